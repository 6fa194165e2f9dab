//! Shared helpers for end-to-end tests: a real gateway on port 0 in this
//! process, talking to a real Kafka broker, and a consumer that reads
//! topics back so tests check what landed, not what was answered.
#![allow(dead_code, missing_docs)]

pub mod servers;
// Each test binary uses the checks its servers need, and some none.
#[allow(unused_imports)]
pub use servers::{without_kafka, without_redis, without_registry};

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::dev::ServerHandle;
use gateway::AppState;
use gateway::config::Config;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::metadata::Metadata;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

/// Brokers of the shared test Kafka (`scripts/kafka start`).
pub fn brokers() -> String {
    std::env::var("KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("gateway/ has a parent").to_path_buf()
}

/// The checked-in dev configuration, pointed at `brokers`.
pub fn config(brokers: &str) -> Config {
    let env = vec![("EVENTGW__KAFKA__BROKERS".to_owned(), brokers.to_owned())];
    Config::load_with_env(&repo_root().join("gateway/config/dev.toml"), env.into_iter()).expect("dev config loads")
}

pub struct TestGateway {
    pub url: String,
    pub state: Arc<AppState>,
    handle: ServerHandle,
}

impl TestGateway {
    /// Runs the real server with `config` on 127.0.0.1:0, after creating the
    /// topics it needs. Call from within an actix runtime (`#[actix_web::test]`).
    pub async fn start(config: Config) -> Self {
        Self::start_state(AppState::with_kafka(config).expect("gateway state builds")).await
    }

    /// As [`TestGateway::start`], with a state the test adjusted (e.g. its clock).
    pub async fn start_state(state: AppState) -> Self {
        let state = Arc::new(state);
        gateway::topics::ensure(&state.catalog, &state.config.kafka).await.unwrap_or_else(|e| {
            panic!("cannot reach Kafka at {}: {e}; run scripts/kafka start", state.config.kafka.brokers)
        });
        snapshot_ends(&state.config.kafka.brokers, &all_topics(&state));
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let server = gateway::serve(Arc::clone(&state), listener).expect("server starts");
        let handle = server.handle();
        actix_web::rt::spawn(server);
        Self { url, state, handle }
    }

    pub async fn stop(self) {
        self.handle.stop(true).await;
    }

    /// POSTs `body` to `path` with the demo write key as HTTP Basic user.
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let response = reqwest::Client::new()
            .post(format!("{}{path}", self.url))
            .basic_auth("demo-write-key", Some(""))
            .json(body)
            .send()
            .await
            .expect("request sent");
        let status = response.status().as_u16();
        (status, response.json().await.expect("JSON body"))
    }
}

