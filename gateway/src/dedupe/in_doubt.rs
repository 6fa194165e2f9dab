//! Settles the ids a crash left in doubt: reserved, produce started, the
//! process died before Kafka's answer came back. Their records may have
//! landed (the client heard nothing, retries, and a blind retry would store
//! them twice) or not (a retry must be produced). Only Kafka knows, so each
//! topic they went to is read from just before the earliest reservation up
//! to the partitions' ends, looking for their `source` and `event-id`
//! headers. Found: confirmed (a retry is `duplicate`); not found: released
//! (a retry is produced). Until then their retries are answered 503 with
//! `Retry-After`; other ids are not held up.
//!
//! A record still above a partition's high watermark (appended by a leader
//! whose follower had just died) cannot be read; looked up then, it would be
//! released and a retry stored twice once the follower leaves the ISR. So
//! the look-up waits until no follower can hold it there
//! (`sink::watermark`); retries of those ids are answered 503 meanwhile.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::memory::MemoryStore;
use super::{EventId, journal::InDoubt};
use crate::config::KafkaConfig;
use crate::sink::watermark;

/// How far before a reservation a record's timestamp may be (the
/// producer stamps it after the reservation; the shared store's times are
/// Redis's clock, the record's the producing gateway's).
const SLACK_MS: u64 = 5_000;
/// One look-up's bound; a failed one is retried every [`RETRY_EVERY`].
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
const RETRY_EVERY: Duration = Duration::from_secs(2);
/// Past this the ids are released unresolved (their retries may then be
/// stored twice): a retry must not wait forever for a Kafka that is down.
const GIVE_UP_AFTER: Duration = Duration::from_secs(300);
/// How often the shared store's settle time follows the cluster.
const REPLICATION_CHECK_EVERY: Duration = Duration::from_secs(60);

/// Looks the ids up in Kafka on a thread of its own and settles them in `store`.
pub fn resolve_in_background(store: Arc<MemoryStore>, ids: Vec<InDoubt>, kafka: &KafkaConfig) {
    if ids.is_empty() {
        return;
    }
    let config = client_config(kafka);
    let spawned = std::thread::Builder::new().name("dedupe-in-doubt".into()).spawn(move || {
        let started = Instant::now();
        wait_for_the_watermark(&config, &ids);
        loop {
            match find(&config, &ids, LOOKUP_TIMEOUT) {
                Ok(found) => {
                    let (present, missing): (Vec<InDoubt>, Vec<InDoubt>) =
                        ids.into_iter().partition(|d| found.contains(&d.id));
                    tracing::info!(
                        in_doubt = present.len() + missing.len(),
                        in_kafka = present.len(),
                        millis = started.elapsed().as_millis() as u64,
                        "Dedupe ids left in doubt by a crash settled: those in Kafka are duplicates, the others will be produced"
                    );
                    store.settle_in_doubt(&present, &missing);
                    return;
                }
                Err(e) if started.elapsed() < GIVE_UP_AFTER => {
                    tracing::warn!(error = %e, in_doubt = ids.len(), "Dedupe ids in doubt not looked up in Kafka yet; their retries wait");
                    std::thread::sleep(RETRY_EVERY);
                }
                Err(e) => {
                    tracing::error!(error = %e, in_doubt = ids.len(), "Dedupe ids in doubt released unresolved; their retries may be stored twice");
                    store.settle_in_doubt(&[], &ids);
                    return;
                }
            }
        }
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "Dedupe in-doubt thread not started; those ids stay pending until their window ends");
    }
}

/// Sleeps until the records of `ids`, if any landed, are below their
/// partitions' high watermarks. If Kafka cannot say whether the topics are
/// replicated, it waits as if they were.
fn wait_for_the_watermark(config: &ClientConfig, ids: &[InDoubt]) {
    let Some(last) = ids.iter().map(|d| d.reserved_ms).max() else { return };
    let topics: BTreeSet<String> = ids.iter().map(|d| d.topic.clone()).collect();
    let replicated = config
        .create::<BaseConsumer>()
        .map_err(|e| e.to_string())
        .and_then(|consumer| watermark::replicated(&consumer, &topics))
        .unwrap_or(true);
    // The record was sent after its reservation, and (librdkafka retrying
    // it while the request waited) at the latest when the process died,
    // which is before now.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let until = watermark::visible_from(replicated, last.saturating_add(SLACK_MS).max(now));
    if until > now {
        tracing::info!(
            in_doubt = ids.len(),
            wait_ms = until - now,
            "Dedupe ids in doubt are looked up in Kafka once no follower can hold their records above the high watermark; their retries wait"
        );
        std::thread::sleep(Duration::from_millis(until - now));
    }
}

