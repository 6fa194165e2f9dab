//! Answer: each event's verdict and its fate in the sink → the 200 answer
//! with each event's outcome (only once every produced record is stored;
//! see [`super::produce`]), and the events counted in the metrics.

use actix_web::HttpResponse;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue};
use serde::Serialize;

use super::Request;
use super::produce::{Fate, ProducedEvent};
use crate::code::Code;
use crate::compact;
pub use crate::outcome::{EventOutcome, EventStatus};
use crate::pipeline::{Planned, Verdict};
use crate::sink::Stored;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The 200 answer of an ingestion request.
#[derive(Debug, Default, Serialize)]
pub struct BatchAnswer {
    /// Events produced to their domain topic.
    pub accepted: usize,
    /// Events that broke their contract, now on the dead-letter topic.
    pub invalid: usize,
    /// Events produced nowhere.
    pub rejected: usize,
    /// Events repeating the `messageId` of an earlier event of the request
    /// that is produced: stored once, not again.
    pub duplicate: usize,
    /// Events kept in the local spool (fsynced) for replay to their topic,
    /// because Kafka did not acknowledge them in time; absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub spooled: usize,
    /// Events of suppressed users, produced nowhere by their wish.
    #[serde(skip_serializing_if = "is_zero")]
    pub suppressed: usize,
    /// One entry per event, in request order.
    pub events: Vec<EventOutcome>,
}

impl BatchAnswer {
    /// The 200 answer: [`Self::to_json`] as `application/json`.
    pub fn response(&self) -> HttpResponse {
        // A static value: `ContentType::json()` copies its text into a new
        // header value on every answer.
        let json = HeaderValue::from_static("application/json");
        HttpResponse::Ok().insert_header((CONTENT_TYPE, json)).body(self.to_json())
    }

    /// The answer's JSON, byte for byte what its `Serialize` writes (a test
    /// holds the two together), written by hand with [`compact`]: an entry
    /// per event, and through serde each costs more than the event's own
    /// record.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96 + 112 * self.events.len());
        // The names as JSON (plain ASCII: written as they are).
        let counts: [(&[u8], usize, bool); 6] = [
            (b"\"accepted\":", self.accepted, true),
            (b"\"invalid\":", self.invalid, true),
            (b"\"rejected\":", self.rejected, true),
            (b"\"duplicate\":", self.duplicate, true),
            (b"\"spooled\":", self.spooled, false),
            (b"\"suppressed\":", self.suppressed, false),
        ];
        out.push(b'{');
        for (name, count, always) in counts {
            if always || count > 0 {
                out.extend_from_slice(name);
                compact::write_uint(&mut out, count as u64);
                out.push(b',');
            }
        }
        out.extend_from_slice(b"\"events\":[");
        for (i, event) in self.events.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_outcome(&mut out, event);
        }
        out.extend_from_slice(b"]}");
        out
    }
}

/// One event's outcome as its `Serialize` writes it.
fn write_outcome(out: &mut Vec<u8>, event: &EventOutcome) {
    out.extend_from_slice(b"{\"index\":");
    compact::write_uint(out, event.index as u64);
    // `name` is `,"name":` (plain ASCII, written as it is).
    let text = |out: &mut Vec<u8>, name: &[u8], value: Option<&str>| {
        if let Some(value) = value {
            out.extend_from_slice(name);
            compact::write_str(out, value);
        }
    };
    text(out, b",\"messageId\":", event.message_id.as_deref());
    text(out, b",\"status\":", Some(event.status.as_str()));
    text(out, b",\"topic\":", event.topic.as_deref());
    text(out, b",\"code\":", event.code);
    text(out, b",\"message\":", event.message.as_deref());
    if !event.errors.is_empty() {
        out.extend_from_slice(b",\"errors\":");
        // Writing into a vector cannot fail; violations are rare.
        let _ = serde_json::to_writer(&mut *out, &event.errors);
    }
    out.push(b'}');
}

/// The answer once every record is stored, its events counted in
/// `eventgw_events_total` (and `eventgw_dead_letters_total`).
pub fn events(request: &Request, produced: Vec<ProducedEvent>) -> BatchAnswer {
    let answer = render(produced.into_iter().map(|p| (p.planned, p.fate)));
    count_events(request, &answer);
    answer
}

/// Counts a strict source's refused batch: nothing of it is produced, so
/// every event counts as rejected, whatever the preview says it would have
/// been.
pub fn count_refused_batch(request: &Request, events: usize) {
    let count = u64::try_from(events).unwrap_or(u64::MAX);
    request.state.metrics.events.with_label_values(&[request.endpoint, "rejected", "none"]).inc_by(count);
}

