//! The catalog as written by people: one `catalog.toml` per domain and one
//! JSON Schema document per event version. These types are what the loader
//! (or a browser, or a test) hands to [`crate::Catalog::compile`]; they also
//! serialise, so the catalog page can hand the same sources to the
//! WebAssembly checker.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One domain's catalog file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DomainSpec {
    /// The business domain, e.g. `web`; must match its directory name.
    pub domain: String,
    /// The Kafka topic every event of this domain is produced to.
    pub topic: String,
    /// The team that owns these contracts and answers for changes to them.
    pub owner: String,
    /// What the domain covers, for the catalog page.
    #[serde(default)]
    pub description: String,
    /// Partitions the topic is created with; the key spreads load over them.
    #[serde(default = "default_partitions")]
    pub partitions: i32,
    /// The rest of the topic's settings, provisioned by `topics apply`.
    #[serde(default)]
    pub topic_settings: TopicSettings,
    /// How record values are written on the topic: plain JSON (the
    /// default) or framed with the Schema Registry id of their schema.
    #[serde(default, skip_serializing_if = "WireFormat::is_json")]
    pub wire_format: WireFormat,
    /// Events by the name clients send (`event` of a track call, or the
    /// conventional names `Page Viewed` and `Screen Viewed`).
    pub events: BTreeMap<String, EventSpec>,
}

fn default_partitions() -> i32 {
    3
}

/// A domain topic's settings beside its partition count. Each one left out
/// is not managed: the broker's default (or whatever an operator set) stays.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TopicSettings {
    /// Copies of each partition; defaults to the gateway's
    /// `kafka.replication_factor`. Only used when the topic is created,
    /// because changing it means reassigning partitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_factor: Option<i32>,
    /// `retention.ms`: how long records are kept; -1 keeps them forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<i64>,
    /// `compression.type`: `producer`, `zstd`, `lz4`, `snappy`, `gzip` or `uncompressed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    /// `min.insync.replicas`: replicas that must have a record before an
    /// `acks=all` producer (the gateway) hears it is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_insync_replicas: Option<i32>,
    /// `cleanup.policy`: `delete`, `compact` or `compact,delete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_policy: Option<String>,
}

impl TopicSettings {
    /// The Kafka topic configs these settings stand for, by Kafka's names.
    pub fn kafka_configs(&self) -> BTreeMap<String, String> {
        let mut configs = BTreeMap::new();
        let mut put = |key: &str, value: Option<String>| {
            if let Some(value) = value {
                configs.insert(key.to_owned(), value);
            }
        };
        put("retention.ms", self.retention_ms.map(|v| v.to_string()));
        put("compression.type", self.compression.clone());
        put("min.insync.replicas", self.min_insync_replicas.map(|v| v.to_string()));
        put("cleanup.policy", self.cleanup_policy.clone());
        configs
    }
}

/// How the gateway writes a domain's record values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WireFormat {
    /// The event as JSON, nothing else: readable by any consumer.
    #[default]
    Json,
    /// Confluent's framing: magic byte 0, the schema's 4-byte big-endian
    /// Schema Registry id, then the JSON, so registry-aware consumers
    /// (Kafka Connect's JSON Schema converter, ksqlDB, Flink, the Confluent
    /// deserializers) find each record's schema.
    Confluent,
}

impl WireFormat {
    /// The name used in catalog files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Confluent => "confluent",
        }
    }

    fn is_json(&self) -> bool {
        *self == Self::Json
    }
}

/// How a new version of an event's schema must relate to the previous one,
/// named as in Confluent Schema Registry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compatibility {
    /// Consumers on the new version can read every event written under the
    /// previous one: fields may be removed and optional fields added.
    #[default]
    Backward,
    /// Consumers still on the previous version can read every event written
    /// under the new one: fields may be added and optional fields removed.
    Forward,
    /// Both backward and forward.
    Full,
    /// No check; for events still in design.
    None,
}

impl Compatibility {
    /// The name used in catalog files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Backward => "backward",
            Self::Forward => "forward",
            Self::Full => "full",
            Self::None => "none",
        }
    }
}

/// What the gateway does with an event that breaks its schema, so a new
/// contract can be rolled out without dropping traffic on day one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rollout {
    /// Validate and count, but accept the event unchanged.
    Observe,
    /// Accept the event, tag its record with a `contract-warning` header, count it.
    Warn,
    /// Send it to the dead-letter topic with the reason.
    #[default]
    Enforce,
}

impl Rollout {
    /// The name used in catalog files, headers and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Observe => "observe",
            Self::Warn => "warn",
            Self::Enforce => "enforce",
        }
    }
}

/// One event in a domain's catalog file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    /// Directory holding this event's versions: `<domain>/<schema>/<N>.json`.
    pub schema: String,
    /// Candidate partition-key fields, first present one wins, as dotted
    /// paths into the event (`userId`, `properties.order_id`).
    pub key: Vec<String>,
    /// What the event means, for the catalog page.
    #[serde(default)]
    pub description: String,
    /// How each version must relate to the previous one.
    #[serde(default)]
    pub compatibility: Compatibility,
    /// What happens to events that break the schema.
    #[serde(default)]
    pub rollout: Rollout,
    /// What the event's data is used for (`analytics`, `marketing`), checked
    /// against the consent categories a user granted; none means unchecked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// Personal fields by dotted path, each with what the gateway does to it
    /// at ingest (`hash`, `redact`, `encrypt`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub personal: BTreeMap<String, crate::PersonalAction>,
}

/// One version of one event's JSON Schema.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct SchemaDocument {
    /// The `schema` directory name this version belongs to.
    pub schema: String,
    /// The version number, from the file name (`2.json` is version 2).
    pub version: u32,
    /// Where it came from, for error messages.
    pub origin: String,
    /// The schema itself.
    pub json: Value,
}

/// A domain's catalog file together with its schema documents.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct DomainSource {
    /// Where the catalog file came from, for error messages.
    pub origin: String,
    /// The parsed catalog file.
    pub spec: DomainSpec,
    /// Every schema version of the domain's events.
    pub schemas: Vec<SchemaDocument>,
}