/// Keeps `settle` (the shared store's wait past a lapsed lease, see
/// `shared::RESERVE`) at [`watermark::SETTLE_MS`] while the cluster has a
/// replicated topic, 0 while it has none; checked now and every minute on a
/// thread of its own, until the store is dropped. Until Kafka first
/// answers it stays as it was (the long wait).
pub fn watch_replication(settle: &Arc<std::sync::atomic::AtomicU64>, kafka: &KafkaConfig) {
    let settle = Arc::downgrade(settle);
    let config = client_config(kafka);
    let spawned = std::thread::Builder::new().name("dedupe-replication".into()).spawn(move || {
        let consumer = match config.create::<BaseConsumer>() {
            Ok(consumer) => consumer,
            Err(e) => {
                tracing::warn!(error = %e, "Dedupe cannot read Kafka's metadata; ids in doubt wait the full settle time");
                return;
            }
        };
        while let Some(settle) = settle.upgrade() {
            match watermark::any_replicated(&consumer) {
                Ok(replicated) => {
                    let wait = if replicated { watermark::SETTLE_MS } else { 0 };
                    settle.store(wait, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => tracing::debug!(error = %e, "Dedupe replication check failed; kept the last answer"),
            }
            drop(settle);
            std::thread::sleep(REPLICATION_CHECK_EVERY);
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "Dedupe replication thread not started; ids in doubt wait the full settle time");
    }
}

/// The consumer's settings: the brokers and the connection and security
/// settings of `[kafka]`, no group (partitions are assigned, nothing committed).
pub fn client_config(kafka: &KafkaConfig) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &kafka.brokers)
        .set("group.id", "eventgw-dedupe-in-doubt")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false");
    for (key, value) in &kafka.extra {
        if ["security.", "sasl.", "ssl.", "socket.", "client."].iter().any(|p| key.starts_with(p)) {
            config.set(key, value);
        }
    }
    config
}

/// The ids of `ids` whose records are in Kafka.
pub fn find(config: &ClientConfig, ids: &[InDoubt], timeout: Duration) -> Result<HashSet<EventId>, String> {
    let deadline = Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    let consumer: BaseConsumer = config.create().map_err(|e| format!("consumer: {e}"))?;
    let mut since: HashMap<&str, u64> = HashMap::new();
    for d in ids {
        let at = since.entry(d.topic.as_str()).or_insert(d.reserved_ms);
        *at = (*at).min(d.reserved_ms);
    }
    let wanted: HashSet<&EventId> = ids.iter().map(|d| &d.id).collect();
    let mut start = TopicPartitionList::new();
    let mut ends: HashMap<(String, i32), i64> = HashMap::new();
    for (topic, reserved_ms) in &since {
        let metadata = consumer.fetch_metadata(Some(topic), left()).map_err(|e| format!("metadata of {topic}: {e}"))?;
        let partitions: Vec<i32> =
            metadata.topics().iter().flat_map(|t| t.partitions().iter().map(|p| p.id())).collect();
        let mut times = TopicPartitionList::new();
        let at = i64::try_from(reserved_ms.saturating_sub(SLACK_MS)).unwrap_or(i64::MAX);
        for p in &partitions {
            times.add_partition_offset(topic, *p, Offset::Offset(at)).map_err(|e| e.to_string())?;
            let (_, high) =
                consumer.fetch_watermarks(topic, *p, left()).map_err(|e| format!("end of {topic}/{p}: {e}"))?;
            ends.insert(((*topic).to_owned(), *p), high);
        }
        let offsets = consumer.offsets_for_times(times, left()).map_err(|e| format!("offsets of {topic}: {e}"))?;
        for e in offsets.elements() {
            let end = ends.get(&(topic.to_string(), e.partition())).copied().unwrap_or(0);
            if let Offset::Offset(from) = e.offset()
                && from < end
            {
                start.add_partition_offset(topic, e.partition(), Offset::Offset(from)).map_err(|e| e.to_string())?;
            }
        }
    }
    let mut open: HashSet<(String, i32)> =
        start.elements().iter().map(|e| (e.topic().to_owned(), e.partition())).collect();
    let mut found = HashSet::new();
    if open.is_empty() {
        return Ok(found);
    }
    consumer.assign(&start).map_err(|e| format!("assign: {e}"))?;
    while !open.is_empty() {
        if Instant::now() >= deadline {
            return Err(format!("{} partitions not read to their end in time", open.len()));
        }
        let Some(message) = consumer.poll(Duration::from_millis(200)) else { continue };
        let message = message.map_err(|e| format!("read: {e}"))?;
        let place = (message.topic().to_owned(), message.partition());
        if let Some(headers) = message.headers() {
            let header = |name: &str| {
                headers.iter().find(|h| h.key == name).and_then(|h| h.value).and_then(|v| std::str::from_utf8(v).ok())
            };
            if let (Some(source), Some(message_id)) = (header("source"), header("event-id")) {
                let id = EventId { source: source.to_owned(), message_id: message_id.to_owned() };
                if wanted.contains(&id) {
                    found.insert(id);
                }
            }
        }
        if ends.get(&place).is_some_and(|end| message.offset() + 1 >= *end) {
            open.remove(&place);
        }
    }
    Ok(found)
}
