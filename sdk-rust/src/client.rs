//! The client callers hold: cheap to clone, every call non-blocking. A call
//! encodes the event, stamps it with a UUID v7 `messageId` and queues it;
//! the worker does the rest. `flush` and `shutdown` are the only awaits that
//! depend on the network.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uuid::Uuid;

use crate::auth::Credentials;
use crate::config::{ClientBuilder, OverflowPolicy};
use crate::delivery::Sender;
use crate::error::{BuildError, EnqueueError};
use crate::event::{CallKind, Encoded, Identity, Message, Parts};
use crate::metrics::Metrics;
use crate::outcome::{Outcome, Report, Status};
use crate::queue::{Limits, Pushed, Queue};
use crate::reporter::{OutcomeStream, Reporter};
use crate::transport::{HttpTransport, Transport};
use crate::typed::TypedEvent;
use crate::worker::{self, Shared};

/// The tracking client. Clone it freely; all clones share one queue and one
/// worker. Build it inside a tokio runtime.
#[derive(Clone)]
pub struct Client {
    /// Dropped with the last clone, which lets the worker wind down.
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    overflow: OverflowPolicy,
    max_event_bytes: usize,
    drop_deadline: Duration,
    /// Taken by the first `shutdown`, which awaits it.
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    // Without a shutdown the worker still delivers, for `drop_deadline`.
    fn drop(&mut self) {
        if !self.shared.queue.is_closed() {
            self.shared.shut_down_by(Instant::now() + self.drop_deadline);
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("metrics", &self.metrics()).finish_non_exhaustive()
    }
}

impl Client {
    /// Settings for a client of the gateway at `endpoint` (e.g.
    /// `http://127.0.0.1:8080`).
    pub fn builder(endpoint: impl Into<String>, credentials: Credentials) -> ClientBuilder {
        ClientBuilder::new(endpoint, credentials)
    }

