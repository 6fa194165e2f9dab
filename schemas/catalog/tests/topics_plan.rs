//! Topic planning without a broker: what is declared against what exists
//! gives creations, config changes and partition additions; shrinking is
//! refused with a message naming the file; a differing replication factor is
//! reported but never "fixed".
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::path::Path;

use eventgw_catalog::gateway_config::GatewayConfig;
use eventgw_catalog::topics::plan::{Change, DeclaredTopic, Drift, ExistingTopic, Refusal, declared, plan};
use eventgw_schemas::loader::load_catalog;

fn topic(partitions: i32, configs: &[(&str, &str)]) -> DeclaredTopic {
    DeclaredTopic {
        name: "t".into(),
        partitions,
        replication_factor: 1,
        configs: configs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        declared_in: "d/catalog.toml".into(),
    }
}

fn existing(partitions: i32, replication_factor: i32, configs: &[(&str, &str)]) -> BTreeMap<String, ExistingTopic> {
    let configs: BTreeMap<String, String> = configs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let topic = ExistingTopic { partitions, replication_factor, configs, overrides: BTreeMap::new() };
    BTreeMap::from([("t".to_owned(), topic)])
}

#[test]
fn declares_domain_topics_with_settings_and_the_gateways_own_topics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("the repository root");
    let config = GatewayConfig::load(&root.join("gateway/config/dev.toml")).expect("dev config");
    let catalog = load_catalog(&root.join("schemas")).expect("catalog");
    let topics = declared(&catalog, &config.topics);
    let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
    for name in ["web.tracking", "billing.payments", "eventgw.dead-letter", "crm.identities", "eventgw.unclassified"] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let web = topics.iter().find(|t| t.name == "web.tracking").expect("web");
    assert_eq!((web.partitions, web.replication_factor), (6, config.topics.replication_factor));
    assert_eq!(web.configs.get("retention.ms").map(String::as_str), Some("1209600000"));
    let dlq = topics.iter().find(|t| t.name == "eventgw.dead-letter").expect("dlq");
    assert_eq!(dlq.partitions, config.topics.system[0].partitions);
    assert_eq!(dlq.declared_in, "the gateway config's [kafka] section");
}

#[test]
fn missing_topics_are_created_and_matching_ones_left_alone() {
    let p = plan(&[topic(3, &[("retention.ms", "1000")])], &BTreeMap::new());
    assert!(matches!(p.changes.as_slice(), [Change::Create(t)] if t.partitions == 3));
    let p = plan(
        &[topic(3, &[("cleanup.policy", "compact,delete")])],
        &existing(3, 1, &[("cleanup.policy", "delete,compact")]),
    );
    assert!(p.is_empty() && p.unchanged == ["t"], "{p}");
    assert!(p.to_string().ends_with("No changes: the cluster matches the catalog."), "{p}");
}

#[test]
fn differing_configs_are_altered_and_missing_partitions_added() {
    let p = plan(&[topic(6, &[("retention.ms", "2000")])], &existing(3, 1, &[("retention.ms", "1000")]));
    assert_eq!(
        p.changes,
        [
            Change::AlterConfigs {
                topic: "t".into(),
                changes: vec![("retention.ms".into(), Some("1000".into()), "2000".into())]
            },
            Change::AddPartitions { topic: "t".into(), from: 3, to: 6 },
        ]
    );
    let text = p.to_string();
    assert!(text.contains("~ alter t: retention.ms 1000 -> 2000") && text.contains("~ add partitions to t: 3 -> 6"));
}

#[test]
fn shrinking_is_refused_with_a_clear_message() {
    let p = plan(&[topic(2, &[("retention.ms", "5")])], &existing(4, 1, &[("retention.ms", "1")]));
    assert_eq!(
        p.refusals,
        [Refusal::Shrink { topic: "t".into(), from: 4, to: 2, declared_in: "d/catalog.toml".into() }]
    );
    let text = p.to_string();
    assert!(
        text.contains("! refused: t has 4 partitions but d/catalog.toml declares 2. Kafka cannot remove partitions")
    );
    assert!(text.ends_with("nothing will be applied until the catalog is fixed."), "{text}");
}

#[test]
fn a_different_replication_factor_is_reported_not_changed() {
    let p = plan(&[topic(3, &[])], &existing(3, 3, &[]));
    assert!(p.is_empty());
    assert_eq!(p.drift, [Drift::ReplicationFactor { topic: "t".into(), actual: 3, declared: 1 }]);
    assert!(p.to_string().contains("replication factor is 3, declared 1; not changed here"));
}
