//! Personal data as the catalog declares it: which fields of an event are
//! personal and what the gateway does to them before anything reaches
//! Kafka, and the purpose an event serves (checked against the consent a
//! user granted). Declared per event in the domain's `catalog.toml`:
//!
//! ```toml
//! [events."Form Submitted"]
//! purpose = "marketing"
//! personal = { "properties.email" = "hash", "properties.name" = "encrypt" }
//! ```

use serde::{Deserialize, Serialize};

use crate::CatalogError;

/// What the gateway does to a personal field at ingest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PersonalAction {
    /// Replaced by its keyed HMAC-SHA256: the same input gives the same
    /// value under the same key, so joins and counts still work.
    Hash,
    /// Removed from the event.
    Redact,
    /// Encrypted with a key of the event's user; deleting that key makes
    /// every copy unreadable without rewriting Kafka (crypto-shredding).
    Encrypt,
}

impl PersonalAction {
    /// The name used in catalog files, on the catalog page and in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hash => "hash",
            Self::Redact => "redact",
            Self::Encrypt => "encrypt",
        }
    }
}

/// One personal field of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonalField {
    /// The dotted path as declared, e.g. `properties.email`.
    pub path: String,
    /// The path split at its dots, resolved once at compile time.
    pub segments: Vec<String>,
    /// What happens to it.
    pub action: PersonalAction,
}

/// What a violation message says instead of a personal field's value.
pub const WITHHELD: &str = "[withheld: personal data]";

/// The JSON Pointer of a personal field (`/properties/email`), escaped as
/// the validator writes instance paths.
pub(crate) fn pointer(field: &PersonalField) -> String {
    field.segments.iter().map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1"))).collect()
}

/// Whether the value at pointer `path` is the value at `field`, holds it or
/// is held by it: then a message quoting it could quote the field.
pub(crate) fn overlaps(path: &str, field: &str) -> bool {
    let within = |inner: &str, outer: &str| {
        inner == outer || (inner.starts_with(outer) && inner.as_bytes().get(outer.len()) == Some(&b'/'))
    };
    within(path, field) || within(field, path)
}

/// Fields an event's partition key or routing depends on: changing them at
/// ingest would break routing, so they cannot be declared personal.
const RESERVED: [&str; 4] = ["type", "event", "messageId", "context"];

/// Checks and resolves an event's declared personal fields.
pub(crate) fn compile(
    origin: &str,
    event: &str,
    declared: &std::collections::BTreeMap<String, PersonalAction>,
) -> Result<Vec<PersonalField>, CatalogError> {
    declared
        .iter()
        .map(|(path, action)| {
            let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
            if segments.iter().any(String::is_empty) {
                let problem = format!("event `{event}`: personal field `{path}` is not a dotted path");
                return Err(CatalogError::new(origin, problem));
            }
            if segments.len() == 1 && RESERVED.contains(&segments[0].as_str()) {
                let problem = format!("event `{event}`: `{path}` routes the event and cannot be personal");
                return Err(CatalogError::new(origin, problem));
            }
            Ok(PersonalField { path: path.clone(), segments, action: *action })
        })
        .collect()
}

/// Checks a declared purpose: a short lower-case word, as consent
/// categories are named (`analytics`, `marketing`, `advertising`).
pub(crate) fn check_purpose(origin: &str, event: &str, purpose: &str) -> Result<(), CatalogError> {
    let ok = !purpose.is_empty()
        && purpose.len() <= 64
        && purpose.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        let problem = format!("event `{event}`: purpose `{purpose}` must be a lower-case word like `analytics`");
        Err(CatalogError::new(origin, problem))
    }
}
