//! A wedged producer, and how replay gets past it without storing a record
//! twice. librdkafka (2.12.1) can be left holding records with no broker
//! connection after its only broker was frozen (SIGSTOP) past the request
//! timeouts: it neither reconnects nor answers, while a fresh client reaches
//! the cluster at once (RELIABILITY.md, the paused-broker scenario; the same
//! symptom as librdkafka issues #4820 and #5080). The spool's producer waits
//! up to `spool.delivery_timeout_ms` (10 min), so replay would stall that long.
//!
//! The [`Watchdog`] sees replay make no progress while the cluster answers a
//! fresh client for [`REACHABLE_FOR`]; replay then replaces the producer
//! ([`crate::sink::KafkaSink::replace_wedged`]), which purges what the old one
//! held. A purged record may still have been stored (a produce request the
//! broker had received before it froze), and Kafka's idempotence does not
//! span producer ids, so before sending such a record again replay reads
//! back what its topics hold since shortly before it was first handed to the
//! producer ([`stored_event_ids`]) and skips the ones already there.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

/// Replay waiting this long with no progress starts probing the cluster.
pub const STALL_BEFORE_PROBE: Duration = Duration::from_secs(30);
/// How often a stalled replay probes.
pub const PROBE_EVERY: Duration = Duration::from_secs(10);
/// The cluster answering a fresh client for this long while replay still
/// makes no progress means the producer is wedged (a healthy producer
/// reconnects within its `reconnect.backoff.max.ms`, 10 s by default).
pub const REACHABLE_FOR: Duration = Duration::from_secs(20);
/// Time each probe or read-back step may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// A read-back gives up (and is retried next round) after this long.
const READ_BACK_LIMIT: Duration = Duration::from_secs(60);

/// Producer-only settings left out of a read-back consumer's configuration
/// (also `gateway dead-letter`'s, which reads the same cluster the same way).
pub const PRODUCER_ONLY: &[&str] = &[
    "acks",
    "request.required.acks",
    "enable.idempotence",
    "enable.gapless.guarantee",
    "compression.type",
    "compression.codec",
    "linger.ms",
    "queue.buffering.max.ms",
    "batch.size",
    "batch.num.messages",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "retries",
    "message.send.max.retries",
    "request.timeout.ms",
    "partitioner",
    "sticky.partitioning.linger.ms",
    "transactional.id",
    "transaction.timeout.ms",
];

/// Decides when a stalled replay means a wedged producer.
#[derive(Debug)]
pub struct Watchdog {
    /// When replay last moved (or started waiting).
    progress_at: Instant,
    /// Since when every probe reached the cluster.
    reachable_since: Option<Instant>,
    /// The last probe.
    probed_at: Option<Instant>,
}

impl Default for Watchdog {
    fn default() -> Self {
        Self { progress_at: Instant::now(), reachable_since: None, probed_at: None }
    }
}

impl Watchdog {
    /// Replay moved (or has nothing to do): not stalled.
    pub fn progressed(&mut self) {
        self.progress_at = Instant::now();
        self.reachable_since = None;
        self.probed_at = None;
    }

    /// Called while replay waits; probes when due (blocking up to a few
    /// seconds) and returns true when the producer should be replaced.
    pub fn wedged(&mut self, config: &ClientConfig) -> bool {
        let now = Instant::now();
        if now.duration_since(self.progress_at) < STALL_BEFORE_PROBE
            || self.probed_at.is_some_and(|at| now.duration_since(at) < PROBE_EVERY)
        {
            return false;
        }
        self.probed_at = Some(now);
        self.judge(cluster_reachable(config).is_ok(), now)
    }

    /// The decision, given a probe's outcome at `now` (separate for tests).
    pub fn judge(&mut self, reachable: bool, now: Instant) -> bool {
        if !reachable {
            self.reachable_since = None;
            return false;
        }
        let since = *self.reachable_since.get_or_insert(now);
        now.duration_since(since) >= REACHABLE_FOR
    }
}

/// Whether a fresh client (not the wedged one) gets the cluster's metadata.
pub fn cluster_reachable(config: &ClientConfig) -> Result<usize, String> {
    let mut probe = config.clone();
    probe.set("enable.idempotence", "false");
    let probe: BaseProducer = probe.create().map_err(|e| e.to_string())?;
    let brokers = probe.client().fetch_metadata(None, CLIENT_TIMEOUT).map_err(|e| e.to_string())?.brokers().len();
    if brokers == 0 { Err("no brokers in the cluster's metadata".into()) } else { Ok(brokers) }
}

