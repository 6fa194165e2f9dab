//! The catalog as written by people: one `catalog.toml` per domain and one
//! JSON Schema document per event version. These types are what the loader
//! (or a browser, or a test) hands to [`crate::Catalog::compile`].

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// One domain's catalog file.
#[derive(Debug, Clone, Deserialize)]
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
    /// Events by the name clients send (`event` of a track call, or the
    /// conventional names `Page Viewed` and `Screen Viewed`).
    pub events: BTreeMap<String, EventSpec>,
}

fn default_partitions() -> i32 {
    3
}

/// One event in a domain's catalog file.
#[derive(Debug, Clone, Deserialize)]
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
}

/// One version of one event's JSON Schema.
#[derive(Debug, Clone)]
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
#[derive(Debug, Clone)]
pub struct DomainSource {
    /// Where the catalog file came from, for error messages.
    pub origin: String,
    /// The parsed catalog file.
    pub spec: DomainSpec,
    /// Every schema version of the domain's events.
    pub schemas: Vec<SchemaDocument>,
}
