//! The compiled catalog: every schema compiled once at start-up, then
//! looked up by event name on each request.

use std::collections::{BTreeMap, HashMap};

use jsonschema::Validator;
use serde_json::Value;

use crate::{CatalogError, DomainSource, KeyPath};

/// Every event the gateway knows, ready to check and route.
#[derive(Debug)]
pub struct Catalog {
    /// By the event name clients send; names are unique across domains,
    /// because a track call only carries the name.
    events: HashMap<String, EventType>,
    /// Domain name to topic, for provisioning topics and for the docs.
    topics: BTreeMap<String, (String, i32)>,
}

/// One event of the catalog with all its versions.
#[derive(Debug)]
pub struct EventType {
    /// The name clients send, e.g. `Order Completed`.
    pub name: String,
    /// The business domain, e.g. `billing`.
    pub domain: String,
    /// The schema directory, e.g. `order_completed`; with the domain it names
    /// the contract on the Kafka record (`billing/order_completed`).
    pub schema: String,
    /// The domain topic its records go to.
    pub topic: String,
    /// Where its partition key comes from.
    pub key: KeyPath,
    /// Versions, oldest first; never empty.
    versions: BTreeMap<u32, EventSchema>,
}

/// One compiled version of an event's schema.
#[derive(Debug)]
pub struct EventSchema {
    /// The version number.
    pub version: u32,
    /// Where it was loaded from.
    pub origin: String,
    /// Whole example events from the schema's `examples`; each is checked
    /// against the schema when the catalog compiles.
    pub examples: Vec<Value>,
    validator: Validator,
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
    /// Compiles every schema and checks the catalog hangs together. Errors
    /// name the file at fault.
    pub fn compile(sources: Vec<DomainSource>) -> Result<Self, CatalogError> {
        let mut events: HashMap<String, EventType> = HashMap::new();
        let mut defined_in: HashMap<String, String> = HashMap::new();
        let mut topics = BTreeMap::new();
        for source in sources {
            let spec = &source.spec;
            check_name(&source.origin, "domain", &spec.domain)?;
            check_topic(&source.origin, &spec.topic)?;
            if spec.partitions < 1 {
                return Err(CatalogError::new(&source.origin, "partitions must be at least 1"));
            }
            if spec.events.is_empty() {
                return Err(CatalogError::new(&source.origin, "declares no events"));
            }
            if topics.insert(spec.domain.clone(), (spec.topic.clone(), spec.partitions)).is_some() {
                return Err(CatalogError::new(&source.origin, format!("domain `{}` is declared twice", spec.domain)));
            }
            for doc in &source.schemas {
                if !spec.events.values().any(|e| e.schema == doc.schema) {
                    return Err(CatalogError::new(
                        &doc.origin,
                        format!("schema `{}` is not used by any event in {}", doc.schema, source.origin),
                    ));
                }
            }
            for (name, event) in &spec.events {
                if let Some(other) = defined_in.insert(name.clone(), source.origin.clone()) {
                    return Err(CatalogError::new(
                        &source.origin,
                        format!("event `{name}` is already defined in {other}; event names must be unique"),
                    ));
                }
                let compiled = compile_event(&source, name, event)?;
                events.insert(name.clone(), compiled);
            }
        }
        if events.is_empty() {
            return Err(CatalogError::new("catalog", "no domains found"));
        }
        Ok(Self { events, topics })
    }

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
}

impl EventType {
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
        schema.validate(event).map_err(Violation::Schema)?;
        let key = self.key.extract(event).ok_or_else(|| Violation::MissingKey(self.key.describe()))?;
        Ok((schema, key))
    }
}

impl EventSchema {
    /// Every way `event` breaks this schema, or `Ok` when it conforms.
    pub fn validate(&self, event: &Value) -> Result<(), Vec<SchemaViolation>> {
        let errors: Vec<SchemaViolation> = self
            .validator
            .iter_errors(event)
            .map(|e| SchemaViolation { path: e.instance_path().to_string(), message: e.to_string() })
            .collect();
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}

fn compile_event(source: &DomainSource, name: &str, spec: &crate::EventSpec) -> Result<EventType, CatalogError> {
    let origin = &source.origin;
    check_name(origin, "schema", &spec.schema)?;
    let key = KeyPath::parse(&spec.key)
        .ok_or_else(|| CatalogError::new(origin, format!("event `{name}`: key must list at least one field path")))?;
    let mut versions = BTreeMap::new();
    for doc in source.schemas.iter().filter(|d| d.schema == spec.schema) {
        if doc.version == 0 {
            return Err(CatalogError::new(&doc.origin, "versions start at 1"));
        }
        if !doc.json.is_object() {
            return Err(CatalogError::new(&doc.origin, "a schema must be a JSON object"));
        }
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&doc.json)
            .map_err(|e| CatalogError::new(&doc.origin, format!("not a valid JSON Schema: {e}")))?;
        let examples = match doc.json.get("examples") {
            None => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(_) => return Err(CatalogError::new(&doc.origin, "`examples` must be an array of events")),
        };
        let compiled = EventSchema { version: doc.version, origin: doc.origin.clone(), examples, validator };
        for (i, example) in compiled.examples.iter().enumerate() {
            if let Err(errors) = compiled.validate(example) {
                let first = errors.first().map(|e| format!("{}: {}", e.path, e.message)).unwrap_or_default();
                return Err(CatalogError::new(&doc.origin, format!("example {i} breaks its own schema ({first})")));
            }
            if key.extract(example).is_none() {
                return Err(CatalogError::new(&doc.origin, format!("example {i} has no key ({})", key.describe())));
            }
        }
        if versions.insert(doc.version, compiled).is_some() {
            return Err(CatalogError::new(&doc.origin, format!("version {} appears twice", doc.version)));
        }
    }
    let Some(&newest) = versions.keys().next_back() else {
        return Err(CatalogError::new(
            origin,
            format!("event `{name}` has no schema versions under {}/{}/", source.spec.domain, spec.schema),
        ));
    };
    if newest as usize != versions.len() {
        return Err(CatalogError::new(
            origin,
            format!("event `{name}`: versions must be numbered 1..{newest} with no gaps"),
        ));
    }
    Ok(EventType {
        name: name.to_owned(),
        domain: source.spec.domain.clone(),
        schema: spec.schema.clone(),
        topic: source.spec.topic.clone(),
        key,
        versions,
    })
}

fn check_name(origin: &str, what: &str, name: &str) -> Result<(), CatalogError> {
    let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok { Ok(()) } else { Err(CatalogError::new(origin, format!("{what} `{name}` must be lower_snake_case"))) }
}

/// Kafka's own rule for topic names: 1..249 of `[a-zA-Z0-9._-]`.
fn check_topic(origin: &str, topic: &str) -> Result<(), CatalogError> {
    let ok = !topic.is_empty()
        && topic.len() <= 249
        && topic != "."
        && topic != ".."
        && topic.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok { Ok(()) } else { Err(CatalogError::new(origin, format!("`{topic}` is not a valid Kafka topic name"))) }
}
