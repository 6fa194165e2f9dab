//! One event as the live view shows it, and the [`Capture`] that builds
//! them: a copy of each record as it goes to the sink (so what is shown is
//! what is stored, privacy actions applied), completed once the sink and
//! the answer are done with the request.

use serde::Serialize;
use serde_json::Value;

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
    /// dead-letter envelope); absent when nothing was stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
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

fn row(source: &str, time: &str, copied: Copied, outcome: &EventOutcome, stored: Option<Stored>) -> LiveEvent {
    let (key, payload) = match copied.record {
        Some((key, bytes)) => (Some(key), serde_json::from_slice::<Value>(&bytes).ok()),
        None => (None, None),
    };
    // A dead-letter envelope carries the event (scrubbed) under `event`.
    let invalid = outcome.status == EventStatus::Invalid;
    let fields = payload.as_ref().map(|p| if invalid { p.get("event").unwrap_or(p) } else { p });
    let text = |name: &str| fields.and_then(|f| f.get(name)).and_then(Value::as_str).map(str::to_owned);
    let (partition, offset) = match stored {
        Some(Stored::Kafka(at)) => (Some(at.partition), Some(at.offset)),
        _ => (None, None),
    };
    LiveEvent {
        time: time.to_owned(),
        source: source.to_owned(),
        r#type: text("type"),
        event: text("event"),
        message_id: outcome.message_id.clone(),
        user_id: text("userId"),
        anonymous_id: text("anonymousId"),
        status: outcome.status.as_str(),
        topic: outcome.topic.clone(),
        key,
        partition,
        offset,
        code: outcome.code,
        message: outcome.message.clone(),
        violations: outcome.errors.clone(),
        payload,
    }
}
