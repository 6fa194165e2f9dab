//! `eventgw-catalog`: data contracts as code. Checks schema compatibility,
//! explains the difference between two versions, writes the catalog site,
//! provisions topics and registers schemas in a Schema Registry.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use eventgw_catalog::cli::{self, Report};
use eventgw_catalog::gateway_config::GatewayConfig;
use eventgw_schemas::Compatibility;

/// The command line (parsed by clap; each command is a function of [`cli`]).
#[derive(Debug, Parser)]
#[command(
    name = "eventgw-catalog",
    about = "Data contracts as code: schema compatibility, the catalog site, topics and Schema Registry subjects",
    after_help = "DIR defaults to ./schemas. Exit status: 0 ok, 1 a check failed or a change was refused, \
                  2 usage or other errors."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The event schemas: compatibility and the catalog site.
    #[command(subcommand)]
    Schemas(Schemas),
    /// The Kafka topics the gateway's configuration and the catalog declare.
    Topics {
        #[command(subcommand)]
        verb: Verb,
        /// The gateway's configuration.
        #[arg(long, global = true, value_name = "FILE", env = "EVENTGW_CONFIG")]
        config: Option<PathBuf>,
    },
    /// The Schema Registry subjects (`<topic>-<domain>.<schema>`) of every schema version.
    Registry {
        #[command(subcommand)]
        verb: Verb,
        /// The catalog directory (default: the configuration's, else ./schemas).
        #[arg(global = true, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The registry's URL (default: the configuration's `[registry] url`, else
        /// $EVENTGW_REGISTRY_URL, else the local dev registry).
        #[arg(long, global = true, value_name = "URL")]
        registry: Option<String>,
        /// The gateway's configuration.
        #[arg(long, global = true, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum Schemas {
    /// Check every version against the previous one, then compile the catalog.
    Check {
        /// The catalog directory.
        #[arg(default_value = "schemas", value_name = "DIR")]
        dir: PathBuf,
        /// An earlier copy of the mapping files (e.g. the main branch's
        /// `schemas/mappings` from `git worktree add`): a rule removed or
        /// pointed at another catalog event fails the check.
        #[arg(long, value_name = "BASE_DIR")]
        mappings_base: Option<PathBuf>,
    },
    /// Explain what breaks between two versions; fails when MODE is broken.
    Diff {
        /// The old version's JSON Schema.
        old: PathBuf,
        /// The new version's JSON Schema.
        new: PathBuf,
        /// The compatibility that must hold.
        #[arg(long, value_enum, default_value = "backward")]
        mode: Mode,
    },
    /// Write the catalog site.
    Docs {
        /// The catalog directory.
        #[arg(default_value = "schemas", value_name = "DIR")]
        dir: PathBuf,
        /// Where to write it.
        #[arg(long, default_value = "target/catalog", value_name = "DIR")]
        out: PathBuf,
        /// The in-browser checker's build (default: DIR/wasm/pkg).
        #[arg(long, value_name = "DIR")]
        wasm: Option<PathBuf>,
    },
}

/// `plan` shows what would change; `apply` makes it so, all or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
enum Verb {
    /// Show what would change.
    Plan,
    /// Make it so (topics: refuses to shrink partitions; registry: registers what is
    /// missing and sets each subject's compatibility, all or nothing).
    Apply,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Backward,
    Forward,
    Full,
    None,
}

impl From<Mode> for Compatibility {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Backward => Compatibility::Backward,
            Mode::Forward => Compatibility::Forward,
            Mode::Full => Compatibility::Full,
            Mode::None => Compatibility::None,
        }
    }
}

fn main() {
    // clap exits with 2 on a usage error and 0 after --help, as documented.
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(report) => {
            print!("{}", report.text);
            std::process::exit(if report.ok { 0 } else { 1 });
        }
        Err(error) => {
            eprintln!("eventgw-catalog: {error:#}");
            std::process::exit(2);
        }
    }
}

fn run(command: Command) -> anyhow::Result<Report> {
    match command {
        Command::Schemas(Schemas::Check { dir, mappings_base }) => cli::schemas_check(&dir, mappings_base.as_deref()),
        Command::Schemas(Schemas::Diff { old, new, mode }) => cli::schemas_diff(&old, &new, mode.into()),
        Command::Schemas(Schemas::Docs { dir, out, wasm }) => {
            let wasm = wasm.unwrap_or_else(|| dir.join(eventgw_catalog::site::WASM_PKG));
            cli::schemas_docs(&dir, &out, &wasm)
        }
        Command::Topics { verb, config } => {
            let config = config.context("topics needs --config FILE (the gateway's configuration)")?;
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(cli::topics(&config, verb == Verb::Apply))
        }
        Command::Registry { verb, dir, registry, config } => {
            let config = config.map(|path| GatewayConfig::load(&path)).transpose()?;
            let dir = match (dir, &config) {
                (Some(dir), _) => dir,
                (None, Some(config)) => config.catalog_dir.clone(),
                (None, None) => cli::default_catalog_dir(),
            };
            let url = registry
                .or_else(|| config.as_ref().and_then(|c| c.registry_url.clone()))
                .or_else(|| std::env::var("EVENTGW_REGISTRY_URL").ok())
                .unwrap_or_else(|| cli::DEFAULT_REGISTRY_URL.to_owned());
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(cli::registry(&dir, &url, verb == Verb::Apply))
        }
    }
}
