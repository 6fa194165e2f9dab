//! The Schema Registry as the gateway sees it: the id of every schema
//! version of the domains whose catalog says `wire_format = "confluent"`,
//! and the framing that puts that id in front of each record's JSON, so
//! registry-aware consumers find the schema of what they read.
//!
//! Ids are fetched at start-up and on SIGHUP, each checked to name the very
//! schema the catalog has, and written to `registry.cache_file`. When the
//! registry cannot be reached at start-up, the cached ids are used if they
//! cover every framed schema (the registry's ids never change for a stored
//! schema, so a cache from an earlier start stays right); without them the
//! gateway refuses to start rather than write records no consumer can place.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use eventgw_schemas::{Catalog, WireFormat};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::RegistryConfig;

// The client, the subject naming and the registered document are the
// catalog tool's, so the ids looked up here are those of what it registered.
pub use eventgw_catalog::registry::{RegistryClient, RegistryError, registered_document, subject};

/// Confluent's magic byte, first of every framed record.
pub const MAGIC_BYTE: u8 = 0;

/// Confluent's wire format: magic byte 0, the schema id as 4 big-endian
/// bytes, then the JSON unchanged.
pub fn frame(id: u32, json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 5);
    out.push(MAGIC_BYTE);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(json);
    out
}

/// One schema version a framed domain needs an id for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Framed {
    /// `domain/schema`, as in the record's `schema` header.
    pub schema: String,
    /// The catalog version.
    pub version: u32,
    /// Its registry subject.
    pub subject: String,
    /// The JSON Schema as registered ([`registered_document`]).
    pub document: Value,
}

/// Every schema version of every domain whose wire format is `confluent`.
pub fn framed(catalog: &Catalog) -> Vec<Framed> {
    let framed_domains: Vec<&str> = catalog
        .sources()
        .iter()
        .filter(|s| s.spec.wire_format == WireFormat::Confluent)
        .map(|s| s.spec.domain.as_str())
        .collect();
    let mut out = Vec::new();
    for event in catalog.events().into_iter().filter(|e| framed_domains.contains(&e.domain.as_str())) {
        for version in event.versions() {
            out.push(Framed {
                schema: format!("{}/{}", event.domain, event.schema),
                version: version.version,
                subject: subject(&event.topic, &event.domain, &event.schema),
                document: registered_document(version.document()),
            });
        }
    }
    out
}

/// Registry ids by `domain/schema` and version (as the record header
/// writes it), for framed domains only: an empty table frames nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaIds {
    /// The registry these ids came from.
    pub registry: String,
    /// `domain/schema` → version → id.
    pub ids: HashMap<String, BTreeMap<String, u32>>,
}

impl SchemaIds {
    /// The id of `schema` at `version`, when its domain is framed.
    pub fn id(&self, schema: &str, version: &str) -> Option<u32> {
        self.ids.get(schema)?.get(version).copied()
    }

    /// The record value for `payload`: framed when its schema's domain is.
    pub fn payload(&self, schema: &str, version: &str, payload: Vec<u8>) -> Vec<u8> {
        match self.id(schema, version) {
            Some(id) => frame(id, &payload),
            None => payload,
        }
    }

    /// The framed schema versions this table has no id for.
    pub fn missing<'a>(&self, needed: &'a [Framed]) -> Vec<&'a Framed> {
        needed.iter().filter(|f| self.id(&f.schema, &f.version.to_string()).is_none()).collect()
    }

    fn read(path: &Path) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }

    fn write(&self, path: &Path) -> std::io::Result<()> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)?;
        std::fs::rename(tmp, path)
    }
}

/// Asks the registry for the id of every framed schema version, each
/// checked to be the catalog's schema.
pub async fn fetch(client: &RegistryClient, needed: &[Framed]) -> Result<SchemaIds, RegistryError> {
    let mut ids = SchemaIds { registry: client.url.clone(), ids: HashMap::new() };
    for f in needed {
        let differs =
            || RegistryError::Differs { subject: f.subject.clone(), version: f.version, schema: f.schema.clone() };
        let Some((id, stored)) = client.version(&f.subject, f.version).await? else {
            return Err(RegistryError::Unreachable {
                url: client.url.clone(),
                problem: format!(
                    "subject `{}` has no version {}; run `eventgw-catalog registry apply`",
                    f.subject, f.version
                ),
            });
        };
        if stored != f.document {
            return Err(differs());
        }
        ids.ids.entry(f.schema.clone()).or_default().insert(f.version.to_string(), id);
    }
    Ok(ids)
}

