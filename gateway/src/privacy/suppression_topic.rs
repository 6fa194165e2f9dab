//! Suppression from a compacted Kafka topic (`privacy.suppression_topic`),
//! so an erasure request made anywhere (a CRM, a privacy tool) reaches
//! every gateway instance without touching its files. A record's key is
//! the `userId` or `anonymousId` as UTF-8 text, compared exactly as the
//! suppression file's lines are; any value suppresses, a tombstone (null
//! value) lifts the suppression. Compaction keeps the latest record per id,
//! so reading the topic from the beginning rebuilds the list.
//!
//! A consumer on its own thread assigns every partition from the beginning
//! (no consumer group, no commits: each instance reads everything) and
//! follows the topic afterwards. Until it has read every partition up to
//! its end as of start-up, the list is not complete: the gateway is not
//! ready and answers events of sources with suppression on `503 not_ready`,
//! so no event of a suppressed user slips through after a restart.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use crate::config::KafkaConfig;

/// How long one poll of the consumer waits for records.
const POLL: Duration = Duration::from_millis(200);
/// Pause before asking again for a topic that is missing or unreachable.
const RETRY: Duration = Duration::from_secs(1);

/// The ids read from the topic, and how far the first read got.
#[derive(Debug)]
pub struct SuppressionTopic {
    /// The topic's name.
    pub topic: String,
    ids: RwLock<HashSet<String>>,
    /// Set once every partition was read to its end as of start-up.
    loaded: AtomicBool,
    /// Why the list is not complete yet, for `/readyz`.
    waiting: Mutex<String>,
}

impl SuppressionTopic {
    /// Starts following `topic` on the brokers of `kafka`, on a thread that
    /// ends when the returned list is dropped.
    pub fn follow(kafka: &KafkaConfig, topic: &str) -> Result<Arc<Self>, KafkaError> {
        let list = Arc::new(Self {
            topic: topic.to_owned(),
            ids: RwLock::new(HashSet::new()),
            loaded: AtomicBool::new(false),
            waiting: Mutex::new("not read yet".into()),
        });
        let consumer: BaseConsumer<Quiet> = client_config(kafka)
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("group.id", "eventgw-suppression")
            .create_with_context(Quiet { topic: topic.to_owned() })?;
        let weak = Arc::downgrade(&list);
        let spawned =
            std::thread::Builder::new().name("eventgw-suppression".into()).spawn(move || run(&consumer, &weak));
        if let Err(error) = spawned {
            return Err(KafkaError::ClientCreation(format!("cannot start the suppression thread: {error}")));
        }
        Ok(list)
    }

    /// Whether `id` is suppressed.
    pub fn contains(&self, id: &str) -> bool {
        self.ids.read().is_ok_and(|ids| ids.contains(id))
    }

    /// How many ids are suppressed.
    pub fn len(&self) -> usize {
        self.ids.read().map_or(0, |ids| ids.len())
    }

    /// Whether no id is suppressed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `Ok` once the first read is complete; else why not.
    pub fn ready(&self) -> Result<(), String> {
        if self.loaded.load(Ordering::Acquire) {
            return Ok(());
        }
        let waiting = self.waiting.lock().map(|w| w.clone()).unwrap_or_default();
        Err(format!("suppression topic `{}` not read to its end yet ({waiting})", self.topic))
    }

    fn wait_for(&self, why: String) {
        if let Ok(mut waiting) = self.waiting.lock() {
            *waiting = why;
        }
    }

    fn apply(&self, key: &[u8], suppress: bool) {
        let Ok(id) = std::str::from_utf8(key).map(str::trim) else {
            tracing::warn!(topic = %self.topic, "Suppression record with a key that is not UTF-8; skipped");
            return;
        };
        if let Ok(mut ids) = self.ids.write() {
            if suppress {
                ids.insert(id.to_owned());
            } else {
                ids.remove(id);
            }
        }
    }
}

/// The consumer's errors, into `tracing`. With `enable.partition.eof`
/// librdkafka reports each partition's end as an error event too, which
/// rdkafka's default context logs at ERROR: every start logged one error
/// per partition. The end of a partition is how the first read completes
/// ([`run`] counts it), so it is logged at DEBUG.
struct Quiet {
    /// The topic, named in every line.
    topic: String,
}

