//! Drops a client's retry of an event already stored, so the topic holds
//! each `(source, messageId)` once within a window (24 h by default).
//!
//! [`DedupeSink`] wraps the sink the request path uses (Kafka, or the spool
//! in front of it), so dedupe sits in one place: before a record is
//! produced its id is *reserved* in a [`Store`] (a short pending entry);
//! once the record is acknowledged or spooled the id is *confirmed* (kept
//! for the window); when the produce fails it is *released*. So a retry
//! after a `503` is produced, and a retry after a `200` is answered
//! `duplicate` and never produced. Records replayed from the spool go
//! straight to Kafka and never pass here: they are not deduped against
//! their own reservation.
//!
//! Decisions (see docs/scale-out.md, "Dedupe"):
//! - while a record's produce is in flight its reservation is extended
//!   every third of the pending TTL; with dedupe on, the producer's message
//!   timeout is long (`delivery_timeout_ms`), so a request that times out
//!   (answered 503) leaves its record to librdkafka's idempotent retries,
//!   still reserved: a client's retry meanwhile is told to retry, and once
//!   the record lands it is `duplicate`. Only a definite failure releases;
//! - a retry that finds the id *pending* (its first request still in
//!   flight) is answered `503` with `Retry-After`: its first copy may yet
//!   fail, so `duplicate` would be a lie, and producing it could store it
//!   twice; by the time the client retries, the first has been settled;
//! - dead-letter records are deduped too: a retry of an invalid event is
//!   answered `invalid` with its reason again, but not dead-lettered twice;
//! - an id repeated with a different event (another topic, partition key,
//!   event name or dead-letter reason) is still the duplicate it claims to
//!   be, counted in `eventgw_dedupe_conflicts_total` and logged. The body
//!   itself is not compared: SDKs change `sentAt` (and so the corrected
//!   `timestamp`) on every attempt, so a byte hash would flag honest retries.

/// The `[dedupe]` section, kept with every other section in [`crate::config`].
pub use crate::config::dedupe as config;
pub mod in_doubt;
pub mod journal;
pub mod memory;
mod metrics;
pub mod shared;
mod sink;

use futures::future::BoxFuture;

pub use crate::config::dedupe::{DedupeConfig, OnStoreError, StoreKind};
pub use memory::MemoryStore;
pub use metrics::DedupeMetrics;
pub use shared::RedisStore;
pub use sink::DedupeSink;

use crate::sink::OutRecord;

/// An event's identity: who sent it and the id it carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventId {
    /// The source (write key owner) it came from; ids are per source.
    pub source: String,
    /// Its `messageId`.
    pub message_id: String,
}

/// One id to reserve, confirm or release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// Which event.
    pub id: EventId,
    /// What the event claims to be (see [`fingerprint`]), kept with the id
    /// so a repeated id with another event is reported as a conflict.
    pub fingerprint: u32,
    /// The request that holds the reservation: only it may release it.
    pub token: u64,
    /// The topic its record goes to: the id log keeps it with a
    /// reservation, so an id a crash left in doubt can be looked up there.
    pub topic: String,
}

/// What the store says of a reserved id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Not seen within the window: now reserved by this request; produce it.
    New,
    /// Stored within the window, with this fingerprint: a duplicate.
    Stored(u32),
    /// Reserved by a request still in flight.
    Pending,
    /// Reserved by a gateway that died mid-request (its lease ran out),
    /// with this fingerprint, at this time (Unix ms): its record may be in
    /// Kafka. Now reserved by this request, which must look it up there.
    InDoubt(u32, u64),
}

