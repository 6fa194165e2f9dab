//! The Segment common fields as the SDKs really send them, brought to one
//! shape before an event is checked against its schema: an SDK's correct
//! event must never be dead-lettered for its envelope.
//!
//! What the SDKs put there (read from their sources; the envelope tests in
//! `gateway/tests/envelope_sdks.rs` cite each file):
//! - `null` for a field they have no value for (Segment's and RudderStack's
//!   Python SDKs: `"anonymousId": null`, `"name": null`, ...);
//! - `""` for an unknown user (RudderStack Kotlin v2 and JS v3: `"userId": ""`);
//! - `originalTimestamp` instead of `timestamp`, and a per-event `sentAt`
//!   (every RudderStack SDK);
//! - the screen name in `event` rather than `name` (RudderStack Android v1
//!   and Kotlin v2 screen calls);
//! - `channel`, `integrations`, `_metadata`, `context.library`: kept as sent.

use serde_json::{Map, Value};

use crate::code::Code;

/// Longest `messageId` accepted; it is a dedup key downstream, not a payload.
pub const MAX_MESSAGE_ID_LEN: usize = 128;

/// Longest Kafka record key (a user id, an order id, ...). Keys are hashed
/// for every record and kept in every consumer's state; a key is an id.
pub const MAX_KEY_BYTES: usize = 256;

/// Identifier fields: `null` and `""` mean absent, an integer becomes its
/// decimal text (backends often hold numeric user ids).
const ID_FIELDS: [&str; 4] = ["userId", "anonymousId", "groupId", "previousId"];

/// Why an envelope cannot be used: a stable code and the reason in words.
pub type EnvelopeError = (Code, String);

/// Normalises the common fields of `event` in place; only an envelope no SDK
/// sends (a `context` that is not an object) is an error. One pass over the
/// event's entries, which keeps their order: no key is looked up.
pub fn normalize(event: &mut Map<String, Value>) -> Result<(), EnvelopeError> {
    let mut bad_context = false;
    let mut named = false;
    let mut page_or_screen = false;
    event.retain(|key, value| {
        // A top-level `null` is "no value" in every SDK that sends one;
        // dropping it lets the schema see the field as absent, as the
        // sender meant.
        if value.is_null() {
            return false;
        }
        match key.as_str() {
            field if ID_FIELDS.contains(&field) => match value {
                Value::String(id) => return !id.is_empty(),
                Value::Number(_) if value.is_i64() || value.is_u64() => *value = Value::String(value.to_string()),
                _ => {}
            },
            "context" => bad_context = !value.is_object(),
            "name" => named = true,
            "type" => page_or_screen = matches!(value.as_str(), Some("screen" | "page")),
            _ => {}
        }
        true
    });
    if bad_context {
        let message = "`context` must be an object (or absent); the event is kept on the dead-letter topic";
        return Err((Code::InvalidContext, message.into()));
    }
    if page_or_screen && !named {
        name_screen_or_page(event);
    }
    Ok(())
}

/// A `page` or `screen` call without a `name`: RudderStack's mobile SDKs
/// put it in `event` (and `properties.name`).
fn name_screen_or_page(event: &mut Map<String, Value>) {
    let name = event
        .get("event")
        .and_then(Value::as_str)
        .or_else(|| event.get("properties").and_then(|p| p.get("name")).and_then(Value::as_str))
        .filter(|name| !name.is_empty())
        .map(str::to_owned);
    if let Some(name) = name {
        event.insert("name".into(), Value::String(name));
    }
}

/// Checks a client's `messageId`: a non-empty printable string of at most
/// [`MAX_MESSAGE_ID_LEN`] bytes, without control characters and without
/// leading or trailing white space (a dedup key that looks blank, or differs
/// from another only in invisible characters, deduplicates nothing).
pub fn check_message_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_MESSAGE_ID_LEN {
        return Err(format!("`messageId` must be a non-empty string of at most {MAX_MESSAGE_ID_LEN} bytes"));
    }
    // Almost every id is printable ASCII (a UUID): then it has no control
    // character, and its only possible white space is a space, so its ends
    // are all there is to check. Anything else is read as characters.
    let bytes = id.as_bytes();
    let printable = bytes.iter().all(|b| (b' '..=b'~').contains(b));
    if printable {
        if bytes.first() == Some(&b' ') || bytes.last() == Some(&b' ') {
            return Err(EDGE_SPACE.into());
        }
        return Ok(());
    }
    if id.chars().any(char::is_control) {
        return Err("`messageId` must not contain control characters (NUL, newlines, tabs, ...)".into());
    }
    if id.trim() != id {
        return Err(EDGE_SPACE.into());
    }
    Ok(())
}

/// The refusal of a `messageId` that begins or ends with white space.
const EDGE_SPACE: &str = "`messageId` must not begin or end with white space";

