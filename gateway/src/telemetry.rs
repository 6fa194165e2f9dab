//! Metric names and labels in one place. Labels are low-cardinality only:
//! endpoint (a fixed set), status, outcome, topic (from the catalog), code
//! and reason (fixed sets); never a user, source key or path.

use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// The gateway's metrics, registered in their own registry so that several
/// gateways in one test process do not share counts.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// HTTP requests by endpoint and status.
    pub requests: IntCounterVec,
    /// Events by endpoint, outcome (accepted/invalid/rejected) and topic.
    pub events: IntCounterVec,
    /// Dead-lettered events by reason code.
    pub dead_letters: IntCounterVec,
    /// Requests answered with an error, by code.
    pub rejected_requests: IntCounterVec,
    /// Events breaking their contract, by schema and rollout (observe, warn, enforce).
    pub contract_violations: IntCounterVec,
    /// Seconds from handing a request's records to the producer to the last acknowledgement.
    pub produce_latency: Histogram,
    /// Records the producer holds that Kafka has not acknowledged yet.
    pub queue_depth: IntGauge,
    /// The queue depth past which requests get 503 backpressure, so an
    /// alert can compare the depth with it (gateway/ops/alerts.yml).
    pub queue_high_water: IntGauge,
    /// 1 while `/readyz` would answer 200 (Kafka answers, not draining), else 0;
    /// set at scrape time and to 0 when shutdown begins.
    pub ready: IntGauge,
    /// The local spool, read at scrape time (all zero when it is off).
    pub spool: SpoolMetrics,
    /// Events from bots, by bot name (a fixed list), where a source labels them.
    pub bots: IntCounterVec,
    /// Events whose purpose was not consented to, by purpose and rollout.
    pub consent_violations: IntCounterVec,
    /// Personal fields handled at ingest, by action (hash, redact, encrypt).
    pub personal_fields: IntCounterVec,
    /// Geo lookups of client addresses, by result (found, not_found).
    pub geo_lookups: IntCounterVec,
    /// Configuration reloads by outcome (applied, refused): a refused one
    /// leaves the gateway on its old configuration, which only the log said.
    pub config_reloads: IntCounterVec,
}

/// The spool's gauges and counters. Counters are advanced at scrape time
/// from the spool's own totals, so the spool needs no handle on metrics.
#[derive(Clone)]
pub struct SpoolMetrics {
    /// 1 while new records go to the spool.
    pub spooling: IntGauge,
    /// Bytes of segment files on disk.
    pub bytes: IntGauge,
    /// Records not yet in Kafka.
    pub records: IntGauge,
    /// Age of the oldest record not yet in Kafka.
    pub oldest_age: Gauge,
    /// Records appended since start.
    pub appended: IntCounter,
    /// Records replayed to Kafka since start; `rate()` of it is the replay rate.
    pub replayed: IntCounter,
    /// Damaged spans found (torn tails, checksum failures).
    pub damaged: IntCounter,
    /// Damaged segment files moved aside, waiting for an operator.
    pub quarantined: IntGauge,
    /// 0 when replay cannot empty the spool for a reason of its own.
    pub can_drain: IntGauge,
    /// 1 while the spool's disk refuses writes.
    pub write_failing: IntGauge,
}

