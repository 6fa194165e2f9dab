//! Topics as code: every topic the gateway writes to, declared by the
//! catalog (domain topics with their settings) and by the gateway's
//! configuration ([`GatewayTopics`]: dead-letter, identity, unclassified,
//! suppression), compared with a cluster into a [`plan::Plan`] and applied
//! through the admin API ([`admin::TopicAdmin`]).
//!
//! The one implementation of creating and altering topics:
//! `eventgw-catalog topics plan|apply` applies the whole plan, and `gateway
//! topics` applies only its creations ([`create_missing`]), so both create a
//! topic with the same partitions, replication factor and configs.

use std::collections::BTreeMap;

use eventgw_schemas::Catalog;

pub mod admin;
pub mod plan;

pub use admin::{ProvisionError, TopicAdmin};
pub use plan::{Change, DeclaredTopic, Drift, ExistingTopic, Plan, Refusal};

/// What the gateway's configuration says about topics: where the cluster
/// is, and the topics the gateway writes to besides the domain topics.
/// Built by the gateway from its typed configuration, and by the tool from
/// the same file ([`crate::gateway_config`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayTopics {
    /// Bootstrap brokers, comma separated.
    pub brokers: String,
    /// The connection and security settings of the gateway's Kafka clients
    /// (see [`connection_settings`]), so the admin client reaches a cluster
    /// that needs TLS or SASL.
    pub connection: BTreeMap<String, String>,
    /// Replication factor of every topic created, unless its domain's
    /// catalog sets one.
    pub replication_factor: i32,
    /// The gateway's own topics, in the order its configuration names them.
    pub system: Vec<SystemTopic>,
}

/// A topic the gateway writes to that no catalog domain declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemTopic {
    /// The topic name.
    pub name: String,
    /// Partitions when created (`kafka.system_topic_partitions`).
    pub partitions: i32,
    /// Topic configs it needs (the suppression topic is compacted).
    pub configs: BTreeMap<String, String>,
    /// The configuration section that names it, for messages.
    pub declared_in: &'static str,
}

/// Where the dead-letter, identity and unclassified topics are declared.
pub const KAFKA_SECTION: &str = "the gateway config's [kafka] section";
/// Where the suppression topic is declared.
pub const PRIVACY_SECTION: &str = "the gateway config's [privacy] section";

/// Prefixes of the librdkafka properties that say how to connect (not how
/// to produce): they apply to the admin client too.
const CONNECTION_PREFIXES: [&str; 5] = ["security.", "sasl.", "ssl.", "socket.", "client."];

/// The connection and security settings among `kafka.extra` properties.
pub fn connection_settings(extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    extra
        .iter()
        .filter(|(key, _)| CONNECTION_PREFIXES.iter().any(|p| key.starts_with(p)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl GatewayTopics {
    /// The gateway's topics as its `[kafka]` section (and optionally
    /// `[privacy] suppression_topic`) names them.
    pub fn new(kafka: KafkaTopics<'_>, suppression_topic: Option<&str>) -> Self {
        let system_topic = |name: &str, configs: BTreeMap<String, String>, declared_in| SystemTopic {
            name: name.to_owned(),
            partitions: kafka.system_topic_partitions,
            configs,
            declared_in,
        };
        let mut system: Vec<SystemTopic> = [kafka.dead_letter_topic, kafka.identity_topic, kafka.unclassified_topic]
            .into_iter()
            .map(|name| system_topic(name, BTreeMap::new(), KAFKA_SECTION))
            .collect();
        if let Some(name) = suppression_topic {
            let compact = BTreeMap::from([("cleanup.policy".to_owned(), "compact".to_owned())]);
            system.push(system_topic(name, compact, PRIVACY_SECTION));
        }
        Self {
            brokers: kafka.brokers.to_owned(),
            connection: connection_settings(kafka.extra),
            replication_factor: kafka.replication_factor,
            system,
        }
    }

    /// The gateway's own topics as declared topics.
    pub fn declared(&self) -> impl Iterator<Item = DeclaredTopic> + '_ {
        self.system.iter().map(|system| DeclaredTopic {
            name: system.name.clone(),
            partitions: system.partitions,
            replication_factor: self.replication_factor,
            configs: system.configs.clone(),
            declared_in: system.declared_in.to_owned(),
        })
    }
}

/// The `[kafka]` keys that declare topics, borrowed from whichever typed
/// form of the configuration the caller has.
#[derive(Debug, Clone, Copy)]
pub struct KafkaTopics<'a> {
    /// `kafka.brokers`.
    pub brokers: &'a str,
    /// `kafka.dead_letter_topic`.
    pub dead_letter_topic: &'a str,
    /// `kafka.identity_topic`.
    pub identity_topic: &'a str,
    /// `kafka.unclassified_topic`.
    pub unclassified_topic: &'a str,
    /// `kafka.system_topic_partitions`.
    pub system_topic_partitions: i32,
    /// `kafka.replication_factor`.
    pub replication_factor: i32,
    /// `kafka.extra`, of which only the connection settings are used.
    pub extra: &'a BTreeMap<String, String>,
}

/// Creates the topics `catalog` and `gateway` declare that do not exist
/// yet, exactly as `topics apply` would create them, and changes nothing
/// that exists. Returns the topics created (a topic someone else created
/// meanwhile counts as created).
pub async fn create_missing(catalog: &Catalog, gateway: &GatewayTopics) -> Result<Vec<DeclaredTopic>, ProvisionError> {
    create_missing_of(&plan::declared(catalog, gateway), gateway).await
}

/// As [`create_missing`], for the topics `declared` alone (on the cluster
/// `gateway` names).
pub async fn create_missing_of(
    declared: &[DeclaredTopic],
    gateway: &GatewayTopics,
) -> Result<Vec<DeclaredTopic>, ProvisionError> {
    let admin = TopicAdmin::connect_with(&gateway.brokers, &gateway.connection)?;
    let existing = admin.existing(declared).await?;
    let creations = plan::plan(declared, &existing).creations();
    admin.apply(&creations, &existing).await?;
    Ok(creations
        .changes
        .into_iter()
        .filter_map(|change| match change {
            Change::Create(topic) => Some(topic),
            _ => None,
        })
        .collect())
}
