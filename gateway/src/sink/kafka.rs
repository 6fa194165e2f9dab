//! The one idempotent Kafka producer: `enable.idempotence`, `acks=all`,
//! compression and batching from configuration, and a bounded queue whose
//! overflow becomes back-pressure (503) instead of memory growth.
//!
//! Fatal errors: when librdkafka reports a fatal idempotence error (e.g. a
//! sequence desynchronisation with the broker) that producer instance can
//! never deliver again, and it can no longer vouch for ordering or
//! once-ness of what it holds. We chose to **recreate the producer in
//! process** rather than fail liveness: every record of the fatal producer
//! fails (its requests get 503, the client retries with the same
//! `messageId`), readiness is red until a fresh producer (new producer id)
//! takes over, and the next request uses it. A liveness failure would do
//! the same thing slower (an orchestrator restart, every in-flight HTTP
//! request cut). Recreation is rate-limited to one per
//! [`RECREATE_MIN_INTERVAL`], so a broker that keeps provoking fatal
//! errors yields 503s, not a producer churn. See RELIABILITY.md.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use futures::future::{BoxFuture, FutureExt};
use rdkafka::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, PurgeConfig, ThreadedProducer};
use tokio::sync::oneshot;

use super::kafka_probe::{self, Next, PROBE_TIMEOUT, ProbeCell, ProbeCounts};
use super::spool::SpooledRecord;
use super::{Delivered, OutRecord, Sink, SinkError};
use crate::config::KafkaConfig;

/// Shortest time between two producer recreations after fatal errors.
pub const RECREATE_MIN_INTERVAL: Duration = Duration::from_secs(1);

/// Routes librdkafka's own log lines and errors into `tracing`, and notes
/// a fatal error so the sink stops using this producer.
#[derive(Debug, Default)]
pub struct LoggingContext {
    /// Set once librdkafka reports `ERR__FATAL`; never cleared (the
    /// producer instance is dead for good).
    fatal: Arc<AtomicBool>,
}

impl ClientContext for LoggingContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical | RDKafkaLogLevel::Error => {
                tracing::error!(facility = fac, "Kafka client: {log_message}")
            }
            RDKafkaLogLevel::Warning => tracing::warn!(facility = fac, "Kafka client: {log_message}"),
            _ => tracing::debug!(facility = fac, "Kafka client: {log_message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal) {
            self.fatal.store(true, Ordering::SeqCst);
            tracing::error!(%error, "Kafka producer hit a fatal error; it will be replaced: {reason}");
        } else {
            tracing::warn!(%error, "Kafka client error: {reason}");
        }
    }
}

/// Each record's delivery report settles its slot of the request's
/// [`Completion`]; the request is woken once, when its last record settles
/// (not once per record, as with one future per record).
impl ProducerContext for LoggingContext {
    type DeliveryOpaque = Box<Slot>;

    fn delivery(&self, result: &DeliveryResult<'_>, slot: Box<Slot>) {
        let outcome = match result {
            Ok(message) => {
                use rdkafka::Message as _;
                Ok(Delivered { partition: message.partition(), offset: message.offset() })
            }
            Err((error, _)) => Err(classify(error)),
        };
        slot.completion.settle(slot.index, outcome);
    }
}

/// One request's records on their way to Kafka: filled in by delivery
/// reports (on the producer's polling thread) and by enqueue failures (on
/// the request's thread), answered once when every record has settled.
pub struct Completion {
    state: Mutex<Settling>,
}

struct Settling {
    results: Vec<Option<Result<Delivered, SinkError>>>,
    remaining: usize,
    reply: Option<oneshot::Sender<Vec<Result<Delivered, SinkError>>>>,
}

/// Which record of which request a delivery report is for.
pub struct Slot {
    completion: Arc<Completion>,
    index: usize,
}

impl Completion {
    fn new(count: usize) -> (Arc<Self>, oneshot::Receiver<Vec<Result<Delivered, SinkError>>>) {
        let (reply, answer) = oneshot::channel();
        let results = (0..count).map(|_| None).collect();
        (Arc::new(Self { state: Mutex::new(Settling { results, remaining: count, reply: Some(reply) }) }), answer)
    }

