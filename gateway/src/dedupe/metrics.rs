//! Dedupe's metrics, owned by the [`super::DedupeSink`] and registered in
//! the gateway's registry when the state is built.

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry};

/// Counters of what dedupe did; labels are low-cardinality only.
#[derive(Clone)]
pub struct DedupeMetrics {
    /// Records not produced because their id was stored within the window.
    pub duplicates: IntCounter,
    /// Duplicates whose event differs from the stored one's (topic, key, name).
    pub conflicts: IntCounter,
    /// Retries answered 503 because their id's first request was in flight.
    pub pending: IntCounter,
    /// Store calls that failed or timed out, by operation.
    pub store_errors: IntCounterVec,
    /// Records produced without dedupe because the store failed
    /// (`on_store_error = "produce"`).
    pub unchecked: IntCounter,
    /// Time of one reservation round trip (one per request).
    pub store_latency: Histogram,
    /// Ids the memory store forgot early to stay within `max_ids`.
    pub evicted: IntCounter,
    /// Ids the memory store holds.
    pub held: IntGauge,
    /// Reservations a request lost while its record was in flight (a retry
    /// took the id over after the lease lapsed): that event may be stored twice.
    pub leases_lost: IntCounter,
}

impl DedupeMetrics {
    /// Creates the metrics, not yet registered.
    pub fn new() -> Self {
        let counter = |name: &str, help: &str| IntCounter::new(name, help).expect("valid metric");
        let latency = HistogramOpts::new("eventgw_dedupe_store_latency_seconds", "Time of one dedupe reservation.")
            .buckets(vec![0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5]);
        Self {
            duplicates: counter(
                "eventgw_dedupe_duplicates_total",
                "Events not produced: their (source, messageId) was stored within the window.",
            ),
            conflicts: counter(
                "eventgw_dedupe_conflicts_total",
                "Duplicates whose event (topic, key, name) differs from the stored one's.",
            ),
            pending: counter(
                "eventgw_dedupe_pending_total",
                "Events answered 503 because the first request with their messageId was still in flight.",
            ),
            store_errors: IntCounterVec::new(
                Opts::new("eventgw_dedupe_store_errors_total", "Dedupe store calls that failed, by operation."),
                &["operation"],
            )
            .expect("valid metric"),
            unchecked: counter(
                "eventgw_dedupe_unchecked_total",
                "Events produced without dedupe because the store failed (on_store_error = produce).",
            ),
            store_latency: Histogram::with_opts(latency).expect("valid metric"),
            evicted: counter(
                "eventgw_dedupe_evicted_total",
                "Ids the memory store forgot before their window ended, to stay within max_ids.",
            ),
            held: IntGauge::new("eventgw_dedupe_ids", "Ids the memory store holds.").expect("valid metric"),
            leases_lost: counter(
                "eventgw_dedupe_leases_lost_total",
                "Reservations lost while their record was in flight (the store was out of reach longer than the \
                 lease and a retry took the id over): those events may be stored twice.",
            ),
        }
    }

    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &Registry) {
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(self.duplicates.clone()),
            Box::new(self.conflicts.clone()),
            Box::new(self.pending.clone()),
            Box::new(self.store_errors.clone()),
            Box::new(self.unchecked.clone()),
            Box::new(self.store_latency.clone()),
            Box::new(self.evicted.clone()),
            Box::new(self.held.clone()),
            Box::new(self.leases_lost.clone()),
        ];
        for collector in collectors {
            if let Err(e) = registry.register(collector) {
                tracing::warn!(error = %e, "Dedupe metric not registered");
            }
        }
    }
}

impl Default for DedupeMetrics {
    fn default() -> Self {
        Self::new()
    }
}
