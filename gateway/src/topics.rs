//! Creates the topics the gateway produces to, when they are missing: each
//! catalog domain's topic plus the dead-letter, identity and unclassified
//! topics. Never alters or deletes a topic that exists.

use std::time::Duration;

use eventgw_schemas::Catalog;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::types::RDKafkaErrorCode;

use crate::config::KafkaConfig;

/// Every topic the gateway may write to, with its partition count.
pub fn wanted(catalog: &Catalog, kafka: &KafkaConfig) -> Vec<(String, i32)> {
    let mut topics: Vec<(String, i32)> = catalog.topics().values().cloned().collect();
    for system in [&kafka.dead_letter_topic, &kafka.identity_topic, &kafka.unclassified_topic] {
        topics.push((system.clone(), kafka.system_topic_partitions));
    }
    topics.sort();
    topics.dedup_by(|a, b| a.0 == b.0);
    topics
}

/// Creates the missing topics; returns the names it created.
pub async fn ensure(catalog: &Catalog, kafka: &KafkaConfig) -> anyhow::Result<Vec<String>> {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &kafka.brokers).create()?;
    let metadata = admin.inner().fetch_metadata(None, Duration::from_secs(10))?;
    let existing: Vec<&str> = metadata.topics().iter().map(|t| t.name()).collect();
    let wanted = wanted(catalog, kafka);
    let missing: Vec<NewTopic> = wanted
        .iter()
        .filter(|(name, _)| !existing.contains(&name.as_str()))
        .map(|(name, partitions)| NewTopic::new(name, *partitions, TopicReplication::Fixed(kafka.replication_factor)))
        .collect();
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let mut created = Vec::new();
    for result in admin.create_topics(&missing, &options).await? {
        match result {
            Ok(name) => created.push(name),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => anyhow::bail!("creating topic {name} failed: {code}"),
        }
    }
    Ok(created)
}
