//! Typed events: the build script turns every event version of the schema
//! catalog into a struct implementing [`TypedEvent`], so a property of the
//! wrong type, a missing required property or an unknown enum value does not
//! compile. Value constraints (patterns, minimums) stay the gateway's job and
//! come back as `invalid` outcomes.

use serde::Serialize;

use crate::event::CallKind;

/// An event type generated from the catalog. The struct serialises as the
/// event's `properties`.
pub trait TypedEvent: Serialize {
    /// The catalog's event name, e.g. `Payment Captured`.
    const NAME: &'static str;
    /// The call that carries it (`track`, `page` or `screen`).
    const KIND: CallKind;
    /// `domain/schema`, e.g. `billing/payment_captured`.
    const SCHEMA: &'static str;
    /// The schema version the struct was generated from; sent as
    /// `context.schemaVersion` so the gateway checks exactly that version.
    const VERSION: u32;
    /// The Kafka topic the catalog routes it to.
    const TOPIC: &'static str;

    /// The `name` of a page or screen call, when the schema has one.
    fn call_name(&self) -> Option<&str> {
        None
    }
}

/// Checks one catalog example against its generated type: the example's
/// properties deserialise into the struct and serialise back unchanged.
#[cfg(test)]
pub(crate) fn check_example<E: TypedEvent + serde::de::DeserializeOwned>(example: &str) {
    use serde_json::Value;
    let example: Value = serde_json::from_str(example).expect("the example is JSON");
    let properties = example.get("properties").cloned().unwrap_or_else(|| serde_json::json!({}));
    let typed: E = serde_json::from_value(properties.clone())
        .unwrap_or_else(|e| panic!("{} v{}: example does not fit the type: {e}", E::SCHEMA, E::VERSION));
    let back = serde_json::to_value(&typed).expect("serialises");
    assert!(same(&back, &properties), "{} v{}: {back} != {properties}", E::SCHEMA, E::VERSION);
    assert_eq!(example.get("type").and_then(Value::as_str), Some(E::KIND.as_str()));
}

/// JSON equality that treats `2` and `2.0` as the same number.
#[cfg(test)]
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
