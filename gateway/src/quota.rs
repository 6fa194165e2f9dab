//! Quotas with governor's GCRA limiters: per source and per JWT subject in
//! events, per client IP in requests, a global ceiling in events, and a
//! lock-out for addresses that keep failing authentication. A batch costs
//! as many cells as it has events and is refused whole. Keyed limiters are
//! cleaned periodically so memory stays bounded under many distinct keys.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
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
#[derive(Debug, Clone, Default, Deserialize)]
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
    /// How often idle limiter state is dropped.
    #[serde(default = "default_cleanup_secs")]
    pub cleanup_interval_secs: u64,
}

fn default_cleanup_secs() -> u64 {
    60
}

impl Rate {
    /// The governor quota, or `None` for a rate that is not positive.
    pub fn quota(&self) -> Option<Quota> {
        if !(self.per_second > 0.0 && self.per_second.is_finite()) {
            return None;
        }
        let burst = NonZeroU32::new(self.burst)?;
        Quota::with_period(Duration::from_secs_f64(1.0 / self.per_second)).map(|q| q.allow_burst(burst))
    }

    /// Seconds in which the whole burst refills: the window of the
    /// `RateLimit-Policy` header.
    pub fn window_secs(&self) -> u64 {
        (f64::from(self.burst) / self.per_second).ceil().max(1.0) as u64
    }
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Denied {
    /// Which quota: `source`, `subject`, `ip`, `global` or `auth_failures`.
    pub scope: &'static str,
    /// Its configured rate.
    pub rate: Rate,
    /// When a retry may conform; `None` when the request can never fit (a
    /// batch larger than the burst).
    pub retry_after: Option<Duration>,
}

type Keyed<K, C> = RateLimiter<K, DashMapStateStore<K>, C, NoOpMiddleware<<C as Clock>::Instant>>;
type Direct<C> = RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// Every limiter of one configuration.
pub struct Quotas<C: Clock = DefaultClock> {
    clock: C,
    source: Option<(Rate, Keyed<String, C>)>,
    subject: Option<(Rate, Keyed<String, C>)>,
    ip: Option<(Rate, Keyed<IpAddr, C>)>,
    global: Option<(Rate, Direct<C>)>,
    auth_failures: Option<(Rate, Keyed<IpAddr, C>)>,
    /// Addresses locked out after too many failed authentications, until when.
    locked_out: Mutex<HashMap<IpAddr, C::Instant>>,
}

impl Quotas<DefaultClock> {
    /// Limiters on the real clock.
    pub fn new(config: &QuotaConfig) -> Self {
        Self::with_clock(config, DefaultClock::default())
    }
}

impl<C: Clock + Clone> Quotas<C> {
    /// Limiters on `clock` (a fake one in tests).
    pub fn with_clock(config: &QuotaConfig, clock: C) -> Self {
        let keyed = |rate: Option<Rate>| rate.and_then(|r| Some((r, RateLimiter::dashmap_with_clock(r.quota()?, clock.clone()))));
        let ip_keyed = |rate: Option<Rate>| rate.and_then(|r| Some((r, RateLimiter::dashmap_with_clock(r.quota()?, clock.clone()))));
        Self {
            source: keyed(config.source),
            subject: keyed(config.subject),
            ip: ip_keyed(config.ip),
            global: config.global.and_then(|r| Some((r, RateLimiter::direct_with_clock(r.quota()?, clock.clone())))),
            auth_failures: ip_keyed(config.auth_failures),
            locked_out: Mutex::new(HashMap::new()),
            clock,
        }
    }

    /// One request from `ip` (before its body is read).
    pub fn check_request(&self, ip: Option<IpAddr>) -> Result<(), Denied> {
        if let (Some((rate, limiter)), Some(ip)) = (&self.ip, ip) {
            self.conform(limiter.check_key_n(&ip, NonZeroU32::MIN), "ip", *rate)?;
        }
        Ok(())
    }

    /// `events` events of `source` (and of `subject`, for a JWT). The whole
    /// batch conforms or nothing of it does.
    pub fn check_events(&self, source: &str, subject: Option<&str>, events: usize) -> Result<(), Denied> {
        let n = NonZeroU32::new(u32::try_from(events).unwrap_or(u32::MAX)).unwrap_or(NonZeroU32::MIN);
        if let Some((rate, limiter)) = &self.global {
            self.conform(limiter.check_n(n), "global", *rate)?;
        }
        if let Some((rate, limiter)) = &self.source {
            self.conform(limiter.check_key_n(&source.to_owned(), n), "source", *rate)?;
        }
        if let (Some((rate, limiter)), Some(subject)) = (&self.subject, subject) {
            self.conform(limiter.check_key_n(&subject.to_owned(), n), "subject", *rate)?;
        }
        Ok(())
    }

    /// Whether `ip` is locked out for failing authentication too often.
    pub fn check_locked_out(&self, ip: Option<IpAddr>) -> Result<(), Denied> {
        let (Some((rate, _)), Some(ip)) = (&self.auth_failures, ip) else { return Ok(()) };
        let now = self.clock.now();
        let until = self.locked_out.lock().ok().and_then(|m| m.get(&ip).copied());
        match until {
            Some(until) if until > now => {
                Err(Denied { scope: "auth_failures", rate: *rate, retry_after: Some(until.duration_since(now).into()) })
            }
            _ => Ok(()),
        }
    }

    /// Counts a failed authentication from `ip`; past the allowance the
    /// address is locked out until the limiter would let it try again.
    pub fn record_auth_failure(&self, ip: Option<IpAddr>) {
        let (Some((_, limiter)), Some(ip)) = (&self.auth_failures, ip) else { return };
        if let Err(not_until) = limiter.check_key(&ip)
            && let Ok(mut locked) = self.locked_out.lock()
        {
            locked.insert(ip, not_until.earliest_possible());
        }
    }

    fn conform<E>(
        &self,
        outcome: Result<Result<(), governor::NotUntil<C::Instant>>, E>,
        scope: &'static str,
        rate: Rate,
    ) -> Result<(), Denied> {
        match outcome {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => {
                Err(Denied { scope, rate, retry_after: Some(not_until.wait_time_from(self.clock.now())) })
            }
            Err(_) => Err(Denied { scope, rate, retry_after: None }),
        }
    }

    /// Drops state of keys idle long enough to be indistinguishable from new
    /// ones, and expired lock-outs. Returns how many keys remain.
    pub fn cleanup(&self) -> usize {
        let mut remaining = 0;
        for limiter in [&self.source, &self.subject].into_iter().flatten().map(|(_, l)| l) {
            limiter.retain_recent();
            limiter.shrink_to_fit();
            remaining += limiter.len();
        }
        for limiter in [&self.ip, &self.auth_failures].into_iter().flatten().map(|(_, l)| l) {
            limiter.retain_recent();
            limiter.shrink_to_fit();
            remaining += limiter.len();
        }
        let now = self.clock.now();
        if let Ok(mut locked) = self.locked_out.lock() {
            locked.retain(|_, until| *until > now);
            locked.shrink_to_fit();
            remaining += locked.len();
        }
        remaining
    }
}
