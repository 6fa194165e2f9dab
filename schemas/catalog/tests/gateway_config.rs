//! What the tool reads from a gateway configuration: the catalog directory
//! relative to the file, the gateway's own topics with the gateway's
//! defaults, environment overrides, only the connection settings of
//! `kafka.extra`, and errors that name the file and the key. (That the
//! gateway reads the same topics from the same files is checked on the
//! gateway's side, `gateway/tests/topics_declared.rs`.)
#![allow(missing_docs)]

use std::path::PathBuf;

use eventgw_catalog::gateway_config::GatewayConfig;

struct Scratch(PathBuf);

impl Scratch {
    fn new(text: &str) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let dir = std::env::temp_dir().join(format!("eventgw-catalog-config-{id}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("gateway.toml"), text).expect("config");
        Self(dir)
    }

    fn load(&self, env: &[(&str, &str)]) -> anyhow::Result<GatewayConfig> {
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        GatewayConfig::load_with_env(&self.0.join("gateway.toml"), env.collect::<Vec<_>>().into_iter())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const MINIMAL: &str = "[server]\nlisten = \"127.0.0.1:0\"\n[catalog]\ndir = \"catalog\"\n[kafka]\n\
    brokers = \"k:9092\"\ndead_letter_topic = \"d\"\nidentity_topic = \"i\"\nunclassified_topic = \"u\"\n\
    [kafka.extra]\n\"sasl.mechanism\" = \"PLAIN\"\n\"linger.ms\" = 5\n";

#[test]
fn reads_the_topics_with_the_gateways_defaults_and_resolves_the_catalog() {
    let scratch = Scratch::new(MINIMAL);
    let config = scratch.load(&[]).expect("reads");
    assert_eq!(config.catalog_dir, scratch.0.join("catalog"));
    assert_eq!(config.registry_url, None);
    let topics = config.topics;
    assert_eq!((topics.brokers.as_str(), topics.replication_factor), ("k:9092", 1));
    let system: Vec<(&str, i32)> = topics.system.iter().map(|t| (t.name.as_str(), t.partitions)).collect();
    assert_eq!(system, [("d", 3), ("i", 3), ("u", 3)]);
    assert_eq!(topics.connection.into_iter().collect::<Vec<_>>(), [("sasl.mechanism".into(), "PLAIN".into())]);
}

#[test]
fn environment_overrides_apply_as_the_gateway_applies_them() {
    let scratch = Scratch::new(MINIMAL);
    let config = scratch
        .load(&[
            ("EVENTGW__KAFKA__BROKERS", "a:1,b:2"),
            ("EVENTGW__KAFKA__REPLICATION_FACTOR", "3"),
            ("EVENTGW__PRIVACY__SUPPRESSION_TOPIC", "privacy.suppressions"),
            ("EVENTGW__REGISTRY__URL", "http://r/apis/ccompat/v7"),
            ("EVENTGW__SERVER__LISTEN", "not read by the tool"),
            ("OTHER__KAFKA__BROKERS", "ignored"),
        ])
        .expect("reads");
    assert_eq!((config.topics.brokers.as_str(), config.topics.replication_factor), ("a:1,b:2", 3));
    assert_eq!(config.registry_url.as_deref(), Some("http://r/apis/ccompat/v7"));
    let suppression = config.topics.system.last().expect("a system topic");
    assert_eq!(suppression.name, "privacy.suppressions");
    assert_eq!(suppression.configs.get("cleanup.policy").map(String::as_str), Some("compact"));
}

#[test]
fn errors_name_the_file_and_the_key() {
    let scratch = Scratch::new(MINIMAL);
    let error = format!("{:#}", scratch.load(&[("EVENTGW__KAFKA__BROKERS", " ")]).expect_err("no broker"));
    assert!(error.contains("gateway.toml: kafka.brokers: must name at least one broker"), "{error}");
    let error = format!("{:#}", scratch.load(&[("EVENTGW__KAFKA__BROKERS__X", "1")]).expect_err("not a table"));
    assert!(error.contains("kafka.brokers.x: from environment EVENTGW__KAFKA__BROKERS__X"), "{error}");
    let missing = Scratch::new("[catalog]\ndir = \"c\"\n[kafka]\nbrokers = \"k\"\n");
    let error = format!("{:#}", missing.load(&[]).expect_err("no topics"));
    assert!(error.contains("gateway.toml") && error.contains("dead_letter_topic"), "{error}");
}