/// The `event-id` headers of every record `topics` hold with a timestamp
/// at or after `since_ms` (milliseconds since the epoch), read up to each
/// partition's high watermark as it is now. Blocking.
pub fn stored_event_ids(
    config: &ClientConfig,
    topics: &BTreeSet<String>,
    since_ms: i64,
) -> Result<HashSet<String>, String> {
    let consumer = read_back_consumer(config)?;
    let mut starts = TopicPartitionList::new();
    let mut ends: HashMap<(String, i32), i64> = HashMap::new();
    for topic in topics {
        let metadata = consumer.fetch_metadata(Some(topic), CLIENT_TIMEOUT).map_err(|e| format!("{topic}: {e}"))?;
        for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
            let (_, high) = consumer
                .fetch_watermarks(topic, partition.id(), CLIENT_TIMEOUT)
                .map_err(|e| format!("{topic}/{}: {e}", partition.id()))?;
            ends.insert((topic.clone(), partition.id()), high);
            starts.add_partition_offset(topic, partition.id(), Offset::Offset(since_ms)).map_err(|e| e.to_string())?;
        }
    }
    let starts = consumer.offsets_for_times(starts, CLIENT_TIMEOUT).map_err(|e| e.to_string())?;
    let mut assign = TopicPartitionList::new();
    for element in starts.elements() {
        let key = (element.topic().to_owned(), element.partition());
        match element.offset() {
            Offset::Offset(at) if ends.get(&key).is_some_and(|end| at < *end) => {
                assign.add_partition_offset(&key.0, key.1, Offset::Offset(at)).map_err(|e| e.to_string())?;
            }
            _ => {
                ends.remove(&key); // nothing stored since then
            }
        }
    }
    read_until(&consumer, &assign, ends)
}

/// Reads the assigned partitions until each reaches its end offset.
fn read_until(
    consumer: &BaseConsumer,
    assign: &TopicPartitionList,
    mut ends: HashMap<(String, i32), i64>,
) -> Result<HashSet<String>, String> {
    let mut ids = HashSet::new();
    if ends.is_empty() {
        return Ok(ids);
    }
    consumer.assign(assign).map_err(|e| e.to_string())?;
    let started = Instant::now();
    while !ends.is_empty() {
        if started.elapsed() > READ_BACK_LIMIT {
            return Err(format!("read-back incomplete after {READ_BACK_LIMIT:?}: {} partition(s) left", ends.len()));
        }
        let Some(message) = consumer.poll(Duration::from_millis(500)) else { continue };
        let message = message.map_err(|e| e.to_string())?;
        if let Some(headers) = message.headers() {
            for header in headers.iter() {
                if header.key == "event-id"
                    && let Some(value) = header.value.and_then(|v| std::str::from_utf8(v).ok())
                {
                    ids.insert(value.to_owned());
                }
            }
        }
        let key = (message.topic().to_owned(), message.partition());
        if ends.get(&key).is_some_and(|end| message.offset() + 1 >= *end) {
            ends.remove(&key);
        }
    }
    Ok(ids)
}

/// Whether a record of `topics` can wait above a partition's high
/// watermark (see `sink::watermark`).
pub fn replicated(config: &ClientConfig, topics: &BTreeSet<String>) -> Result<bool, String> {
    crate::sink::watermark::replicated(&read_back_consumer(config)?, topics)
}

/// A consumer with the producer's connection settings (`config`), no
/// group offsets, no commits: for reading records back.
pub fn read_back_consumer(config: &ClientConfig) -> Result<BaseConsumer, String> {
    let mut cc = ClientConfig::new();
    for (key, value) in config.config_map() {
        if !PRODUCER_ONLY.contains(&key) {
            cc.set(key, value);
        }
    }
    cc.set("group.id", "eventgw-spool-read-back")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false");
    cc.create().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wedged_only_after_the_cluster_answered_for_the_whole_window() {
        let mut dog = Watchdog::default();
        let t0 = Instant::now();
        assert!(!dog.judge(true, t0), "first answer starts the window");
        assert!(!dog.judge(true, t0 + REACHABLE_FOR - Duration::from_millis(1)));
        assert!(!dog.judge(false, t0 + REACHABLE_FOR), "an unreachable cluster resets the window");
        assert!(!dog.judge(true, t0 + REACHABLE_FOR * 2));
        assert!(dog.judge(true, t0 + REACHABLE_FOR * 3), "reachable for the whole window while stalled");
    }

    #[test]
    fn progress_resets_the_window() {
        let mut dog = Watchdog::default();
        let t0 = Instant::now();
        assert!(!dog.judge(true, t0));
        dog.progressed();
        assert!(!dog.judge(true, t0 + REACHABLE_FOR), "the window restarted with the progress");
    }
}
