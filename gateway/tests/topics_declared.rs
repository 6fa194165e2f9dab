//! The gateway and the catalog tool read the same configuration file for
//! topics: the gateway through its typed `Config`, the tool (which the
//! gateway depends on, so it cannot use that type) through its own narrow
//! reader. For every shipped configuration, with environment overrides of
//! the keys that matter, both declare the same cluster, the same topics with
//! the same settings and the same catalog directory; and `gateway topics`
//! (against the real broker, `KAFKA_BROKERS`) creates every declared topic
//! with the catalog's settings, after which the tool's plan has nothing to
//! create and a second run creates nothing.
#![allow(missing_docs)]

mod common;

use std::path::PathBuf;

use eventgw_catalog::gateway_config::GatewayConfig;
use eventgw_catalog::topics::{Change, TopicAdmin, plan};
use eventgw_schemas::loader::load_catalog;
use gateway::config::Config;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

fn shipped(name: &str) -> PathBuf {
    common::repo_root().join("gateway/config").join(name)
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn both_readings_of_every_shipped_config_declare_the_same_topics() {
    let overrides = [
        env(&[]),
        env(&[
            ("EVENTGW__KAFKA__BROKERS", "broker-a:9093,broker-b:9093"),
            ("EVENTGW__KAFKA__SYSTEM_TOPIC_PARTITIONS", "7"),
            ("EVENTGW__KAFKA__DEAD_LETTER_TOPIC", "ops.dead-letter"),
            ("EVENTGW__KAFKA__EXTRA__SECURITY.PROTOCOL", "SASL_SSL"),
            ("EVENTGW__KAFKA__EXTRA__LINGER.MS", "5"),
            ("EVENTGW__PRIVACY__SUPPRESSION_TOPIC", "privacy.suppressions"),
            ("EVENTGW__SERVER__LISTEN", "127.0.0.1:1"),
        ]),
    ];
    // A configuration with only the required keys, so the defaults are compared too.
    let minimal = std::env::temp_dir().join(format!("eventgw-topics-minimal-{}.toml", std::process::id()));
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[catalog]\ndir = \"{}\"\n[kafka]\nbrokers = \"127.0.0.1:9\"\n\
         dead_letter_topic = \"d\"\nidentity_topic = \"i\"\nunclassified_topic = \"u\"\n\
         [[sources]]\nid = \"t\"\nwrite_key = \"minimal-write-key\"\ndomains = [\"web\"]\n",
        common::repo_root().join("schemas").display()
    );
    std::fs::write(&minimal, text).expect("minimal config");
    for path in [shipped("dev.toml"), shipped("production.toml"), minimal.clone()] {
        let name = path.display();
        for vars in &overrides {
            let config = Config::load_with_env(&path, vars.clone().into_iter()).expect("gateway reads it");
            let tool = GatewayConfig::load_with_env(&path, vars.clone().into_iter()).expect("tool reads it");
            assert_eq!(tool.topics, gateway::topics::declared_by(&config), "{name} with {vars:?}");
            assert_eq!(tool.catalog_dir, config.catalog.dir, "{name}");
            assert_eq!(tool.registry_url, config.registry.as_ref().map(|r| r.url.clone()), "{name}");
        }
    }
    std::fs::remove_file(&minimal).ok();
    // The overrides reached both: a control that the comparison is not of two defaults.
    let config = Config::load_with_env(&shipped("dev.toml"), overrides[1].clone().into_iter()).expect("config");
    let topics = gateway::topics::declared_by(&config);
    assert_eq!(topics.brokers, "broker-a:9093,broker-b:9093");
    assert_eq!(topics.connection.get("security.protocol").map(String::as_str), Some("SASL_SSL"));
    assert!(!topics.connection.contains_key("linger.ms"), "producer tuning is not the admin client's");
    let names: Vec<(&str, i32)> = topics.system.iter().map(|t| (t.name.as_str(), t.partitions)).collect();
    assert!(names.contains(&("ops.dead-letter", 7)) && names.contains(&("privacy.suppressions", 7)), "{names:?}");
}

#[actix_web::test]
async fn gateway_topics_creates_what_the_catalog_tool_declares() {
    if common::without_kafka() {
        return;
    }
    let id = uuid::Uuid::new_v4().simple().to_string()[..10].to_owned();
    let mut config = common::config(&common::brokers());
    config.kafka.dead_letter_topic = format!("topics-test.{id}.dlq").into();
    config.kafka.identity_topic = format!("topics-test.{id}.identity").into();
    config.kafka.unclassified_topic = format!("topics-test.{id}.unclassified").into();
    config.privacy.suppression_topic = Some(format!("topics-test.{id}.suppressions"));
    let catalog = load_catalog(&config.catalog.dir).expect("catalog");

    let created = gateway::topics::ensure_all(&catalog, &config).await.expect("gateway topics");
    for own in ["dlq", "identity", "unclassified"] {
        assert!(created.contains(&format!("topics-test.{id}.{own}")), "{own} not in {created:?}");
    }
    assert!(created.contains(&format!("topics-test.{id}.suppressions (compacted)")), "{created:?}");

    // The tool's view of the same configuration now has nothing to create,
    // and the topics have the settings the catalog and the config declare.
    let declared = plan::declared(&catalog, &gateway::topics::declared_by(&config));
    let admin = TopicAdmin::connect(&config.kafka.brokers).expect("admin");
    let mut existing = admin.existing(&declared).await.expect("describe");
    for _ in 0..40 {
        if declared.iter().all(|t| existing.contains_key(&t.name)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        existing = admin.existing(&declared).await.expect("describe");
    }
    let after = plan::plan(&declared, &existing);
    assert!(!after.changes.iter().any(|c| matches!(c, Change::Create(_))), "still to create:\n{after}");
    let suppressions = &existing[&format!("topics-test.{id}.suppressions")];
    assert_eq!(suppressions.configs.get("cleanup.policy").map(String::as_str), Some("compact"));
    let dlq = &existing[&format!("topics-test.{id}.dlq")];
    assert_eq!(dlq.partitions, config.kafka.system_topic_partitions);

    let again = gateway::topics::ensure_all(&catalog, &config).await.expect("gateway topics again");
    assert!(again.is_empty(), "a second run created {again:?}");

    let names: Vec<String> = ["dlq", "identity", "unclassified", "suppressions"]
        .iter()
        .map(|own| format!("topics-test.{id}.{own}"))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &config.kafka.brokers).create().expect("admin");
    let _ = admin.delete_topics(&refs, &AdminOptions::new()).await;
}
