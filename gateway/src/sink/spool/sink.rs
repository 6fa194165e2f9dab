//! [`SpoolSink`]: the Kafka sink with the spool behind it, chosen per
//! request: straight to Kafka while nothing is spooled and Kafka answers
//! within `spool.ack_timeout_ms`, to the spool otherwise.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Sender, channel};
use std::time::Duration;

use futures::future::{BoxFuture, Either, FutureExt, select};
use tokio::sync::oneshot;

use super::replay::Replayer;
use super::store::{Fate, Shared, now_ms};
use super::writer::{Append, Command, Writer};
use super::{SpoolConfig, SpoolError, format};
use crate::sink::{Delivered, KafkaSink, OutRecord, Sink, SinkError, Stored};

/// A snapshot of the spool for `/readyz`, `/metrics` and `gateway spool status`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpoolStatus {
    /// True while new records go to the spool, behind what it holds.
    pub spooling: bool,
    /// Records appended and not yet in Kafka.
    pub records: u64,
    /// Bytes of segment files on disk.
    pub bytes: u64,
    /// Segment files on disk.
    pub segments: usize,
    /// Age of the oldest record not yet in Kafka, in seconds (0 when none).
    pub oldest_age_secs: f64,
    /// Records appended since start.
    pub appended_total: u64,
    /// Records produced to Kafka by replay since start.
    pub replayed_total: u64,
    /// Damaged spans found (torn tails, checksum failures).
    pub damaged_total: u64,
    /// The slowest group commit (write + fsync) since start, in milliseconds:
    /// what a request waits for on top of `ack_timeout_ms` at worst.
    pub slowest_commit_ms: u64,
    /// Damaged segment files moved to `quarantine/` in the spool directory,
    /// waiting for an operator.
    pub quarantined_segments: u64,
    /// False when replay cannot empty the spool for a reason of its own
    /// (stuck, or the disk cannot be read); Kafka being away is not one.
    pub can_drain: bool,
    /// True while the spool's last append failed (disk full, I/O error)
    /// and the disk has not taken a write since.
    pub write_failing: bool,
}

impl SpoolStatus {
    /// Why readiness must be red because of the spool whatever Kafka says,
    /// if it must: a spool that cannot drain keeps every new record behind
    /// it, and a spool that cannot write while it spools refuses them all.
    pub fn not_ready(&self) -> Option<String> {
        if self.spooling && !self.can_drain {
            return Some("the spool cannot drain: replay is stuck or cannot read the spool's disk".into());
        }
        if self.spooling && self.write_failing {
            return Some("the spool is spooling and its disk refuses writes".into());
        }
        None
    }
}

/// The Kafka sink with a spool behind it.
#[derive(Clone)]
pub struct SpoolSink {
    kafka: KafkaSink,
    shared: Arc<Shared>,
    writer: Sender<Command>,
    /// How long a request waits for Kafka before spooling.
    ack_timeout: Duration,
    /// Bounds, for readiness (shared: a request's clone of the sink must not
    /// copy the configuration).
    config: Arc<SpoolConfig>,
    /// For sources that opted out of the spool: a producer with the
    /// `[kafka]` delivery timeout (below the request deadline), so their 503
    /// means "not stored", as without the spool. Built at its first use.
    direct: Arc<Direct>,
}

/// The opted-out sources' producer, and what it is built from.
struct Direct {
    config: Option<crate::config::KafkaConfig>,
    producer: std::sync::OnceLock<Result<KafkaSink, String>>,
}

impl SpoolSink {
    /// Opens the spool directory (recovering what a previous process left,
    /// which is replayed first), starts the writer and replay threads.
    pub fn open(config: &SpoolConfig, kafka: KafkaSink) -> Result<Self, SpoolError> {
        let sink = Self::open_idle(config, kafka)?;
        let replayer = sink.replayer(config);
        std::thread::Builder::new()
            .name("spool-replay".into())
            .spawn(move || match tokio::runtime::Builder::new_current_thread().enable_time().build() {
                Ok(runtime) => runtime.block_on(replayer.run()),
                Err(error) => tracing::error!(%error, "Spool replay cannot start; spooled records stay on disk"),
            })
            .map_err(|e| SpoolError::io(&config.dir, e))?;
        Ok(sink)
    }