    fn settle(&self, index: usize, outcome: Result<Delivered, SinkError>) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(place) = state.results.get_mut(index) else { return };
        if place.is_some() {
            return; // settled already (never twice: one report per record)
        }
        *place = Some(outcome);
        state.remaining -= 1;
        if state.remaining == 0
            && let Some(reply) = state.reply.take()
        {
            let results = std::mem::take(&mut state.results);
            drop(state);
            let all = results.into_iter().map(|r| r.unwrap_or_else(|| Err(shut_down()))).collect();
            let _ = reply.send(all);
        }
    }
}

fn shut_down() -> SinkError {
    SinkError::Unavailable("the producer was shut down".into())
}

/// One producer instance and whether it has died of a fatal error.
struct Generation {
    /// The librdkafka producer; its own thread polls delivery reports.
    producer: ThreadedProducer<LoggingContext>,
    /// Shared with the producer's context, which sets it.
    fatal: Arc<AtomicBool>,
}

impl Generation {
    fn create(config: &ClientConfig) -> Result<Self, KafkaError> {
        let fatal = Arc::new(AtomicBool::new(false));
        let producer = config.create_with_context(LoggingContext { fatal: Arc::clone(&fatal) })?;
        Ok(Self { producer, fatal })
    }

    /// True once librdkafka declared this instance dead (by callback, or
    /// asked directly in case the callback has not run yet).
    fn is_fatal(&self) -> bool {
        self.fatal.load(Ordering::SeqCst) || self.producer.client().fatal_error().is_some()
    }
}

/// The producer shared by every request; replaced whole after a fatal error.
#[derive(Clone)]
pub struct KafkaSink {
    inner: Arc<Inner>,
}

struct Inner {
    /// Settings for every producer this sink creates.
    config: ClientConfig,
    /// The producer in use.
    current: ArcSwap<Generation>,
    /// When the producer was last replaced; also serialises replacement.
    last_recreated: Mutex<Option<Instant>>,
    /// Producers replaced after fatal errors, for tests and logs.
    recreated: AtomicU64,
    /// When Kafka last acknowledged a record (milliseconds since `started`;
    /// 0: never). Readiness trusts a recent acknowledgement over a metadata
    /// probe: it proves writes succeed, while the probe may ask a broker that
    /// just died (one broker of three gone must not turn a whole fleet of
    /// gateways unready at its balancer while the other two take writes).
    last_ack_ms: Arc<AtomicU64>,
    /// The origin of `last_ack_ms`.
    started: Instant,
    /// The latest readiness probe, made on a thread of its own.
    probe: Arc<ProbeCell>,
}

impl Inner {
    fn acknowledged_within(&self, window: Duration) -> bool {
        let last = self.last_ack_ms.load(Ordering::Relaxed);
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        last > 0 && now.saturating_sub(last) <= u64::try_from(window.as_millis()).unwrap_or(u64::MAX)
    }
}

/// What the probing thread does next: nothing once the sink is gone; no
/// metadata request while acknowledgements prove Kafka takes writes. The
/// thread holds the sink only between probes, never during one.
fn next_probe(inner: &std::sync::Weak<Inner>) -> Next {
    let Some(inner) = inner.upgrade() else { return Next::Stop };
    if inner.acknowledged_within(RECENT_ACK) {
        return Next::Acknowledged;
    }
    let generation = inner.current.load_full();
    Next::Probe(Box::new(move || {
        match generation.producer.client().fetch_metadata(None, PROBE_TIMEOUT).map(|m| m.brokers().len()) {
            Ok(brokers) if brokers > 0 => Ok(()),
            Ok(_) => Err("Kafka reported no brokers".into()),
            Err(e) => Err(format!("Kafka is unreachable: {e}")),
        }
    }))
}

/// An acknowledgement younger than this makes the sink ready without probing.
const RECENT_ACK: Duration = Duration::from_secs(5);

impl KafkaSink {
    /// Creates the producer; it connects lazily, so this succeeds with Kafka down.
    pub fn new(config: &KafkaConfig) -> Result<Self, KafkaError> {
        Self::from_client_config(producer_config(config))
    }

    /// As [`KafkaSink::new`], with librdkafka's `message.timeout.ms` set to
    /// `timeout_ms` (0: never give up) instead of `kafka.delivery_timeout_ms`:
    /// with the spool on, no request waits for the producer past
    /// `spool.ack_timeout_ms`, and a long timeout lets the idempotent
    /// producer's own retries deliver each record once and in order.
    pub fn with_message_timeout(config: &KafkaConfig, timeout_ms: u64) -> Result<Self, KafkaError> {
        let mut config = producer_config(config);
        config.set("message.timeout.ms", timeout_ms.to_string());
        Self::from_client_config(config)
    }