/// A request builder aimed at the gateway.
pub fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// Status, headers and body of an answer.
pub async fn answer(response: reqwest::Response) -> (u16, reqwest::header::HeaderMap, Value) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("body");
    (status, headers, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// One record read back from Kafka.
#[derive(Debug, Clone)]
pub struct Consumed {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<String>,
    pub headers: HashMap<String, String>,
    pub value: Value,
}

/// Where each partition ended when this test process started its first
/// gateway: records before that cannot be any test's, so reads skip them
/// (a developer's broker may hold millions from earlier runs or benchmarks).
static START_OFFSETS: std::sync::OnceLock<std::sync::Mutex<HashMap<PartitionOf, i64>>> = std::sync::OnceLock::new();

/// Brokers, topic and partition.
type PartitionOf = (String, String, i32);

/// Notes where `topics` end now, so [`read_topic`] and [`find`] read only
/// what was written after (the first note of a partition stands): on a
/// broker that earlier runs or benchmarks filled with millions of records,
/// reading a whole topic takes minutes and all the memory there is.
/// [`TestGateway::start`] calls it; a test that starts its gateway another
/// way calls it before it produces.
pub fn snapshot_ends(brokers: &str, topics: &[String]) {
    let offsets = START_OFFSETS.get_or_init(Default::default);
    let consumer = read_consumer(brokers);
    for topic in topics {
        let Ok(metadata) = topic_metadata(&consumer, topic) else { continue };
        for p in metadata.topics().iter().flat_map(|t| t.partitions()) {
            let key = (brokers.to_owned(), topic.clone(), p.id());
            if offsets.lock().expect("lock").contains_key(&key) {
                continue;
            }
            if let Ok((_, high)) = watermarks(&consumer, topic, p.id()) {
                offsets.lock().expect("lock").entry(key).or_insert(high);
            }
        }
    }
}

fn start_offset(brokers: &str, topic: &str, partition: i32) -> i64 {
    START_OFFSETS
        .get()
        .and_then(|m| m.lock().ok().and_then(|m| m.get(&(brokers.to_owned(), topic.to_owned(), partition)).copied()))
        .unwrap_or(0)
}

/// How long a helper waits out a broker's transient answers before it
/// gives up and fails with the last error: longer than a KRaft leader
/// election after a `kill -9` (the session timeout is 9 s) plus a restart's
/// log recovery.
pub const TRANSIENT_DEADLINE: Duration = Duration::from_secs(60);

/// Answers a broker gives while the cluster moves (a leader election, a
/// follower's high watermark catching up, a coordinator loading its log, a
/// connection being re-established), documented as retriable by the Kafka
/// protocol or librdkafka. Anything else is a real failure.
pub fn is_transient(error: &KafkaError) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        error.rdkafka_error_code(),
        Some(
            C::OffsetNotAvailable
                | C::LeaderNotAvailable
                | C::NotLeaderForPartition
                | C::FencedLeaderEpoch
                | C::UnknownLeaderEpoch
                | C::CoordinatorLoadInProgress
                | C::CoordinatorNotAvailable
                | C::NotCoordinator
                | C::RequestTimedOut
                | C::NetworkException
                | C::BrokerTransportFailure
                | C::AllBrokersDown
                | C::OperationTimedOut
        )
    )
}

/// Calls `attempt` until it succeeds, fails with a non-transient error
/// (returned at once), or `TRANSIENT_DEADLINE` passes (the last transient
/// error is returned, so the failure names it).
pub fn retry_transient<T>(what: &str, attempt: impl FnMut() -> KafkaResult<T>) -> KafkaResult<T> {
    retry_while(what, is_transient, attempt)
}

/// [`retry_transient`] with `retryable` deciding which errors are waited out.
fn retry_while<T>(
    what: &str,
    retryable: impl Fn(&KafkaError) -> bool,
    mut attempt: impl FnMut() -> KafkaResult<T>,
) -> KafkaResult<T> {
    let deadline = Instant::now() + TRANSIENT_DEADLINE;
    let mut pause = Duration::from_millis(100);
    loop {
        match attempt() {
            Err(e) if retryable(&e) && Instant::now() < deadline => {
                eprintln!("{what}: transient {e}; retrying");
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            other => return other,
        }
    }
}

/// A consumer that reads by assignment (no group membership, no commits).
fn read_consumer(brokers: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "eventgw-tests-unused")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .expect("consumer")
}

/// `topic`'s metadata, waiting out a topic-level transient error (e.g.
/// `LeaderNotAvailable` right after creation or a broker loss) and
/// `UnknownTopicOrPartition`: every caller reads a topic its test created,
/// and in a cluster of three the broker asked may not know a new topic yet
/// (a CI run failed so, in `Cluster::followers_only`). A topic that never
/// appears still fails, after `TRANSIENT_DEADLINE`, with that error.
fn topic_metadata(consumer: &BaseConsumer, topic: &str) -> KafkaResult<Metadata> {
    let retryable =
        |e: &KafkaError| is_transient(e) || e.rdkafka_error_code() == Some(RDKafkaErrorCode::UnknownTopicOrPartition);
    retry_while(&format!("metadata of {topic}"), retryable, || {
        let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
        match metadata.topics().first().and_then(|t| t.error()) {
            Some(code) => Err(KafkaError::MetadataFetch(code.into())),
            None => Ok(metadata),
        }
    })
}