    /// Opens the spool and starts only the writer (for `gateway spool`).
    pub(super) fn open_idle(config: &SpoolConfig, kafka: KafkaSink) -> Result<Self, SpoolError> {
        if config.unsafe_skip_fsync {
            tracing::error!(
                dir = %config.dir.display(),
                "UNSAFE: spool.unsafe_skip_fsync = true: spooled events are answered 200 before they are on disk; \
                 a crash or power loss loses them. For benchmarks only; never in production"
            );
        }
        let shared = Arc::new(Shared::open(&config.dir)?);
        let status = status_of(&shared);
        if status.records > 0 {
            tracing::warn!(
                records = status.records,
                bytes = status.bytes,
                "Spool left by a previous process; replaying it before new records"
            );
        }
        let (writer, commands) = channel();
        let thread = Writer::new(Arc::clone(&shared), config.clone());
        std::thread::Builder::new()
            .name("spool-writer".into())
            .spawn(move || thread.run(commands))
            .map_err(|e| SpoolError::io(&config.dir, e))?;
        let ack_timeout = Duration::from_millis(config.ack_timeout_ms);
        let direct = Arc::new(Direct { config: None, producer: std::sync::OnceLock::new() });
        Ok(Self { kafka, shared, writer, ack_timeout, config: Arc::new(config.clone()), direct })
    }

    /// Sources with `spool = false` produce through their own producer built
    /// from `kafka` (else through the spool's, whose delivery timeout is long).
    #[must_use]
    pub fn direct_to(mut self, kafka: crate::config::KafkaConfig) -> Self {
        self.direct = Arc::new(Direct { config: Some(kafka), producer: std::sync::OnceLock::new() });
        self
    }

    /// The producer for sources that opted out of the spool.
    fn direct(&self) -> Result<&KafkaSink, SinkError> {
        let Some(config) = &self.direct.config else { return Ok(&self.kafka) };
        let built = self.direct.producer.get_or_init(|| KafkaSink::new(config).map_err(|e| e.to_string()));
        built.as_ref().map_err(|e| SinkError::Unavailable(format!("the Kafka producer cannot be created: {e}")))
    }

    pub(super) fn replayer(&self, config: &SpoolConfig) -> Replayer {
        Replayer::new(Arc::clone(&self.shared), self.kafka.clone(), self.writer.clone(), config.replay_batch)
    }