    fn from_client_config(config: ClientConfig) -> Result<Self, KafkaError> {
        let current = ArcSwap::from_pointee(Generation::create(&config)?);
        let inner = Inner {
            config,
            current,
            last_recreated: Mutex::new(None),
            recreated: AtomicU64::new(0),
            last_ack_ms: Arc::new(AtomicU64::new(0)),
            started: Instant::now(),
            probe: Arc::new(ProbeCell::default()),
        };
        let inner = Arc::new(inner);
        let weak = Arc::downgrade(&inner);
        kafka_probe::spawn(Arc::clone(&inner.probe), move || next_probe(&weak));
        Ok(Self { inner })
    }

    /// How many times a fatal error made the sink replace its producer.
    pub fn producers_replaced(&self) -> u64 {
        self.inner.recreated.load(Ordering::SeqCst)
    }

    /// The producer to use now: the current one, or a fresh one when the
    /// current one is fatally broken. `Err` while no healthy producer exists.
    fn healthy(&self) -> Result<Arc<Generation>, SinkError> {
        let current = self.inner.current.load_full();
        if !current.is_fatal() {
            return Ok(current);
        }
        let mut last = self.inner.last_recreated.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let latest = self.inner.current.load_full();
        if !Arc::ptr_eq(&latest, &current) && !latest.is_fatal() {
            return Ok(latest); // another request replaced it meanwhile
        }
        if last.is_some_and(|at| at.elapsed() < RECREATE_MIN_INTERVAL) {
            return Err(SinkError::Unavailable("the Kafka producer hit a fatal error; replacing it".into()));
        }
        *last = Some(Instant::now());
        let fresh = Arc::new(Generation::create(&self.inner.config).map_err(|e| classify(&e))?);
        let old = self.inner.current.swap(Arc::clone(&fresh));
        let replaced = self.inner.recreated.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::error!(replaced, "Kafka producer replaced after a fatal error; its undelivered records got 503");
        // Dropping a producer purges and joins its thread: not on a request's thread.
        std::thread::spawn(move || drop(old));
        Ok(fresh)
    }

    /// Replaces a producer that is not fatally broken but wedged: it holds
    /// records and delivers none although a fresh client reaches the
    /// cluster (librdkafka can be left without a connection after its only
    /// broker froze; see `sink/spool/wedge.rs`). Everything the old producer
    /// held is purged at once, so each of its delivery futures resolves with
    /// an error and nothing more leaves it; the caller must find out which of
    /// those records Kafka stored anyway before sending them again.
    pub fn replace_wedged(&self) -> Result<(), SinkError> {
        let _serialised = self.inner.last_recreated.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let fresh = Arc::new(Generation::create(&self.inner.config).map_err(|e| classify(&e))?);
        let old = self.inner.current.swap(fresh);
        let replaced = self.inner.recreated.fetch_add(1, Ordering::SeqCst) + 1;
        old.producer.purge(PurgeConfig::default().queue().inflight());
        tracing::error!(replaced, "Kafka producer wedged (no acknowledgement while the cluster answers); replaced");
        std::thread::spawn(move || drop(old));
        Ok(())
    }

    /// The settings every producer of this sink is created with (for the
    /// spool's probes and read-backs, which must reach the same cluster the
    /// same way).
    pub fn client_config(&self) -> &ClientConfig {
        &self.inner.config
    }
}

/// The producer's settings: the fixed safety ones first, tunables from
/// configuration, then `kafka.extra` which may override tunables but not
/// idempotence or acks.
pub fn producer_config(config: &KafkaConfig) -> ClientConfig {
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", &config.brokers)
        .set("client.id", "eventgw")
        .set("compression.type", &config.compression)
        .set("linger.ms", config.linger_ms.to_string())
        .set("batch.size", config.batch_size.to_string())
        .set("message.timeout.ms", config.delivery_timeout_ms.to_string())
        .set("queue.buffering.max.messages", config.queue_max_messages.to_string())
        .set("queue.buffering.max.kbytes", config.queue_max_kbytes.to_string());
    for (key, value) in &config.extra {
        cc.set(key, value);
    }
    cc.set("enable.idempotence", "true").set("acks", "all");
    cc
}

