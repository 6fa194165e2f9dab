//! Kafka records of an event: the enriched event on its topic, or the
//! dead-letter envelope with the reasons; both with the same headers.

use eventgw_schemas::SchemaViolation;
use serde_json::{Value, json};

use super::clock::CORRECTION_HEADER;
use super::{Admission, MAX_WARNING_BYTES, Planned, Route, Verdict};
use crate::code::Code;
use crate::compact;
use crate::sink::{OutRecord, Text};

impl Admission<'_> {
    fn headers(&self, message_id: &str, route: Option<&Route>) -> Vec<(&'static str, Text)> {
        // Room for the route's three, a warning or correction flag and the
        // enrichment's marks, so the vector is allocated once.
        let mut headers = Vec::with_capacity(12);
        headers.extend([
            ("event-id", Text::copied(message_id)),
            ("source", Text::from(&self.source.id)),
            ("received-at", Text::from(&self.received_at_text)),
            ("auth", Text::Static(self.auth_method.as_str())),
            ("protocol", Text::Static(self.protocol)),
        ]);
        if let Some(route) = route {
            headers.push(("event-name", route.name.clone()));
            headers.push(("schema", route.schema.clone()));
            headers.push(("schema-version", route.version.clone()));
            if let Some(warning) = &route.warning {
                headers.push(("contract-warning", Text::copied(warning)));
            }
        }
        headers
    }

    /// The record of an accepted event, `payload` its enriched JSON;
    /// `time_flag` says why its timestamp was not corrected, if it was not.
    pub(super) fn record(
        &self,
        route: &Route,
        message_id: &str,
        payload: Vec<u8>,
        time_flag: Option<&'static str>,
    ) -> OutRecord {
        let mut headers = self.headers(message_id, Some(route));
        if let Some(flag) = time_flag {
            headers.push((CORRECTION_HEADER, Text::Static(flag)));
        }
        OutRecord {
            topic: route.topic.clone(),
            key: route.key.clone(),
            payload: self.schema_ids.payload(&route.schema, &route.version, payload).into(),
            headers,
        }
    }

    /// An event its decoder could not read: dead-lettered as sent, under an
    /// id of its own (what it holds cannot be trusted to name one), unless
    /// it is over `limits.max_event_bytes` as every event is checked.
    pub(super) fn undecodable(&self, original: &Value, reason: String) -> Planned {
        let message_id = uuid::Uuid::now_v7().to_string();
        let size = compact::value_len(original);
        let verdict = if size > self.max_event_bytes {
            let message = format!("the event is {size} bytes; at most {} are accepted", self.max_event_bytes);
            Verdict::Reject { code: Code::EventTooLarge, message: format!("{message} (and unreadable: {reason})") }
        } else {
            self.dead_letter(original, &message_id, Code::UndecodableEvent, reason, Vec::new())
        };
        Planned { message_id: Some(message_id), verdict, violation: None, shown: self.take_shown() }
    }

    pub(super) fn dead_letter(
        &self,
        original: &Value,
        message_id: &str,
        code: Code,
        message: String,
        errors: Vec<SchemaViolation>,
    ) -> Verdict {
        let scrubbed = self.edge.scrub(original);
        if let Value::Object(event) = scrubbed.as_ref() {
            self.note_shown(event);
        }
        let envelope = json!({
            "reason": code.as_str(),
            "message": message,
            "errors": errors,
            "source": self.source.id,
            "receivedAt": self.received_at_text,
            "messageId": message_id,
            "event": scrubbed,
        });
        let mut headers = self.headers(message_id, None);
        headers.push(("dead-letter-reason", Text::Static(code.as_str())));
        let record = OutRecord {
            topic: Text::from(&self.kafka.dead_letter_topic),
            key: message_id.to_owned(),
            payload: envelope.to_string().into_bytes().into(),
            headers,
        };
        Verdict::DeadLetter { record, code, message, errors }
    }
}

/// The waived violations as one header value, `path: message; ...`, cut
/// at [`MAX_WARNING_BYTES`] on a character boundary.
pub(super) fn warning_text(waived: &[SchemaViolation]) -> String {
    let mut text = waived.iter().map(|v| format!("{}: {}", v.path, v.message)).collect::<Vec<_>>().join("; ");
    if text.len() > MAX_WARNING_BYTES {
        let mut cut = MAX_WARNING_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}
