//! Validate, the part every event passes before its contract is looked up:
//! a JSON object within `limits.max_event_bytes`, a usable `messageId` (one
//! is generated when the client sent none), the JWT subject as `userId`,
//! and not from a user who asked not to be tracked.

use serde_json::{Map, Value};

use super::Admission;
use super::envelope::check_message_id;
use crate::code::Code;
use crate::compact;

/// A refused event: its `messageId` if known, the code and the reason.
pub(super) type Refused = (Option<String>, Code, String);

impl Admission<'_> {
    /// The event as an object and its `messageId`, or its refusal.
    pub(super) fn validate(&self, event: Value) -> Result<(Map<String, Value>, String), Refused> {
        let Value::Object(mut event) = event else {
            return Err((None, Code::EventNotObject, "each event in `batch` must be a JSON object".into()));
        };
        let size = compact::object_len(&event);
        if size > self.max_event_bytes {
            let id = compact::entry(&event, "messageId").and_then(Value::as_str).map(str::to_owned);
            let message = format!("the event is {size} bytes; at most {} are accepted", self.max_event_bytes);
            return Err((id, Code::EventTooLarge, message));
        }
        let message_id = match compact::entry(&event, "messageId") {
            None | Some(Value::Null) => {
                let id = uuid::Uuid::now_v7().to_string();
                event.insert("messageId".into(), Value::String(id.clone()));
                id
            }
            Some(Value::String(id)) => match check_message_id(id) {
                Ok(()) => id.clone(),
                Err(message) => return Err((None, Code::InvalidMessageId, message)),
            },
            Some(_) => return Err((None, Code::InvalidMessageId, "`messageId` must be a string".into())),
        };
        // Looked for first: a remove hashes the key even when it is absent,
        // as it is from almost every event.
        if compact::entry(&event, "writeKey").is_some() {
            event.remove("writeKey");
        }
        if let Some(subject) = self.subject {
            event.insert("userId".into(), Value::String(subject.to_owned()));
        }
        if self.edge.suppressed(&event) {
            let message = "the user asked not to be tracked; the event was dropped".into();
            return Err((Some(message_id), Code::Suppressed, message));
        }
        Ok((event, message_id))
    }
}
