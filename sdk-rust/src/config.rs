//! Building a client: the endpoint, the credentials and every limit, each
//! with a default fit for a backend service and a reason.

use std::sync::Arc;
use std::time::Duration;

use crate::auth::Credentials;
use crate::delivery::RetryPolicy;
use crate::error::BuildError;
use crate::outcome::Outcome;
use crate::reporter::OutcomeCallback;

/// What a call does when the queue is full. Whatever it is, every event it
/// costs is counted in [`crate::Metrics::dropped`] and reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverflowPolicy {
    /// Refuse the new event (`Err(QueueFull)`); what is queued keeps its
    /// place. The default: a caller never waits and always knows.
    DropNewest,
    /// Take the new event and evict the oldest queued ones to make room;
    /// they are reported as [`crate::Status::Dropped`] outcomes.
    DropOldest,
    /// Wait up to this long for room (back-pressure on the caller), then
    /// refuse the event (`Err(WaitTimedOut)`).
    Wait(Duration),
}

/// Settings for a [`crate::Client`]; start from [`crate::Client::builder`].
#[derive(Clone)]
pub struct ClientBuilder {
    /// The gateway's base URL, e.g. `http://127.0.0.1:8080`.
    pub(crate) endpoint: String,
    /// Write key or token provider.
    pub(crate) credentials: Credentials,
    /// Most events queued at once.
    pub(crate) queue_max_events: usize,
    /// Most bytes of JSON queued at once: the client's memory bound.
    pub(crate) queue_max_bytes: usize,
    /// Events per request; the gateway refuses more than 500 by default.
    pub(crate) batch_max_events: usize,
    /// Uncompressed bytes per request; below the gateway's 512 KiB body and
    /// 2 MiB decompressed limits even without gzip.
    pub(crate) batch_max_bytes: usize,
    /// Largest event; the gateway rejects events over 32 KiB.
    pub(crate) max_event_bytes: usize,
    /// How long the first event of a batch waits for company.
    pub(crate) linger: Duration,
    /// Requests in flight at once.
    pub(crate) max_in_flight: usize,
    /// What to do when the queue is full.
    pub(crate) overflow: OverflowPolicy,
    /// Retries and backoff.
    pub(crate) retry: RetryPolicy,
    /// Whole-request timeout (the gateway answers 503 within its own
    /// `request_timeout_ms`, 10 s in the dev config).
    pub(crate) request_timeout: Duration,
    /// TCP connect timeout.
    pub(crate) connect_timeout: Duration,
    /// Gzip request bodies.
    pub(crate) gzip: bool,
    /// How long a client dropped without `shutdown` keeps delivering.
    pub(crate) drop_deadline: Duration,
    /// Called with every outcome.
    pub(crate) on_outcome: Option<OutcomeCallback>,
    /// Outcomes buffered per stream before a slow stream lags.
    pub(crate) outcome_buffer: usize,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("endpoint", &self.endpoint)
            .field("credentials", &self.credentials)
            .field("overflow", &self.overflow)
            .finish_non_exhaustive()
    }
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident: $ty:ty) => {
        $(#[$doc])*
        #[must_use]
        pub fn $name(mut self, value: $ty) -> Self {
            self.$name = value;
            self
        }
    };
}

impl ClientBuilder {
    pub(crate) fn new(endpoint: impl Into<String>, credentials: Credentials) -> Self {
        Self {
            endpoint: endpoint.into(),
            credentials,
            queue_max_events: 100_000,
            queue_max_bytes: 64 << 20,
            batch_max_events: 500,
            batch_max_bytes: 480 << 10,
            max_event_bytes: 32 << 10,
            linger: Duration::from_millis(500),
            max_in_flight: 1,
            overflow: OverflowPolicy::DropNewest,
            retry: RetryPolicy::default(),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            gzip: true,
            drop_deadline: Duration::from_secs(5),
            on_outcome: None,
            outcome_buffer: 4096,
        }
    }

    setter!(
        /// Most events queued at once (default 100 000).
        queue_max_events: usize
    );
    setter!(
        /// Most bytes of event JSON queued at once (default 64 MiB).
        queue_max_bytes: usize
    );
    setter!(
        /// Events per request (default 500, the gateway's `max_batch_events`).
        batch_max_events: usize
    );
    setter!(
        /// Uncompressed bytes per request (default 480 KiB).
        batch_max_bytes: usize
    );
    setter!(
        /// Largest event accepted by a call (default 32 KiB, the gateway's
        /// `max_event_bytes`).
        max_event_bytes: usize
    );
    setter!(
        /// How long a batch waits to fill before it is sent (default 500 ms).
        linger: Duration
    );
    setter!(
        /// Requests in flight at once (default 1, which keeps this client's
        /// events in order, including across retries).
        max_in_flight: usize
    );
    setter!(
        /// What a call does when the queue is full (default drop newest).
        overflow: OverflowPolicy
    );
    setter!(
        /// Retry attempts and backoff.
        retry: RetryPolicy
    );
    setter!(
        /// Whole-request timeout (default 30 s).
        request_timeout: Duration
    );
    setter!(
        /// TCP connect timeout (default 5 s).
        connect_timeout: Duration
    );
    setter!(
        /// Gzip request bodies (default on).
        gzip: bool
    );
    setter!(
        /// How long a client dropped without `shutdown` keeps delivering in
        /// the background (default 5 s).
        drop_deadline: Duration
    );
    setter!(
        /// Outcomes each [`crate::OutcomeStream`] buffers before it lags
        /// (default 4096).
        outcome_buffer: usize
    );

    /// Calls `callback` with every event's outcome, on the worker task: keep
    /// it quick and non-blocking.
    #[must_use]
    pub fn on_outcome(mut self, callback: impl Fn(&Outcome) + Send + Sync + 'static) -> Self {
        self.on_outcome = Some(Arc::new(callback));
        self
    }

    /// Refuses settings that cannot work, naming the setting.
    pub(crate) fn check(&self) -> Result<(), BuildError> {
        let url = &self.endpoint;
        let rest = url.strip_prefix("http://").ok_or_else(|| BuildError::InvalidEndpoint(url.clone()))?;
        if rest.is_empty() || rest.starts_with('/') {
            return Err(BuildError::InvalidEndpoint(url.clone()));
        }
        let positive = [
            ("queue_max_events", self.queue_max_events),
            ("queue_max_bytes", self.queue_max_bytes),
            ("batch_max_events", self.batch_max_events),
            ("batch_max_bytes", self.batch_max_bytes),
            ("max_event_bytes", self.max_event_bytes),
            ("max_in_flight", self.max_in_flight),
            ("retry.max_attempts", self.retry.max_attempts as usize),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(BuildError::Config(format!("{name} must be at least 1")));
        }
        if self.max_event_bytes > self.queue_max_bytes {
            return Err(BuildError::Config("max_event_bytes must not exceed queue_max_bytes".into()));
        }
        Ok(())
    }
}
