//! `eventgw-catalog topics plan|apply` against the real broker: creates the
//! declared topics, a second plan is empty, a changed retention and an
//! added partition are applied, and a shrink is refused with nothing
//! applied. Every topic is unique to the run, so shipped topics are never
//! touched.

#![allow(missing_docs)]

/// Whether the servers this test needs are there (the gateway's test helper, shared by path).
#[path = "../../../gateway/tests/common/servers.rs"]
mod servers;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use eventgw_catalog::topics::{DeclaredTopic, ExistingTopic, TopicAdmin};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

fn brokers() -> String {
    std::env::var("KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

/// A temporary catalog with one domain, and a gateway config pointing at it.
struct Scratch {
    dir: PathBuf,
    topic: String,
}

impl Scratch {
    fn new() -> Self {
        let id = format!("{}{}", std::process::id(), uuid::Uuid::new_v4().simple().to_string().get(..8).unwrap_or("0"));
        let dir = std::env::temp_dir().join(format!("eventgw-contracts-{id}"));
        let topic = format!("contracts-test.{id}");
        let domain = dir.join("catalog/ctest");
        std::fs::create_dir_all(domain.join("thing_done")).expect("mkdir");
        std::fs::write(
            domain.join("thing_done/1.json"),
            r#"{"type": "object", "properties": {"type": {"enum": ["track"]}},
                "examples": [{"type": "track", "event": "Thing Done", "userId": "u1"}]}"#,
        )
        .expect("schema");
        std::fs::write(
            dir.join("gateway.toml"),
            format!(
                "[server]\nlisten = \"127.0.0.1:0\"\n[catalog]\ndir = \"catalog\"\n[kafka]\nbrokers = \"{}\"\n\
                 dead_letter_topic = \"{topic}.dlq\"\nidentity_topic = \"{topic}.identity\"\n\
                 unclassified_topic = \"{topic}.unclassified\"\nsystem_topic_partitions = 1\nreplication_factor = 1\n\
                 [[sources]]\nid = \"t\"\nwrite_key = \"contracts-test-key\"\ndomains = [\"ctest\"]\n",
                brokers()
            ),
        )
        .expect("config");
        let scratch = Self { dir, topic };
        scratch.declare(2, 3_600_000);
        scratch
    }

    fn declare(&self, partitions: i32, retention_ms: i64) {
        let text = format!(
            "domain = \"ctest\"\ntopic = \"{}\"\nowner = \"contracts-test\"\npartitions = {partitions}\n\
             [topic_settings]\nretention_ms = {retention_ms}\ncleanup_policy = \"delete\"\n\
             [events.\"Thing Done\"]\nschema = \"thing_done\"\nkey = [\"userId\"]\n",
            self.topic
        );
        std::fs::write(self.dir.join("catalog/ctest/catalog.toml"), text).expect("catalog");
    }

    /// Runs `topics VERB`; the exit code and standard output.
    fn topics(&self, verb: &str) -> (i32, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_eventgw-catalog"))
            .args(["topics", verb, "--config"])
            .arg(self.dir.join("gateway.toml"))
            .output()
            .expect("run eventgw-catalog");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
    }

    /// Plans until the broker's metadata shows the last apply (it
    /// propagates asynchronously); returns the last plan. Bounded.
    fn settled_plan(&self) -> (i32, String) {
        let mut last = self.topics("plan");
        for _ in 0..20 {
            if last.1.contains("No changes") {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
            last = self.topics("plan");
        }
        last
    }

    /// The domain topic as the broker has it now.
    fn describe(&self) -> ExistingTopic {
        let declared = DeclaredTopic {
            name: self.topic.clone(),
            partitions: 0,
            replication_factor: 1,
            configs: Default::default(),
            declared_in: String::new(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let admin = TopicAdmin::connect(&brokers()).expect("admin");
        let mut found = runtime.block_on(admin.existing(&[declared])).expect("describe");
        found.remove(&self.topic).expect("topic exists")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let admin: Option<AdminClient<DefaultClientContext>> =
            ClientConfig::new().set("bootstrap.servers", brokers()).create().ok();
        if let (Some(admin), Ok(runtime)) = (admin, tokio::runtime::Builder::new_current_thread().enable_all().build())
        {
            let names: Vec<String> =
                ["", ".dlq", ".identity", ".unclassified"].iter().map(|s| format!("{}{s}", self.topic)).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let _ = runtime.block_on(admin.delete_topics(&refs, &AdminOptions::new()));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn plan_apply_replan_alter_grow_and_refuse_to_shrink() {
    if servers::without_kafka() {
        return;
    }
    let s = Scratch::new();
    let t = &s.topic;

    let (code, plan) = s.topics("plan");
    assert_eq!(code, 0, "{plan}");
    assert!(plan.contains(&format!("+ create {t}: 2 partitions, replication factor 1")), "{plan}");
    assert!(
        plan.contains("retention.ms=3600000") && plan.contains(&format!("+ create {t}.dlq: 1 partitions")),
        "{plan}"
    );
    assert!(plan.contains("4 change(s) to apply"), "{plan}");

    let (code, applied) = s.topics("apply");
    assert_eq!(code, 0, "{applied}");
    assert!(applied.contains(&format!("created {t} (2 partitions)")), "{applied}");
    let topic = s.describe();
    assert_eq!((topic.partitions, topic.configs.get("retention.ms").map(String::as_str)), (2, Some("3600000")));

    let (code, again) = s.settled_plan();
    assert_eq!(code, 0, "{again}");
    assert!(again.contains("No changes"), "a second plan shows no change:\n{again}");

    s.declare(3, 7_200_000);
    let (_, plan) = s.topics("plan");
    assert!(plan.contains(&format!("~ alter {t}: retention.ms 3600000 -> 7200000")), "{plan}");
    assert!(plan.contains(&format!("~ add partitions to {t}: 2 -> 3")), "{plan}");
    let (code, applied) = s.topics("apply");
    assert_eq!(code, 0, "{applied}");
    let topic = s.describe();
    assert_eq!(topic.configs.get("retention.ms").map(String::as_str), Some("7200000"), "{applied}");
    assert_eq!(topic.configs.get("cleanup.policy").map(String::as_str), Some("delete"), "other overrides kept");
    assert_eq!(topic.partitions, 3);
    assert!(s.settled_plan().1.contains("No changes"));

    // A shrink together with a retention change: refused whole, nothing applied.
    s.declare(1, 60_000);
    let (code, plan) = s.topics("plan");
    assert_eq!(code, 1, "{plan}");
    assert!(plan.contains(&format!("! refused: {t} has 3 partitions but")), "{plan}");
    assert!(plan.contains("declares 1") && plan.contains("Kafka cannot remove partitions"), "{plan}");
    let (code, refused) = s.topics("apply");
    assert_eq!(code, 1, "{refused}");
    assert!(refused.contains("nothing will be applied"), "{refused}");
    let topic = s.describe();
    assert_eq!((topic.partitions, topic.configs.get("retention.ms").map(String::as_str)), (3, Some("7200000")));
    assert!(Path::new(&s.dir).exists());
}
