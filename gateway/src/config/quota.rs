//! The `[quotas]` section: rates and bursts of the source, subject, IP,
//! global and authentication-failure limiters.

use serde::Deserialize;

/// A rate with a burst, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    /// Sustained cells per second (may be below 1: 0.001 is one per 1000 s).
    pub per_second: f64,
    /// Cells available at once.
    pub burst: u32,
}

/// Which quotas apply; a missing one is unlimited.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    /// Events per source.
    pub source: Option<Rate>,
    /// Events per JWT subject.
    pub subject: Option<Rate>,
    /// Requests per client IP.
    pub ip: Option<Rate>,
    /// Events for the whole gateway instance (the global quota divided by
    /// the number of instances).
    pub global: Option<Rate>,
    /// Failed authentications per client IP before it is locked out.
    pub auth_failures: Option<Rate>,
    /// The IP quota and the lock-out key an IPv6 address by this many
    /// leading bits (1 to 128), since a subscriber holds a whole prefix
    /// (see `quota/client_key.rs`); IPv4 addresses are keyed whole.
    #[serde(default = "default_ipv6_prefix_len")]
    pub ipv6_prefix_len: u8,
    /// How often idle limiter state is dropped.
    #[serde(default = "default_cleanup_secs")]
    pub cleanup_interval_secs: u64,
}

/// No quota; the defaults a file gets for the keys it leaves out.
impl Default for QuotaConfig {
    fn default() -> Self {
        Self {
            source: None,
            subject: None,
            ip: None,
            global: None,
            auth_failures: None,
            ipv6_prefix_len: default_ipv6_prefix_len(),
            cleanup_interval_secs: default_cleanup_secs(),
        }
    }
}

/// The default IPv6 prefix length: the /64 every subscriber gets at least.
pub const DEFAULT_IPV6_PREFIX_LEN: u8 = 64;

/// Longest IPv6 prefix: the full address.
pub const MAX_IPV6_PREFIX_LEN: u8 = 128;

fn default_ipv6_prefix_len() -> u8 {
    DEFAULT_IPV6_PREFIX_LEN
}

fn default_cleanup_secs() -> u64 {
    60
}

impl Rate {
    /// Seconds in which the whole burst refills: the window of the
    /// `RateLimit-Policy` header.
    pub fn window_secs(&self) -> u64 {
        (f64::from(self.burst) / self.per_second).ceil().max(1.0) as u64
    }
}
