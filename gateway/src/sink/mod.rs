//! Where records go. The request path only sees the [`Sink`] trait, so unit
//! tests swap in [`MemorySink`] while every end-to-end test uses
//! [`KafkaSink`] against a real broker.

mod kafka;
mod kafka_probe;
mod memory;
pub mod spool;
pub mod watermark;

use std::time::Duration;

use actix_web::web::Bytes;
use futures::future::{BoxFuture, FutureExt};

pub use crate::text::Text;
pub use kafka::{KafkaSink, producer_config};
pub use kafka_probe::{PROBE_INTERVAL, PROBE_TIMEOUT, ProbeCounts};
pub use memory::MemorySink;
pub use spool::{SpoolSink, SpoolStatus};

/// One record ready for Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutRecord {
    /// Destination topic.
    pub topic: Text,
    /// Partition key; equal keys land on one partition, in order.
    pub key: String,
    /// The enriched event (or dead-letter envelope) as JSON; shared, not
    /// copied, by whatever else keeps the record (the spool's copies in
    /// flight, the live view).
    pub payload: Bytes,
    /// Metadata consumers can read without parsing the payload.
    pub headers: Vec<(&'static str, Text)>,
}

/// Where a record was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// Partition it landed on.
    pub partition: i32,
    /// Its offset there.
    pub offset: i64,
}

/// Where a record is kept once the request can be answered 200.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Kafka acknowledged it.
    Kafka(Delivered),
    /// Kafka did not acknowledge it in time: it is fsynced in the local
    /// spool and will be replayed to its topic.
    Spooled,
    /// Not produced: the same `(source, messageId)` was stored within the
    /// dedupe window (see [`crate::dedupe`]).
    Duplicate,
}

/// Why a record was not stored, sorted by what the client should do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    /// The producer's bounded queue is full: retry later (503).
    #[error("the producer queue is full")]
    QueueFull,
    /// The record is larger than Kafka accepts: the client's fault, never retried.
    #[error("the record is larger than Kafka accepts")]
    TooLarge,
    /// Kafka did not acknowledge it in time or refused it: retry later (503).
    #[error("{0}")]
    Unavailable(String),
    /// Kafka did not acknowledge it and the spool cannot take it (full,
    /// too old, or the disk failed): retry later (503).
    #[error("{0}")]
    SpoolRefused(String),
}

/// Produces records and reports each one's fate.
pub trait Sink: Send + Sync + 'static {
    /// Sends every record at once (pipelined, never one at a time) and
    /// resolves when each is acknowledged or has failed, in input order.
    fn send_all(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>>;

    /// As [`Sink::send_all`], but a sink with a spool may keep a record on
    /// local disk instead when Kafka does not acknowledge it in time, within
    /// `deadline`. Sinks without a spool only ever answer [`Stored::Kafka`].
    fn store_all(
        &self,
        records: Vec<OutRecord>,
        deadline: Duration,
    ) -> BoxFuture<'static, Vec<Result<Stored, SinkError>>> {
        let _ = deadline;
        let sent = self.send_all(records);
        async move { sent.await.into_iter().map(|r| r.map(Stored::Kafka)).collect() }.boxed()
    }

    /// As [`Sink::send_all`], for a source that opted out of the spool: a
    /// sink with a spool sends through a producer that gives up within the
    /// request deadline, as without the spool.
    fn send_direct(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        self.send_all(records)
    }

    /// The value of the record this sink stored at `offset` of `topic`'s
    /// `partition` (the live view's `GET /live/events/{id}`); `Ok(None)`
    /// when it no longer holds it (retention), `Err` when it cannot say.
    fn read_back(&self, topic: &str, partition: i32, offset: i64) -> BoxFuture<'static, Result<Option<Bytes>, String>> {
        let _ = (topic, partition, offset);
        futures::future::ready(Err("this sink cannot read records back".to_owned())).boxed()
    }

    /// The spool's state, for `/readyz` and `/metrics`; `None` without a spool.
    fn spool_status(&self) -> Option<SpoolStatus> {
        None
    }

    /// Registers the sink's own metrics (dedupe's) in the gateway's registry.
    fn register_metrics(&self, registry: &prometheus::Registry) {
        let _ = registry;
    }

    /// Whether the sink can take traffic now; the error says why not.
    /// `/readyz` and `/metrics` await it, so it must answer from state the
    /// sink already holds, never by asking Kafka (see `kafka_probe`).
    fn check_ready(&self) -> BoxFuture<'static, Result<(), String>>;

    /// Records handed over and not yet acknowledged or failed.
    fn queue_depth(&self) -> i64;

    /// Waits for everything queued to be delivered, for a graceful shutdown.
    fn flush(&self, timeout: std::time::Duration) -> Result<(), String>;
}