    /// Appends records (fsynced); resolves with their sequence numbers.
    fn spool(&self, records: &[OutRecord], in_flight: bool) -> BoxFuture<'static, Result<Range<u64>, SpoolError>> {
        let bodies = records
            .iter()
            .map(|r| {
                let mut body = Vec::with_capacity(r.payload.len() + 256);
                format::encode_body(r, &mut body);
                body
            })
            .collect();
        let (reply, answer) = oneshot::channel();
        let sent = self.writer.send(Command::Append(Append { bodies, in_flight, reply }));
        let shared = Arc::clone(&self.shared);
        let count = records.len() as u64;
        async move {
            sent.map_err(|_| SpoolError::Stopped)?;
            let range = answer.await.map_err(|_| SpoolError::Stopped)??;
            shared.appended_total.fetch_add(count, Ordering::SeqCst);
            Ok(range)
        }
        .boxed()
    }

    /// Kafka answered within the wait: records it could not take (queue
    /// full, producer broken) are spooled; the others keep their answer.
    async fn after_answer(
        &self,
        copies: Vec<OutRecord>,
        results: Vec<Result<Delivered, SinkError>>,
    ) -> Vec<Result<Stored, SinkError>> {
        let retry =
            |r: &Result<Delivered, SinkError>| matches!(r, Err(SinkError::QueueFull | SinkError::Unavailable(_)));
        let failed: Vec<OutRecord> =
            copies.into_iter().zip(&results).filter(|(_, r)| retry(r)).map(|(record, _)| record).collect();
        let spooled = if failed.is_empty() { Ok(0..0) } else { self.spool(&failed, false).await };
        results
            .into_iter()
            .map(|r| match (r, &spooled) {
                (r, _) if !retry(&r) => r.map(Stored::Kafka),
                (_, Ok(_)) => Ok(Stored::Spooled),
                (_, Err(error)) => Err(SinkError::SpoolRefused(error.for_client())),
            })
            .collect()
    }

    /// Kafka did not answer within the wait: every record is spooled, and
    /// its first send keeps going; replay waits for that send's fate and
    /// skips the records it delivered, so none is stored twice.
    async fn after_timeout(
        &self,
        copies: Vec<OutRecord>,
        sent: BoxFuture<'static, Vec<Result<Delivered, SinkError>>>,
    ) -> Vec<Result<Stored, SinkError>> {
        let count = copies.len();
        match self.spool(&copies, true).await {
            Ok(range) => {
                let shared = Arc::clone(&self.shared);
                tokio::spawn(async move {
                    let results = sent.await;
                    let mut fates = shared.fates();
                    for (seq, result) in range.zip(results) {
                        fates.insert(seq, if result.is_ok() { Fate::Delivered } else { Fate::Failed });
                    }
                });
                vec![Ok(Stored::Spooled); count]
            }
            Err(error) => {
                // Refused while the first send is still in flight: that send
                // may yet deliver. Answer with what Kafka does (the request's
                // deadline usually passes first and the client gets 503), so
                // dedupe above confirms or releases the ids on Kafka's answer
                // and a retry is `duplicate`, not stored twice (issue 32's
                // nemesis found the retries of such 503s stored twice).
                tracing::warn!(%error, records = count, "Spool refused records whose first send is in flight; waiting for Kafka's answer");
                let refused = error.for_client();
                sent.await
                    .into_iter()
                    .map(|r| r.map(Stored::Kafka).map_err(|_| SinkError::SpoolRefused(refused.clone())))
                    .collect()
            }
        }
    }

    /// The idle path: the records are lent to the producer (it copies
    /// them), and kept here only in case they must be spooled. A broken
    /// producer answers at once with errors, which are spooled.
    fn direct_or_spool(
        &self,
        records: Vec<OutRecord>,
        deadline: Duration,
    ) -> BoxFuture<'static, Vec<Result<Stored, SinkError>>> {
        let me = self.clone();
        let sent = self.kafka.send_borrowed(&records);
        let wait = self.ack_timeout.min(deadline);
        async move {
            match select(sent, Box::pin(tokio::time::sleep(wait))).await {
                Either::Left((results, _)) => me.after_answer(records, results).await,
                Either::Right((_, sent)) => me.after_timeout(records, sent).await,
            }
        }
        .boxed()
    }

    /// Waits (at most `limit`) while replay sends the spool's last round,
    /// so this request can go straight to Kafka behind it: under steady
    /// traffic the spool would otherwise never be found empty.
    async fn wait_handover(&self, limit: Duration) {
        let until = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.shared.handover.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if !self.shared.is_closing() {
                return;
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                return;
            }
        }
    }

    /// Why the spool would refuse records now, if it would.
    fn refusing(&self) -> Option<String> {
        let status = status_of(&self.shared);
        if status.bytes >= self.config.max_bytes {
            return Some(SpoolError::Full(self.config.max_bytes).to_string());
        }
        if status.oldest_age_secs > self.config.max_age_secs as f64 {
            return Some(SpoolError::TooOld(self.config.max_age_secs).to_string());
        }
        if status.write_failing {
            return Some(SpoolError::Failing.to_string());
        }
        status.not_ready()
    }
}