/// The rules every record key obeys, whatever the route: present, not
/// empty, at most [`MAX_KEY_BYTES`].
pub fn check_key(key: &str) -> Result<(), EnvelopeError> {
    if key.is_empty() {
        return Err((Code::MissingKey, "the event's key field is empty; a record needs a key".into()));
    }
    if key.len() > MAX_KEY_BYTES {
        let message = format!("the event's key is {} bytes; keys are at most {MAX_KEY_BYTES} bytes", key.len());
        return Err((Code::InvalidKey, message));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// The rules of [`check_message_id`] as characters, without its
    /// printable-ASCII shortcut.
    fn by_characters(id: &str) -> Result<(), String> {
        if id.is_empty() || id.len() > MAX_MESSAGE_ID_LEN {
            return Err("length".into());
        }
        if id.chars().any(char::is_control) {
            return Err("control".into());
        }
        if id.trim() != id {
            return Err("space".into());
        }
        Ok(())
    }

    proptest! {
        /// The shortcut decides every id as the character rules do: ASCII
        /// and not, spaces, tabs, DEL, C1 controls, Unicode white space.
        #[test]
        fn the_ascii_shortcut_decides_ids_as_the_character_rules_do(
            id in prop_oneof!["[ a~]{0,6}", "[ -~]{0,40}", "[ a\\t\\n\u{7f}\u{85}\u{a0}\u{2003}\u{3000}é😀]{0,8}"]
        ) {
            prop_assert_eq!(check_message_id(&id).is_ok(), by_characters(&id).is_ok(), "{:?}", id);
        }
    }

    #[test]
    fn ids_with_space_or_controls_are_refused_and_uuids_pass() {
        assert!(check_message_id("0193a0b4-6c1e-7cc2-9d0e-000000000001").is_ok());
        assert!(check_message_id("order 17 / retry 2").is_ok(), "inner spaces are fine");
        assert_eq!(check_message_id(" a").expect_err("refused"), EDGE_SPACE);
        assert_eq!(check_message_id("a ").expect_err("refused"), EDGE_SPACE);
        assert_eq!(check_message_id("a\u{3000}").expect_err("refused"), EDGE_SPACE, "Unicode white space at an end");
        assert!(check_message_id("a\tb").expect_err("refused").contains("control"));
        assert!(check_message_id("a\u{7f}b").expect_err("refused").contains("control"), "DEL");
        assert!(check_message_id("a\u{85}b").expect_err("refused").contains("control"), "a C1 control");
        assert!(check_message_id("").is_err());
    }

    fn normalized(event: Value) -> Result<Value, EnvelopeError> {
        let Value::Object(mut map) = event else { panic!("object") };
        normalize(&mut map).map(|()| Value::Object(map))
    }

    #[test]
    fn nulls_and_empty_ids_mean_absent() {
        let event = normalized(json!({"type": "track", "event": "X", "userId": "u", "anonymousId": null,
            "context": null, "integrations": {}, "channel": "server", "properties": {"a": null}}))
        .expect("valid envelope");
        assert_eq!(
            event,
            json!({"type": "track", "event": "X", "userId": "u", "integrations": {}, "channel": "server",
                "properties": {"a": null}}),
            "only top-level nulls go; properties are the event's own data"
        );
        let event = normalized(json!({"type": "track", "userId": "", "anonymousId": "a"})).expect("valid");
        assert_eq!(event, json!({"type": "track", "anonymousId": "a"}));
    }

    #[test]
    fn numeric_ids_become_text_and_others_stay() {
        let event = normalized(json!({"userId": 42, "anonymousId": 1.5, "groupId": -7})).expect("valid");
        assert_eq!(event, json!({"userId": "42", "anonymousId": 1.5, "groupId": "-7"}));
    }

    #[test]
    fn a_context_that_is_not_an_object_is_refused() {
        assert_eq!(normalized(json!({"context": "x"})).expect_err("string").0, Code::InvalidContext);
        assert_eq!(normalized(json!({"context": [1]})).expect_err("array").0, Code::InvalidContext);
        assert!(normalized(json!({"context": null})).expect("null is absent").get("context").is_none());
    }

    #[test]
    fn screens_named_in_event_get_their_name() {
        let event = normalized(json!({"type": "screen", "event": "Home", "properties": {}})).expect("valid");
        assert_eq!(event["name"], "Home");
        let event = normalized(json!({"type": "screen", "properties": {"name": "Cart"}})).expect("valid");
        assert_eq!(event["name"], "Cart");
        let event = normalized(json!({"type": "screen", "name": "A", "event": "B"})).expect("valid");
        assert_eq!(event["name"], "A", "the client's own name wins");
        let event = normalized(json!({"type": "track", "event": "B"})).expect("valid");
        assert!(event.get("name").is_none(), "only page and screen calls");
    }

    #[test]
    fn message_ids_must_be_printable_and_bounded() {
        for good in ["a", "0194B2C4-6F1E-7A3B-9C2D-1E2F3A4B5C6D", "1733140800000-3e0c", &"x".repeat(MAX_MESSAGE_ID_LEN)]
        {
            assert!(check_message_id(good).is_ok(), "{good:?}");
        }
        for bad in ["", " ", "a\nb", "a\0", "\t", " a", "a ", &"x".repeat(MAX_MESSAGE_ID_LEN + 1)] {
            assert!(check_message_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn key_rules_are_exact() {
        assert!(check_key(&"k".repeat(MAX_KEY_BYTES)).is_ok());
        assert_eq!(check_key(&"k".repeat(MAX_KEY_BYTES + 1)).expect_err("long").0, Code::InvalidKey);
        assert_eq!(check_key("").expect_err("empty").0, Code::MissingKey);
    }
}
