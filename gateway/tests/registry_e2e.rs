//! The Schema Registry end to end, against the real registry
//! (`scripts/registry start`, `REGISTRY_URL`) and the real broker: the
//! catalog tool's `registry apply` (its library, as the binary runs it)
//! registers a scratch catalog; the gateway frames a record of that domain
//! (magic byte 0 + the registry's id + JSON); Confluent's Python
//! deserializer reads it back with its schema; and a start-up with the
//! registry down uses the cached ids. Every subject and topic is unique to
//! the run. The tool's own behaviour (a second apply changes nothing, a
//! refused change is rolled back) is tested with its binary in
//! `schemas/catalog/tests/registry_apply.rs`.
#![allow(missing_docs)]

mod common;

use std::path::PathBuf;
use std::process::Command;

use gateway::AppState;
use gateway::config::{Config, RegistryConfig};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{Value, json};

fn registry_url() -> String {
    std::env::var("REGISTRY_URL").unwrap_or_else(|_| "http://127.0.0.1:18481/apis/ccompat/v7".into())
}

struct Scratch {
    dir: PathBuf,
    domain: String,
    topic: String,
}

const ALPHA_V1: &str = r#"{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
  "required": ["type", "properties"],
  "properties": {"type": {"enum": ["track"]}, "userId": {"type": "string"},
    "properties": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}},
  "examples": [{"type": "track", "event": "Alpha Done", "userId": "u1", "properties": {"n": 1}}]}"#;

const BETA_V1: &str = r#"{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
  "required": ["type"], "properties": {"type": {"enum": ["track"]}, "userId": {"type": "string"}},
  "examples": [{"type": "track", "event": "Beta Done", "userId": "u1"}]}"#;

impl Scratch {
    fn new() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string()[..10].to_owned();
        let dir = std::env::temp_dir().join(format!("eventgw-registry-{id}"));
        let domain = format!("r{id}");
        let topic = format!("registry-test.{id}");
        let root = dir.join("catalog").join(&domain);
        for schema in ["alpha_done", "beta_done"] {
            std::fs::create_dir_all(root.join(schema)).expect("mkdir");
        }
        std::fs::write(root.join("alpha_done/1.json"), ALPHA_V1).expect("schema");
        std::fs::write(root.join("beta_done/1.json"), BETA_V1).expect("schema");
        std::fs::write(
            root.join("catalog.toml"),
            format!(
                "domain = \"{domain}\"\ntopic = \"{topic}\"\nowner = \"registry-test\"\npartitions = 1\n\
                 wire_format = \"confluent\"\n\
                 [events.\"Alpha Done\"]\nschema = \"alpha_done\"\nkey = [\"userId\"]\n\
                 [events.\"Beta Done\"]\nschema = \"beta_done\"\nkey = [\"userId\"]\n"
            ),
        )
        .expect("catalog");
        std::fs::write(
            dir.join("gateway.toml"),
            format!(
                "[server]\nlisten = \"127.0.0.1:0\"\n[catalog]\ndir = \"catalog\"\n[kafka]\nbrokers = \"{}\"\n\
                 dead_letter_topic = \"{topic}.dlq\"\nidentity_topic = \"{topic}.identity\"\n\
                 unclassified_topic = \"{topic}.unclassified\"\nsystem_topic_partitions = 1\nreplication_factor = 1\n\
                 [[sources]]\nid = \"t\"\nwrite_key = \"demo-write-key\"\ndomains = [\"{domain}\"]\n\
                 [registry]\nurl = \"{}\"\ncache_file = \"{}\"\n",
                common::brokers(),
                registry_url(),
                dir.join("ids.json").display()
            ),
        )
        .expect("config");
        Self { dir, domain, topic }
    }

    fn catalog(&self) -> PathBuf {
        self.dir.join("catalog")
    }

    fn subject(&self, schema: &str) -> String {
        format!("{}-{}.{schema}", self.topic, self.domain)
    }

    /// `eventgw-catalog registry apply DIR --registry URL`, through the library.
    async fn register(&self) -> String {
        let report = eventgw_catalog::cli::registry(&self.catalog(), &registry_url(), true).await.expect("registry");
        assert!(report.ok, "apply fails:\n{}", report.text);
        report.text
    }
}

