//! `gateway serve|topics|check-config [--config FILE]`: reads the
//! arguments and the configuration, sets up logging, binds the listener
//! and hands over to [`gateway::run`].

use std::net::TcpListener;
use std::path::PathBuf;

use anyhow::Context;
use gateway::config::Config;
use gateway::tls::CertificateStore;
use gateway::{AppState, topics};

/// Every request allocates and frees many small objects across worker
/// threads; mimalloc measured markedly faster than glibc's malloc here
/// (malloc and free were a fifth of the gateway's CPU profile).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: gateway [serve|topics|check-config|spool] [--config FILE]
  serve         run the HTTP gateway (default)
  topics        create the catalog's and the gateway's topics where missing
  check-config  load the configuration and the catalog, then exit
  spool         status|inspect|replay of the local spool (gateway spool --help)
The config file defaults to $EVENTGW_CONFIG; every key can be overridden
with EVENTGW__SECTION__KEY=value.";

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,librdkafka=warn".into()),
        )
        .init();
    if std::env::args().nth(1).as_deref() == Some("spool") {
        return gateway::sink::spool::cli::main(std::env::args().skip(2));
    }
    let mut args = std::env::args().skip(1);
    let mut command = "serve".to_owned();
    let mut config_path = std::env::var_os("EVENTGW_CONFIG").map(PathBuf::from);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--config" | "-c" => config_path = Some(args.next().context("--config needs a file")?.into()),
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            "serve" | "topics" | "check-config" => command = arg,
            other => anyhow::bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    let path = config_path.context(format!("no configuration: pass --config FILE or set EVENTGW_CONFIG\n{USAGE}"))?;
    let config = Config::load(&path)?;
    let runtime = actix_web::rt::System::new();
    runtime.block_on(command_for(&command, config))
}

async fn command_for(command: &str, config: Config) -> anyhow::Result<()> {
    match command {
        "check-config" => {
            config.server.tls.as_ref().map(CertificateStore::load).transpose()?;
            let state = AppState::with_kafka(config)?;
            println!("configuration and catalog are valid: {} events", state.catalog.events().len());
            Ok(())
        }
        "topics" => {
            let state = AppState::with_kafka(config)?;
            let created = topics::ensure_all(&state.catalog, &state.config).await?;
            println!("created {} topic(s): {}", created.len(), created.join(", "));
            Ok(())
        }
        _ => {
            let listen = config.server.listen;
            let listener = TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
            let signals = gateway::run::os_signals().context("cannot listen for signals")?;
            Ok(gateway::run(config, listener, signals).await?)
        }
    }
}
