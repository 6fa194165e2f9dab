//! Topics as code, the pure half: what the catalog and the gateway's
//! configuration declare, compared with what a cluster has, gives a plan of
//! creations, config changes and partition additions. Shrinking is refused
//! here, before anything touches Kafka, because Kafka cannot remove
//! partitions and re-creating a topic would lose its records and reorder keys.

use std::collections::BTreeMap;
use std::fmt;

use eventgw_schemas::Catalog;

use super::GatewayTopics;

/// A topic as the catalog (or the gateway config) declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredTopic {
    /// The topic name.
    pub name: String,
    /// How many partitions it should have.
    pub partitions: i32,
    /// Copies of each partition, used when it is created.
    pub replication_factor: i32,
    /// Topic configs by Kafka name (`retention.ms`); keys left out are not managed.
    pub configs: BTreeMap<String, String>,
    /// Where it is declared, so messages can say which file to change.
    pub declared_in: String,
}

/// A topic as the cluster has it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExistingTopic {
    /// Its partition count.
    pub partitions: i32,
    /// Replicas of its first partition.
    pub replication_factor: i32,
    /// The effective value of every config the broker reported.
    pub configs: BTreeMap<String, String>,
    /// The configs set on the topic itself (not broker defaults): Kafka's
    /// AlterConfigs replaces them all, so applying a change must resend them.
    pub overrides: BTreeMap<String, String>,
}

/// One step that brings the cluster to what is declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The topic does not exist yet.
    Create(DeclaredTopic),
    /// Configs differ: `(key, current value, declared value)`.
    AlterConfigs {
        /// The topic.
        topic: String,
        /// Each differing config.
        changes: Vec<(String, Option<String>, String)>,
    },
    /// The topic has fewer partitions than declared.
    AddPartitions {
        /// The topic.
        topic: String,
        /// Partitions now.
        from: i32,
        /// Partitions declared.
        to: i32,
    },
}

/// What the plan will not do, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Fewer partitions declared than the topic has.
    Shrink {
        /// The topic.
        topic: String,
        /// Partitions now.
        from: i32,
        /// Partitions declared.
        to: i32,
        /// Where the declaration is.
        declared_in: String,
    },
}

/// A difference the tool reports but does not change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// The replication factor differs; changing it means reassigning
    /// partitions to brokers, an operation for `kafka-reassign-partitions`.
    ReplicationFactor {
        /// The topic.
        topic: String,
        /// Its replication factor now.
        actual: i32,
        /// The declared one.
        declared: i32,
    },
}

/// Everything `topics apply` would do, would refuse, and would leave alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Steps to apply, in order: creations, config changes, partition additions.
    pub changes: Vec<Change>,
    /// What makes the plan impossible; `apply` does nothing while any remain.
    pub refusals: Vec<Refusal>,
    /// Reported, not changed.
    pub drift: Vec<Drift>,
    /// Topics already as declared.
    pub unchanged: Vec<String>,
}

/// The domain topics of `catalog` with their settings, then the gateway's
/// own topics; a name declared twice keeps its first declaration.
pub fn declared(catalog: &Catalog, gateway: &GatewayTopics) -> Vec<DeclaredTopic> {
    let mut topics: BTreeMap<String, DeclaredTopic> = BTreeMap::new();
    for domain in catalog.domains().values() {
        topics.entry(domain.topic.clone()).or_insert_with(|| DeclaredTopic {
            name: domain.topic.clone(),
            partitions: domain.partitions,
            replication_factor: domain.settings.replication_factor.unwrap_or(gateway.replication_factor),
            configs: domain.settings.kafka_configs(),
            declared_in: domain.origin.clone(),
        });
    }
    for system in gateway.declared() {
        topics.entry(system.name.clone()).or_insert(system);
    }
    topics.into_values().collect()
}

