//! Metric names and labels in one place. Labels are low-cardinality only:
//! endpoint (a fixed set), status, outcome, topic (from the catalog), code
//! and reason (fixed sets); never a user, source key or path.

use prometheus::{Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

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
    /// Events from bots, by bot name (a fixed list), where a source labels them.
    pub bots: IntCounterVec,
    /// Events whose purpose was not consented to, by purpose and rollout.
    pub consent_violations: IntCounterVec,
    /// Personal fields handled at ingest, by action (hash, redact, encrypt).
    pub personal_fields: IntCounterVec,
    /// Geo lookups of client addresses, by result (found, not_found).
    pub geo_lookups: IntCounterVec,
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
        Self {
            registry,
            requests,
            events,
            dead_letters,
            rejected_requests,
            contract_violations,
            produce_latency,
            queue_depth,
            bots,
            consent_violations,
            personal_fields,
            geo_lookups,
        }
    }

    /// Everything in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let encoder = TextEncoder::new();
        if let Err(e) = encoder.encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "Metrics could not be encoded");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
