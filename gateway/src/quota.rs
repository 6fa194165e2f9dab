//! Quotas with governor's GCRA limiters: per source and per JWT subject in
//! events, per client IP in requests, a global ceiling in events, and a
//! lock-out for addresses that keep failing authentication. A batch costs
//! as many cells as it has events and is refused whole: a batch one
//! limiter refuses spends nothing of any other. Keyed limiters are
//! cleaned periodically so memory stays bounded under many distinct keys.

mod client_key;
mod refundable;

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};
use refundable::RefundableStore;

pub use crate::config::quota::{QuotaConfig, Rate};
pub use client_key::{DEFAULT_IPV6_PREFIX_LEN, MAX_IPV6_PREFIX_LEN, client_key};

impl Rate {
    /// The governor quota, or `None` for a rate that is not positive.
    pub fn quota(&self) -> Option<Quota> {
        if !(self.per_second > 0.0 && self.per_second.is_finite()) {
            return None;
        }
        let burst = NonZeroU32::new(self.burst)?;
        Quota::with_period(Duration::from_secs_f64(1.0 / self.per_second)).map(|q| q.allow_burst(burst))
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

/// A limiter of events, charged together with the others of a batch.
struct EventLimiter<K: Hash + Eq + Clone, C: Clock> {
    scope: &'static str,
    rate: Rate,
    limiter: RateLimiter<K, RefundableStore<K>, C, NoOpMiddleware<C::Instant>>,
    /// The limiter's own state, to give cells back when another refuses.
    store: RefundableStore<K>,
    /// One cell's weight: what a refund of one event gives back.
    period: Duration,
}

impl<K: Hash + Eq + Clone, C: Clock + Clone> EventLimiter<K, C> {
    fn new(scope: &'static str, rate: Option<Rate>, clock: &C) -> Option<Self> {
        let rate = rate?;
        let quota = rate.quota()?;
        let store = RefundableStore::default();
        let limiter = RateLimiter::new(quota, store.clone(), clock.clone());
        Some(Self { scope, rate, limiter, store, period: quota.replenish_interval() })
    }
}

/// Every limiter of one configuration.
pub struct Quotas<C: Clock = DefaultClock> {
    clock: C,
    source: Option<EventLimiter<String, C>>,
    subject: Option<EventLimiter<String, C>>,
    ip: Option<(Rate, Keyed<IpAddr, C>)>,
    /// Keyed by nothing: one bucket for the whole instance.
    global: Option<EventLimiter<(), C>>,
    auth_failures: Option<(Rate, Keyed<IpAddr, C>)>,
    /// Addresses locked out after too many failed authentications, until when.
    locked_out: Mutex<HashMap<IpAddr, C::Instant>>,
    /// IPv6 addresses are keyed by this many leading bits (see [`client_key`]).
    ipv6_prefix_len: u8,
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
        let ip_keyed = |rate: Option<Rate>| {
            rate.and_then(|r| Some((r, RateLimiter::dashmap_with_clock(r.quota()?, clock.clone()))))
        };
        Self {
            source: EventLimiter::new("source", config.source, &clock),
            subject: EventLimiter::new("subject", config.subject, &clock),
            ip: ip_keyed(config.ip),
            global: EventLimiter::new("global", config.global, &clock),
            auth_failures: ip_keyed(config.auth_failures),
            locked_out: Mutex::new(HashMap::new()),
            ipv6_prefix_len: config.ipv6_prefix_len,
            clock,
        }
    }

    /// One request from `ip` (before its body is read).
    pub fn check_request(&self, ip: Option<IpAddr>) -> Result<(), Denied> {
        if let (Some((rate, limiter)), Some(ip)) = (&self.ip, self.key(ip)) {
            self.conform(limiter.check_key_n(&ip, NonZeroU32::MIN), "ip", *rate)?;
        }
        Ok(())
    }

    /// `events` events of `source` (and of `subject`, for a JWT). The whole
    /// batch conforms to every limiter or spends nothing of any: each is
    /// charged in turn, and when one refuses, the ones already charged get
    /// their cells back. (Between the charge and the refund a concurrent
    /// batch may see those cells spent: the error is on the safe side.)
    pub fn check_events(&self, source: &str, subject: Option<&str>, events: usize) -> Result<(), Denied> {
        let n = NonZeroU32::new(u32::try_from(events).unwrap_or(u32::MAX)).unwrap_or(NonZeroU32::MIN);
        let source = self.source.as_ref().map(|l| (l, source.to_owned()));
        let subject = self.subject.as_ref().zip(subject).map(|(l, s)| (l, s.to_owned()));
        let global = self.global.as_ref();
        self.charge(source.as_ref(), n)?;
        if let Err(denied) = self.charge(subject.as_ref(), n) {
            refund(source.as_ref(), n);
            return Err(denied);
        }
        if let Err(denied) = self.charge(global.map(|l| (l, ())).as_ref(), n) {
            refund(source.as_ref(), n);
            refund(subject.as_ref(), n);
            return Err(denied);
        }
        Ok(())
    }

    fn charge<K: Hash + Eq + Clone>(
        &self,
        limiter: Option<&(&EventLimiter<K, C>, K)>,
        n: NonZeroU32,
    ) -> Result<(), Denied> {
        let Some((limiter, key)) = limiter else { return Ok(()) };
        self.conform(limiter.limiter.check_key_n(key, n), limiter.scope, limiter.rate)
    }

    /// Whether `ip` is locked out for failing authentication too often.
    pub fn check_locked_out(&self, ip: Option<IpAddr>) -> Result<(), Denied> {
        let (Some((rate, _)), Some(ip)) = (&self.auth_failures, self.key(ip)) else { return Ok(()) };
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
        let (Some((_, limiter)), Some(ip)) = (&self.auth_failures, self.key(ip)) else { return };
        if let Err(not_until) = limiter.check_key(&ip)
            && let Ok(mut locked) = self.locked_out.lock()
        {
            locked.insert(ip, not_until.earliest_possible());
        }
    }

    fn key(&self, ip: Option<IpAddr>) -> Option<IpAddr> {
        ip.map(|ip| client_key(ip, self.ipv6_prefix_len))
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
        for limiter in [&self.source, &self.subject].into_iter().flatten().map(|l| &l.limiter) {
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

fn refund<K: Hash + Eq + Clone, C: Clock>(limiter: Option<&(&EventLimiter<K, C>, K)>, n: NonZeroU32) {
    if let Some((limiter, key)) = limiter {
        limiter.store.refund(key, limiter.period * n.get());
    }
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    fn rate(per_second: f64, burst: u32) -> Option<Rate> {
        Some(Rate { per_second, burst })
    }

    fn quotas(config: QuotaConfig) -> (Quotas<FakeRelativeClock>, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        (Quotas::with_clock(&config, clock.clone()), clock)
    }

    #[test]
    fn exactly_the_burst_is_accepted_then_the_wait_is_exact() {
        let (q, clock) = quotas(QuotaConfig { source: rate(10.0, 5), ..QuotaConfig::default() });
        for _ in 0..5 {
            q.check_events("web", None, 1).expect("within the burst");
        }
        let denied = q.check_events("web", None, 1).expect_err("one past the burst");
        assert_eq!(denied.scope, "source");
        assert_eq!(denied.retry_after, Some(Duration::from_millis(100)), "one cell per 100 ms");
        clock.advance(Duration::from_millis(99));
        assert!(q.check_events("web", None, 1).is_err(), "not a moment early");
        clock.advance(Duration::from_millis(1));
        assert!(q.check_events("web", None, 1).is_ok());
    }

    #[test]
    fn a_batch_costs_its_events_and_is_refused_whole() {
        let (q, _) = quotas(QuotaConfig { source: rate(1.0, 10), ..QuotaConfig::default() });
        q.check_events("web", None, 8).expect("8 of 10");
        assert!(q.check_events("web", None, 3).is_err(), "3 more do not fit");
        q.check_events("web", None, 2).expect("the refused batch consumed nothing");
        let never = q.check_events("web", None, 11).expect_err("larger than the burst");
        assert_eq!(never.retry_after, None, "it can never conform");
    }

    #[test]
    fn one_noisy_source_does_not_use_another_sources_quota() {
        let (q, _) = quotas(QuotaConfig { source: rate(1.0, 3), subject: rate(1.0, 2), ..QuotaConfig::default() });
        q.check_events("noisy", None, 3).expect("burst");
        assert!(q.check_events("noisy", None, 1).is_err());
        q.check_events("quiet", None, 2).expect("its own burst");
        q.check_events("quiet", Some("alice"), 0).expect("zero counts as one");
        assert_eq!(q.check_events("other", Some("alice"), 2).expect_err("alice has 1 left").scope, "subject");
        q.check_events("third", Some("bob"), 2).expect("bob has his own");
    }

    #[test]
    fn global_and_ip_quotas_apply_to_everyone() {
        let (q, _) = quotas(QuotaConfig { global: rate(1.0, 4), ip: rate(1.0, 1), ..QuotaConfig::default() });
        q.check_events("a", None, 2).expect("global 2/4");
        q.check_events("b", None, 2).expect("global 4/4");
        assert_eq!(q.check_events("c", None, 1).expect_err("global full").scope, "global");
        let ip: IpAddr = "192.0.2.1".parse().expect("ip");
        q.check_request(Some(ip)).expect("first request");
        assert_eq!(q.check_request(Some(ip)).expect_err("second").scope, "ip");
        q.check_request(Some("192.0.2.2".parse().expect("ip"))).expect("another address");
    }

    #[test]
    fn a_batch_the_source_refuses_spends_no_global_quota() {
        let (q, _) = quotas(QuotaConfig { global: rate(1.0, 4), source: rate(1.0, 2), ..QuotaConfig::default() });
        q.check_events("a", None, 2).expect("source 2/2, global 2/4");
        assert_eq!(q.check_events("a", None, 1).expect_err("source full").scope, "source");
        assert_eq!(q.check_events("a", None, 3).expect_err("past the burst").retry_after, None);
        q.check_events("b", None, 2).expect("the refused batches spent no global quota");
        assert_eq!(q.check_events("c", None, 1).expect_err("now it is full").scope, "global");
    }

    #[test]
    fn a_batch_the_subject_or_global_quota_refuses_spends_no_source_quota() {
        let (q, _) = quotas(QuotaConfig {
            source: rate(1.0, 5),
            subject: rate(1.0, 2),
            global: rate(1.0, 8),
            ..QuotaConfig::default()
        });
        q.check_events("s", Some("alice"), 2).expect("alice's two");
        for _ in 0..3 {
            assert_eq!(q.check_events("s", Some("alice"), 1).expect_err("alice is full").scope, "subject");
        }
        q.check_events("other", None, 5).expect("global 7/8");
        assert_eq!(q.check_events("s", Some("bob"), 2).expect_err("global has 1").scope, "global");
        q.check_events("s", Some("bob"), 1).expect("global 8/8");
        assert_eq!(q.check_events("t", Some("bob"), 1).expect_err("global is full").scope, "global");
        q.check_events("t", Some("carol"), 0).expect_err("global is full");
        // Source `s` spent 3 of 5 (alice's two, bob's one), subject `bob`
        // 1 of 2, source `t` nothing: no refused batch spent anything.
        let fresh = quotas(QuotaConfig { source: rate(1.0, 5), subject: rate(1.0, 2), ..QuotaConfig::default() }).0;
        fresh.check_events("s", Some("bob"), 3).expect_err("over bob's burst");
        fresh.check_events("s", None, 3).expect("three");
        fresh.check_events("x", Some("bob"), 1).expect("one");
        assert_eq!(left(&q, "s", None), left(&fresh, "s", None), "source s");
        assert_eq!(left(&q, "t", None), 5, "source t");
        assert_eq!(left(&q, "zz", Some("bob")), left(&fresh, "zz", Some("bob")), "subject bob");
    }

    /// How many more single events the source (or, given, the subject)
    /// limiter takes; probes that limiter only.
    fn left(q: &Quotas<FakeRelativeClock>, source: &str, subject: Option<&str>) -> usize {
        let (limiter, key) = match subject {
            Some(subject) => (&q.subject.as_ref().expect("a subject quota").limiter, subject),
            None => (&q.source.as_ref().expect("a source quota").limiter, source),
        };
        (0..).take_while(|_| limiter.check_key(&key.to_owned()).is_ok()).count()
    }

    #[test]
    fn failing_authentication_locks_an_address_out_for_a_while() {
        let (q, clock) = quotas(QuotaConfig { auth_failures: rate(0.1, 2), ..QuotaConfig::default() });
        let ip: IpAddr = "198.51.100.9".parse().expect("ip");
        q.record_auth_failure(Some(ip));
        q.record_auth_failure(Some(ip));
        q.check_locked_out(Some(ip)).expect("two failures are allowed");
        q.record_auth_failure(Some(ip));
        let denied = q.check_locked_out(Some(ip)).expect_err("the third locks out");
        assert_eq!(denied.retry_after, Some(Duration::from_secs(10)));
        clock.advance(Duration::from_secs(10));
        q.check_locked_out(Some(ip)).expect("the lock-out ends");
    }

    #[test]
    fn limiter_memory_stays_bounded_under_many_distinct_keys() {
        let (q, clock) = quotas(QuotaConfig {
            source: rate(100.0, 10),
            subject: rate(100.0, 10),
            ip: rate(100.0, 10),
            ..QuotaConfig::default()
        });
        for i in 0..200_000u32 {
            q.check_events(&format!("s{i}"), Some(&format!("u{i}")), 1).expect("fresh key");
            q.check_request(Some(IpAddr::from(i.to_be_bytes()))).expect("fresh address");
        }
        assert_eq!(q.cleanup(), 600_000, "nothing is idle long enough yet");
        clock.advance(Duration::from_millis(100));
        assert_eq!(q.cleanup(), 0, "keys idle for a full burst period are indistinguishable from new ones");
    }
}