impl ClientContext for Quiet {
    fn error(&self, error: KafkaError, reason: &str) {
        let eof = matches!(error, KafkaError::PartitionEOF(_));
        if eof || error.rdkafka_error_code() == Some(RDKafkaErrorCode::PartitionEOF) {
            tracing::debug!(topic = %self.topic, reason, "Suppression topic partition read to its end");
            return;
        }
        tracing::warn!(topic = %self.topic, %error, reason, "Suppression topic consumer error");
    }
}

impl ConsumerContext for Quiet {}

fn client_config(kafka: &KafkaConfig) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &kafka.brokers);
    // Connection and security settings apply to this client too; producer
    // tuning does not.
    for (key, value) in eventgw_catalog::topics::connection_settings(&kafka.extra) {
        config.set(key, value);
    }
    config
}

/// Where the first read stands: each partition's end as of start-up, and
/// the partitions read that far.
struct FirstRead {
    ends: HashMap<i32, i64>,
    done: HashSet<i32>,
}

fn run(consumer: &BaseConsumer<Quiet>, weak: &Weak<SuppressionTopic>) {
    let mut first: Option<FirstRead> = None;
    loop {
        let Some(list) = weak.upgrade() else { return };
        let Some(read) = first.as_mut() else {
            match assign(consumer, &list.topic) {
                Ok(read) => first = Some(read),
                Err(why) => {
                    list.wait_for(why);
                    drop(list);
                    std::thread::sleep(RETRY);
                }
            }
            continue;
        };
        match consumer.poll(POLL) {
            Some(Ok(record)) => {
                if let Some(key) = record.key() {
                    list.apply(key, record.payload().is_some());
                }
                if read.ends.get(&record.partition()).is_some_and(|end| record.offset() + 1 >= *end) {
                    read.done.insert(record.partition());
                }
            }
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                read.done.insert(partition);
            }
            Some(Err(error)) => {
                tracing::warn!(%error, topic = %list.topic, "Reading the suppression topic failed; retrying");
            }
            None => {}
        }
        if !list.loaded.load(Ordering::Relaxed) && read.ends.keys().all(|p| read.done.contains(p)) {
            list.loaded.store(true, Ordering::Release);
            tracing::info!(topic = %list.topic, count = list.len(), "Suppression topic read; following it");
        }
    }
}

/// Assigns every partition of `topic` from the beginning and notes where
/// each ends now; empty partitions are read already.
fn assign(consumer: &BaseConsumer<Quiet>, topic: &str) -> Result<FirstRead, String> {
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(5)).map_err(|e| e.to_string())?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Err("the topic does not exist (yet)".into());
    }
    let mut ends = HashMap::new();
    let mut done = HashSet::new();
    let mut assignment = TopicPartitionList::new();
    for partition in partitions {
        let (low, high) =
            consumer.fetch_watermarks(topic, partition, Duration::from_secs(5)).map_err(|e| e.to_string())?;
        if high <= low {
            done.insert(partition);
        }
        ends.insert(partition, high);
        assignment.add_partition_offset(topic, partition, Offset::Beginning).map_err(|e| e.to_string())?;
    }
    consumer.assign(&assignment).map_err(|e| e.to_string())?;
    Ok(FirstRead { ends, done })
}

/// Creates `topic` compacted if it is missing (`gateway topics` does this
/// for the configured topic); returns whether it created it. An existing
/// topic is left as it is.
pub async fn ensure_topic(kafka: &KafkaConfig, topic: &str) -> anyhow::Result<bool> {
    crate::topics::ensure_suppression_topic(kafka, topic).await
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// What `during` logged at INFO and above, as text.
    fn logged(during: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = Arc::clone(&out);
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || Writer(Arc::clone(&sink)))
            .finish();
        tracing::subscriber::with_default(subscriber, during);
        let text = out.lock().expect("log").clone();
        String::from_utf8(text).expect("utf-8")
    }

    struct Writer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Writer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("log").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_end_of_a_partition_is_not_logged_as_an_error() {
        let quiet = Quiet { topic: "privacy.suppressions".into() };
        let eof = KafkaError::Global(RDKafkaErrorCode::PartitionEOF);
        assert_eq!(logged(|| quiet.error(eof, "Fetch from broker 1 reached end of partition at offset 0")), "");
        assert_eq!(logged(|| quiet.error(KafkaError::PartitionEOF(0), "end")), "");
        let down = KafkaError::Global(RDKafkaErrorCode::AllBrokersDown);
        let text = logged(|| quiet.error(down, "1/1 brokers are down"));
        assert!(text.contains("WARN") && text.contains("1/1 brokers are down"), "{text}");
        assert!(text.contains("privacy.suppressions"), "the topic is named: {text}");
    }
}
