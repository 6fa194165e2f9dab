//! Turns the catalog as written ([`DomainSource`]s) into a [`Catalog`]:
//! compiles every schema, checks examples, version numbering, topic
//! settings and each event's compatibility promise, and names the file at
//! fault when something is wrong.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::catalog::{Domain, EventSchema, EventType, Names};
use crate::{Catalog, CatalogError, Compatibility, DomainSource, DomainSpec, EventSpec, KeyPath, compat};

impl Catalog {
    /// Compiles every schema and checks the catalog hangs together: names,
    /// topics and their settings, examples, version numbering, and that each
    /// version keeps its event's compatibility mode with the previous one.
    /// Errors name the file at fault.
    pub fn compile(sources: Vec<DomainSource>) -> Result<Self, CatalogError> {
        let mut events: Names<EventType> = Names::default();
        let mut defined_in: HashMap<String, String> = HashMap::new();
        let mut topics = BTreeMap::new();
        let mut domains: BTreeMap<String, Domain> = BTreeMap::new();
        for source in &sources {
            let spec = &source.spec;
            check_domain(&source.origin, spec)?;
            let same_topic = domains.values().find(|d| d.topic == spec.topic);
            if let Some(other) =
                same_topic.filter(|d| d.partitions != spec.partitions || d.settings != spec.topic_settings)
            {
                return Err(CatalogError::new(
                    &source.origin,
                    format!("topic `{}` is also declared in {} with other settings", spec.topic, other.origin),
                ));
            }
            if topics.insert(spec.domain.clone(), (spec.topic.clone(), spec.partitions)).is_some() {
                return Err(CatalogError::new(&source.origin, format!("domain `{}` is declared twice", spec.domain)));
            }
            domains.insert(spec.domain.clone(), domain_of(source));
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
                let compiled = compile_event(source, name, event)?;
                events.insert(name.clone(), compiled);
            }
        }
        if events.is_empty() {
            return Err(CatalogError::new("catalog", "no domains found"));
        }
        Ok(Self { events, topics, domains, sources })
    }
}

fn domain_of(source: &DomainSource) -> Domain {
    let spec = &source.spec;
    Domain {
        name: spec.domain.clone(),
        description: spec.description.clone(),
        owner: spec.owner.clone(),
        topic: spec.topic.clone(),
        partitions: spec.partitions,
        settings: spec.topic_settings.clone(),
        origin: source.origin.clone(),
    }
}

fn check_domain(origin: &str, spec: &DomainSpec) -> Result<(), CatalogError> {
    check_name(origin, "domain", &spec.domain)?;
    check_topic(origin, &spec.topic)?;
    if spec.partitions < 1 {
        return Err(CatalogError::new(origin, "partitions must be at least 1"));
    }
    if spec.events.is_empty() {
        return Err(CatalogError::new(origin, "declares no events"));
    }
    let t = &spec.topic_settings;
    let problem = if t.replication_factor.is_some_and(|r| r < 1) {
        Some("topic_settings.replication_factor must be at least 1")
    } else if t.min_insync_replicas.is_some_and(|m| m < 1) {
        Some("topic_settings.min_insync_replicas must be at least 1")
    } else if matches!((t.min_insync_replicas, t.replication_factor), (Some(m), Some(r)) if m > r) {
        Some("topic_settings.min_insync_replicas cannot exceed replication_factor: no write would ever succeed")
    } else if t.retention_ms.is_some_and(|r| r < -1) {
        Some("topic_settings.retention_ms must be -1 (forever) or more")
    } else if t
        .compression
        .as_deref()
        .is_some_and(|c| !["producer", "zstd", "lz4", "snappy", "gzip", "uncompressed"].contains(&c))
    {
        Some("topic_settings.compression must be producer, zstd, lz4, snappy, gzip or uncompressed")
    } else if t.cleanup_policy.as_deref().is_some_and(|c| !["delete", "compact", "compact,delete"].contains(&c)) {
        Some("topic_settings.cleanup_policy must be delete, compact or \"compact,delete\"")
    } else {
        None
    };
    problem.map_or(Ok(()), |p| Err(CatalogError::new(origin, p)))
}

