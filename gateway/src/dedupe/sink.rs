//! [`DedupeSink`]: reserve → produce → confirm or release, around any sink.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt};

use super::journal::InDoubt;
use super::{Claim, DedupeMetrics, OnStoreError, Reservation, Store, StoreError, event_id, fingerprint};

/// Longest look-up in Kafka of ids in doubt, within one request.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);
/// How soon a failed extension of reservations in flight is tried again.
const EXTEND_RETRY: Duration = Duration::from_millis(250);
use crate::sink::{Delivered, OutRecord, Sink, SinkError, SpoolStatus, Stored};

/// The message of a retry whose first request is still in flight.
pub const PENDING: &str =
    "an earlier request with the same messageId is still being stored; retry after it is answered";

/// A sink that produces each `(source, messageId)` once within the window.
pub struct DedupeSink {
    /// Where records that are not duplicates go (Kafka, or the spool).
    inner: Arc<dyn Sink>,
    /// Where ids are remembered.
    store: Arc<dyn Store>,
    /// What happens when the store fails.
    on_store_error: OnStoreError,
    /// Shared with the tasks that settle reservations after the answer.
    metrics: DedupeMetrics,
    /// How to read Kafka when the store says an id is in doubt (its first
    /// gateway died mid-request); without it such an id is produced again.
    lookup: Option<Arc<rdkafka::config::ClientConfig>>,
}

impl DedupeSink {
    /// Wraps `inner`, remembering ids in `store`.
    pub fn new(inner: Arc<dyn Sink>, store: Arc<dyn Store>, on_store_error: OnStoreError) -> Self {
        Self { inner, store, on_store_error, metrics: DedupeMetrics::new(), lookup: None }
    }

    /// Looks ids in doubt up in the Kafka of `kafka` (see [`Claim::InDoubt`]).
    #[must_use]
    pub fn with_lookup(mut self, kafka: &crate::config::KafkaConfig) -> Self {
        self.lookup = Some(Arc::new(super::in_doubt::client_config(kafka)));
        self
    }

    /// Its metrics (tests read them).
    pub fn metrics(&self) -> &DedupeMetrics {
        &self.metrics
    }
}

impl Sink for DedupeSink {
    /// Not deduped: the request path calls [`Sink::store_all`]; this is for
    /// callers that produce on purpose (none today).
    fn send_all(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        self.inner.send_all(records)
    }

    fn read_back(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> BoxFuture<'static, Result<Option<actix_web::web::Bytes>, String>> {
        self.inner.read_back(topic, partition, offset)
    }

    fn store_all(
        &self,
        records: Vec<OutRecord>,
        deadline: Duration,
    ) -> BoxFuture<'static, Vec<Result<Stored, SinkError>>> {
        let count = records.len();
        let run = Run {
            inner: Arc::clone(&self.inner),
            store: Arc::clone(&self.store),
            on_store_error: self.on_store_error,
            metrics: self.metrics.clone(),
            lookup: self.lookup.clone(),
        };
        // A task of its own: the request may time out and drop its future,
        // but the produce goes on in the producer, and its reservation must
        // still be confirmed or released when it settles.
        let task = tokio::spawn(run.store_all(records, deadline));
        async move {
            task.await.unwrap_or_else(|e| {
                tracing::error!(error = %e, "Dedupe task failed");
                vec![Err(SinkError::Unavailable(format!("the dedupe task failed: {e}"))); count]
            })
        }
        .boxed()
    }

    fn spool_status(&self) -> Option<SpoolStatus> {
        self.inner.spool_status()
    }

    fn check_ready(&self) -> BoxFuture<'static, Result<(), String>> {
        let inner = self.inner.check_ready();
        let store = (self.on_store_error == OnStoreError::Unavailable).then(|| self.store.check());
        async move {
            inner.await?;
            if let Some(store) = store {
                store.await.map_err(|e| format!("the dedupe store cannot be reached: {e}"))?;
            }
            Ok(())
        }
        .boxed()
    }

    fn queue_depth(&self) -> i64 {
        self.inner.queue_depth()
    }

    fn flush(&self, timeout: Duration) -> Result<(), String> {
        self.inner.flush(timeout)
    }

    fn register_metrics(&self, registry: &prometheus::Registry) {
        self.metrics.register(registry);
        self.inner.register_metrics(registry);
    }
}

/// One request's records, moved into the task that settles them.
struct Run {
    inner: Arc<dyn Sink>,
    store: Arc<dyn Store>,
    on_store_error: OnStoreError,
    metrics: DedupeMetrics,
    lookup: Option<Arc<rdkafka::config::ClientConfig>>,
}

