//! Decodes bodies in the Segment HTTP API shapes: a batch
//! `{"batch": [...], "sentAt": "...", "context": {...}, "writeKey": "..."}`,
//! or one event for `/v1/track`, `/v1/page`, ... with `writeKey` beside its fields.

use serde_json::{Map, Value};

use super::WireError;
use crate::config::LimitsConfig;

/// A decoded batch, events still as the client wrote them.
#[derive(Debug)]
pub struct BatchRequest {
    /// The events, in order.
    pub events: Vec<Value>,
    /// When the client sent the batch by its own clock, for skew correction.
    /// A `sentAt` that is not a string is kept as its JSON text: like an
    /// unparsable string, it stops the correction and is flagged on each
    /// record (never a refusal: most SDKs drop a batch answered 400).
    pub sent_at: Option<String>,
    /// The write key from the body, for clients that cannot set headers.
    pub write_key: Option<String>,
    /// The tracker protocol it came in ([`SEGMENT`], `posthog`, ...), carried
    /// on every record as the `protocol` header.
    pub protocol: &'static str,
    /// Events the decoder could not read (their slot in `events` holds them
    /// as sent): each is dead-lettered on its own with its reason, never
    /// validated, so one unreadable event does not refuse the request and
    /// drop the others with it.
    pub undecodable: Vec<Undecodable>,
}

/// One event of a batch its decoder could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecodable {
    /// Its index in the batch's `events`, where it is kept as sent.
    pub index: usize,
    /// Why, naming the event and field (`data[1].cx` is not base64 ...).
    pub reason: String,
}

/// The protocol of Segment's HTTP Tracking API (and RudderStack's, the pixel's).
pub const SEGMENT: &str = "segment";

/// Shape-checks a batch body. Batch-level `context` is merged into each
/// event's own `context`, whose keys win.
pub fn decode_batch(value: Value, limits: &LimitsConfig) -> Result<BatchRequest, WireError> {
    let Value::Object(mut top) = value else {
        return Err(WireError::InvalidBody("the body must be a JSON object with a `batch` array".into()));
    };
    let write_key = take_write_key(&mut top)?;
    let sent_at = match top.remove("sentAt") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => Some(other.to_string()),
    };
    let mut events = match top.remove("batch") {
        Some(Value::Array(events)) => events,
        Some(_) => return Err(WireError::InvalidBody("`batch` must be an array of events".into())),
        None => return Err(WireError::InvalidBody("the body has no `batch` array".into())),
    };
    if events.is_empty() {
        return Err(WireError::InvalidBody("`batch` is empty; send at least one event".into()));
    }
    if events.len() > limits.max_batch_events {
        return Err(WireError::BatchTooLarge { count: events.len(), limit: limits.max_batch_events });
    }
    if let Some(Value::Object(shared)) = top.remove("context") {
        for event in &mut events {
            merge_context(event, &shared);
        }
    }
    Ok(BatchRequest { events, sent_at, write_key, protocol: SEGMENT, undecodable: Vec::new() })
}

/// Shape-checks a single-event body (`/v1/track` and friends); the endpoint
/// decides the event's `type`.
pub fn decode_single(value: Value, kind: &str) -> Result<BatchRequest, WireError> {
    let Value::Object(mut event) = value else {
        return Err(WireError::InvalidBody(format!("the body of a {kind} call must be a JSON object (one event)")));
    };
    let write_key = take_write_key(&mut event)?;
    event.insert("type".into(), Value::String(kind.to_owned()));
    Ok(BatchRequest {
        events: vec![Value::Object(event)],
        sent_at: None,
        write_key,
        protocol: SEGMENT,
        undecodable: Vec::new(),
    })
}

fn take_write_key(object: &mut Map<String, Value>) -> Result<Option<String>, WireError> {
    match object.remove("writeKey") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(key)) => Ok(Some(key)),
        Some(_) => Err(WireError::InvalidBody("`writeKey` must be a string".into())),
    }
}

fn merge_context(event: &mut Value, shared: &Map<String, Value>) {
    let Value::Object(event) = event else { return };
    let context = event.entry("context").or_insert_with(|| Value::Object(Map::new()));
    // `"context": null` is an absent context (Python SDKs send it).
    if context.is_null() {
        *context = Value::Object(Map::new());
    }
    if let Value::Object(context) = context {
        for (key, value) in shared {
            context.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits(max_batch_events: usize) -> LimitsConfig {
        LimitsConfig { max_batch_events, ..LimitsConfig::default() }
    }

    fn decode(body: Value, max: usize) -> Result<BatchRequest, WireError> {
        decode_batch(body, &limits(max))
    }

    #[test]
    fn takes_write_key_sent_at_and_shared_context() {
        let batch = decode(
            json!({"writeKey": "k", "sentAt": "2026-01-01T00:00:00Z", "context": {"ip": "1.2.3.4", "locale": "en"},
                   "batch": [{"type": "track", "context": {"locale": "de"}}]}),
            10,
        )
        .expect("valid");
        assert_eq!(batch.write_key.as_deref(), Some("k"));
        assert_eq!(batch.sent_at.as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(batch.events[0]["context"], json!({"locale": "de", "ip": "1.2.3.4"}));
        let batch = decode(json!({"context": {"locale": "en"}, "batch": [{"context": null}]}), 10).expect("valid");
        assert_eq!(batch.events[0]["context"], json!({"locale": "en"}), "a null context takes the shared one");
    }

    #[test]
    fn single_events_take_their_type_from_the_endpoint() {
        let one = decode_single(json!({"type": "page", "event": "X", "writeKey": "k"}), "track").expect("object");
        assert_eq!(one.write_key.as_deref(), Some("k"));
        assert_eq!(one.events[0]["type"], "track");
        assert!(one.events[0].get("writeKey").is_none());
        assert_eq!(decode_single(json!([]), "track").expect_err("array").code(), "invalid_body");
    }

    #[test]
    fn batch_length_limit_is_exact() {
        let events = |n: usize| json!({"batch": vec![json!({"type": "track"}); n]});
        assert_eq!(decode(events(3), 3).expect("at the limit").events.len(), 3);
        let err = decode(events(4), 3).expect_err("one past the limit");
        assert_eq!(err.code(), "batch_too_large");
    }

    #[test]
    fn shape_errors_have_their_codes() {
        assert_eq!(decode(json!([1]), 5).expect_err("array").code(), "invalid_body");
        assert_eq!(decode(json!({"batch": {}}), 5).expect_err("object").code(), "invalid_body");
        assert_eq!(decode(json!({"batch": []}), 5).expect_err("empty").code(), "invalid_body");
        assert_eq!(decode(json!({"batch": [{}], "writeKey": 5}), 5).expect_err("key").code(), "invalid_body");
    }

    #[test]
    fn a_sent_at_that_is_not_a_string_is_kept_for_the_events_to_flag() {
        let batch = decode(json!({"sentAt": 5, "batch": [{}]}), 5).expect("not refused");
        assert_eq!(batch.sent_at.as_deref(), Some("5"));
        let batch = decode(json!({"sentAt": null, "batch": [{}]}), 5).expect("null is absent");
        assert_eq!(batch.sent_at, None);
    }
}
