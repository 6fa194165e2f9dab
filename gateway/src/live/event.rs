//! One event as the live view shows it, and the [`Capture`] that builds
//! them: a copy of each record as it goes to the sink (so what is shown is
//! what is stored, privacy actions applied), completed once the sink and
//! the answer are done with the request.
//!
//! Per event the cost is paid once, whatever the number of viewers: the
//! record is scanned once for the fields the view shows (no JSON tree is
//! built), its bytes are kept as they are (`RawValue`), and the SSE frame
//! is rendered by the first viewer that sends it and shared by the rest.

use std::borrow::Cow;
use std::sync::OnceLock;

use actix_web::web::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::LiveHub;
use crate::outcome::{EventOutcome, EventStatus};
use crate::sink::{OutRecord, Stored};

/// One event of the live view, serialised as the stream's `data:`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveEvent {
    /// When the gateway answered it (RFC 3339, milliseconds).
    pub time: String,
    /// The source that sent it.
    pub source: String,
    /// `track`, `page`, `identify`, ... (as stored; absent when nothing was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub r#type: Option<String>,
    /// The event name of a `track` (as stored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// Its `messageId`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// `userId` as stored (hashed when the policy hashes it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// `anonymousId` as stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anonymous_id: Option<String>,
    /// The answer's status word: accepted, invalid, rejected, ...
    pub status: &'static str,
    /// The topic it went to (its domain topic, or the dead-letter topic).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// The record's key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The partition, once Kafka acknowledged the record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    /// The offset, once Kafka acknowledged the record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// The answer's code, unless accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    /// The answer's reason in words, unless accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The schema violations, in the answer's words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<eventgw_schemas::SchemaViolation>,
    /// The record's value as stored (a dead-lettered event's is the
    /// dead-letter envelope), its bytes unchanged; absent when nothing was stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Box<RawValue>>,
    /// The `event: event` SSE frame of this event, rendered once by the
    /// first viewer that sends it and shared by every other viewer.
    #[serde(skip)]
    pub(super) frame: OnceLock<Bytes>,
}

impl LiveEvent {
    /// This event's SSE frame (`event: event`, the event as JSON), rendered
    /// on the first call only.
    pub fn frame(&self) -> Bytes {
        self.frame
            .get_or_init(|| {
                let mut out = b"event: event\ndata: ".to_vec();
                if serde_json::to_writer(&mut out, self).is_err() {
                    out.truncate(b"event: event\ndata: ".len());
                    out.extend_from_slice(b"{}");
                }
                out.extend_from_slice(b"\n\n");
                Bytes::from(out)
            })
            .clone()
    }
}

/// What the live view copies of one event before its record goes to the
/// sink.
struct Copied {
    /// Key and value of the record, `None` when none is produced.
    record: Option<(String, Vec<u8>)>,
}

/// The copies of one request's records, taken only when someone watches.
pub struct Capture {
    /// The source, for the channel and the rows.
    source: String,
    /// One per event, in request order.
    copies: Vec<Copied>,
}

impl LiveHub {
    /// Copies the records of `source`'s events (each `None` when it is not
    /// produced) when anyone watches that source; `None`, having built
    /// nothing, when nobody does.
    pub fn capture<'r>(&self, source: &str, records: impl Iterator<Item = Option<&'r OutRecord>>) -> Option<Capture> {
        if !self.watches(source) {
            return None;
        }
        let copies = records.map(|r| Copied { record: r.map(|r| (r.key.clone(), r.payload.clone())) }).collect();
        Some(Capture { source: source.to_owned(), copies })
    }
}

impl Capture {
    /// The rows of the request once answered: each event's `outcome` and
    /// where its record was stored (`stored`, in request order), at `time`.
    pub fn finish(self, time: &str, outcomes: &[EventOutcome], stored: &[Option<Stored>]) -> Vec<LiveEvent> {
        let Self { source, copies } = self;
        copies
            .into_iter()
            .zip(outcomes)
            .enumerate()
            .map(|(i, (copied, outcome))| row(&source, time, copied, outcome, stored.get(i).copied().flatten()))
            .collect()
    }
}

/// The fields the view shows and filters on, read from a stored record in
/// one scan without building its tree; a field that is not a string is
/// absent (as `Value::as_str` would say).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Shown<'a> {
    #[serde(rename = "type", default, borrow, deserialize_with = "text")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    event: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    user_id: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    anonymous_id: Option<Cow<'a, str>>,
}

/// A dead-letter envelope: the event (scrubbed) is under `event`.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    event: Option<Shown<'a>>,
}