impl SpoolMetrics {
    fn new(registry: &Registry) -> Self {
        let gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("static gauge");
            registry.register(Box::new(g.clone())).expect("registered once");
            g
        };
        let counter = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("static counter");
            registry.register(Box::new(c.clone())).expect("registered once");
            c
        };
        let oldest_age =
            Gauge::new("eventgw_spool_oldest_record_age_seconds", "Age of the oldest spooled record not yet in Kafka.")
                .expect("static gauge");
        registry.register(Box::new(oldest_age.clone())).expect("registered once");
        Self {
            spooling: gauge("eventgw_spool_spooling", "1 while new records go to the spool, behind what it holds."),
            bytes: gauge("eventgw_spool_bytes", "Bytes of spool segment files on disk."),
            records: gauge("eventgw_spool_records", "Spooled records not yet in Kafka."),
            oldest_age,
            appended: counter("eventgw_spool_appended_total", "Records appended to the spool."),
            replayed: counter("eventgw_spool_replayed_total", "Spooled records replayed to Kafka."),
            damaged: counter(
                "eventgw_spool_damaged_total",
                "Damaged spool spans found (torn tails, checksum failures).",
            ),
            quarantined: gauge(
                "eventgw_spool_quarantined_segments",
                "Damaged spool segment files moved to quarantine/, waiting for an operator.",
            ),
            can_drain: gauge(
                "eventgw_spool_can_drain",
                "0 when spool replay is stuck or cannot read its disk (not when Kafka is away).",
            ),
            write_failing: gauge(
                "eventgw_spool_write_failing",
                "1 while the spool's disk refuses writes (full, I/O errors).",
            ),
        }
    }

    /// Sets every spool metric from a status snapshot.
    pub fn observe(&self, status: &crate::sink::SpoolStatus) {
        self.spooling.set(i64::from(status.spooling));
        self.bytes.set(i64::try_from(status.bytes).unwrap_or(i64::MAX));
        self.records.set(i64::try_from(status.records).unwrap_or(i64::MAX));
        self.oldest_age.set(status.oldest_age_secs);
        self.quarantined.set(i64::try_from(status.quarantined_segments).unwrap_or(i64::MAX));
        self.can_drain.set(i64::from(status.can_drain));
        self.write_failing.set(i64::from(status.write_failing));
        for (counter, total) in [
            (&self.appended, status.appended_total),
            (&self.replayed, status.replayed_total),
            (&self.damaged, status.damaged_total),
        ] {
            counter.inc_by(total.saturating_sub(counter.get()));
        }
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("metric definitions are static and valid");
            registry.register(Box::new(c.clone())).expect("each metric is registered once");
            c
        };
        let requests =
            counter("eventgw_http_requests_total", "HTTP requests by endpoint and status.", &["endpoint", "status"]);
        let events = counter(
            "eventgw_events_total",
            "Events by endpoint, outcome and topic.",
            &["endpoint", "outcome", "topic"],
        );
        let dead_letters = counter("eventgw_dead_letters_total", "Dead-lettered events by reason.", &["reason"]);
        let rejected_requests =
            counter("eventgw_rejected_requests_total", "Requests answered with an error, by code.", &["code"]);
        let contract_violations = counter(
            "eventgw_contract_violations_total",
            "Events breaking their schema, by schema and rollout.",
            &["schema", "rollout"],
        );
        let bots = counter("eventgw_bots_total", "Events from bots, by bot name.", &["name"]);
        let consent_violations = counter(
            "eventgw_consent_violations_total",
            "Events whose purpose was not consented to, by purpose and rollout.",
            &["purpose", "rollout"],
        );
        let personal_fields =
            counter("eventgw_personal_fields_total", "Personal fields handled at ingest, by action.", &["action"]);
        let geo_lookups =
            counter("eventgw_geo_lookups_total", "Geo lookups of client addresses, by result.", &["result"]);
        let config_reloads = counter("eventgw_config_reloads_total", "Configuration reloads by outcome.", &["outcome"]);
        let buckets = vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
        let produce_latency = Histogram::with_opts(
            HistogramOpts::new("eventgw_produce_latency_seconds", "Time until Kafka acknowledged a request's records.")
                .buckets(buckets),
        )
        .expect("static histogram");
        registry.register(Box::new(produce_latency.clone())).expect("registered once");
        let queue_depth = IntGauge::new("eventgw_producer_queue_depth", "Records not yet acknowledged by Kafka.")
            .expect("static gauge");
        registry.register(Box::new(queue_depth.clone())).expect("registered once");
        let spool = SpoolMetrics::new(&registry);
        let gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("static gauge");
            registry.register(Box::new(g.clone())).expect("registered once");
            g
        };
        let queue_high_water = gauge(
            "eventgw_producer_queue_high_water",
            "Queue depth above which requests are refused with 503 backpressure.",
        );
        let ready = gauge(
            "eventgw_ready",
            "1 when /readyz would answer 200 (Kafka answers a metadata request, not draining), else 0.",
        );
        Self {
            registry,
            spool,
            requests,
            events,
            dead_letters,
            rejected_requests,
            contract_violations,
            produce_latency,
            queue_depth,
            queue_high_water,
            ready,
            bots,
            consent_violations,
            personal_fields,
            geo_lookups,
            config_reloads,
        }
    }

    /// The registry, for metrics owned elsewhere (the dedupe sink's).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Everything in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let encoder = TextEncoder::new();
        if let Err(e) = encoder.encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "Metrics could not be encoded");
        }
        let mut text = String::from_utf8(out).unwrap_or_default();
        // Only where the allocator counts (the gateway binary): a 0 would read as a measurement.
        if let Some(bytes) = crate::heap::in_use() {
            text.push_str(
                "# HELP eventgw_heap_bytes Heap bytes in use (Rust allocations; resident memory also keeps what \
                 the allocator held at its peak).\n# TYPE eventgw_heap_bytes gauge\n",
            );
            text.push_str(&format!("eventgw_heap_bytes {bytes}\n"));
        }
        if let Some(bytes) = crate::heap::peak() {
            text.push_str(
                "# HELP eventgw_heap_peak_bytes The most heap bytes in use at any moment since start.\n\
                 # TYPE eventgw_heap_peak_bytes gauge\n",
            );
            text.push_str(&format!("eventgw_heap_peak_bytes {bytes}\n"));
        }
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
