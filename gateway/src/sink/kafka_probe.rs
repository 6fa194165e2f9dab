//! Kafka's readiness, probed off the request path. A metadata request to a
//! broker that is down blocks for its whole timeout (2 s), so `/readyz` and
//! `/metrics` must not make one: a thread of the sink asks every
//! [`PROBE_INTERVAL`] and keeps the latest answer, and the handlers read it
//! (a balancer probe with a 2 s timeout would otherwise take a healthy,
//! spooling gateway out of rotation while Kafka is away).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Pause between two probes. Readiness lags Kafka by at most this plus
/// one probe; a metadata request a second is nothing to a broker.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// How long one metadata request may wait for a broker.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How many probes began and how many answered, so a test can prove a
/// handler answered while a probe was still blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeCounts {
    /// Probes begun.
    pub started: u64,
    /// Probes that answered (either way).
    pub finished: u64,
}

impl ProbeCounts {
    /// Whether a probe has begun and not answered yet.
    pub fn in_flight(&self) -> bool {
        self.started > self.finished
    }
}

/// What the probing thread does next.
pub(super) enum Next {
    /// The sink is gone: the thread ends.
    Stop,
    /// Kafka acknowledged a record recently: that proves it takes writes,
    /// better than a metadata answer would.
    Acknowledged,
    /// Ask Kafka: the closure blocks for up to [`PROBE_TIMEOUT`].
    Probe(Box<dyn FnOnce() -> Result<(), String> + Send>),
}

/// The latest answer, shared by the probing thread and the handlers.
#[derive(Debug, Default)]
pub(super) struct ProbeCell {
    /// `None` until the first probe answered.
    latest: Mutex<Option<Result<(), String>>>,
    started: AtomicU64,
    finished: AtomicU64,
}

impl ProbeCell {
    /// The latest answer, without waiting for anything.
    pub(super) fn latest(&self) -> Result<(), String> {
        let latest = self.latest.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        latest.unwrap_or_else(|| Err("Kafka not probed yet: the first metadata request has not answered".into()))
    }

    pub(super) fn counts(&self) -> ProbeCounts {
        // `finished` first: a probe ending between the two loads then
        // shows as still in flight, never the reverse.
        let finished = self.finished.load(Ordering::SeqCst);
        ProbeCounts { started: self.started.load(Ordering::SeqCst), finished }
    }

    fn store(&self, answer: Result<(), String>) {
        *self.latest.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(answer);
    }

    fn probe(&self, ask: Box<dyn FnOnce() -> Result<(), String> + Send>) {
        self.started.fetch_add(1, Ordering::SeqCst);
        let answer = ask();
        self.store(answer);
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

/// Probes on a thread of its own until `next` says stop; the first probe
/// begins at once.
pub(super) fn spawn(cell: std::sync::Arc<ProbeCell>, mut next: impl FnMut() -> Next + Send + 'static) {
    let spawned = std::thread::Builder::new().name("eventgw-kafka-probe".into()).spawn(move || {
        loop {
            match next() {
                Next::Stop => return,
                Next::Acknowledged => cell.store(Ok(())),
                Next::Probe(ask) => cell.probe(ask),
            }
            std::thread::sleep(PROBE_INTERVAL);
        }
    });
    if let Err(error) = spawned {
        tracing::error!(%error, "Cannot start the Kafka readiness probe; readiness follows acknowledgements only");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, mpsc};
    use std::time::Instant;

    use super::*;

    fn until(cell: &ProbeCell, what: &str, done: impl Fn(ProbeCounts) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(cell.counts()) {
            assert!(Instant::now() < deadline, "{what}: {:?}", cell.counts());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_latest_answer_is_read_while_the_next_probe_is_blocked() {
        let cell = Arc::new(ProbeCell::default());
        assert!(cell.latest().is_err_and(|e| e.contains("not probed yet")), "nothing known before the first answer");
        let (release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        let mut calls = 0;
        spawn(Arc::clone(&cell), move || {
            calls += 1;
            let gate = Arc::clone(&gate);
            match calls {
                1 => Next::Probe(Box::new(|| Err("Kafka is unreachable".into()))),
                2 => Next::Probe(Box::new(move || {
                    let _ = gate.lock().map(|g| g.recv());
                    Ok(())
                })),
                _ => Next::Stop,
            }
        });
        until(&cell, "the second probe begins", |c| c.started == 2);
        assert!(cell.counts().in_flight());
        assert_eq!(cell.latest(), Err("Kafka is unreachable".into()), "the first answer, while the second blocks");
        release.send(()).expect("the second probe waits for it");
        until(&cell, "the second probe answers", |c| c.finished == 2);
        assert_eq!(cell.latest(), Ok(()));
    }
}

#[cfg(test)]
mod sink_tests {
    use std::time::Instant;

    use futures::FutureExt;

    use crate::config::Config;
    use crate::sink::{KafkaSink, Sink};

    /// Before the fix `check_ready` made its own metadata request, which
    /// blocks for 2 s against a port nothing listens on: its future was
    /// still pending on the first poll.
    #[actix_web::test]
    async fn readiness_is_answered_on_the_first_poll_while_kafka_is_down() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/dev.toml");
        let env = [("EVENTGW__KAFKA__BROKERS".to_owned(), format!("127.0.0.1:{port}"))];
        let config = Config::load_with_env(&path, env.into_iter()).expect("dev config");
        let sink = KafkaSink::new(&config.kafka).expect("producer");
        let first = sink.check_ready().now_or_never().expect("answered without waiting");
        assert!(first.is_err_and(|e| e.contains("not probed yet")), "unknown until the first probe answers");
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        while sink.probe_counts().finished == 0 {
            assert!(Instant::now() < deadline, "the first probe never answered");
            actix_web::rt::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let answer = sink.check_ready().now_or_never().expect("answered without waiting");
        assert!(answer.is_err_and(|e| e.contains("Kafka is unreachable")), "the probe's answer");
    }
}
