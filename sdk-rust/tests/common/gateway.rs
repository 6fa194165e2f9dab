//! The real gateway, in-process on 127.0.0.1:0, run on its own thread with
//! its own actix system (the gateway needs actix; the client under test runs
//! on the test's tokio runtime), and a Kafka reader to check what landed.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gateway::AppState;
use gateway::config::Config;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

/// Brokers of the shared test Kafka (`scripts/kafka start`).
pub fn brokers() -> String {
    std::env::var("KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("sdk-rust/ has a parent").to_path_buf()
}

/// A gateway running until dropped.
pub struct RunningGateway {
    pub url: String,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RunningGateway {
    /// Starts the gateway with the checked-in dev configuration, after
    /// creating its topics.
    pub fn start() -> Self {
        Self::start_with(Vec::new())
    }

    /// As [`RunningGateway::start`], with configuration overrides
    /// (`EVENTGW__SECTION__KEY`, value).
    pub fn start_with(overrides: Vec<(String, String)>) -> Self {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                let mut env = vec![("EVENTGW__KAFKA__BROKERS".to_owned(), brokers())];
                env.extend(overrides);
                let config = Config::load_with_env(&repo_root().join("gateway/config/dev.toml"), env.into_iter())
                    .expect("dev config loads");
                let state = Arc::new(AppState::with_kafka(config).expect("gateway state builds"));
                gateway::topics::ensure(&state.catalog, &state.config.kafka)
                    .await
                    .unwrap_or_else(|e| panic!("cannot reach Kafka: {e}; run scripts/kafka start"));
                let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
                let url = format!("http://{}", listener.local_addr().expect("local addr"));
                let server = gateway::serve(Arc::clone(&state), listener).expect("server starts");
                let handle = server.handle();
                actix_web::rt::spawn(server);
                ready_tx.send(url).expect("test waits");
                // Wait for the stop signal without blocking the actix thread.
                let _ = actix_web::rt::task::spawn_blocking(move || stop_rx.recv()).await;
                handle.stop(true).await;
            });
        });
        let url = ready_rx.recv_timeout(Duration::from_secs(60)).expect("the gateway starts");
        Self { url, stop: Some(stop_tx), thread: Some(thread) }
    }
}

impl Drop for RunningGateway {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One record read back from Kafka.
#[derive(Debug, Clone)]
pub struct Consumed {
    pub topic: String,
    pub key: Option<String>,
    pub headers: HashMap<String, String>,
    pub value: Value,
}

/// Where each partition of some topics ends now: records a test produces
/// afterwards are read from here, not from the beginning of shared topics.
#[derive(Debug, Clone, Default)]
pub struct Marks(HashMap<(String, i32), i64>);

fn consumer() -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .set("group.id", "eventgw-sdk-tests-unused")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer")
}

/// The current end of every partition of `topics`.
pub fn marks(topics: &[&str]) -> Marks {
    let consumer = consumer();
    let mut marks = HashMap::new();
    for topic in topics {
        let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).expect("metadata");
        for p in metadata.topics()[0].partitions() {
            let (_, high) = consumer.fetch_watermarks(topic, p.id(), Duration::from_secs(10)).expect("watermarks");
            marks.insert(((*topic).to_owned(), p.id()), high);
        }
    }
    Marks(marks)
}

/// Every record of `topic` between `since` and the current end, by
/// partition assignment (no consumer group, so tests do not interfere).
pub fn read_topic(topic: &str, since: &Marks) -> Vec<Consumed> {
    let consumer = consumer();
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).expect("metadata");
    let partitions: Vec<i32> = metadata.topics()[0].partitions().iter().map(|p| p.id()).collect();
    let mut assignment = TopicPartitionList::new();
    let mut ends = HashMap::new();
    for p in &partitions {
        let (low, high) = consumer.fetch_watermarks(topic, *p, Duration::from_secs(10)).expect("watermarks");
        let from = since.0.get(&(topic.to_owned(), *p)).copied().unwrap_or(low).max(low);
        if high > from {
            assignment.add_partition_offset(topic, *p, Offset::Offset(from)).expect("assign");
            ends.insert(*p, high);
        }
    }
    let mut records = Vec::new();
    if ends.is_empty() {
        return records;
    }
    consumer.assign(&assignment).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ends.is_empty() {
        assert!(Instant::now() < deadline, "reading {topic} timed out; still waiting for {ends:?}");
        let Some(message) = consumer.poll(Duration::from_millis(500)) else { continue };
        let m = message.expect("consume");
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
            key: m.key().map(|k| String::from_utf8_lossy(k).into_owned()),
            headers,
            value: serde_json::from_slice(m.payload().unwrap_or_default()).expect("JSON record"),
        });
        if ends.get(&m.partition()).is_some_and(|end| m.offset() + 1 >= *end) {
            ends.remove(&m.partition());
        }
    }
    records
}

/// Records of `topic` since `marks` whose `event-id` header is one of `ids`, by id.
pub fn find(topic: &str, since: &Marks, ids: &[String]) -> HashMap<String, Vec<Consumed>> {
    let mut found: HashMap<String, Vec<Consumed>> = HashMap::new();
    for record in read_topic(topic, since) {
        if let Some(id) = record.headers.get("event-id").filter(|id| ids.contains(id)) {
            found.entry(id.clone()).or_default().push(record);
        }
    }
    found
}

/// A fresh id, so tests sharing a broker never confuse each other's records.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}