/// Start-up: the ids from the registry (then cached on disk), or from the
/// cache when the registry cannot be reached and the cache covers every
/// framed schema. Nothing is needed when no domain is framed.
pub async fn load(config: Option<&RegistryConfig>, catalog: &Catalog) -> Result<SchemaIds, RegistryError> {
    let needed = framed(catalog);
    let Some(first) = needed.first() else { return Ok(SchemaIds::default()) };
    let Some(config) = config else {
        return Err(RegistryError::NotConfigured(first.schema.split('/').next().unwrap_or_default().to_owned()));
    };
    let client = RegistryClient::new(&config.url, Duration::from_millis(config.timeout_ms))?;
    match fetch(&client, &needed).await {
        Ok(ids) => {
            if let Err(error) = ids.write(&config.cache_file) {
                tracing::warn!(file = %config.cache_file.display(), %error, "Cannot write the schema id cache");
            }
            tracing::info!(schemas = needed.len(), registry = %config.url, "Schema ids fetched from the registry");
            Ok(ids)
        }
        Err(RegistryError::Unreachable { url, problem }) => {
            match SchemaIds::read(&config.cache_file).filter(|c| c.missing(&needed).is_empty()) {
                Some(cached) => {
                    tracing::warn!(%url, %problem, file = %config.cache_file.display(), "Schema registry unreachable; using cached schema ids");
                    Ok(cached)
                }
                None => Err(RegistryError::Unreachable {
                    url,
                    problem: format!("{problem}; and no usable id cache at {}", config.cache_file.display()),
                }),
            }
        }
        Err(other) => Err(other),
    }
}

/// Start-up: loads the ids of `catalog`'s framed schemas and swaps them into `ids`.
pub async fn start(
    config: Option<&RegistryConfig>,
    catalog: &Catalog,
    ids: &arc_swap::ArcSwap<SchemaIds>,
) -> Result<(), RegistryError> {
    let loaded = load(config, catalog).await?;
    ids.store(std::sync::Arc::new(loaded));
    Ok(())
}

/// On reload: fetches the ids again; on any failure the running ones stay.
pub async fn refresh(config: Option<&RegistryConfig>, catalog: &Catalog, ids_now: &arc_swap::ArcSwap<SchemaIds>) {
    let needed = framed(catalog);
    let Some(config) = config.filter(|_| !needed.is_empty()) else { return };
    let fetched = match RegistryClient::new(&config.url, Duration::from_millis(config.timeout_ms)) {
        Ok(client) => fetch(&client, &needed).await,
        Err(error) => Err(error),
    };
    match fetched {
        Ok(ids) => {
            if let Err(error) = ids.write(&config.cache_file) {
                tracing::warn!(file = %config.cache_file.display(), %error, "Cannot write the schema id cache");
            }
            ids_now.store(std::sync::Arc::new(ids));
            tracing::info!(schemas = needed.len(), "Schema ids refreshed from the registry");
        }
        Err(error) => tracing::warn!(%error, "Schema id refresh failed; keeping the running ids"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_is_magic_byte_id_big_endian_then_json() {
        let framed = frame(0x0102_0304, br#"{"a":1}"#);
        assert_eq!(&framed[..5], &[0, 1, 2, 3, 4]);
        assert_eq!(&framed[5..], br#"{"a":1}"#);
    }

    #[test]
    fn only_schemas_with_an_id_are_framed() {
        let mut ids = SchemaIds::default();
        ids.ids.entry("billing/order_completed".into()).or_default().insert("2".into(), 7);
        assert_eq!(ids.payload("billing/order_completed", "2", b"{}".to_vec()), vec![0, 0, 0, 0, 7, b'{', b'}']);
        assert_eq!(ids.payload("billing/order_completed", "1", b"{}".to_vec()), b"{}".to_vec());
        assert_eq!(ids.payload("web/page_viewed", "2", b"{}".to_vec()), b"{}".to_vec());
    }
}
