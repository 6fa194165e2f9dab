//! Topics as code, the Kafka half: reads what a cluster has and applies a
//! [`Plan`] through the admin API. Safe to run again: a plan made after a
//! successful apply is empty, and a topic someone else created in between is
//! taken as created.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, ConfigSource, NewPartitions, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use super::plan::{Change, DeclaredTopic, ExistingTopic, Plan};

/// How long one admin request may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Why reading or changing the cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The admin client could not talk to the cluster.
    #[error("Kafka admin client: {0}")]
    Kafka(#[from] KafkaError),
    /// The cluster refused one operation on one topic.
    #[error("{action} {topic} failed: {code}")]
    Topic {
        /// What was being done.
        action: &'static str,
        /// The topic.
        topic: String,
        /// Kafka's answer.
        code: RDKafkaErrorCode,
    },
    /// The plan has refusals; nothing was applied.
    #[error("refusing to apply; nothing was changed:\n{0}")]
    Refused(Plan),
}

/// An admin connection to one cluster.
pub struct TopicAdmin {
    admin: AdminClient<DefaultClientContext>,
}

impl TopicAdmin {
    /// Connects to `brokers` (comma separated).
    pub fn connect(brokers: &str) -> Result<Self, ProvisionError> {
        Self::connect_with(brokers, &BTreeMap::new())
    }

    /// Connects to `brokers` with librdkafka connection settings
    /// (`security.protocol`, `sasl.*`, `ssl.*`).
    pub fn connect_with(brokers: &str, settings: &BTreeMap<String, String>) -> Result<Self, ProvisionError> {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", brokers);
        for (key, value) in settings {
            config.set(key, value);
        }
        Ok(Self { admin: config.create()? })
    }

    /// The topics among `declared` that exist, with their partitions,
    /// replication factor and configs.
    pub async fn existing(
        &self,
        declared: &[DeclaredTopic],
    ) -> Result<BTreeMap<String, ExistingTopic>, ProvisionError> {
        let metadata = self.admin.inner().fetch_metadata(None, ADMIN_TIMEOUT)?;
        let mut existing = BTreeMap::new();
        for topic in metadata.topics() {
            if !declared.iter().any(|d| d.name == topic.name()) || topic.partitions().is_empty() {
                continue;
            }
            let replication_factor = topic.partitions().first().map_or(0, |p| p.replicas().len() as i32);
            let found =
                ExistingTopic { partitions: topic.partitions().len() as i32, replication_factor, ..Default::default() };
            existing.insert(topic.name().to_owned(), found);
        }
        let names: Vec<String> = existing.keys().cloned().collect();
        let specifiers: Vec<ResourceSpecifier<'_>> = names.iter().map(|n| ResourceSpecifier::Topic(n)).collect();
        if specifiers.is_empty() {
            return Ok(existing);
        }
        let results = self.admin.describe_configs(&specifiers, &options()).await?;
        for (name, result) in names.iter().zip(results) {
            let resource = result.map_err(|code| ProvisionError::Topic {
                action: "describe configs of",
                topic: name.clone(),
                code,
            })?;
            let Some(topic) = existing.get_mut(name) else { continue };
            for entry in resource.entries {
                let Some(value) = entry.value else { continue };
                if entry.source == ConfigSource::DynamicTopic {
                    topic.overrides.insert(entry.name.clone(), value.clone());
                }
                topic.configs.insert(entry.name, value);
            }
        }
        Ok(existing)
    }

    /// Applies `plan` (made against `existing`), returning one line per
    /// step done. Refuses a plan with refusals before touching anything.
    pub async fn apply(
        &self,
        plan: &Plan,
        existing: &BTreeMap<String, ExistingTopic>,
    ) -> Result<Vec<String>, ProvisionError> {
        if !plan.refusals.is_empty() {
            return Err(ProvisionError::Refused(plan.clone()));
        }
        let mut done = Vec::new();
        for change in &plan.changes {
            match change {
                Change::Create(topic) => {
                    self.create(topic).await?;
                    done.push(format!("created {} ({} partitions)", topic.name, topic.partitions));
                }
                Change::AlterConfigs { topic, changes } => {
                    let mut configs = existing.get(topic).map(|t| t.overrides.clone()).unwrap_or_default();
                    for (key, _, value) in changes {
                        configs.insert(key.clone(), value.clone());
                    }
                    self.alter(topic, &configs).await?;
                    let list: Vec<String> = changes.iter().map(|(k, _, v)| format!("{k}={v}")).collect();
                    done.push(format!("altered {topic}: {}", list.join(", ")));
                }
                Change::AddPartitions { topic, from, to } => {
                    self.grow(topic, *to).await?;
                    done.push(format!("added partitions to {topic}: {from} -> {to}"));
                }
            }
        }
        Ok(done)
    }

    async fn create(&self, topic: &DeclaredTopic) -> Result<(), ProvisionError> {
        let mut new = NewTopic::new(&topic.name, topic.partitions, TopicReplication::Fixed(topic.replication_factor));
        for (key, value) in &topic.configs {
            new = new.set(key, value);
        }
        for result in self.admin.create_topics([&new], &options()).await? {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => return Err(ProvisionError::Topic { action: "create", topic: name, code }),
            }
        }
        Ok(())
    }

    /// Sets `configs` as the topic's whole set of overrides (AlterConfigs
    /// is not incremental; the caller passes the existing overrides too).
    async fn alter(&self, topic: &str, configs: &BTreeMap<String, String>) -> Result<(), ProvisionError> {
        let mut alter = AlterConfig::new(ResourceSpecifier::Topic(topic));
        for (key, value) in configs {
            alter = alter.set(key, value);
        }
        for result in self.admin.alter_configs([&alter], &options()).await? {
            result.map_err(|(_, code)| ProvisionError::Topic {
                action: "alter configs of",
                topic: topic.to_owned(),
                code,
            })?;
        }
        Ok(())
    }

    async fn grow(&self, topic: &str, to: i32) -> Result<(), ProvisionError> {
        let partitions = NewPartitions::new(topic, usize::try_from(to).unwrap_or_default());
        for result in self.admin.create_partitions([&partitions], &options()).await? {
            result.map_err(|(_, code)| ProvisionError::Topic {
                action: "add partitions to",
                topic: topic.to_owned(),
                code,
            })?;
        }
        Ok(())
    }
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT)).request_timeout(Some(ADMIN_TIMEOUT))
}