fn compile_event(source: &DomainSource, name: &str, spec: &EventSpec) -> Result<EventType, CatalogError> {
    let origin = &source.origin;
    check_name(origin, "schema", &spec.schema)?;
    let key = KeyPath::parse(&spec.key)
        .ok_or_else(|| CatalogError::new(origin, format!("event `{name}`: key must list at least one field path")))?;
    let mut versions = BTreeMap::new();
    for doc in source.schemas.iter().filter(|d| d.schema == spec.schema) {
        if doc.version == 0 {
            return Err(CatalogError::new(&doc.origin, "versions start at 1"));
        }
        let compiled = compile_version(&doc.origin, doc.version, &doc.json, &key)?;
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
    check_steps(name, spec.compatibility, &versions)?;
    let personal = crate::personal::compile(origin, name, &spec.personal)?;
    // The key travels in clear as the Kafka record key: a personal field
    // cannot be one (key by a pseudonymous id instead).
    if let Some(field) = personal.iter().find(|f| key.touches(&f.segments)) {
        let problem = format!("event `{name}`: `{}` keys the event's records and cannot be personal", field.path);
        return Err(CatalogError::new(origin, problem));
    }
    if let Some(purpose) = &spec.purpose {
        crate::personal::check_purpose(origin, name, purpose)?;
    }
    Ok(EventType {
        name: name.into(),
        domain: source.spec.domain.clone(),
        schema: spec.schema.clone(),
        contract: format!("{}/{}", source.spec.domain, spec.schema).into(),
        topic: source.spec.topic.as_str().into(),
        key,
        versions,
        description: spec.description.clone(),
        compatibility: spec.compatibility,
        rollout: spec.rollout,
        purpose: spec.purpose.clone(),
        personal,
    })
}

fn compile_version(origin: &str, version: u32, json: &Value, key: &KeyPath) -> Result<EventSchema, CatalogError> {
    if !json.is_object() {
        return Err(CatalogError::new(origin, "a schema must be a JSON object"));
    }
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(json)
        .map_err(|e| CatalogError::new(origin, format!("not a valid JSON Schema: {e}")))?;
    let examples = match json.get("examples") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err(CatalogError::new(origin, "`examples` must be an array of events")),
    };
    let compiled = EventSchema {
        version,
        version_text: version.to_string().into(),
        origin: origin.to_owned(),
        examples,
        document: json.clone(),
        validator,
    };
    for (i, example) in compiled.examples.iter().enumerate() {
        if let Err(errors) = compiled.validate(example) {
            let first = errors.first().map(|e| format!("{}: {}", e.path, e.message)).unwrap_or_default();
            return Err(CatalogError::new(origin, format!("example {i} breaks its own schema ({first})")));
        }
        if key.extract(example).is_none() {
            return Err(CatalogError::new(origin, format!("example {i} has no key ({})", key.describe())));
        }
    }
    Ok(compiled)
}

/// Refuses a version that breaks the event's compatibility mode with the
/// one before it, listing every violation so one fix-up round is enough.
fn check_steps(name: &str, mode: Compatibility, versions: &BTreeMap<u32, EventSchema>) -> Result<(), CatalogError> {
    let ordered: Vec<&EventSchema> = versions.values().collect();
    for pair in ordered.windows(2) {
        let (old, new) = (pair[0], pair[1]);
        let problems = compat::check(&old.document, &new.document, mode);
        if !problems.is_empty() {
            let list: Vec<String> = problems.iter().map(|p| format!("  - {}", p.message)).collect();
            return Err(CatalogError::new(
                &new.origin,
                format!(
                    "event `{name}` v{} breaks {} compatibility with v{} ({}):\n{}",
                    new.version,
                    mode.as_str(),
                    old.version,
                    old.origin,
                    list.join("\n")
                ),
            ));
        }
    }
    Ok(())
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
