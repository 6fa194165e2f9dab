//! The whole gateway in the test's process, without Kafka: the real server
//! run by [`gateway::run_state`] (as `gateway serve` runs it) on port 0,
//! with the in-memory sink, a configuration file of its own that a test
//! may rewrite and reload, and shutdown signals sent through a channel.
//! Use it for everything Kafka cannot change: CORS, limits, error codes,
//! auth, quotas, reload and drain. What only Kafka can prove stays in the
//! `*_e2e` tests.
#![allow(dead_code, missing_docs)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::mpsc::{UnboundedSender, unbounded};
use gateway::config::Config;
use gateway::run::RunError;
use gateway::sink::MemorySink;
use gateway::{AppState, Signal};
use serde_json::Value;

/// Brokers no test ever reaches: the memory sink stands in for Kafka.
const NO_KAFKA: &str = "127.0.0.1:1";

pub struct TestGateway {
    pub url: String,
    pub addr: String,
    pub sink: Arc<MemorySink>,
    pub state: Arc<AppState>,
    /// The configuration file reloads read; see [`TestGateway::rewrite_config`].
    pub config_file: PathBuf,
    signals: UnboundedSender<Signal>,
    running: Option<tokio::task::JoinHandle<Result<(), RunError>>>,
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The dev configuration's text, with the catalog found from anywhere and
/// brokers nobody reaches.
pub fn dev_config_text() -> String {
    let dev = std::fs::read_to_string(manifest_dir().join("config/dev.toml")).expect("dev config");
    let catalog = manifest_dir().parent().expect("repo root").join("schemas");
    let text = dev
        .replace("dir = \"../../schemas\"", &format!("dir = \"{}\"", catalog.display()))
        .replace("brokers = \"127.0.0.1:9092\"", &format!("brokers = \"{NO_KAFKA}\""));
    assert!(text.contains(NO_KAFKA) && !text.contains("../../schemas"), "dev.toml changed shape");
    text
}

fn scratch_dir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("eventgw-inprocess-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn load(path: &Path) -> Config {
    // Only the file: a developer's EVENTGW__ variables must not change tests.
    Config::load_with_env(path, std::iter::empty()).expect("test config loads")
}

impl TestGateway {
    /// The dev configuration. Call within an actix runtime (`#[actix_web::test]`).
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// The dev configuration, changed by `edit` (the change is not in the
    /// file, so a reload forgets it; use [`TestGateway::start_text`] for that).
    pub async fn start_with(edit: impl FnOnce(&mut Config)) -> Self {
        Self::start_from(dev_config_text(), edit).await
    }

    /// A configuration file of this text (see [`dev_config_text`]).
    pub async fn start_text(text: String) -> Self {
        Self::start_from(text, |_| {}).await
    }

    async fn start_from(text: String, edit: impl FnOnce(&mut Config)) -> Self {
        let config_file = scratch_dir().join("gateway.toml");
        std::fs::write(&config_file, text).expect("write config");
        let mut config = load(&config_file);
        edit(&mut config);
        let sink = Arc::new(MemorySink::default());
        let state = Arc::new(AppState::new(config, Arc::clone(&sink) as _).expect("state builds"));
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
        let addr = listener.local_addr().expect("local addr").to_string();
        let (signals, received) = unbounded();
        let running = actix_web::rt::spawn(gateway::run_state(Arc::clone(&state), listener, received));
        let gw =
            Self { url: format!("http://{addr}"), addr, sink, state, config_file, signals, running: Some(running) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while reqwest::Client::new().get(format!("{}/healthz", gw.url)).send().await.is_err() {
            assert!(Instant::now() < deadline, "the in-process gateway did not start");
            actix_web::rt::time::sleep(Duration::from_millis(20)).await;
        }
        gw
    }

    /// Sends `signal` as the OS would (SIGHUP, SIGTERM).
    pub fn signal(&self, signal: Signal) {
        self.signals.unbounded_send(signal).expect("the gateway listens");
    }

    /// Replaces the configuration file's text (for the next reload).
    pub fn rewrite_config(&self, text: &str) {
        std::fs::write(&self.config_file, text).expect("rewrite config");
    }

    /// Sends a reload and waits until it was applied or refused; returns which.
    pub async fn reload(&self) -> &'static str {
        let count = |outcome| self.state.metrics.config_reloads.with_label_values(&[outcome]).get();
        let before = (count("applied"), count("refused"));
        self.signal(Signal::Reload);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if count("applied") > before.0 {
                return "applied";
            }
            if count("refused") > before.1 {
                return "refused";
            }
            assert!(Instant::now() < deadline, "the reload was never handled");
            actix_web::rt::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Sends a shutdown and waits for the gateway to drain, stop and flush.
    pub async fn shutdown(mut self) -> Result<(), RunError> {
        self.signal(Signal::Shutdown);
        self.stopped().await
    }

    /// Waits for the gateway to end (after the signals the test sent).
    pub async fn stopped(&mut self) -> Result<(), RunError> {
        self.running.take().expect("runs once").await.expect("the run task does not panic")
    }

    /// The `value` of every record produced so far, as JSON.
    pub fn values(&self) -> Vec<Value> {
        self.sink.records().iter().map(|r| serde_json::from_slice(&r.payload).expect("JSON record")).collect()
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        // Dropping the sender ends the signal stream: the gateway drains and stops.
        self.signals.close_channel();
    }
}

/// Status, headers and JSON body (`Null` when not JSON) of an answer.
pub async fn answer(response: reqwest::Response) -> (u16, reqwest::header::HeaderMap, Value) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("body");
    (status, headers, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}