/// Compares what is declared with what exists.
pub fn plan(declared: &[DeclaredTopic], existing: &BTreeMap<String, ExistingTopic>) -> Plan {
    let mut plan = Plan::default();
    let (mut alters, mut grows) = (Vec::new(), Vec::new());
    for topic in declared {
        let Some(actual) = existing.get(&topic.name) else {
            plan.changes.push(Change::Create(topic.clone()));
            continue;
        };
        let changes: Vec<(String, Option<String>, String)> = topic
            .configs
            .iter()
            .filter(|(key, want)| actual.configs.get(*key).map(|have| normalise(have)) != Some(normalise(want)))
            .map(|(key, want)| (key.clone(), actual.configs.get(key).cloned(), want.clone()))
            .collect();
        if changes.is_empty() && actual.partitions == topic.partitions {
            plan.unchanged.push(topic.name.clone());
        }
        if !changes.is_empty() {
            alters.push(Change::AlterConfigs { topic: topic.name.clone(), changes });
        }
        if actual.partitions < topic.partitions {
            grows.push(Change::AddPartitions {
                topic: topic.name.clone(),
                from: actual.partitions,
                to: topic.partitions,
            });
        } else if actual.partitions > topic.partitions {
            plan.refusals.push(Refusal::Shrink {
                topic: topic.name.clone(),
                from: actual.partitions,
                to: topic.partitions,
                declared_in: topic.declared_in.clone(),
            });
        }
        if actual.replication_factor != topic.replication_factor {
            plan.drift.push(Drift::ReplicationFactor {
                topic: topic.name.clone(),
                actual: actual.replication_factor,
                declared: topic.replication_factor,
            });
        }
    }
    plan.changes.extend(alters);
    plan.changes.extend(grows);
    plan
}

/// `cleanup.policy` lists come back in any order (`delete,compact`).
fn normalise(value: &str) -> String {
    let mut parts: Vec<&str> = value.split(',').map(str::trim).collect();
    parts.sort_unstable();
    parts.join(",")
}

impl Plan {
    /// Whether applying it would change nothing.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.refusals.is_empty()
    }

    /// Only the creations: what `gateway topics` applies. It never changes
    /// a topic that exists, so nothing about existing topics is refused.
    pub fn creations(&self) -> Plan {
        let changes = self.changes.iter().filter(|c| matches!(c, Change::Create(_))).cloned().collect();
        Plan { changes, ..Plan::default() }
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for change in &self.changes {
            match change {
                Change::Create(t) => {
                    let configs: Vec<String> = t.configs.iter().map(|(k, v)| format!(", {k}={v}")).collect();
                    writeln!(
                        f,
                        "+ create {}: {} partitions, replication factor {}{}",
                        t.name,
                        t.partitions,
                        t.replication_factor,
                        configs.concat()
                    )?
                }
                Change::AlterConfigs { topic, changes } => {
                    for (key, from, to) in changes {
                        writeln!(f, "~ alter {topic}: {key} {} -> {to}", from.as_deref().unwrap_or("(unset)"))?
                    }
                }
                Change::AddPartitions { topic, from, to } => {
                    writeln!(f, "~ add partitions to {topic}: {from} -> {to}")?
                }
            }
        }
        for Refusal::Shrink { topic, from, to, declared_in } in &self.refusals {
            writeln!(
                f,
                "! refused: {topic} has {from} partitions but {declared_in} declares {to}. Kafka cannot remove \
                 partitions, and re-creating the topic would lose its records and move keys to other partitions. \
                 Declare {from} (or more) partitions, or create a new topic and migrate."
            )?;
        }
        for Drift::ReplicationFactor { topic, actual, declared } in &self.drift {
            writeln!(
                f,
                "? {topic}: replication factor is {actual}, declared {declared}; not changed here (reassign \
                 partitions with kafka-reassign-partitions)"
            )?;
        }
        if !self.unchanged.is_empty() {
            writeln!(f, "= unchanged: {}", self.unchanged.join(", "))?;
        }
        match (self.changes.len(), self.refusals.len()) {
            (0, 0) => write!(f, "No changes: the cluster matches the catalog."),
            (n, 0) => write!(f, "{n} change(s) to apply."),
            (_, r) => write!(f, "{r} refusal(s): nothing will be applied until the catalog is fixed."),
        }
    }
}