fn classify(error: &KafkaError) -> SinkError {
    match error.rdkafka_error_code() {
        Some(RDKafkaErrorCode::QueueFull) => SinkError::QueueFull,
        Some(RDKafkaErrorCode::MessageSizeTooLarge) => SinkError::TooLarge,
        _ => SinkError::Unavailable(error.to_string()),
    }
}

/// Hands one record to librdkafka; its delivery report settles `slot`.
fn enqueue<'a>(
    generation: &Generation,
    topic: &str,
    key: &str,
    payload: &[u8],
    headers: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
    slot: Box<Slot>,
) -> Result<(), (SinkError, Box<Slot>)> {
    let mut owned = OwnedHeaders::new_with_capacity(headers.len());
    for (key, value) in headers {
        owned = owned.insert(Header { key, value: Some(value.as_bytes()) });
    }
    let out = BaseRecord::with_opaque_to(topic, slot).key(key).payload(payload).headers(owned);
    generation.producer.send(out).map_err(|(error, record)| (classify(&error), record.delivery_opaque))
}

/// Waits for the request's completion and notes when Kafka last
/// acknowledged a record (for readiness).
fn wait_all(
    inner: &Arc<Inner>,
    count: usize,
    answer: oneshot::Receiver<Vec<Result<Delivered, SinkError>>>,
) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
    let inner = Arc::clone(inner);
    async move {
        let results = answer.await.unwrap_or_else(|_| (0..count).map(|_| Err(shut_down())).collect());
        if results.iter().any(Result::is_ok) {
            let now = u64::try_from(inner.started.elapsed().as_millis()).unwrap_or(u64::MAX).max(1);
            inner.last_ack_ms.fetch_max(now, Ordering::Relaxed);
        }
        results
    }
    .boxed()
}

impl KafkaSink {
    /// Whether Kafka acknowledged a record within `window`.
    pub fn acknowledged_within(&self, window: Duration) -> bool {
        self.inner.acknowledged_within(window)
    }

    /// How many readiness probes began and answered.
    pub fn probe_counts(&self) -> ProbeCounts {
        self.inner.probe.counts()
    }

    /// Whether Kafka takes writes, from what the sink already knows: the
    /// producer is not fatally broken, and Kafka acknowledged a record
    /// recently or answered the latest probe. Never waits on Kafka.
    pub fn readiness(&self) -> Result<(), String> {
        self.healthy().map_err(|error| error.to_string())?;
        if self.acknowledged_within(RECENT_ACK) {
            return Ok(());
        }
        self.inner.probe.latest()
    }

    /// False while the producer is fatally broken and not yet replaced.
    pub fn is_healthy(&self) -> bool {
        self.healthy().is_ok()
    }

    /// Produces records read back from the spool with their original
    /// topic, key, headers and payload, through this same idempotent producer.
    pub fn send_spooled(&self, records: &[SpooledRecord]) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        self.send_each(records, |r| {
            (&r.topic, &r.key, &r.payload[..], r.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        })
    }

    /// Enqueues every record now (librdkafka batches them), then waits for
    /// each one's fate; `parts` gives a record's topic, key, payload and headers.
    fn send_each<'a, R, H>(
        &self,
        records: &'a [R],
        parts: impl Fn(&'a R) -> (&'a str, &'a str, &'a [u8], H),
    ) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>>
    where
        H: ExactSizeIterator<Item = (&'a str, &'a str)>,
    {
        let generation = match self.healthy() {
            Ok(generation) => generation,
            Err(error) => return futures::future::ready(records.iter().map(|_| Err(error.clone())).collect()).boxed(),
        };
        if records.is_empty() {
            return futures::future::ready(Vec::new()).boxed();
        }
        let (completion, answer) = Completion::new(records.len());
        for (index, r) in records.iter().enumerate() {
            let (topic, key, payload, headers) = parts(r);
            let slot = Box::new(Slot { completion: Arc::clone(&completion), index });
            if let Err((error, slot)) = enqueue(&generation, topic, key, payload, headers, slot) {
                slot.completion.settle(slot.index, Err(error));
            }
        }
        wait_all(&self.inner, records.len(), answer)
    }
}

impl KafkaSink {
    /// As [`Sink::send_all`], borrowing the records: librdkafka copies each
    /// payload when it is enqueued, so a caller that may still need the
    /// records (the spool appends them when Kafka does not answer in time)
    /// keeps them without copying them first.
    pub fn send_borrowed(&self, records: &[OutRecord]) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        self.send_each(records, |r| {
            (r.topic.as_str(), &r.key, &r.payload[..], r.headers.iter().map(|(k, v)| (*k, v.as_str())))
        })
    }
}

