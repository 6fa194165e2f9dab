//! `gateway topics`: creates the topics the gateway writes to when they are
//! missing (each catalog domain's topic, the dead-letter, identity and
//! unclassified topics, and the privacy suppression topic). Never alters or
//! deletes a topic that exists. The planning and the admin calls are the
//! catalog tool's ([`eventgw_catalog::topics`]), so `gateway topics` and
//! `eventgw-catalog topics apply` create a topic the same way; this module
//! only says which topics the gateway's configuration declares.

use eventgw_catalog::topics::{self as provision, DeclaredTopic, GatewayTopics, KafkaTopics};
use eventgw_schemas::Catalog;

use crate::config::{Config, KafkaConfig};

/// The topics the `[kafka]` section declares (no suppression topic).
pub fn declared_by_kafka(kafka: &KafkaConfig) -> GatewayTopics {
    GatewayTopics::new(kafka_topics(kafka), None)
}

/// Every topic of the gateway's own that `config` declares.
pub fn declared_by(config: &Config) -> GatewayTopics {
    GatewayTopics::new(kafka_topics(&config.kafka), config.privacy.suppression_topic.as_deref())
}

fn kafka_topics(kafka: &KafkaConfig) -> KafkaTopics<'_> {
    KafkaTopics {
        brokers: &kafka.brokers,
        dead_letter_topic: &kafka.dead_letter_topic,
        identity_topic: &kafka.identity_topic,
        unclassified_topic: &kafka.unclassified_topic,
        system_topic_partitions: kafka.system_topic_partitions,
        replication_factor: kafka.replication_factor,
        extra: &kafka.extra,
    }
}

/// Every topic the catalog and `kafka` declare, with its partition count.
pub fn wanted(catalog: &Catalog, kafka: &KafkaConfig) -> Vec<(String, i32)> {
    provision::plan::declared(catalog, &declared_by_kafka(kafka)).into_iter().map(|t| (t.name, t.partitions)).collect()
}

/// Creates the missing topics of the catalog and `kafka`; returns the names
/// it created.
pub async fn ensure(catalog: &Catalog, kafka: &KafkaConfig) -> anyhow::Result<Vec<String>> {
    let created = provision::create_missing(catalog, &declared_by_kafka(kafka)).await?;
    Ok(created.into_iter().map(|t| t.name).collect())
}

/// What `gateway topics` does: creates every missing topic `config`
/// declares; returns them as it prints them (a compacted one says so).
pub async fn ensure_all(catalog: &Catalog, config: &Config) -> anyhow::Result<Vec<String>> {
    let created = provision::create_missing(catalog, &declared_by(config)).await?;
    Ok(created.iter().map(describe).collect())
}

/// Creates the suppression topic `topic` (compacted) if it is missing;
/// returns whether it created it.
pub async fn ensure_suppression_topic(kafka: &KafkaConfig, topic: &str) -> anyhow::Result<bool> {
    let gateway = GatewayTopics::new(kafka_topics(kafka), Some(topic));
    let declared: Vec<DeclaredTopic> = gateway.declared().filter(|t| t.name == topic).collect();
    Ok(!provision::create_missing_of(&declared, &gateway).await?.is_empty())
}

fn describe(topic: &DeclaredTopic) -> String {
    match topic.configs.get("cleanup.policy").map(String::as_str) {
        Some("compact") => format!("{} (compacted)", topic.name),
        _ => topic.name.clone(),
    }
}
