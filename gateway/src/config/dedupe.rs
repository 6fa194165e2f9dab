//! The `[dedupe]` section: whether a client's retry of an event already
//! stored is dropped, where the ids are remembered, and what happens when
//! that store cannot be reached. Off unless `enabled = true`.

use serde::Deserialize;

/// Fewest ids the memory store holds: one per slice of its window
/// (`dedupe::memory::SLICES`; a test keeps the two equal).
pub const MIN_MAX_IDS: usize = 16;

/// Where the ids of stored events are remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// In this process: exact, bounded by `max_ids`; for one gateway. Kept
    /// across a crash when `path` is set, else lost on restart.
    Memory,
    /// A Redis or Valkey server shared by every gateway.
    Redis,
}

/// What a request does when the store cannot answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnStoreError {
    /// Produce without dedupe (a retry may then be stored twice), counted in
    /// `eventgw_dedupe_store_errors_total`: availability first.
    Produce,
    /// Answer 503 with `Retry-After` and report not ready: no duplicate ever.
    Unavailable,
}

/// `[dedupe]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DedupeConfig {
    /// Off by default: every retry is produced again, for downstream to drop.
    pub enabled: bool,
    /// `memory` or `redis`.
    pub store: StoreKind,
    /// How long an id is remembered after its event was stored; a retry
    /// later than this is stored again. Segment's own window is about a day.
    pub window_secs: u64,
    /// The memory store's id log directory (relative to the config file):
    /// set, the ids survive a process crash (`kill -9`, OOM): they are
    /// appended there (one `write(2)` per request, no fsync: a machine
    /// crash may forget the last seconds) and read back on start-up, and
    /// the ids whose produce was in flight at the crash are looked up in
    /// Kafka. One gateway process per directory (a lock file). Unset, the
    /// memory store forgets every id when the process ends.
    pub path: Option<std::path::PathBuf>,
    /// Most ids the memory store holds; past it the oldest are forgotten
    /// before their window ends (counted in `eventgw_dedupe_evicted_total`).
    pub max_ids: usize,
    /// The shared store, for `store = "redis"`.
    pub redis_url: String,
    /// `produce` or `unavailable`.
    pub on_store_error: OnStoreError,
    /// Longest wait for one store answer before it counts as a store error.
    pub store_timeout_ms: u64,
    /// How long a reservation holds without being extended (at least twice
    /// `server.request_timeout_ms`). A request whose produce is in flight
    /// extends it every sixth of this, so it bounds the outage of the store
    /// a live gateway rides out without losing its reservations (less one
    /// extension period, plus 50 s where topics are replicated); and the
    /// retries of a gateway that died mid-request wait that long (plus the
    /// same 50 s) before their ids are looked up in Kafka. See
    /// docs/scale-out.md, "The lease is a trade-off".
    pub lease_secs: u64,
    /// The producer's `message.timeout.ms` while dedupe is on (the spool's
    /// own setting wins when it is on too): long, so a record whose request
    /// timed out is still delivered once by librdkafka's idempotent retries
    /// while its id stays reserved, instead of timing out "possibly
    /// stored" and being stored again by the client's retry. 0 means never
    /// give up.
    pub delivery_timeout_ms: u64,
}

impl Default for DedupeConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            store: StoreKind::Memory,
            window_secs: 24 * 3600,
            path: None,
            max_ids: 10_000_000,
            redis_url: "redis://127.0.0.1:6379".into(),
            on_store_error: OnStoreError::Produce,
            store_timeout_ms: 500,
            lease_secs: 30,
            delivery_timeout_ms: 600_000,
        }
    }
}

impl DedupeConfig {
    /// Checks values that types alone cannot; names the key at fault.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !self.enabled {
            return Ok(());
        }
        if self.window_secs == 0 {
            return Err(("dedupe.window_secs", "must be above 0".into()));
        }
        if self.max_ids < MIN_MAX_IDS {
            return Err(("dedupe.max_ids", format!("must be at least {MIN_MAX_IDS}")));
        }
        if self.path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            return Err(("dedupe.path", "must name a directory (or be left out)".into()));
        }
        if self.lease_secs == 0 {
            return Err(("dedupe.lease_secs", "must be above 0".into()));
        }
        if self.store_timeout_ms == 0 {
            return Err(("dedupe.store_timeout_ms", "must be above 0".into()));
        }
        if self.store == StoreKind::Redis {
            redis::Client::open(self.redis_url.as_str())
                .map_err(|e| ("dedupe.redis_url", format!("`{}` is not a Redis URL: {e}", self.redis_url)))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> DedupeConfig {
        DedupeConfig { enabled: true, ..DedupeConfig::default() }
    }

    #[test]
    fn defaults_are_valid_and_off() {
        assert!(!DedupeConfig::default().enabled);
        assert_eq!(enabled().check(), Ok(()));
    }

    #[test]
    fn the_least_max_ids_is_one_per_memory_slice() {
        assert_eq!(MIN_MAX_IDS, crate::dedupe::memory::SLICES);
    }

    #[test]
    fn max_ids_is_checked_at_exactly_one_per_slice() {
        let at = DedupeConfig { max_ids: MIN_MAX_IDS, ..enabled() };
        assert_eq!(at.check(), Ok(()));
        let below = DedupeConfig { max_ids: MIN_MAX_IDS - 1, ..enabled() };
        assert_eq!(below.check().map_err(|(key, _)| key), Err("dedupe.max_ids"));
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            (DedupeConfig { window_secs: 0, ..enabled() }, "dedupe.window_secs"),
            (DedupeConfig { store_timeout_ms: 0, ..enabled() }, "dedupe.store_timeout_ms"),
            (DedupeConfig { lease_secs: 0, ..enabled() }, "dedupe.lease_secs"),
            (
                DedupeConfig { store: StoreKind::Redis, redis_url: "http://nope".into(), ..enabled() },
                "dedupe.redis_url",
            ),
        ];
        for (config, key) in cases {
            assert_eq!(config.check().map_err(|(k, _)| k), Err(key));
        }
        // Off, nothing is checked.
        assert_eq!(DedupeConfig { window_secs: 0, ..DedupeConfig::default() }.check(), Ok(()));
    }

    #[test]
    fn store_and_policy_read_from_toml() {
        let config: DedupeConfig =
            toml::from_str("enabled = true\nstore = \"redis\"\non_store_error = \"unavailable\"").expect("parses");
        assert_eq!((config.store, config.on_store_error), (StoreKind::Redis, OnStoreError::Unavailable));
        assert!(toml::from_str::<DedupeConfig>("store = \"disk\"").is_err());
        assert!(toml::from_str::<DedupeConfig>("typo = 1").is_err());
    }
}