/// Low and high watermarks of one partition, waiting out `OffsetNotAvailable`
/// (a new leader whose high watermark has not caught up) and its kin.
pub fn watermarks(consumer: &BaseConsumer, topic: &str, partition: i32) -> KafkaResult<(i64, i64)> {
    retry_transient(&format!("watermarks of {topic}/{partition}"), || {
        consumer.fetch_watermarks(topic, partition, Duration::from_secs(10))
    })
}

/// Every record of `topic` written since this process's first gateway
/// started, read by partition assignment (no consumer group, so tests do
/// not interfere). Transient broker answers are waited out; anything else
/// fails the test with the error.
pub fn read_topic(brokers: &str, topic: &str) -> Vec<Consumed> {
    read(brokers, topic, None)
}

/// As [`read_topic`], keeping only the records whose `event-id` header is
/// `only` when given (the rest are never parsed or held).
fn read(brokers: &str, topic: &str, only: Option<&str>) -> Vec<Consumed> {
    let consumer = read_consumer(brokers);
    let metadata = topic_metadata(&consumer, topic).unwrap_or_else(|e| panic!("metadata of {topic}: {e}"));
    let partitions: Vec<i32> = metadata.topics()[0].partitions().iter().map(|p| p.id()).collect();
    assert!(!partitions.is_empty(), "topic {topic} does not exist");
    let mut assignment = TopicPartitionList::new();
    let mut ends = HashMap::new();
    for p in &partitions {
        let (low, high) = watermarks(&consumer, topic, *p).unwrap_or_else(|e| panic!("watermarks of {topic}/{p}: {e}"));
        let low = low.max(start_offset(brokers, topic, *p));
        if high > low {
            assignment.add_partition_offset(topic, *p, Offset::Offset(low)).expect("assign");
            ends.insert(*p, high);
        }
    }
    let mut records = Vec::new();
    if ends.is_empty() {
        return records;
    }
    consumer.assign(&assignment).expect("assign");
    // A deadline on progress, not on the whole read: a fault scenario's
    // topic can hold 100 000+ records, which a debug build on a busy
    // machine does not read in 30 s, while a stuck read makes no progress.
    let mut deadline = Instant::now() + Duration::from_secs(30);
    while !ends.is_empty() {
        assert!(Instant::now() < deadline, "reading {topic}: nothing for 30 s; still waiting for {ends:?}");
        let m = match consumer.poll(Duration::from_millis(500)) {
            None => continue,
            Some(Err(e)) if is_transient(&e) => {
                eprintln!("consuming {topic}: transient {e}; going on");
                continue;
            }
            Some(Err(e)) => panic!("consuming {topic}: {e}"),
            Some(Ok(m)) => m,
        };
        deadline = Instant::now() + Duration::from_secs(30);
        if ends.get(&m.partition()).is_some_and(|end| m.offset() + 1 >= *end) {
            ends.remove(&m.partition());
        }
        let header = |key: &str| {
            m.headers().and_then(|hs| hs.iter().find(|h| h.key == key).and_then(|h| h.value.map(<[u8]>::to_vec)))
        };
        if only.is_some_and(|id| header("event-id").as_deref() != Some(id.as_bytes())) {
            continue;
        }
        let headers = m
            .headers()
            .map(|hs| {
                hs.iter()
                    .map(|h| (h.key.to_owned(), String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        records.push(Consumed {
            topic: topic.to_owned(),
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(|k| String::from_utf8_lossy(k).into_owned()),
            headers,
            value: serde_json::from_slice(m.payload().unwrap_or_default()).expect("JSON record"),
        });
    }
    records
}

/// The leader's node id of each partition of `topic`, by partition (-1: none),
/// waiting out transient metadata errors.
pub fn partition_leaders(brokers: &str, topic: &str) -> Vec<i32> {
    let consumer = read_consumer(brokers);
    let metadata = topic_metadata(&consumer, topic).unwrap_or_else(|e| panic!("metadata of {topic}: {e}"));
    let mut partitions: Vec<(i32, i32)> =
        metadata.topics().iter().flat_map(|t| t.partitions()).map(|p| (p.id(), p.leader())).collect();
    partitions.sort();
    partitions.into_iter().map(|(_, leader)| leader).collect()
}

/// Waits until every partition of `topics` has a leader and an in-sync
/// replica set that includes it (the cluster settled after a fault), and
/// returns how long that took. Fails after `deadline` naming the partitions
/// that never settled.
pub fn wait_settled(brokers: &str, topics: &[String], deadline: Duration) -> Duration {
    let started = Instant::now();
    let consumer = read_consumer(brokers);
    loop {
        let unsettled = match consumer.fetch_metadata(None, Duration::from_secs(10)) {
            Ok(metadata) => unsettled_partitions(&metadata, topics),
            Err(e) if is_transient(&e) => vec![format!("metadata: {e}")],
            Err(e) => panic!("metadata of {brokers}: {e}"),
        };
        if unsettled.is_empty() {
            return started.elapsed();
        }
        assert!(started.elapsed() < deadline, "cluster at {brokers} not settled after {deadline:?}: {unsettled:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Partitions of `topics` without a live leader, or whose ISR lacks it.
fn unsettled_partitions(metadata: &Metadata, topics: &[String]) -> Vec<String> {
    let live: Vec<i32> = metadata.brokers().iter().map(|b| b.id()).collect();
    let mut unsettled = Vec::new();
    for topic in topics {
        let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
            unsettled.push(format!("{topic}: missing"));
            continue;
        };
        if let Some(e) = t.error() {
            unsettled.push(format!("{topic}: {:?}", RDKafkaErrorCode::from(e)));
        }
        for p in t.partitions() {
            let leader = p.leader();
            if p.error().is_some() || leader < 0 || !live.contains(&leader) || !p.isr().contains(&leader) {
                unsettled.push(format!("{topic}/{}: leader {leader}, isr {:?}", p.id(), p.isr()));
            }
        }
    }
    unsettled
}

/// Records of `topic` whose `event-id` header is `message_id`.
pub fn find(brokers: &str, topic: &str, message_id: &str) -> Vec<Consumed> {
    read(brokers, topic, Some(message_id))
}

/// Every topic the gateway writes to, per its configuration and catalog.
pub fn all_topics(state: &AppState) -> Vec<String> {
    gateway::topics::wanted(&state.catalog, &state.config.kafka).into_iter().map(|(t, _)| t).collect()
}

/// A fresh id, so tests sharing a broker never confuse each other's records.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

/// Kafka, except that the first `fail` produce calls answer "unavailable"
/// without producing: the 503 a client retries after.
pub struct FailsFirst {
    pub kafka: gateway::sink::KafkaSink,
    pub fail: std::sync::atomic::AtomicUsize,
}

impl gateway::sink::Sink for FailsFirst {
    fn send_all(
        &self,
        records: Vec<gateway::sink::OutRecord>,
    ) -> futures::future::BoxFuture<'static, Vec<Result<gateway::sink::Delivered, gateway::sink::SinkError>>> {
        if self
            .fail
            .fetch_update(std::sync::atomic::Ordering::SeqCst, std::sync::atomic::Ordering::SeqCst, |n| {
                n.checked_sub(1)
            })
            .is_ok()
        {
            let failed = vec![
                Err(gateway::sink::SinkError::Unavailable("the broker did not acknowledge".into()));
                records.len()
            ];
            return futures::FutureExt::boxed(async move { failed });
        }
        self.kafka.send_all(records)
    }
    fn check_ready(&self) -> futures::future::BoxFuture<'static, Result<(), String>> {
        self.kafka.check_ready()
    }
    fn queue_depth(&self) -> i64 {
        self.kafka.queue_depth()
    }
    fn flush(&self, timeout: Duration) -> Result<(), String> {
        self.kafka.flush(timeout)
    }
}