impl Sink for KafkaSink {
    fn send_all(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        self.send_borrowed(&records)
    }

    fn read_back(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> BoxFuture<'static, Result<Option<actix_web::web::Bytes>, String>> {
        let (config, topic) = (self.inner.config.clone(), topic.to_owned());
        async move {
            tokio::task::spawn_blocking(move || read_one(&config, &topic, partition, offset))
                .await
                .map_err(|e| format!("read-back: {e}"))?
        }
        .boxed()
    }

    fn check_ready(&self) -> BoxFuture<'static, Result<(), String>> {
        futures::future::ready(self.readiness()).boxed()
    }

    fn queue_depth(&self) -> i64 {
        i64::from(self.inner.current.load().producer.in_flight_count())
    }

    fn flush(&self, timeout: Duration) -> Result<(), String> {
        self.inner.current.load().producer.flush(timeout).map_err(|e| e.to_string())
    }
}

/// Longest [`read_one`] waits for Kafka.
const READ_ONE_LIMIT: Duration = Duration::from_secs(5);

/// The value of the record at `offset` of `topic`'s `partition`, read by a
/// consumer of its own with the producer's connection settings (a person
/// opening a row of the live view: rare, so nothing is kept open between
/// reads); `None` when the partition no longer holds that offset.
fn read_one(
    config: &ClientConfig,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Option<actix_web::web::Bytes>, String> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Message, Offset, TopicPartitionList};
    let at = format!("{topic} partition {partition} offset {offset}");
    let consumer: BaseConsumer = super::spool::read_back_consumer(config)?;
    let (low, high) = consumer.fetch_watermarks(topic, partition, READ_ONE_LIMIT).map_err(|e| format!("{at}: {e}"))?;
    if offset < low || offset >= high {
        return Ok(None);
    }
    let mut assign = TopicPartitionList::new();
    assign.add_partition_offset(topic, partition, Offset::Offset(offset)).map_err(|e| format!("{at}: {e}"))?;
    consumer.assign(&assign).map_err(|e| format!("{at}: {e}"))?;
    let started = Instant::now();
    while started.elapsed() < READ_ONE_LIMIT {
        match consumer.poll(Duration::from_millis(250)) {
            None => {}
            Some(Err(e)) => return Err(format!("{at}: {e}")),
            // A compacted or transactional partition may skip the offset.
            Some(Ok(message)) => {
                return Ok((message.offset() == offset)
                    .then(|| actix_web::web::Bytes::copy_from_slice(message.payload().unwrap_or_default())));
            }
        }
    }
    Err(format!("{at}: Kafka returned nothing within {READ_ONE_LIMIT:?}"))
}

#[cfg(test)]
mod completion_tests {
    use super::{Completion, Delivered, SinkError};

    fn at(offset: i64) -> Result<Delivered, SinkError> {
        Ok(Delivered { partition: 0, offset })
    }

    #[test]
    fn a_request_is_answered_once_every_record_settled_in_input_order() {
        let (completion, mut answer) = Completion::new(3);
        completion.settle(2, at(12));
        completion.settle(0, at(10));
        assert!(answer.try_recv().is_err(), "one record is still out");
        completion.settle(1, Err(SinkError::QueueFull));
        let results = answer.try_recv().expect("answered");
        assert_eq!(results, vec![at(10), Err(SinkError::QueueFull), at(12)]);
    }

    #[test]
    fn a_second_report_for_a_record_changes_nothing() {
        let (completion, mut answer) = Completion::new(2);
        completion.settle(0, at(1));
        completion.settle(0, Err(SinkError::TooLarge));
        assert!(answer.try_recv().is_err(), "a repeated report does not count as the other record's");
        completion.settle(7, at(99));
        assert!(answer.try_recv().is_err(), "nor does a report for a record the request does not have");
        completion.settle(1, at(2));
        assert_eq!(answer.try_recv().expect("answered"), vec![at(1), at(2)], "the first report stands");
    }

    #[test]
    fn a_completion_dropped_unsettled_wakes_its_request() {
        let (completion, answer) = Completion::new(1);
        drop(completion);
        assert!(
            futures::executor::block_on(answer).is_err(),
            "the request is woken (and answered 503) rather than left waiting"
        );
    }
}