impl Run {
    /// Turns each [`Claim::InDoubt`] into `Stored` (its record is in Kafka:
    /// confirmed now) or `New` (not there: this request produces it), or
    /// `Pending` when Kafka cannot be read now (the reservation stays this
    /// request's until its lease runs out, and the next retry looks again).
    async fn resolve_doubts(&self, wanted: &[Reservation], claims: Vec<Claim>) -> Vec<Claim> {
        let doubts: Vec<InDoubt> = wanted
            .iter()
            .zip(&claims)
            .filter_map(|(r, c)| match c {
                Claim::InDoubt(fingerprint, since) => Some(InDoubt {
                    id: r.id.clone(),
                    fingerprint: *fingerprint,
                    topic: r.topic.clone(),
                    reserved_ms: *since,
                }),
                _ => None,
            })
            .collect();
        if doubts.is_empty() {
            return claims;
        }
        let Some(config) = self.lookup.clone() else {
            return claims.into_iter().map(|c| if matches!(c, Claim::InDoubt(..)) { Claim::New } else { c }).collect();
        };
        let asked = doubts.clone();
        let found = tokio::task::spawn_blocking(move || super::in_doubt::find(&config, &asked, LOOKUP_TIMEOUT)).await;
        let found = match found {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, ids = doubts.len(), "Dedupe ids in doubt not looked up in Kafka; their retries wait");
                return claims
                    .into_iter()
                    .map(|c| if matches!(c, Claim::InDoubt(..)) { Claim::Pending } else { c })
                    .collect();
            }
            Err(e) => {
                tracing::warn!(error = %e, "Dedupe in-doubt look-up failed");
                return claims
                    .into_iter()
                    .map(|c| if matches!(c, Claim::InDoubt(..)) { Claim::Pending } else { c })
                    .collect();
            }
        };
        let stored: Vec<Reservation> = wanted.iter().filter(|r| found.contains(&r.id)).cloned().collect();
        tracing::info!(
            in_doubt = doubts.len(),
            in_kafka = stored.len(),
            "Dedupe ids of a gateway that died mid-request looked up in Kafka: those there are duplicates"
        );
        if !stored.is_empty()
            && let Err(e) = self.store.confirm(stored).await
        {
            self.metrics.store_errors.with_label_values(&["confirm"]).inc();
            tracing::warn!(error = %e, "Dedupe store did not confirm ids found in Kafka");
        }
        wanted
            .iter()
            .zip(claims)
            .map(|(r, c)| match c {
                Claim::InDoubt(fingerprint, _) if found.contains(&r.id) => Claim::Stored(fingerprint),
                Claim::InDoubt(..) => Claim::New,
                c => c,
            })
            .collect()
    }

    async fn store_all(self, records: Vec<OutRecord>, deadline: Duration) -> Vec<Result<Stored, SinkError>> {
        let token = uuid::Uuid::new_v4().as_u64_pair().0;
        let reservations: Vec<Option<Reservation>> = records
            .iter()
            .map(|r| {
                event_id(r).map(|id| Reservation { id, fingerprint: fingerprint(r), token, topic: r.topic.to_string() })
            })
            .collect();
        let wanted: Vec<Reservation> = reservations.iter().flatten().cloned().collect();
        let started = Instant::now();
        let claims = if wanted.is_empty() { Ok(Vec::new()) } else { self.store.reserve(wanted.clone()).await };
        self.metrics.store_latency.observe(started.elapsed().as_secs_f64());
        let claims = match claims {
            Ok(claims) if claims.len() == wanted.len() => self.resolve_doubts(&wanted, claims).await,
            Ok(_) => {
                return self.unchecked(records, deadline, StoreError("the store answered a short list".into())).await;
            }
            Err(e) => return self.unchecked(records, deadline, e).await,
        };
        let mut claims = claims.into_iter();
        let mut answers: Vec<Option<Result<Stored, SinkError>>> = Vec::with_capacity(records.len());
        let mut to_send = Vec::new();
        let mut sent: Vec<Option<Reservation>> = Vec::new();
        for (record, reservation) in records.into_iter().zip(reservations) {
            let Some(reservation) = reservation else {
                answers.push(None);
                to_send.push(record);
                sent.push(None);
                continue;
            };
            match claims.next().unwrap_or(Claim::Pending) {
                Claim::New => {
                    answers.push(None);
                    to_send.push(record);
                    sent.push(Some(reservation));
                }
                Claim::Stored(stored) => {
                    self.metrics.duplicates.inc();
                    if stored != reservation.fingerprint {
                        self.metrics.conflicts.inc();
                        tracing::warn!(
                            source = %reservation.id.source,
                            message_id = %reservation.id.message_id,
                            topic = %record.topic,
                            "Repeated messageId with a different event; dropped as the duplicate it claims to be"
                        );
                    }
                    answers.push(Some(Ok(Stored::Duplicate)));
                }
                Claim::Pending | Claim::InDoubt(..) => {
                    self.metrics.pending.inc();
                    answers.push(Some(Err(SinkError::Unavailable(PENDING.into()))));
                }
            }
        }
        let stored = if to_send.is_empty() {
            Vec::new()
        } else {
            let held: Vec<Reservation> = sent.iter().flatten().cloned().collect();
            self.keep_reserved(self.inner.store_all(to_send, deadline), held).await
        };
        self.settle(&sent, &stored).await;
        let mut stored = stored.into_iter();
        answers
            .into_iter()
            .map(|a| {
                a.unwrap_or_else(|| stored.next().unwrap_or_else(|| Err(SinkError::Unavailable("no answer".into()))))
            })
            .collect()
    }

    /// Awaits the produce, extending its reservations meanwhile (a produce
    /// can outlast the request: see the module's notes). An extension is
    /// due every sixth of the lease; one that fails is tried again after
    /// [`EXTEND_RETRY`], not a whole period later, so a live request gets
    /// its lease back as soon as the store answers again. Once the produce
    /// settled after a failed extension, one more extension asks the store
    /// whether a retry took any id over meanwhile: those events may be
    /// stored twice, and are counted and logged as such.
    async fn keep_reserved(
        &self,
        produce: BoxFuture<'static, Vec<Result<Stored, SinkError>>>,
        held: Vec<Reservation>,
    ) -> Vec<Result<Stored, SinkError>> {
        let every = (self.store.pending_ttl() / 6).max(Duration::from_millis(10));
        let mut produce = produce.fuse();
        let mut next = every;
        let (mut failed, mut lost) = (false, 0);
        let stored = loop {
            let mut tick = Box::pin(tokio::time::sleep(next)).fuse();
            futures::select! {
                stored = produce => break stored,
                () = tick => next = match self.extend(&held, &mut lost).await {
                    Ok(()) => every,
                    Err(()) => {
                        failed = true;
                        EXTEND_RETRY.min(every)
                    }
                },
            }
        };
        if failed {
            // Best effort: a store still out of reach was counted above.
            let _ = self.extend(&held, &mut lost).await;
        }
        stored
    }

    /// Extends `held`; counts the ids a retry took over (`lost`: those
    /// counted so far, for this request).
    async fn extend(&self, held: &[Reservation], lost: &mut usize) -> Result<(), ()> {
        if held.is_empty() {
            return Ok(());
        }
        match self.store.extend(held.to_vec()).await {
            Ok(now_lost) if now_lost <= *lost => Ok(()),
            Ok(now_lost) => {
                self.metrics.leases_lost.inc_by((now_lost - *lost) as u64);
                *lost = now_lost;
                tracing::error!(
                    lost = now_lost,
                    held = held.len(),
                    "Dedupe reservations of records in flight were taken over after their lease lapsed (the store \
                     was out of reach longer than dedupe.lease_secs); those events may be stored twice"
                );
                Ok(())
            }
            Err(e) => {
                self.metrics.store_errors.with_label_values(&["extend"]).inc();
                tracing::warn!(error = %e, "Dedupe store did not extend reservations in flight; trying again");
                Err(())
            }
        }
    }

    /// Confirms what was stored (in Kafka or the spool), releases what was not.
    async fn settle(&self, sent: &[Option<Reservation>], stored: &[Result<Stored, SinkError>]) {
        let (mut confirm, mut release) = (Vec::new(), Vec::new());
        for (reservation, result) in sent.iter().zip(stored) {
            let Some(reservation) = reservation.clone() else { continue };
            if result.is_ok() { confirm.push(reservation) } else { release.push(reservation) }
        }
        // A failed confirm lets a later retry be stored again (a duplicate,
        // never a loss); a failed release makes a retry wait for the
        // pending TTL (a delay, never a loss).
        if !confirm.is_empty()
            && let Err(e) = self.store.confirm(confirm).await
        {
            self.metrics.store_errors.with_label_values(&["confirm"]).inc();
            tracing::warn!(error = %e, "Dedupe store did not confirm stored ids; their retries may be stored again");
        }
        if !release.is_empty()
            && let Err(e) = self.store.release(release).await
        {
            self.metrics.store_errors.with_label_values(&["release"]).inc();
            tracing::warn!(error = %e, "Dedupe store did not release failed ids; their retries wait for the pending TTL");
        }
        let evicted = self.store.evicted();
        let seen = self.metrics.evicted.get();
        if evicted > seen {
            self.metrics.evicted.inc_by(evicted - seen);
        }
        if let Some(held) = self.store.held() {
            self.metrics.held.set(i64::try_from(held).unwrap_or(i64::MAX));
        }
    }

    /// The store failed: produce without dedupe, or refuse, as configured.
    async fn unchecked(
        self,
        records: Vec<OutRecord>,
        deadline: Duration,
        error: StoreError,
    ) -> Vec<Result<Stored, SinkError>> {
        self.metrics.store_errors.with_label_values(&["reserve"]).inc();
        match self.on_store_error {
            OnStoreError::Produce => {
                tracing::warn!(error = %error, "Dedupe store failed; producing without dedupe");
                self.metrics.unchecked.inc_by(records.len() as u64);
                self.inner.store_all(records, deadline).await
            }
            OnStoreError::Unavailable => {
                tracing::warn!(error = %error, "Dedupe store failed; answering 503");
                let detail = format!("the dedupe store cannot be reached ({error}); retry later");
                vec![Err(SinkError::Unavailable(detail)); records.len()]
            }
        }
    }
}
