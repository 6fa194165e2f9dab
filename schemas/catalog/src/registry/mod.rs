//! The catalog in a Schema Registry: how a catalog version becomes a
//! registry subject and document (shared with the gateway, which looks up
//! the ids of what it frames), the registry's HTTP API ([`client`]), and
//! the plan and all-or-nothing apply of `eventgw-catalog registry`
//! ([`sync`]).

use serde_json::Value;

pub mod client;
pub mod sync;

pub use client::{RegistryClient, RegistryError};

/// The registry subject of one event: `<topic>-<domain>.<schema>`, i.e.
/// Confluent's TopicRecordNameStrategy with `<domain>.<schema>` as the
/// record name, so one topic carries several event types, each with its
/// own version history and compatibility.
pub fn subject(topic: &str, domain: &str, schema: &str) -> String {
    format!("{topic}-{domain}.{schema}")
}

/// The dialect schemas are registered under. Apicurio's JSON Schema
/// compatibility checker reads drafts 4, 6 and 7 only (it fails on 2020-12
/// with "could not determine version"), so the catalog's 2020-12 documents
/// are registered as draft-07, which means the same for every keyword they
/// may use (see [`later_keyword`]).
pub const REGISTERED_DIALECT: &str = "http://json-schema.org/draft-07/schema#";

/// Keywords that mean nothing in draft-07: a schema using one cannot be
/// registered as draft-07 without changing its meaning.
const LATER_KEYWORDS: [&str; 10] = [
    "prefixItems",
    "$defs",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$dynamicAnchor",
    "minContains",
    "maxContains",
];

/// The first keyword of `schema` that draft-07 does not have, if any.
pub fn later_keyword(schema: &Value) -> Option<&'static str> {
    match schema {
        Value::Object(map) => LATER_KEYWORDS
            .iter()
            .find(|k| map.contains_key(**k))
            .copied()
            .or_else(|| map.iter().filter(|(k, _)| *k != "examples").find_map(|(_, v)| later_keyword(v))),
        Value::Array(items) => items.iter().find_map(later_keyword),
        _ => None,
    }
}

/// The catalog's schema as it is registered: the same document with
/// `$schema` naming [`REGISTERED_DIALECT`].
pub fn registered_document(schema: &Value) -> Value {
    let mut document = schema.clone();
    if let Value::Object(map) = &mut document {
        map.insert("$schema".into(), Value::String(REGISTERED_DIALECT.into()));
    }
    document
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subject_is_topic_then_record_name() {
        assert_eq!(
            subject("billing.payments", "billing", "order_completed"),
            "billing.payments-billing.order_completed"
        );
    }

    #[test]
    fn later_keywords_are_found_below_the_top_but_not_in_examples() {
        assert_eq!(later_keyword(&json!({"properties": {"a": {"$defs": {}}}})), Some("$defs"));
        assert_eq!(later_keyword(&json!({"examples": [{"prefixItems": 1}]})), None);
        assert_eq!(registered_document(&json!({"$schema": "x"}))["$schema"], REGISTERED_DIALECT);
    }
}
