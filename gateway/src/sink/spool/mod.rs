//! The spool: when Kafka does not acknowledge a request's records within
//! `spool.ack_timeout_ms` (or the producer is broken), they are appended to
//! an append-only, segmented, checksummed log on local disk and fsynced
//! (group commit), and only then answered `200` with the outcome
//! `spooled`. A background replay produces them to Kafka with their
//! original key and headers through the same idempotent producer.
//!
//! Per-key order: from the first spooled record until replay has caught up
//! with everything appended, *every* new record goes to the spool, behind
//! what it holds, and replay is strictly in append order (a record whose
//! first send is still in flight is waited for, never overtaken). So a
//! record answered before another was sent is in Kafka before it.

mod checkpoint;
pub mod cli;
mod format;
mod reader;
mod replay;
mod sink;
mod store;
mod wedge;
mod writer;

use std::path::Path;

pub use crate::config::spool::SpoolConfig;
pub use format::{Damage, SEGMENT_HEADER, SpooledRecord, scan};
pub use reader::{SegmentReader, read_segment};
pub use sink::{SpoolSink, SpoolStatus};
pub use store::{Recovered, recover};
pub use wedge::{PRODUCER_ONLY, cluster_reachable, read_back_consumer, stored_event_ids};

/// Why the spool cannot take records, or cannot be opened.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SpoolError {
    /// `spool.max_bytes` is reached.
    #[error("Kafka is unavailable and the spool is full ({0} bytes, spool.max_bytes)")]
    Full(u64),
    /// The oldest spooled record is older than `spool.max_age_secs`.
    #[error("Kafka is unavailable and the spool's oldest record is older than {0} s (spool.max_age_secs)")]
    TooOld(u64),
    /// Another process holds the spool directory.
    #[error("the spool directory {0} is locked by another gateway process")]
    Locked(String),
    /// The disk failed.
    #[error("spool {path}: {message}")]
    Io {
        /// The file or directory.
        path: String,
        /// The operating system's error.
        message: String,
    },
    /// The writer thread is gone (the process is stopping).
    #[error("the spool writer has stopped")]
    Stopped,
    /// The last append failed and the disk has not taken a write since.
    #[error("Kafka is unavailable and the spool's disk refuses writes")]
    Failing,
}

impl SpoolError {
    /// What a client is told: no path or operating-system detail (those
    /// are logged), which says nothing to a client and shows the host's layout.
    pub fn for_client(&self) -> String {
        match self {
            Self::Io { .. } | Self::Failing => {
                "Kafka is unavailable and the spool cannot write to its disk; nothing of this request was kept".into()
            }
            other => other.to_string(),
        }
    }

    fn io(path: &Path, error: std::io::Error) -> Self {
        Self::Io { path: path.display().to_string(), message: error.to_string() }
    }
}
