//! The command line, parsed by clap. `ceiling`, `run`, `bench-catalog` and
//! `token` read their typed fields; `suite` and `curves` read theirs
//! through [`Args`] (by flag name, with their defaults where they are used),
//! after clap checked every flag's name and type.

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::Context;
use clap::{ArgMatches, Parser, Subcommand};

/// `loadtest COMMAND [--flags]`.
#[derive(Debug, Parser)]
#[command(name = "loadtest", about = "Open-loop load generator and benchmark harness for the gateway")]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// An HTTP server answering every request (optionally after a delay): the ceiling the gateway is compared with.
    Ceiling(CeilingArgs),
    /// One open-loop run against a URL; prints a summary line.
    Run(RunArgs),
    /// The whole benchmark suite; writes the report to --out.
    Suite(SuiteArgs),
    /// The cost curves; prints the "Cost curves" section.
    Curves(CurvesArgs),
    /// Writes the generated `bench` domain (many event types) for the cost curves.
    BenchCatalog(BenchCatalogArgs),
    /// Prints an HS256 JWT for the benchmark's JWT variant, valid for a day.
    Token(TokenArgs),
}

/// `loadtest ceiling`.
#[derive(Debug, clap::Args)]
pub struct CeilingArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub listen: String,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Delay before each answer, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
}

/// `loadtest run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The endpoint, e.g. http://127.0.0.1:8080/v1/batch.
    #[arg(long)]
    pub url: String,
    /// Requests per second (open loop).
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    /// How long to send.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Events per request.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Gzip the bodies.
    #[arg(long)]
    pub gzip: bool,
    /// Distinct user ids.
    #[arg(long, default_value_t = 10_000)]
    pub users: u64,
    /// The catalog whose examples are sent.
    #[arg(long, default_value = "schemas")]
    pub catalog: PathBuf,
    /// A bearer token instead of the write key.
    #[arg(long)]
    pub bearer: Option<String>,
    /// The write key.
    #[arg(long, default_value = "demo-write-key")]
    pub key: String,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 10)]
    pub timeout_secs: u64,
}

/// `loadtest suite` (defaults in `suite.rs`).
#[derive(Debug, clap::Args)]
pub struct SuiteArgs {
    /// The gateway's base URL.
    #[arg(long)]
    pub gateway: String,
    /// The ceiling server's base URL.
    #[arg(long)]
    pub ceiling: String,
    /// Kafka bootstrap servers.
    #[arg(long)]
    pub brokers: String,
    /// Where the report goes (default BENCHMARKS.md).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seconds per run (default 4).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// The p99 bound of a sustained rate, in ms (default 100).
    #[arg(long)]
    pub p99_ms: Option<f64>,
    /// The catalog whose examples are sent (default schemas).
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// The write key (default demo-write-key).
    #[arg(long)]
    pub key: Option<String>,
    /// A bearer token: adds the JWT variant.
    #[arg(long)]
    pub bearer: Option<String>,
    /// The gateway's pid, for CPU and memory figures.
    #[arg(long)]
    pub gateway_pid: Option<u32>,
    /// The broker's pid, for CPU figures.
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Idle connections held open (default 10000).
    #[arg(long)]
    pub connections: Option<usize>,
}

/// `loadtest curves` (defaults in `curves.rs`).
#[derive(Debug, clap::Args)]
pub struct CurvesArgs {
    /// The gateway's base URL.
    #[arg(long)]
    pub gateway: String,
    /// The catalog the gateway serves (with the `bench` domain).
    #[arg(long)]
    pub catalog: PathBuf,
    /// The gateway's pid, for CPU figures.
    #[arg(long)]
    pub gateway_pid: Option<u32>,
    /// Seconds per run (default 4).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Runs per point (default 3).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Events per second sent (default 8000).
    #[arg(long)]
    pub events_per_sec: Option<f64>,
    /// Only this curve (default: all).
    #[arg(long)]
    pub only: Option<String>,
    /// The write key (default bench-write-key).
    #[arg(long)]
    pub key: Option<String>,
}

