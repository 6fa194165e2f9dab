//! Where records go. The request path only sees the [`Sink`] trait, so unit
//! tests swap in [`MemorySink`] while every end-to-end test uses
//! [`KafkaSink`] against a real broker.

mod kafka;
mod memory;

use futures::future::BoxFuture;

pub use kafka::KafkaSink;
pub use memory::MemorySink;

/// One record ready for Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutRecord {
    /// Destination topic.
    pub topic: String,
    /// Partition key; equal keys land on one partition, in order.
    pub key: String,
    /// The enriched event (or dead-letter envelope) as JSON.
    pub payload: Vec<u8>,
    /// Metadata consumers can read without parsing the payload.
    pub headers: Vec<(&'static str, String)>,
}

/// Where a record was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// Partition it landed on.
    pub partition: i32,
    /// Its offset there.
    pub offset: i64,
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
}

/// Produces records and reports each one's fate.
pub trait Sink: Send + Sync + 'static {
    /// Sends every record at once (pipelined, never one at a time) and
    /// resolves when each is acknowledged or has failed, in input order.
    fn send_all(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>>;

    /// Whether the sink can take traffic now; the error says why not.
    fn check_ready(&self) -> BoxFuture<'static, Result<(), String>>;

    /// Records handed over and not yet acknowledged or failed.
    fn queue_depth(&self) -> i64;

    /// Waits for everything queued to be delivered, for a graceful shutdown.
    fn flush(&self, timeout: std::time::Duration) -> Result<(), String>;
}