/// Counts a request's events with one counter update per distinct label
/// set, not one per event: a batch of 500 mostly shares one.
fn count_events(request: &Request, answer: &BatchAnswer) {
    let mut events: Vec<((&str, &str), u64)> = Vec::new();
    let mut dead: Vec<(&str, u64)> = Vec::new();
    for event in &answer.events {
        let labels = (event.status.as_str(), event.topic.as_deref().unwrap_or("none"));
        bump(&mut events, labels);
        if let (EventStatus::Invalid, Some(code)) = (event.status, event.code) {
            bump(&mut dead, code);
        }
    }
    let metrics = &request.state.metrics;
    for ((status, topic), n) in events {
        metrics.events.with_label_values(&[request.endpoint, status, topic]).inc_by(n);
    }
    for (code, n) in dead {
        metrics.dead_letters.with_label_values(&[code]).inc_by(n);
    }
}

fn bump<K: PartialEq>(counts: &mut Vec<(K, u64)>, key: K) {
    match counts.iter_mut().find(|(k, _)| *k == key) {
        Some((_, n)) => *n += 1,
        None => counts.push((key, 1)),
    }
}

/// What would happen to each event, without producing anything (a strict
/// source's refused batch): an event that would be accepted says so, with
/// no topic, as nothing went there.
pub fn preview(planned: Vec<Planned>) -> BatchAnswer {
    let mut answer = render(planned.into_iter().map(|p| (p, Fate::NotProduced)));
    for event in &mut answer.events {
        event.topic = None;
    }
    answer
}

/// Each event's outcome, in request order, and the counts by status.
fn render(events: impl ExactSizeIterator<Item = (Planned, Fate)>) -> BatchAnswer {
    let mut answer = BatchAnswer { events: Vec::with_capacity(events.len()), ..BatchAnswer::default() };
    for (index, (planned, fate)) in events.enumerate() {
        let outcome = outcome(index, planned, fate);
        *match outcome.status {
            EventStatus::Accepted => &mut answer.accepted,
            EventStatus::Invalid => &mut answer.invalid,
            EventStatus::Duplicate => &mut answer.duplicate,
            EventStatus::Suppressed => &mut answer.suppressed,
            EventStatus::Spooled => &mut answer.spooled,
            EventStatus::Rejected => &mut answer.rejected,
        } += 1;
        answer.events.push(outcome);
    }
    answer
}

/// One event's outcome. A dead-lettered event says `invalid` with its
/// reason wherever its record was kept (spool, or already stored): that is
/// what its sender needs to know. An accepted one says where it went: its
/// topic (`accepted`; also what a preview says), the spool (`spooled`, its
/// topic being where replay will put it), or nowhere again as its
/// `messageId` was already stored (`duplicate`, a client's retry).
fn outcome(index: usize, planned: Planned, fate: Fate) -> EventOutcome {
    let mut outcome = EventOutcome {
        index,
        message_id: planned.message_id,
        status: EventStatus::Accepted,
        topic: None,
        code: None,
        message: None,
        errors: Vec::new(),
    };
    let mut tell = |status, code: Code, message: String| {
        outcome.status = status;
        outcome.code = Some(code.as_str());
        outcome.message = Some(message);
    };
    match (planned.verdict, fate) {
        (_, Fate::Failed(_)) => {
            tell(EventStatus::Rejected, Code::EventTooLarge, "the event is larger than Kafka accepts".into());
        }
        (Verdict::Accept(record), Fate::Stored(Stored::Kafka(_)) | Fate::NotProduced) => {
            outcome.topic = Some(record.topic.into());
        }
        (Verdict::Accept(record), Fate::Stored(Stored::Spooled)) => {
            outcome.status = EventStatus::Spooled;
            outcome.topic = Some(record.topic.into());
        }
        (Verdict::Accept(record), Fate::Stored(Stored::Duplicate)) => {
            let message = "an event with this `messageId` from this source was already stored: not stored again";
            tell(EventStatus::Duplicate, Code::DuplicateMessageId, message.into());
            outcome.topic = Some(record.topic.into());
        }
        (Verdict::DeadLetter { record, code, message, errors }, _) => {
            tell(EventStatus::Invalid, code, message);
            outcome.topic = Some(record.topic.into());
            outcome.errors = errors;
        }
        (Verdict::Reject { code, message }, _) => {
            let status = if code == Code::Suppressed { EventStatus::Suppressed } else { EventStatus::Rejected };
            tell(status, code, message);
        }
        (Verdict::Duplicate { first }, _) => {
            let message = format!("the same `messageId` as event {first} of this request: stored once");
            tell(EventStatus::Duplicate, Code::DuplicateMessageId, message);
        }
    }
    outcome
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