/// Why the store did not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// Remembers the ids of stored events for the window.
pub trait Store: Send + Sync + 'static {
    /// Reserves each id not yet known (atomically per id) and says what
    /// each one is, in input order.
    fn reserve(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<Vec<Claim>, StoreError>>;
    /// Marks the ids as stored, for the window.
    fn confirm(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>>;
    /// Forgets the ids still reserved with their token (the produce failed).
    fn release(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>>;
    /// Keeps the ids still reserved with their token reserved for another
    /// lease: called while their produce is in flight, so a live request
    /// keeps its reservation and a dead one's lapses. Answers how many of
    /// `ids` are no longer this request's (taken over by a retry after the
    /// lease lapsed, or gone): their records may be stored twice.
    fn extend(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<usize, StoreError>>;
    /// Whether the store answers now.
    fn check(&self) -> BoxFuture<'static, Result<(), StoreError>>;
    /// How long a reservation lasts unless extended.
    fn pending_ttl(&self) -> std::time::Duration;
    /// Ids forgotten before their window ended, to respect a memory bound.
    fn evicted(&self) -> u64 {
        0
    }
    /// Ids held, where the store knows it cheaply.
    fn held(&self) -> Option<usize> {
        None
    }
}

/// The identity of a record: its `source` and `event-id` headers (every
/// record the pipeline makes has both).
pub fn event_id(record: &OutRecord) -> Option<EventId> {
    let header = |name: &str| record.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
    Some(EventId { source: header("source")?, message_id: header("event-id")? })
}

/// What a record claims to be, for conflict reports: its topic, partition
/// key, event name and dead-letter reason. CRC-32, the same in every
/// gateway process and version, so gateways sharing a store agree.
pub fn fingerprint(record: &OutRecord) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(record.topic.as_bytes());
    hasher.update(&[0]);
    hasher.update(record.key.as_bytes());
    for name in ["event-name", "dead-letter-reason"] {
        hasher.update(&[0]);
        if let Some((_, value)) = record.headers.iter().find(|(n, _)| *n == name) {
            hasher.update(value.as_bytes());
        }
    }
    hasher.finalize()
}

/// `sink` with dedupe in front when `[dedupe]` is enabled, else `sink`.
/// A reservation's lease is `dedupe.lease_secs`, at least twice the request
/// timeout: by then the request that made it has been answered, and its
/// task has settled it or keeps extending it, unless the process died. With `[dedupe] path` the memory store reads
/// its id log back first and looks up the ids a crash left in doubt in
/// Kafka (a thread of its own; their retries wait meanwhile).
pub fn wrap(
    config: &crate::config::Config,
    sink: std::sync::Arc<dyn crate::sink::Sink>,
) -> Result<std::sync::Arc<dyn crate::sink::Sink>, StoreError> {
    let dedupe = &config.dedupe;
    if !dedupe.enabled {
        return Ok(sink);
    }
    let request_timeout = std::time::Duration::from_millis(config.server.request_timeout_ms);
    let window = std::time::Duration::from_secs(dedupe.window_secs);
    let pending_ttl = (request_timeout * 2).max(std::time::Duration::from_secs(dedupe.lease_secs));
    let store: std::sync::Arc<dyn Store> = match (dedupe.store, &dedupe.path) {
        (StoreKind::Memory, None) => std::sync::Arc::new(MemoryStore::new(window, dedupe.max_ids, pending_ttl)),
        (StoreKind::Memory, Some(path)) => {
            let base = config.file.as_deref().and_then(std::path::Path::parent).unwrap_or(std::path::Path::new("."));
            let dir = base.join(path);
            let (store, in_doubt) = MemoryStore::open(window, dedupe.max_ids, pending_ttl, &dir)?;
            let store = std::sync::Arc::new(store);
            in_doubt::resolve_in_background(std::sync::Arc::clone(&store), in_doubt, &config.kafka);
            store
        }
        (StoreKind::Redis, _) => {
            let timeout = std::time::Duration::from_millis(dedupe.store_timeout_ms);
            let store = RedisStore::new(&dedupe.redis_url, window, pending_ttl, timeout)?;
            in_doubt::watch_replication(&store.settle(), &config.kafka);
            std::sync::Arc::new(store)
        }
    };
    Ok(std::sync::Arc::new(DedupeSink::new(sink, store, dedupe.on_store_error).with_lookup(&config.kafka)))
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod model_tests;