/// `loadtest bench-catalog`.
#[derive(Debug, clap::Args)]
pub struct BenchCatalogArgs {
    /// The catalog directory to write the domain into.
    #[arg(long)]
    pub out: PathBuf,
    /// Event types (1..=1000).
    #[arg(long, default_value_t = 200)]
    pub types: usize,
}

/// `loadtest token`.
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// The HS256 secret.
    #[arg(long)]
    pub secret: String,
    /// The `iss` claim.
    #[arg(long)]
    pub issuer: String,
}

/// A command's flags by name (`--p99-ms` is `p99-ms`), for the modules
/// that read them where they are used.
pub struct Args {
    values: HashMap<String, String>,
}

impl Args {
    /// The flags clap parsed (and checked) for one command.
    pub fn from_matches(matches: &ArgMatches) -> Self {
        let mut values = HashMap::new();
        for id in matches.ids() {
            let raw = matches.get_raw(id.as_str()).and_then(|mut v| v.next());
            if let Some(value) = raw.and_then(|v| v.to_str()) {
                values.insert(id.as_str().replace('_', "-"), value.to_owned());
            }
        }
        Self { values }
    }

    /// The value of `--key`, parsed, or `default`.
    pub fn get<T: FromStr>(&self, key: &str, default: T) -> anyhow::Result<T>
    where
        T::Err: std::fmt::Display,
    {
        match self.values.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e| anyhow::anyhow!("--{key} {v}: {e}")),
        }
    }

    /// The value of a required `--key`.
    pub fn required(&self, key: &str) -> anyhow::Result<String> {
        self.values.get(key).cloned().with_context(|| format!("--{key} is required"))
    }

    /// Whether `--flag` was given.
    pub fn flag(&self, key: &str) -> bool {
        self.values.get(key).is_some_and(|v| v == "true")
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::{Args, Cli, Command};

    fn parse(words: &[&str]) -> Result<(Cli, Args), clap::Error> {
        let matches = Cli::command().try_get_matches_from(std::iter::once("loadtest").chain(words.iter().copied()))?;
        let cli = Cli::from_arg_matches(&matches)?;
        let args = Args::from_matches(matches.subcommand().expect("a command").1);
        Ok((cli, args))
    }

    #[test]
    fn suite_flags_are_read_by_their_names_with_defaults_where_used() {
        let words = ["suite", "--gateway", "http://g", "--ceiling", "http://c", "--brokers", "b:9092"];
        let (_, args) = parse(&[&words[..], &["--p99-ms", "50", "--gateway-pid", "42"]].concat()).expect("parses");
        assert_eq!(args.required("gateway").expect("gateway"), "http://g");
        assert_eq!(args.get("p99-ms", 100.0).expect("p99"), 50.0);
        assert_eq!(args.get::<u32>("gateway-pid", 0).expect("pid"), 42);
        assert_eq!(args.get("seconds", 4.0).expect("default"), 4.0);
        assert!(args.required("bearer").is_err());
    }

    #[test]
    fn curves_take_an_empty_only_and_run_flags_are_typed() {
        let (_, args) = parse(&["curves", "--gateway", "g", "--catalog", "c", "--only", ""]).expect("parses");
        assert_eq!(args.get("only", "x".to_owned()).expect("only"), "");
        let (cli, args) = parse(&["run", "--url", "u", "--gzip", "--batch", "10"]).expect("parses");
        let Command::Run(run) = cli.command else { panic!("not run") };
        assert!(run.gzip && args.flag("gzip"));
        assert_eq!((run.batch, run.rate, run.key.as_str()), (10, 100.0, "demo-write-key"));
    }

    #[test]
    fn unknown_or_mistyped_flags_are_usage_errors() {
        assert!(parse(&["run", "--url", "u", "--bogus", "1"]).is_err());
        assert!(parse(&["run", "--url", "u", "--rate", "fast"]).is_err());
        assert!(parse(&["suite", "--gateway", "g"]).is_err());
        assert_eq!(parse(&["nope"]).err().map(|e| e.exit_code()), Some(2));
    }
}
