//! `gateway serve|topics|check-config [--config FILE]`: reads the
//! configuration, sets up logging, and hands over to the library.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
    runtime.block_on(run(&command, config, path))
}

async fn run(command: &str, config: Config, path: PathBuf) -> anyhow::Result<()> {
    match command {
        "check-config" => {
            config.server.tls.as_ref().map(CertificateStore::load).transpose()?;
            let state = AppState::with_kafka(config)?;
            println!("configuration and catalog are valid: {} events", state.catalog.events().len());
            Ok(())
        }
        "topics" => {
            let state = AppState::with_kafka(config)?;
            let created = topics::ensure(&state.catalog, &state.config.kafka).await?;
            println!("created {} topic(s): {}", created.len(), created.join(", "));
            Ok(())
        }
        _ => serve(config, path).await,
    }
}

async fn serve(config: Config, path: PathBuf) -> anyhow::Result<()> {
    let listen = config.server.listen;
    let tls = config.server.tls.as_ref().map(CertificateStore::load).transpose()?.map(Arc::new);
    let listener = TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
    let state = Arc::new(AppState::serving(config)?);
    gateway::registry::start(&state).await?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(%listen, scheme, events = state.catalog.events().len(), "Gateway listening");
    let signals = ShutdownSignals::listen()?;
    actix_web::rt::spawn(reload_on_sighup(Arc::clone(&state), path, tls.clone()));
    let server = gateway::server::serve_with_tls(Arc::clone(&state), listener, tls)?;
    actix_web::rt::spawn(signals.drain(Arc::clone(&state), server.handle()));
    server.await?;
    tracing::info!("Server stopped; flushing the producer");
    state.sink.flush(Duration::from_secs(state.config.server.shutdown_timeout_secs)).map_err(anyhow::Error::msg)?;
    tracing::info!("Producer flushed; bye");
    Ok(())
}

/// SIGTERM and SIGINT: the first starts a drain, a second one during the
/// drain grace cuts it short.
struct ShutdownSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    fn listen() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
        let interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
        Ok(Self { terminate, interrupt })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        }
    }

    async fn drain(mut self, state: Arc<AppState>, server: actix_web::dev::ServerHandle) {
        let signal = self.next().await;
        tracing::info!(signal, "Shutting down");
        let again = async move {
            self.next().await;
        };
        gateway::server::drain(&state, &server, again).await;
    }
}

/// SIGHUP re-reads the configuration file and swaps in its sources, write
/// keys, JWT issuers and quotas, and re-reads the TLS certificate and key
/// (new connections get them); a bad file is refused and the running one
/// kept. Connections are not touched.
async fn reload_on_sighup(state: Arc<AppState>, path: PathBuf, tls: Option<Arc<CertificateStore>>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(stream) => stream,
        Err(error) => {
            tracing::error!(%error, "Cannot listen for SIGHUP; configuration reload is off");
            return;
        }
    };
    while hangups.recv().await.is_some() {
        let outcome = Config::load(&path).map_err(anyhow::Error::from).and_then(|c| Ok(state.reload(&c)?));
        gateway::registry::refresh(&state).await;
        match outcome {
            Ok(()) => {
                tracing::info!(file = %path.display(), "Configuration reloaded: sources, keys, issuers and quotas")
            }
            Err(error) => {
                tracing::error!(file = %path.display(), %error, "Configuration reload refused; keeping the running one")
            }
        }
        if let Some(store) = &tls {
            reload_certificate(store);
        }
    }
}

fn reload_certificate(store: &CertificateStore) {
    let (cert, key) = (store.files().cert_file.display(), store.files().key_file.display());
    match store.reload() {
        Ok(()) => tracing::info!(%cert, %key, "TLS certificate reloaded; new connections get it"),
        Err(error) => tracing::error!(%error, "TLS certificate reload refused; keeping the running one"),
    }
}
