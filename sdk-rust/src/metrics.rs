//! Counters a service exports to its own metrics system: what was handed
//! over, sent, retried and dropped. Plain atomics, so reading them never
//! slows down a `track` call.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::outcome::{Report, Status};

/// A snapshot of the client's counters, all monotonic except the two
/// queue gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Metrics {
    /// Events taken into the queue.
    pub enqueued: u64,
    /// Events the gateway accepted onto their domain topic.
    pub sent: u64,
    /// Events the gateway dead-lettered as invalid.
    pub invalid: u64,
    /// Events the gateway refused.
    pub rejected: u64,
    /// Events refused at the call or evicted from the queue, never sent.
    pub dropped: u64,
    /// Events whose sending gave up.
    pub failed: u64,
    /// Event sends repeated after a failed attempt (one per event per retry).
    pub retried: u64,
    /// HTTP requests made, first attempts and retries.
    pub requests: u64,
    /// Events waiting in the queue now.
    pub queued_events: u64,
    /// Bytes of JSON waiting in the queue now.
    pub queued_bytes: u64,
}

/// The live counters behind [`Metrics`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Events handed over by callers, queued or refused; the denominator of
    /// the report's accounting.
    pub handed: AtomicU64,
    /// See [`Metrics::enqueued`].
    pub enqueued: AtomicU64,
    /// See [`Metrics::sent`].
    pub sent: AtomicU64,
    /// See [`Metrics::invalid`].
    pub invalid: AtomicU64,
    /// See [`Metrics::rejected`].
    pub rejected: AtomicU64,
    /// See [`Metrics::dropped`].
    pub dropped: AtomicU64,
    /// See [`Metrics::failed`].
    pub failed: AtomicU64,
    /// See [`Metrics::retried`].
    pub retried: AtomicU64,
    /// See [`Metrics::requests`].
    pub requests: AtomicU64,
}

impl Counters {
    /// Counts one resolved event under its status.
    pub fn resolve(&self, status: &Status) {
        let counter = match status {
            Status::Accepted { .. } => &self.sent,
            Status::Invalid { .. } => &self.invalid,
            Status::Rejected { .. } => &self.rejected,
            Status::Failed { .. } => &self.failed,
            Status::Dropped { .. } => &self.dropped,
        };
        counter.fetch_add(1, Relaxed);
    }

    /// The snapshot, with the queue's gauges filled in by the caller.
    pub fn snapshot(&self, queued_events: u64, queued_bytes: u64) -> Metrics {
        Metrics {
            enqueued: self.enqueued.load(Relaxed),
            sent: self.sent.load(Relaxed),
            invalid: self.invalid.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            failed: self.failed.load(Relaxed),
            retried: self.retried.load(Relaxed),
            requests: self.requests.load(Relaxed),
            queued_events,
            queued_bytes,
        }
    }

    /// The report: totals, with whatever is not yet resolved as `pending`.
    pub fn report(&self) -> Report {
        let mut report = Report {
            sent: self.sent.load(Relaxed),
            invalid: self.invalid.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            failed: self.failed.load(Relaxed),
            pending: 0,
        };
        report.pending = self.handed.load(Relaxed).saturating_sub(report.total());
        report
    }
}