async fn get(path: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{}{path}", registry_url())).await.expect("registry answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The raw value of the record of `topic` whose `event-id` is `id`.
fn raw_record(topic: &str, id: &str) -> Vec<u8> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", common::brokers())
        .set("group.id", "eventgw-tests-unused")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, 0, Offset::Beginning).expect("assign");
    consumer.assign(&assignment).expect("assign");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let Some(Ok(m)) = consumer.poll(std::time::Duration::from_millis(500)) else { continue };
        let matches =
            m.headers().is_some_and(|hs| hs.iter().any(|h| h.key == "event-id" && h.value == Some(id.as_bytes())));
        if matches {
            return m.payload().unwrap_or_default().to_vec();
        }
    }
    panic!("no record {id} on {topic}");
}

fn python() -> String {
    let root = common::repo_root();
    let out = Command::new(root.join("scripts/registry")).arg("python").output().expect("scripts/registry python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[actix_web::test]
async fn catalog_registered_records_framed_read_by_confluent_deserializer_cache_serves() {
    if common::without_kafka() || common::without_registry() {
        return;
    }
    let scratch = Scratch::new();
    let text = scratch.register().await;
    assert!(text.contains(&format!("register {} version 1", scratch.subject("alpha_done"))), "{text}");
    let (_, config) = get(&format!("/config/{}", scratch.subject("beta_done"))).await;
    assert_eq!(config["compatibilityLevel"], "BACKWARD");

    // The gateway frames records of the domain with the registry's id.
    let config = Config::load(&scratch.dir.join("gateway.toml")).expect("config");
    let gateway = common::TestGateway::start(config).await;
    gateway.state.load_schema_ids().await.expect("schema ids load");
    let message_id = uuid::Uuid::new_v4().to_string();
    let event = json!({"type": "track", "event": "Alpha Done", "userId": "u7", "messageId": message_id, "properties": {"n": 42}});
    let (status, answer) = gateway.post("/v1/batch", &json!({"batch": [event]})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["events"][0]["status"], "accepted", "{answer}");
    gateway.stop().await;
    let (_, version) = get(&format!("/subjects/{}/versions/1", scratch.subject("alpha_done"))).await;
    let id = version["id"].as_u64().expect("registry id") as u32;
    let raw = raw_record(&scratch.topic, &message_id);
    assert_eq!(raw[0], 0, "magic byte");
    assert_eq!(u32::from_be_bytes([raw[1], raw[2], raw[3], raw[4]]), id, "schema id in the frame");
    let body: Value = serde_json::from_slice(&raw[5..]).expect("JSON after the frame");
    assert_eq!(body["properties"]["n"], 42);

    // Confluent's own deserializer reads it and finds its schema.
    let script = common::repo_root().join("gateway/tests/registry/consume.py");
    let out = Command::new(python())
        .arg(script)
        .args([&common::brokers(), &registry_url(), &scratch.topic, &message_id])
        .output()
        .expect("python consumer runs");
    assert!(out.status.success(), "consumer failed: {}", String::from_utf8_lossy(&out.stderr));
    let read: Value = serde_json::from_slice(&out.stdout).expect("consumer prints JSON");
    assert_eq!(read["schema_id"], id);
    assert_eq!(read["event"]["messageId"], message_id);
    assert_eq!(read["event"]["properties"]["n"], 42);
    assert_eq!(read["schema_type"], "JSON");
    assert_eq!(read["schema"]["properties"]["properties"]["required"], json!(["n"]));
    assert!(read["subjects"].as_array().is_some_and(|s| s.contains(&json!(scratch.subject("alpha_done")))), "{read}");

    // A start-up with the registry unreachable uses the cached ids.
    let mut down = Config::load(&scratch.dir.join("gateway.toml")).expect("config");
    let cache = scratch.dir.join("ids.json");
    down.registry =
        Some(RegistryConfig { url: "http://127.0.0.1:9/apis/ccompat/v7".into(), cache_file: cache, timeout_ms: 500 });
    let state = AppState::new(down.clone(), std::sync::Arc::new(gateway::sink::MemorySink::default())).expect("state");
    let cached = gateway::registry::load(down.registry.as_ref(), &state.catalog).await.expect("cached ids serve");
    assert_eq!(cached.id(&format!("{}/alpha_done", scratch.domain), "1"), Some(id));
    if let Some(r) = down.registry.as_mut() {
        r.cache_file = scratch.dir.join("none.json");
    }
    let refused = gateway::registry::load(down.registry.as_ref(), &state.catalog).await;
    assert!(refused.is_err(), "no registry and no cache must refuse to start");

    std::fs::remove_dir_all(&scratch.dir).ok();
}