/// A string as it is (borrowed when it has no escapes), anything else absent.
fn text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Field<'a> {
        Text(#[serde(borrow)] Cow<'a, str>),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Option::<Field<'de>>::deserialize(d)? {
        Some(Field::Text(t)) => Some(t),
        _ => None,
    })
}

/// The shown fields of a record's bytes (`invalid`: a dead-letter envelope).
fn shown(bytes: &[u8], invalid: bool) -> Shown<'_> {
    let inner = invalid.then(|| serde_json::from_slice::<Envelope>(bytes).ok().and_then(|e| e.event)).flatten();
    inner.unwrap_or_else(|| serde_json::from_slice(bytes).unwrap_or_default())
}

/// The record's bytes as a JSON value kept as it is; the gateway writes
/// records compact, but one with a line break (which would end an SSE
/// `data:` line) is re-written compact.
fn raw(bytes: Vec<u8>) -> Option<Box<RawValue>> {
    let text = String::from_utf8(bytes).ok()?;
    if !text.contains('\n') {
        return RawValue::from_string(text).ok();
    }
    let value: Value = serde_json::from_str(&text).ok()?;
    RawValue::from_string(value.to_string()).ok()
}

fn row(source: &str, time: &str, copied: Copied, outcome: &EventOutcome, stored: Option<Stored>) -> LiveEvent {
    let (key, bytes) = match copied.record {
        Some((key, bytes)) => (Some(key), Some(bytes)),
        None => (None, None),
    };
    let owned = |t: Option<Cow<'_, str>>| t.map(Cow::into_owned);
    let (kind, event, user_id, anonymous_id) = match &bytes {
        Some(b) => {
            let s = shown(b, outcome.status == EventStatus::Invalid);
            (owned(s.kind), owned(s.event), owned(s.user_id), owned(s.anonymous_id))
        }
        None => (None, None, None, None),
    };
    let (partition, offset) = match stored {
        Some(Stored::Kafka(at)) => (Some(at.partition), Some(at.offset)),
        _ => (None, None),
    };
    LiveEvent {
        time: time.to_owned(),
        source: source.to_owned(),
        r#type: kind,
        event,
        message_id: outcome.message_id.clone(),
        user_id,
        anonymous_id,
        status: outcome.status.as_str(),
        topic: outcome.topic.clone(),
        key,
        partition,
        offset,
        code: outcome.code,
        message: outcome.message.clone(),
        violations: outcome.errors.clone(),
        payload: bytes.and_then(raw),
        frame: OnceLock::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: EventStatus) -> EventOutcome {
        EventOutcome { index: 0, message_id: None, status, topic: None, code: None, message: None, errors: Vec::new() }
    }

    fn copied(payload: &str) -> Copied {
        Copied { record: Some(("k".into(), payload.as_bytes().to_vec())) }
    }

    #[test]
    fn the_stored_bytes_are_shown_as_they_are_with_their_fields() {
        let stored = r#"{"type":"track","event":"Form Submitted","userId":"u-\"1\"","properties":{"z":1,"a":2}}"#;
        let row = row("web", "t", copied(stored), &outcome(EventStatus::Accepted), None);
        assert_eq!(row.payload.as_ref().map(|p| p.get()), Some(stored), "bytes and key order kept");
        assert_eq!((row.r#type.as_deref(), row.event.as_deref()), (Some("track"), Some("Form Submitted")));
        assert_eq!(row.user_id.as_deref(), Some("u-\"1\""), "escapes read");
        let frame = row.frame();
        assert!(frame.starts_with(b"event: event\ndata: {\"time\":\"t\""), "{frame:?}");
        assert!(frame.ends_with(format!(",\"payload\":{stored}}}\n\n").as_bytes()), "{frame:?}");
        assert_eq!(row.frame().as_ptr(), frame.as_ptr(), "rendered once, shared");
    }

    #[test]
    fn a_dead_letter_shows_its_events_fields_and_odd_values_are_absent() {
        let envelope =
            r#"{"reason":"schema_violation","event":{"type":"track","event":"Order","userId":7,"anonymousId":"a"}}"#;
        let row = row("web", "t", copied(envelope), &outcome(EventStatus::Invalid), None);
        assert_eq!(row.event.as_deref(), Some("Order"));
        assert_eq!((row.user_id.as_deref(), row.anonymous_id.as_deref()), (None, Some("a")), "a number is no user id");
        let pretty = "{\n  \"type\": \"page\"\n}";
        let row = row("web", "t", copied(pretty), &outcome(EventStatus::Accepted), None);
        assert_eq!(row.payload.as_ref().map(|p| p.get()), Some(r#"{"type":"page"}"#), "no line break in a data: line");
        assert_eq!(row.frame().iter().filter(|b| **b == b'\n').count(), 3, "one data: line");
    }
}