    pub(crate) fn start(builder: ClientBuilder, transport: Arc<dyn Transport>) -> Result<Self, BuildError> {
        builder.check()?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?;
        let reporter = Arc::new(Reporter::new(builder.on_outcome.clone(), builder.outcome_buffer));
        let limits = Limits {
            max_events: builder.queue_max_events,
            max_bytes: builder.queue_max_bytes,
            batch_events: builder.batch_max_events,
            batch_bytes: builder.batch_max_bytes,
        };
        let shared = Arc::new(Shared {
            queue: Queue::new(limits),
            reporter: Arc::clone(&reporter),
            linger: builder.linger,
            max_in_flight: builder.max_in_flight,
            flush_to: 0.into(),
            shutdown_at: Mutex::new(None),
            resolved_below: tokio::sync::watch::Sender::new(0),
        });
        let seed = std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), Uuid::now_v7());
        let sender = Arc::new(Sender {
            transport,
            credentials: builder.credentials.clone(),
            retry: builder.retry,
            gzip: builder.gzip,
            reporter,
            jitter: seed.into(),
        });
        let worker = runtime.spawn(worker::run(Arc::clone(&shared), sender));
        Ok(Self {
            inner: Arc::new(Inner {
                shared,
                overflow: builder.overflow,
                max_event_bytes: builder.max_event_bytes,
                drop_deadline: builder.drop_deadline,
                worker: Mutex::new(Some(worker)),
            }),
        })
    }

    /// A `track` call: `who` did `event`, described by `properties` (any
    /// `Serialize`, e.g. a `serde_json::json!` value or your own struct).
    pub async fn track<P: Serialize + ?Sized>(
        &self,
        who: &Identity,
        event: &str,
        properties: &P,
    ) -> Result<Uuid, EnqueueError> {
        let parts = Parts { event: Some(event), properties: Some(properties), ..Parts::new(CallKind::Track, who) };
        self.push(parts.encode(Uuid::now_v7(), chrono::Utc::now(), self.inner.max_event_bytes)).await
    }

    /// A `page` call (catalog event `Page Viewed`).
    pub async fn page<P: Serialize + ?Sized>(
        &self,
        who: &Identity,
        name: Option<&str>,
        properties: &P,
    ) -> Result<Uuid, EnqueueError> {
        let parts = Parts { name, properties: Some(properties), ..Parts::new(CallKind::Page, who) };
        self.push(parts.encode(Uuid::now_v7(), chrono::Utc::now(), self.inner.max_event_bytes)).await
    }

    /// A `screen` call (catalog event `Screen Viewed`).
    pub async fn screen<P: Serialize + ?Sized>(
        &self,
        who: &Identity,
        name: &str,
        properties: &P,
    ) -> Result<Uuid, EnqueueError> {
        let parts = Parts { name: Some(name), properties: Some(properties), ..Parts::new(CallKind::Screen, who) };
        self.push(parts.encode(Uuid::now_v7(), chrono::Utc::now(), self.inner.max_event_bytes)).await
    }

    /// An `identify` call: who the user is.
    pub async fn identify<T: Serialize + ?Sized>(&self, who: &Identity, traits: &T) -> Result<Uuid, EnqueueError> {
        let parts = Parts { traits: Some(traits), ..Parts::new(CallKind::Identify, who) };
        self.push(parts.encode(Uuid::now_v7(), chrono::Utc::now(), self.inner.max_event_bytes)).await
    }

    /// A `group` call: the user belongs to `group_id`.
    pub async fn group<T: Serialize + ?Sized>(
        &self,
        who: &Identity,
        group_id: &str,
        traits: &T,
    ) -> Result<Uuid, EnqueueError> {
        let parts = Parts { group_id: Some(group_id), traits: Some(traits), ..Parts::new(CallKind::Group, who) };
        self.push(parts.encode(Uuid::now_v7(), chrono::Utc::now(), self.inner.max_event_bytes)).await
    }

    /// An `alias` call: `previous_id` is now `who`.
    pub async fn alias(&self, who: &Identity, previous_id: &str) -> Result<Uuid, EnqueueError> {
        let parts = Parts::<Value> { previous_id: Some(previous_id), ..Parts::new(CallKind::Alias, who) };
        self.push(parts.encode(Uuid::now_v7(), chrono::Utc::now(), self.inner.max_event_bytes)).await
    }

    /// A typed event generated from the catalog ([`crate::catalog`]): its
    /// call, name and pinned schema version come from the type.
    pub async fn record<E: TypedEvent>(&self, who: &Identity, event: &E) -> Result<Uuid, EnqueueError> {
        let (kind, name) = match E::KIND {
            CallKind::Track => (CallKind::Track, None),
            other => (other, event.call_name()),
        };
        let parts = Parts {
            event: (kind == CallKind::Track).then_some(E::NAME),
            name,
            properties: Some(event),
            schema_version: Some(E::VERSION),
            ..Parts::new(kind, who)
        };
        self.push(parts.encode(Uuid::now_v7(), chrono::Utc::now(), self.inner.max_event_bytes)).await
    }

    /// Any event, with full control over its fields.
    pub async fn send(&self, message: &Message) -> Result<Uuid, EnqueueError> {
        self.push(message.encode(self.inner.max_event_bytes)).await
    }

    async fn push(&self, encoded: Result<Encoded, EnqueueError>) -> Result<Uuid, EnqueueError> {
        let shared = &self.inner.shared;
        let counters = &shared.reporter.counters;
        counters.handed.fetch_add(1, Relaxed);
        let event = encoded.inspect_err(|_| {
            counters.dropped.fetch_add(1, Relaxed);
        })?;
        let id = event.id;
        let evict = self.inner.overflow == OverflowPolicy::DropOldest;
        let refused = match shared.queue.push(event, evict, Instant::now()) {
            Pushed::Queued(evicted) => return Ok(self.queued(id, evicted)),
            Pushed::Closed => EnqueueError::Closed,
            Pushed::Full(event) => match self.inner.overflow {
                OverflowPolicy::Wait(max) => match self.wait_for_room(event, max).await {
                    Ok(evicted) => return Ok(self.queued(id, evicted)),
                    Err(e) => e,
                },
                _ => {
                    let (events, bytes) = shared.queue.depth();
                    EnqueueError::QueueFull { events, bytes }
                }
            },
        };
        shared.reporter.resolve(Outcome { message_id: id, status: Status::Dropped { reason: refused.to_string() } });
        Err(refused)
    }

    fn queued(&self, id: Uuid, evicted: Vec<crate::queue::Queued>) -> Uuid {
        let reporter = &self.inner.shared.reporter;
        reporter.counters.enqueued.fetch_add(1, Relaxed);
        for old in evicted {
            let reason = "evicted from the full queue by a newer event (drop-oldest policy)".to_owned();
            reporter.resolve(Outcome { message_id: old.id, status: Status::Dropped { reason } });
        }
        id
    }

    async fn wait_for_room(
        &self,
        mut event: Encoded,
        max: Duration,
    ) -> Result<Vec<crate::queue::Queued>, EnqueueError> {
        let queue = &self.inner.shared.queue;
        let deadline = Instant::now() + max;
        loop {
            let notified = queue.space.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match queue.push(event, false, Instant::now()) {
                Pushed::Queued(evicted) => return Ok(evicted),
                Pushed::Closed => return Err(EnqueueError::Closed),
                Pushed::Full(back) => event = back,
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(EnqueueError::WaitTimedOut(max));
            }
        }
    }

    /// Sends everything queued before this call without waiting for the
    /// batch timer, and returns once each of those events is resolved
    /// (delivered, refused, or given up after its retries).
    pub async fn flush(&self) {
        let shared = &self.inner.shared;
        let target = shared.queue.next_seq();
        shared.flush_to.fetch_max(target, SeqCst);
        shared.queue.wake.notify_one();
        let mut resolved = shared.resolved_below.subscribe();
        // An error means the worker is gone, and with it anything to wait for.
        let _ = resolved.wait_for(|below| *below >= target).await;
    }

    /// Stops taking events, delivers what it can until `deadline` from now,
    /// gives up on the rest, and reports the client's totals. Events still
    /// unresolved at the deadline are counted as failed, never forgotten.
    pub async fn shutdown(&self, deadline: Duration) -> Report {
        let shared = &self.inner.shared;
        shared.shut_down_by(Instant::now() + deadline);
        let worker = self.inner.worker.lock().unwrap_or_else(PoisonError::into_inner).take();
        match worker {
            Some(handle) => {
                if let Err(e) = handle.await {
                    tracing::error!(error = %e, "The tracking worker stopped abnormally");
                }
            }
            None => {
                let mut resolved = shared.resolved_below.subscribe();
                let _ = resolved.wait_for(|below| *below == u64::MAX).await;
            }
        }
        shared.reporter.counters.report()
    }

    /// The counters now.
    pub fn metrics(&self) -> Metrics {
        let (events, bytes) = self.inner.shared.queue.depth();
        self.inner.shared.reporter.counters.snapshot(events as u64, bytes as u64)
    }

    /// The totals now, in the shape `shutdown` returns.
    pub fn report(&self) -> Report {
        self.inner.shared.reporter.counters.report()
    }

    /// A stream of every outcome from now on.
    pub fn outcomes(&self) -> OutcomeStream {
        self.inner.shared.reporter.subscribe()
    }
}

impl ClientBuilder {
    /// Builds the client and starts its worker on the current tokio runtime.
    pub fn build(self) -> Result<Client, BuildError> {
        self.check()?;
        let transport = HttpTransport::new(&self.endpoint, self.request_timeout, self.connect_timeout)?;
        Client::start(self, Arc::new(transport))
    }
}
