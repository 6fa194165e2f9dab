//! The compiled catalog: every schema compiled once at start-up, then
//! looked up by event name on each request.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use jsonschema::Validator;
use serde_json::Value;

use crate::{Compatibility, DomainSource, KeyPath, Rollout, TopicSettings};

/// A map by event name, hashed with FNV-1a: it is looked up once or twice
/// per event, where std's SipHash cost several times more for a short
/// name. Its keys are the catalog's own, fixed at start-up, so a client
/// choosing the names it looks up cannot crowd it.
pub(crate) type Names<V> = HashMap<String, V, BuildHasherDefault<NameHasher>>;

/// FNV-1a (64 bits) over a name's bytes; see [`Names`].
#[derive(Debug)]
pub(crate) struct NameHasher(u64);

impl Default for NameHasher {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Every event the gateway knows, ready to check and route.
#[derive(Debug)]
pub struct Catalog {
    /// By the event name clients send; names are unique across domains,
    /// because a track call only carries the name.
    pub(crate) events: Names<EventType>,
    /// Domain name to topic, for provisioning topics and for the docs.
    pub(crate) topics: BTreeMap<String, (String, i32)>,
    /// Each domain's description, owner and topic settings, by name.
    pub(crate) domains: BTreeMap<String, Domain>,
    /// What it was compiled from, so the catalog page can hand the very same
    /// contract to the in-browser checker.
    pub(crate) sources: Vec<DomainSource>,
}

/// One business domain: who owns it and where its events go.
#[derive(Debug, Clone)]
pub struct Domain {
    /// The domain's name, e.g. `billing`.
    pub name: String,
    /// What it covers.
    pub description: String,
    /// The team answering for its contracts.
    pub owner: String,
    /// Its Kafka topic.
    pub topic: String,
    /// The topic's partition count.
    pub partitions: i32,
    /// The topic's other settings.
    pub settings: TopicSettings,
    /// The catalog file it was declared in.
    pub origin: String,
}

/// One event of the catalog with all its versions.
#[derive(Debug)]
pub struct EventType {
    /// The name clients send, e.g. `Order Completed`; shared, because each
    /// of its records carries it as a header.
    pub name: Arc<str>,
    /// The business domain, e.g. `billing`.
    pub domain: String,
    /// The schema directory, e.g. `order_completed`; with the domain it names
    /// the contract on the Kafka record (`billing/order_completed`).
    pub schema: String,
    /// `domain/schema`, the contract's name on each of its records (their
    /// `schema` header), made once here rather than for every record.
    pub contract: Arc<str>,
    /// The domain topic its records go to.
    pub topic: Arc<str>,
    /// Where its partition key comes from.
    pub key: KeyPath,
    /// Versions, oldest first; never empty.
    pub(crate) versions: BTreeMap<u32, EventSchema>,
    /// What the event means.
    pub(crate) description: String,
    /// How each version must relate to the previous one.
    pub(crate) compatibility: Compatibility,
    /// What the gateway does with an event that breaks its schema.
    pub(crate) rollout: Rollout,
    /// What the event's data is used for, checked against granted consent.
    pub(crate) purpose: Option<String>,
    /// Its personal fields and what happens to each at ingest.
    pub(crate) personal: Vec<crate::PersonalField>,
}

/// One compiled version of an event's schema.
#[derive(Debug)]
pub struct EventSchema {
    /// The version number.
    pub version: u32,
    /// The version number as text, for the records' `schema-version`
    /// header, made once here rather than for every record.
    pub version_text: Arc<str>,
    /// Where it was loaded from.
    pub origin: String,
    /// Whole example events from the schema's `examples`; each is checked
    /// against the schema when the catalog compiles.
    pub examples: Vec<Value>,
    /// The JSON Schema as written, for the catalog page.
    pub(crate) document: Value,
    pub(crate) validator: Validator,
}

/// One way an event breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SchemaViolation {
    /// JSON Pointer to the offending part of the event (`/properties/url`).
    pub path: String,
    /// What is wrong, as the validator words it.
    pub message: String,
}

/// Why an event cannot be accepted under the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// The event asked for a schema version that does not exist.
    UnknownVersion {
        /// The version asked for.
        requested: u32,
        /// The newest version there is.
        latest: u32,
    },
    /// The event does not match its schema.
    Schema(Vec<SchemaViolation>),
    /// None of the key fields is present, so the event cannot be keyed.
    MissingKey(String),
}

impl Catalog {
    /// The event clients call `name`, if the catalog has it.
    pub fn event(&self, name: &str) -> Option<&EventType> {
        self.events.get(name)
    }

    /// Every event, sorted by domain then name.
    pub fn events(&self) -> Vec<&EventType> {
        let mut all: Vec<&EventType> = self.events.values().collect();
        all.sort_by(|a, b| (&a.domain, &a.name).cmp(&(&b.domain, &b.name)));
        all
    }

    /// Each domain's topic and partition count, by domain.
    pub fn topics(&self) -> &BTreeMap<String, (String, i32)> {
        &self.topics
    }

