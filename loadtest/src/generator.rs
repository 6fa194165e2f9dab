//! The open-loop generator: request `i` is due at `start + i / rate`
//! whatever happened to earlier ones, and its latency is measured from that
//! intended time, so a stalled server shows in the tail instead of slowing
//! the generator down (no coordinated omission). Bounded in requests and
//! time; it stops by itself.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::task::JoinSet;

use crate::protocol::Protocol;
use crate::workload::Workload;

/// How to authenticate.
#[derive(Debug, Clone)]
pub enum Auth {
    /// HTTP Basic with the write key as user name.
    WriteKey(String),
    /// `Authorization: Bearer`.
    Bearer(String),
}

/// One fixed-rate run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// `http://host:port/v1/batch`.
    pub url: String,
    /// Requests per second.
    pub rate: f64,
    /// How long requests are started for.
    pub duration: Duration,
    /// Credentials.
    pub auth: Auth,
    /// Give up on a request after this.
    pub timeout: Duration,
}

/// What a run measured.
#[derive(Debug)]
pub struct RunResult {
    /// Requests started.
    pub sent: u64,
    /// Requests answered 2xx with every event taken (none `invalid` or
    /// `rejected` in the answer's outcomes).
    pub ok: u64,
    /// Other answers by status, and `0` for transport errors and timeouts;
    /// a 2xx whose answer counts an invalid or rejected event is a failure
    /// under its status (`{200: n}`), so a dead-lettering run cannot pass as fast.
    pub failed: BTreeMap<u16, u64>,
    /// Latency from intended send time to the answer, in microseconds (200s only).
    pub latency_us: Histogram<u64>,
    /// From the first intended send to the last answer.
    pub elapsed: Duration,
    /// Events per request.
    pub batch: usize,
}

impl RunResult {
    /// An empty result for `sent` requests of `batch` events each.
    pub fn new(sent: u64, batch: usize) -> Self {
        Self { sent, ok: 0, failed: BTreeMap::new(), latency_us: histogram(), elapsed: Duration::ZERO, batch }
    }

    /// One finished request: acknowledged after `latency`, or failed with
    /// `status` (0 for transport errors and timeouts).
    pub fn record(&mut self, acknowledged: bool, status: u16, latency: Duration) {
        if acknowledged {
            self.ok += 1;
            let _ = self.latency_us.record((latency.as_micros() as u64).max(1));
        } else {
            *self.failed.entry(status).or_default() += 1;
        }
    }

    /// Answered-200 requests per second over the run.
    pub fn ok_per_sec(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Percentile of the acknowledgement latency, in milliseconds.
    pub fn ms(&self, percentile: f64) -> f64 {
        self.latency_us.value_at_percentile(percentile) as f64 / 1000.0
    }

    /// Requests that did not get a 200.
    pub fn failures(&self) -> u64 {
        self.failed.values().sum()
    }
}

/// A new latency histogram: 1 µs to 1 hour, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("static bounds are valid")
}

/// Runs `config` with bodies from `workload`; `start` is shared with any
/// consumer measuring end-to-end latency.
pub async fn run(client: &reqwest::Client, config: &RunConfig, workload: Arc<Workload>, start: Instant) -> RunResult {
    let total = (config.rate * config.duration.as_secs_f64()).round() as u64;
    let mut tasks = JoinSet::new();
    let mut result = RunResult::new(total, workload.batch);
    let run_start = Instant::now();
    let offset = run_start.duration_since(start);
    for seq in 0..total {
        let due = run_start + Duration::from_secs_f64(seq as f64 / config.rate);
        tokio::time::sleep_until(due.into()).await;
        let intended_ns = (offset + due.duration_since(run_start)).as_nanos() as u64;
        let request = request(client, config, &workload, seq, intended_ns);
        tasks.spawn(async move {
            let outcome = match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let body = response.bytes().await.unwrap_or_default();
                    (status, Protocol::all_taken(status, &body))
                }
                Err(_) => (0, false),
            };
            (outcome, due.elapsed())
        });
        // Collect finished requests as we go, so memory stays bounded by
        // what is in flight rather than by the run's length.
        while let Some(joined) = tasks.try_join_next() {
            if let Ok(((status, taken), latency)) = joined {
                result.record(taken, status, latency);
            }
        }
    }
    while let Some(joined) = tasks.join_next().await {
        let Ok(((status, taken), latency)) = joined else { continue };
        result.record(taken, status, latency);
    }
    result.elapsed = run_start.elapsed();
    result
}

fn request(
    client: &reqwest::Client,
    config: &RunConfig,
    workload: &Workload,
    seq: u64,
    intended_ns: u64,
) -> reqwest::RequestBuilder {
    let mut request = client
        .post(&config.url)
        .timeout(config.timeout)
        .header("content-type", "application/json")
        .body(workload.body(seq, intended_ns));
    if workload.gzip {
        request = request.header("content-encoding", "gzip");
    }
    if !workload.protocol.basic_auth() {
        return request; // the credential is in the body or the URL
    }
    match &config.auth {
        Auth::WriteKey(key) => request.basic_auth(key, Some("")),
        Auth::Bearer(token) => request.bearer_auth(token),
    }
}
