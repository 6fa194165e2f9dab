//! The `[spool]` section: where the spool lives, when a request falls back
//! to it, and its bounds. Off unless `enabled = true`.

use std::path::PathBuf;

use serde::Deserialize;

/// The local disk spool that takes events while Kafka cannot.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpoolConfig {
    /// Off by default: a request then waits for Kafka and gets 503 when it cannot.
    pub enabled: bool,
    /// Directory of the segment files; relative paths are relative to the config file.
    /// One gateway process per directory (a lock file enforces it).
    pub dir: PathBuf,
    /// How long a request waits for Kafka's acknowledgement before its
    /// records are spooled instead: the part of `server.request_timeout_ms`
    /// given to Kafka (the rest is left for the fsync and the answer).
    pub ack_timeout_ms: u64,
    /// A segment file is closed and a new one started past this size.
    pub segment_bytes: u64,
    /// Most bytes on disk; past it requests get 503 (never silent loss).
    pub max_bytes: u64,
    /// When the oldest record not yet in Kafka is older than this, new
    /// records are refused with 503: the spool is a buffer, not an archive.
    pub max_age_secs: u64,
    /// Records produced per replay round (one round is acknowledged before the next).
    pub replay_batch: usize,
    /// The producer's `message.timeout.ms` while the spool is on: long, so
    /// librdkafka's idempotent retries (exactly once, in order) do the
    /// waiting instead of a timeout that could leave a record "possibly
    /// stored" and replay it twice. 0 means never give up.
    pub delivery_timeout_ms: u64,
    /// Benchmarks only: answer spooled events without waiting for the
    /// fsync (the control that prices the fsync in `scripts/bench spool`).
    /// A crash then loses what was answered 200; logged as an error at start.
    pub unsafe_skip_fsync: bool,
}

impl Default for SpoolConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            dir: PathBuf::from("spool"),
            ack_timeout_ms: 2_000,
            segment_bytes: 64 * 1024 * 1024,
            max_bytes: 1024 * 1024 * 1024,
            max_age_secs: 24 * 3600,
            replay_batch: 500,
            delivery_timeout_ms: 600_000,
            unsafe_skip_fsync: false,
        }
    }
}

impl SpoolConfig {
    /// Checks values that types alone cannot; names the key at fault.
    pub fn check(&self, request_timeout_ms: u64) -> Result<(), (&'static str, String)> {
        if !self.enabled {
            return Ok(());
        }
        if self.ack_timeout_ms == 0 || self.ack_timeout_ms >= request_timeout_ms {
            let problem = format!(
                "{} must be above 0 and below server.request_timeout_ms ({request_timeout_ms}), leaving time for the fsync",
                self.ack_timeout_ms
            );
            return Err(("spool.ack_timeout_ms", problem));
        }
        if self.segment_bytes < 4096 {
            return Err(("spool.segment_bytes", "must be at least 4096".into()));
        }
        if self.max_bytes < self.segment_bytes {
            return Err(("spool.max_bytes", "must be at least spool.segment_bytes".into()));
        }
        if self.max_age_secs == 0 {
            return Err(("spool.max_age_secs", "must be above 0".into()));
        }
        if self.replay_batch == 0 {
            return Err(("spool.replay_batch", "must be above 0".into()));
        }
        if self.dir.as_os_str().is_empty() {
            return Err(("spool.dir", "must name a directory".into()));
        }
        Ok(())
    }
}
