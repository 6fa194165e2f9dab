//! One event as the live view shows it, and the [`Capture`] that builds
//! them: a copy of each record as it goes to the sink (so what is shown is
//! what is stored, privacy actions applied), completed once the sink and
//! the answer are done with the request.
//!
//! Per event the cost is paid once, whatever the number of viewers: the
//! fields the view shows were read by admission from the record as it was
//! built ([`Shown`]: the record's bytes are never scanned again), its
//! bytes are kept as they are for `GET /live/events/{id}` (never put in
//! the frame), and the SSE frame is rendered by the first viewer that
//! sends it and shared by the rest.

use std::sync::OnceLock;

use actix_web::web::Bytes;
use serde::Serialize;

use super::LiveHub;
use crate::outcome::EventOutcome;
pub use crate::pipeline::Shown;
use crate::sink::{OutRecord, Stored};

/// One event of the live view, serialised as the stream's `data:`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveEvent {
    /// Its number in this gateway's live view (from 1, in publishing
    /// order): `GET /live/events/{id}` answers its stored record while the
    /// view still holds it. 0 until published.
    pub id: u64,
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
    /// dead-letter envelope), its JSON bytes unchanged; absent when nothing
    /// was stored. Not in the frame (a viewer opens it by `id`, so the
    /// stream carries what a row shows, not every record's bytes to every
    /// viewer); the frame says `"stored":true` when there is one.
    #[serde(skip)]
    pub payload: Option<Bytes>,
    /// The `event: event` SSE frame of this event, rendered once by the
    /// first viewer that sends it and shared by every other viewer.
    #[serde(skip)]
    pub(super) frame: OnceLock<Bytes>,
}

impl LiveEvent {
    /// This event's SSE frame (`event: event`, the event as JSON without
    /// its stored record), rendered on the first call only.
    pub fn frame(&self) -> Bytes {
        self.frame
            .get_or_init(|| {
                const HEAD: &[u8] = b"event: event\ndata: ";
                let mut out = Vec::with_capacity(HEAD.len() + 512);
                out.extend_from_slice(HEAD);
                let written = serde_json::to_writer(&mut out, self).is_ok();
                if !written {
                    out.truncate(HEAD.len());
                    out.extend_from_slice(b"{}");
                }
                if written && self.payload.is_some() {
                    // The object always ends with `}`.
                    out.pop();
                    out.extend_from_slice(b",\"stored\":true}");
                }
                out.extend_from_slice(b"\n\n");
                Bytes::from(out)
            })
            .clone()
    }

    /// What this event holds in memory, for the bound of the opened-events
    /// store: its stored record and the rest, roughly.
    pub fn weight(&self) -> usize {
        256 + self.payload.as_ref().map_or(0, Bytes::len)
    }
}

/// What the live view copies of one event before its record goes to the
/// sink.
struct Copied {
    /// Key and value of the record (the value shared with the sink's
    /// record, not copied), `None` when none is produced.
    record: Option<(String, Bytes)>,
    /// The fields shown, as admission read them from the record it built.
    shown: Option<Box<Shown>>,
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
    /// produced) with what admission read of them ([`Shown`]) when anyone
    /// watches that source; `None`, having built nothing, when nobody does.
    pub fn capture<'r>(
        &self,
        source: &str,
        events: impl Iterator<Item = (Option<&'r OutRecord>, Option<Box<Shown>>)>,
    ) -> Option<Capture> {
        if !self.watches(source) {
            return None;
        }
        let copies = events
            .map(|(record, shown)| Copied { record: record.map(|r| (r.key.clone(), r.payload.clone())), shown })
            .collect();
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
    let (key, bytes) = match copied.record {
        Some((key, bytes)) => (Some(key), Some(bytes)),
        None => (None, None),
    };
    // Only a JSON object is offered to open (`/live/events/{id}` answers it
    // as JSON): every record the gateway builds is one, except a framed
    // domain's (the registry's wire format puts five bytes before it).
    let bytes = bytes.filter(|b| b.first() == Some(&b'{'));
    let Shown { kind, event, user_id, anonymous_id } = copied.shown.map(|s| *s).unwrap_or_default();
    let (partition, offset) = match stored {
        Some(Stored::Kafka(at)) => (Some(at.partition), Some(at.offset)),
        _ => (None, None),
    };
    LiveEvent {
        id: 0,
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
        payload: bytes,
        frame: OnceLock::new(),
    }
}

#[cfg(test)]
#[path = "event_tests.rs"]
mod tests;
