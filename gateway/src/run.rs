//! A running gateway's whole life, in one place so tests run it in-process
//! exactly as `gateway serve` does: serve on the caller's listener, clean
//! quota state, reload the configuration when told, and on shutdown drain
//! (readiness red first), stop and flush the producer. `main` only turns
//! OS signals into [`Signal`]s; tests send them through a channel.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use futures::{Stream, StreamExt};

use crate::config::Config;
use crate::state::AppState;
use crate::tls::CertificateStore;

/// What the outside world asks of a running gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Re-read the configuration file (SIGHUP).
    Reload,
    /// Drain and stop (SIGTERM, SIGINT); a second one cuts the drain grace short.
    Shutdown,
}

/// Why the gateway could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The state could not be built (catalog, sources, producer, spool).
    #[error(transparent)]
    Startup(#[from] crate::state::StartupError),
    /// The Schema Registry ids could not be loaded.
    #[error("schema registry: {0}")]
    Registry(#[from] crate::registry::RegistryError),
    /// The TLS certificate could not be read.
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    /// The listener failed.
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
    /// The producer did not deliver everything before the flush timeout.
    #[error("flushing the producer: {0}")]
    Flush(String),
}

/// Runs the gateway of `config` (Kafka, and the spool when enabled) on
/// `listener` until `signals` asks it to stop (or ends).
pub async fn run(
    config: Config,
    listener: TcpListener,
    signals: impl Stream<Item = Signal> + Unpin + 'static,
) -> Result<(), RunError> {
    let state = Arc::new(AppState::serving(config)?);
    state.load_schema_ids().await?;
    run_state(state, listener, signals).await
}

/// As [`run`], with a state the caller built (a memory sink in tests).
pub async fn run_state(
    state: Arc<AppState>,
    listener: TcpListener,
    signals: impl Stream<Item = Signal> + Unpin + 'static,
) -> Result<(), RunError> {
    let tls = state.config.server.tls.as_ref().map(CertificateStore::load).transpose()?.map(Arc::new);
    let listen = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(%listen, scheme, events = state.catalog.events().len(), "Gateway listening");
    actix_web::rt::spawn(clean_quotas(Arc::clone(&state)));
    let server = crate::server::serve_with_tls(Arc::clone(&state), listener, tls.clone())?;
    crate::features::Features::of(&state.config).log(listen, state.catalog.events().len());
    actix_web::rt::spawn(obey(Arc::clone(&state), tls, server.handle(), signals));
    server.await?;
    tracing::info!("Server stopped; flushing the producer");
    state.sink.flush(Duration::from_secs(state.config.server.shutdown_timeout_secs)).map_err(RunError::Flush)?;
    tracing::info!("Producer flushed; bye");
    Ok(())
}

/// Acts on each signal; the stream ending counts as a shutdown (without
/// a second signal to cut the grace short).
async fn obey(
    state: Arc<AppState>,
    tls: Option<Arc<CertificateStore>>,
    server: ServerHandle,
    mut signals: impl Stream<Item = Signal> + Unpin,
) {
    while let Some(signal) = signals.next().await {
        match signal {
            Signal::Reload => reload(&state, tls.as_deref()).await,
            Signal::Shutdown => break,
        }
    }
    tracing::info!("Shutting down");
    let again = async move {
        while let Some(signal) = signals.next().await {
            if signal == Signal::Shutdown {
                return;
            }
        }
        std::future::pending::<()>().await;
    };
    crate::server::drain(&state, &server, again).await;
}

/// Re-reads the configuration file and swaps in its sources, write keys,
/// JWT issuers and quotas, and re-reads the TLS certificate and key (new
/// connections get them); a bad file is refused and the running one kept.
/// Connections are not touched.
pub async fn reload(state: &AppState, tls: Option<&CertificateStore>) {
    let Some(path) = state.config.file.as_deref() else {
        tracing::error!("Configuration reload refused: the gateway was not started from a file");
        state.metrics.config_reloads.with_label_values(&["refused"]).inc();
        return;
    };
    let outcome =
        Config::load(path).map_err(|e| e.to_string()).and_then(|c| state.reload(&c).map_err(|e| e.to_string()));
    state.refresh_schema_ids().await;
    let label = if outcome.is_ok() { "applied" } else { "refused" };
    match outcome {
        Ok(()) => tracing::info!(file = %path.display(), "Configuration reloaded: sources, keys, issuers and quotas"),
        Err(error) => {
            tracing::error!(file = %path.display(), %error, "Configuration reload refused; keeping the running one")
        }
    }
    state.metrics.config_reloads.with_label_values(&[label]).inc();
    if let Some(store) = tls {
        let (cert, key) = (store.files().cert_file.display(), store.files().key_file.display());
        match store.reload() {
            Ok(()) => tracing::info!(%cert, %key, "TLS certificate reloaded; new connections get it"),
            Err(error) => tracing::error!(%error, "TLS certificate reload refused; keeping the running one"),
        }
    }
}

/// SIGHUP as [`Signal::Reload`]; SIGTERM and SIGINT as [`Signal::Shutdown`].
pub fn os_signals() -> std::io::Result<impl Stream<Item = Signal> + Unpin + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let hangup = signal(SignalKind::hangup())?;
    let terminate = signal(SignalKind::terminate())?;
    let interrupt = signal(SignalKind::interrupt())?;
    let stream = futures::stream::unfold((hangup, terminate, interrupt), |(mut h, mut t, mut i)| async move {
        let signal = tokio::select! {
            Some(()) = h.recv() => Signal::Reload,
            Some(()) = t.recv() => Signal::Shutdown,
            Some(()) = i.recv() => Signal::Shutdown,
            else => return None,
        };
        Some((signal, (h, t, i)))
    });
    Ok(Box::pin(stream))
}

/// Drops idle limiter state now and then, so memory stays bounded however
/// many distinct sources, subjects and addresses appear. Ends with the server.
async fn clean_quotas(state: Arc<AppState>) {
    let every = Duration::from_secs(state.config.quotas.cleanup_interval_secs.max(1));
    let weak = Arc::downgrade(&state);
    drop(state);
    loop {
        actix_web::rt::time::sleep(every).await;
        let Some(state) = weak.upgrade() else { return };
        let remaining = state.auth.load().quotas.cleanup();
        tracing::debug!(remaining, "Quota state cleaned");
    }
}
