//! The `[live]` section: the live events view (`/live/`, `/live/stream`,
//! `gateway tail`), behind an operator token. Off unless `enabled = true`.

use serde::Deserialize;

/// Fewest characters of an operator token: shorter ones are guessable.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Most events one viewer's buffer may hold (each an `Arc` of a rendered
/// event): the memory bound of the view.
pub const MAX_BUFFER_EVENTS: usize = 65_536;

/// Most MiB of recent events a viewer can open.
pub const MAX_RECENT_MIB: usize = 1024;

/// `[live]`.
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LiveConfig {
    /// Off by default: no route, nothing published.
    pub enabled: bool,
    /// The operator token (`Authorization: Bearer`, the `eventgw_live`
    /// cookie, or `?token=` once to open the page). Required when enabled;
    /// keep it in the environment (`EVENTGW__LIVE__TOKEN`), not the file.
    pub token: String,
    /// Events buffered per source channel; a viewer further behind skips
    /// the oldest and is told how many.
    pub buffer_events: usize,
    /// Seconds between keep-alive comments on an idle stream.
    pub heartbeat_secs: u64,
    /// MiB of the most recent events' rows kept so a viewer can open one
    /// (`GET /live/events/{id}` reads its record back from Kafka; a
    /// spooled record's bytes are kept with its row); older ones answer
    /// `404 live_event_gone`. Held only while published, i.e. watched.
    pub recent_mib: usize,
}

impl Default for LiveConfig {
    fn default() -> Self {
        Self { enabled: false, token: String::new(), buffer_events: 4096, heartbeat_secs: 15, recent_mib: 16 }
    }
}

/// The token is never printed, not even in `{:?}`.
impl std::fmt::Debug for LiveConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveConfig")
            .field("enabled", &self.enabled)
            .field("token", &"<redacted>")
            .field("buffer_events", &self.buffer_events)
            .field("heartbeat_secs", &self.heartbeat_secs)
            .field("recent_mib", &self.recent_mib)
            .finish()
    }
}

impl LiveConfig {
    /// Checks what types alone cannot: the key at fault and the problem.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !self.enabled {
            return Ok(());
        }
        if self.token.chars().count() < MIN_TOKEN_CHARS {
            return Err(("live.token", format!("must be at least {MIN_TOKEN_CHARS} characters when live is enabled")));
        }
        if self.buffer_events == 0 || self.buffer_events > MAX_BUFFER_EVENTS {
            return Err(("live.buffer_events", format!("must be between 1 and {MAX_BUFFER_EVENTS}")));
        }
        if self.recent_mib == 0 || self.recent_mib > MAX_RECENT_MIB {
            return Err(("live.recent_mib", format!("must be between 1 and {MAX_RECENT_MIB}")));
        }
        if self.heartbeat_secs == 0 {
            return Err(("live.heartbeat_secs", "must be at least 1".into()));
        }
        Ok(())
    }
}