    /// Every domain, by name.
    pub fn domains(&self) -> &BTreeMap<String, Domain> {
        &self.domains
    }

    /// The sources the catalog was compiled from; they serialise to JSON
    /// that [`Catalog::compile`] accepts again (in the browser, say).
    pub fn sources(&self) -> &[DomainSource] {
        &self.sources
    }
}

impl EventType {
    /// What the event means, from its catalog entry.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// How each version must relate to the previous one.
    pub fn compatibility(&self) -> Compatibility {
        self.compatibility
    }

    /// What the gateway does with an event that breaks its schema:
    /// observe (accept and count), warn (accept, tag and count) or enforce
    /// (dead-letter).
    pub fn rollout(&self) -> Rollout {
        self.rollout
    }

    /// What the event's data is used for (`analytics`, `marketing`), if
    /// the catalog says; checked against the consent a user granted.
    pub fn purpose(&self) -> Option<&str> {
        self.purpose.as_deref()
    }

    /// Its personal fields and what the gateway does to each at ingest.
    pub fn personal(&self) -> &[crate::PersonalField] {
        &self.personal
    }

    /// The newest version, used when an event does not pin one.
    pub fn latest(&self) -> &EventSchema {
        self.versions.values().next_back().expect("compile refuses an event without versions")
    }

    /// A pinned version, if it exists.
    pub fn version(&self, version: u32) -> Option<&EventSchema> {
        self.versions.get(&version)
    }

    /// All versions, oldest first.
    pub fn versions(&self) -> impl Iterator<Item = &EventSchema> {
        self.versions.values()
    }

    /// Checks `event` against the pinned version (or the newest) and finds its
    /// key. On success returns the schema used and the key.
    pub fn check(&self, event: &Value, pinned: Option<u32>) -> Result<(&EventSchema, String), Violation> {
        let schema = match pinned {
            Some(v) => {
                self.version(v).ok_or(Violation::UnknownVersion { requested: v, latest: self.latest().version })?
            }
            None => self.latest(),
        };
        schema.validate_withholding(event, &self.personal).map_err(Violation::Schema)?;
        let key = self.key.extract(event).ok_or_else(|| Violation::MissingKey(self.key.describe()))?;
        Ok((schema, key))
    }
}

/// An event checked under its event's rollout: routable, possibly with
/// schema violations that the rollout waives.
#[derive(Debug)]
pub struct Checked<'a> {
    /// The schema version used.
    pub schema: &'a EventSchema,
    /// The partition key.
    pub key: String,
    /// Schema violations let through because the rollout is `observe` or
    /// `warn`; empty when the event conforms.
    pub waived: Vec<SchemaViolation>,
}

impl EventType {
    /// As [`EventType::check`], but under the `observe` and `warn` rollouts
    /// a schema violation is waived: the event is returned routable with
    /// the violations listed, for the gateway to count (and, under `warn`,
    /// tag). An unknown pinned version or a missing key is never waived:
    /// without them the event cannot be routed or keyed at all.
    pub fn check_rollout(&self, event: &Value, pinned: Option<u32>) -> Result<Checked<'_>, Violation> {
        match self.check(event, pinned) {
            Ok((schema, key)) => Ok(Checked { schema, key, waived: Vec::new() }),
            Err(Violation::Schema(errors)) if self.rollout != Rollout::Enforce => {
                let schema = match pinned {
                    Some(v) => self.version(v).unwrap_or_else(|| self.latest()),
                    None => self.latest(),
                };
                let key = self.key.extract(event).ok_or_else(|| Violation::MissingKey(self.key.describe()))?;
                Ok(Checked { schema, key, waived: errors })
            }
            Err(other) => Err(other),
        }
    }
}

impl EventSchema {
    /// The JSON Schema document as written.
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// Every way `event` breaks this schema, or `Ok` when it conforms.
    pub fn validate(&self, event: &Value) -> Result<(), Vec<SchemaViolation>> {
        self.validate_withholding(event, &[])
    }

    /// As [`EventSchema::validate`], but a message about a `personal` field
    /// (or about a value holding one, or held by one) never quotes the
    /// value: the validator's own wording with the value replaced by
    /// [`crate::WITHHELD`]. Violation messages travel where the
    /// event's personal-data actions do not reach (dead-letter `errors`,
    /// the `contract-warning` header, answers, logs), so the clear value
    /// must not be in them in the first place.
    pub fn validate_withholding(
        &self,
        event: &Value,
        personal: &[crate::PersonalField],
    ) -> Result<(), Vec<SchemaViolation>> {
        // The common case, a valid event, never pays for error collection.
        if self.validator.is_valid(event) {
            return Ok(());
        }
        let pointers: Vec<String> = personal.iter().map(crate::personal::pointer).collect();
        let errors: Vec<SchemaViolation> = self
            .validator
            .iter_errors(event)
            .map(|e| {
                let path = e.instance_path().to_string();
                let message = if pointers.iter().any(|p| crate::personal::overlaps(&path, p)) {
                    e.masked_with(crate::personal::WITHHELD).to_string()
                } else {
                    e.to_string()
                };
                SchemaViolation { path, message }
            })
            .collect();
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}
