//! Reads, from the gateway's configuration file, the few keys the tool
//! needs: the catalog directory, the topics the gateway writes to, the
//! cluster and the Schema Registry. The gateway depends on this crate, so
//! the tool cannot use the gateway's typed configuration; it reads the same
//! file with the same environment overrides (`EVENTGW__KAFKA__BROKERS=...`)
//! and the same defaults, and ignores every other key. The gateway's tests
//! (`gateway/tests/topics_declared.rs`) check that both readings declare the
//! same topics for every shipped configuration.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::topics::{GatewayTopics, KafkaTopics};

/// Prefix of the gateway's environment overrides; `__` separates segments.
pub const ENV_PREFIX: &str = "EVENTGW__";

/// The sections read; overrides of other sections are the gateway's business.
const SECTIONS: [&str; 4] = ["catalog", "kafka", "registry", "privacy"];

/// What the tool takes from a gateway configuration.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// The catalog directory, relative paths resolved against the file's directory.
    pub catalog_dir: PathBuf,
    /// The cluster and the gateway's own topics.
    pub topics: GatewayTopics,
    /// `[registry] url`, when the gateway frames records for a registry.
    pub registry_url: Option<String>,
}

#[derive(Deserialize)]
struct File {
    catalog: CatalogSection,
    kafka: KafkaSection,
    #[serde(default)]
    registry: Option<RegistrySection>,
    #[serde(default)]
    privacy: PrivacySection,
}

#[derive(Deserialize)]
struct CatalogSection {
    dir: PathBuf,
}

/// The gateway's `[kafka]` keys about topics, with its defaults.
#[derive(Deserialize)]
struct KafkaSection {
    brokers: String,
    dead_letter_topic: String,
    identity_topic: String,
    unclassified_topic: String,
    #[serde(default = "default_partitions")]
    system_topic_partitions: i32,
    #[serde(default = "default_replication")]
    replication_factor: i32,
    #[serde(default)]
    extra: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
struct RegistrySection {
    url: String,
}

#[derive(Deserialize, Default)]
struct PrivacySection {
    #[serde(default)]
    suppression_topic: Option<String>,
}

/// The gateway's `kafka.system_topic_partitions` default.
fn default_partitions() -> i32 {
    3
}

/// The gateway's `kafka.replication_factor` default.
fn default_replication() -> i32 {
    1
}

impl GatewayConfig {
    /// Reads `path` with the process environment's overrides.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        Self::load_with_env(path, std::env::vars())
    }

    /// As [`GatewayConfig::load`], with the environment given explicitly.
    pub fn load_with_env(path: &Path, env: impl Iterator<Item = (String, String)>) -> anyhow::Result<Self> {
        let file = path.display();
        let text = std::fs::read_to_string(path).with_context(|| format!("config {file}: cannot read"))?;
        let mut table: toml::Table = text.parse().with_context(|| format!("config {file}"))?;
        for (name, value) in env {
            let Some(rest) = name.strip_prefix(ENV_PREFIX) else { continue };
            let segments: Vec<String> = rest.split("__").map(str::to_lowercase).collect();
            if segments.first().is_some_and(|s| SECTIONS.contains(&s.as_str())) {
                set(&mut table, &segments, scalar(&value))
                    .with_context(|| format!("config {file}: {}: from environment {name}", segments.join(".")))?;
            }
        }
        let read: File = toml::Value::Table(table).try_into().with_context(|| format!("config {file}"))?;
        if read.kafka.brokers.trim().is_empty() {
            bail!("config {file}: kafka.brokers: must name at least one broker");
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let extra: BTreeMap<String, String> = read.kafka.extra.iter().map(|(k, v)| (k.clone(), plain(v))).collect();
        let k = &read.kafka;
        let kafka = KafkaTopics {
            brokers: &k.brokers,
            dead_letter_topic: &k.dead_letter_topic,
            identity_topic: &k.identity_topic,
            unclassified_topic: &k.unclassified_topic,
            system_topic_partitions: k.system_topic_partitions,
            replication_factor: k.replication_factor,
            extra: &extra,
        };
        Ok(Self {
            catalog_dir: base.join(&read.catalog.dir),
            topics: GatewayTopics::new(kafka, read.privacy.suppression_topic.as_deref()),
            registry_url: read.registry.map(|r| r.url),
        })
    }
}

/// Sets the dotted `segments` in `table`, making tables on the way.
fn set(table: &mut toml::Table, segments: &[String], value: toml::Value) -> anyhow::Result<()> {
    let (first, rest) = segments.split_first().context("empty key")?;
    if rest.is_empty() {
        table.insert(first.clone(), value);
        return Ok(());
    }
    match table.entry(first.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new())) {
        toml::Value::Table(inner) => set(inner, rest, value),
        _ => bail!("`{first}` is not a table"),
    }
}

/// An override read as a TOML value when it parses as one (numbers,
/// booleans), as a string otherwise: the gateway's rule.
fn scalar(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()))
}

/// A librdkafka property as librdkafka writes it: strings bare.
fn plain(value: &toml::Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}