/// The spool's state now.
pub(super) fn status_of(shared: &Shared) -> SpoolStatus {
    let index = shared.index();
    let oldest = index.oldest_ms().map_or(0.0, |at| now_ms().saturating_sub(at) as f64 / 1000.0);
    SpoolStatus {
        spooling: shared.is_spooling(),
        records: index.next_seq.saturating_sub(index.replayed_through),
        bytes: index.bytes(),
        segments: index.segments.len(),
        oldest_age_secs: oldest,
        appended_total: shared.appended_total.load(Ordering::SeqCst),
        replayed_total: shared.replayed_total.load(Ordering::SeqCst),
        damaged_total: shared.damaged_total.load(Ordering::SeqCst),
        slowest_commit_ms: shared.slowest_commit_ms.load(Ordering::SeqCst),
        quarantined_segments: shared.quarantined.load(Ordering::SeqCst),
        can_drain: shared.can_drain(),
        write_failing: shared.write_failing.load(Ordering::SeqCst),
    }
}

impl Sink for SpoolSink {
    fn send_all(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        self.kafka.send_all(records)
    }

    fn read_back(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> BoxFuture<'static, Result<Option<actix_web::web::Bytes>, String>> {
        self.kafka.read_back(topic, partition, offset)
    }

    fn store_all(
        &self,
        records: Vec<OutRecord>,
        deadline: Duration,
    ) -> BoxFuture<'static, Vec<Result<Stored, SinkError>>> {
        if records.is_empty() {
            return futures::future::ready(Vec::new()).boxed();
        }
        let me = self.clone();
        if self.shared.is_spooling() {
            // Behind what the spool holds: per-key order.
            return async move {
                let started = tokio::time::Instant::now();
                if me.shared.is_closing() {
                    me.wait_handover(me.ack_timeout.min(deadline / 2)).await;
                }
                if !me.shared.is_spooling() {
                    return me.direct_or_spool(records, deadline.saturating_sub(started.elapsed())).await;
                }
                let count = records.len();
                match me.spool(&records, false).await {
                    Ok(_) => vec![Ok(Stored::Spooled); count],
                    Err(error) => vec![Err(SinkError::SpoolRefused(error.for_client())); count],
                }
            }
            .boxed();
        }
        self.direct_or_spool(records, deadline)
    }

    fn send_direct(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        match self.direct() {
            Ok(kafka) => kafka.send_all(records),
            Err(error) => futures::future::ready(records.iter().map(|_| Err(error.clone())).collect()).boxed(),
        }
    }

    fn check_ready(&self) -> BoxFuture<'static, Result<(), String>> {
        let refusing = self.refusing();
        let kafka = self.kafka.check_ready();
        async move {
            match (kafka.await, refusing) {
                (Ok(()), _) | (Err(_), None) => Ok(()),
                (Err(kafka), Some(spool)) => Err(format!("{kafka}; {spool}")),
            }
        }
        .boxed()
    }

    fn queue_depth(&self) -> i64 {
        let direct = self.direct.producer.get().and_then(|p| p.as_ref().ok()).map_or(0, KafkaSink::queue_depth);
        self.kafka.queue_depth() + direct
    }

    /// Every record answered 200 is acknowledged or fsynced in the spool, so
    /// a producer that cannot flush (Kafka away) loses nothing: what it held
    /// is replayed by the next process.
    fn flush(&self, timeout: Duration) -> Result<(), String> {
        if let Err(error) = self.kafka.flush(timeout) {
            tracing::warn!(%error, "Producer not flushed; what it held is in the spool and is replayed on the next start");
        }
        if let Some(Ok(direct)) = self.direct.producer.get()
            && let Err(error) = direct.flush(timeout)
        {
            tracing::warn!(%error, "The producer of sources without the spool not flushed; none of what it held was answered 200");
        }
        Ok(())
    }

    fn spool_status(&self) -> Option<SpoolStatus> {
        Some(status_of(&self.shared))
    }
}
