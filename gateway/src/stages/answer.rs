//! Answer: verdicts and the sink's acknowledgements → the 200 answer with
//! each event's outcome (only once every produced record is stored; see
//! [`super::produce`]), and the events counted in the metrics.

use serde::Serialize;

use super::Request;
use super::produce::Produced;
use crate::code::Code;
pub use crate::outcome::{EventOutcome, EventStatus};
use crate::pipeline::{Planned, Verdict};
use crate::sink::{Delivered, SinkError};

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The 200 answer of an ingestion request.
#[derive(Debug, Serialize)]
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

/// The answer once every record is stored, its events counted in
/// `eventgw_events_total` (and `eventgw_dead_letters_total`).
pub fn events(request: &Request, produced: Produced) -> BatchAnswer {
    let Produced { planned, results, spooled, repeated } = produced;
    let mut answer = assemble(planned, results.into_iter());
    mark_spooled(&mut answer, &spooled);
    mark_repeated(&mut answer, &repeated);
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

/// An accepted event whose `messageId` was already stored (a client's
/// retry) says `duplicate`; a dead-lettered one keeps `invalid` and its
/// reason (not dead-lettered again), which is what its sender needs to know.
fn mark_repeated(answer: &mut BatchAnswer, repeated: &[usize]) {
    for &index in repeated {
        if let Some(event) = answer.events.get_mut(index).filter(|e| e.status == EventStatus::Accepted) {
            event.status = EventStatus::Duplicate;
            event.code = Some(Code::DuplicateMessageId.as_str());
            event.message =
                Some("an event with this `messageId` from this source was already stored: not stored again".into());
            answer.accepted -= 1;
            answer.duplicate += 1;
        }
    }
}

/// An accepted event that went to the spool says `spooled` (its topic is
/// where replay will put it); a dead-lettered one keeps `invalid` and its
/// reason, which is what its sender needs to know.
fn mark_spooled(answer: &mut BatchAnswer, spooled: &[usize]) {
    for &index in spooled {
        if let Some(event) = answer.events.get_mut(index).filter(|e| e.status == EventStatus::Accepted) {
            event.status = EventStatus::Spooled;
            answer.accepted -= 1;
            answer.spooled += 1;
        }
    }
}

/// What would happen to each event, without producing anything (a strict
/// source's refused batch).
pub fn preview(planned: Vec<Planned>) -> BatchAnswer {
    let count = planned.len();
    let delivered = std::iter::repeat_n(Ok(Delivered { partition: -1, offset: -1 }), count);
    let mut answer = assemble(planned, delivered);
    for event in &mut answer.events {
        event.topic = None;
    }
    answer
}

/// Pairs each produced verdict with its delivery result, in order.
fn assemble(planned: Vec<Planned>, mut results: impl Iterator<Item = Result<Delivered, SinkError>>) -> BatchAnswer {
    let mut answer = BatchAnswer {
        accepted: 0,
        invalid: 0,
        rejected: 0,
        duplicate: 0,
        spooled: 0,
        suppressed: 0,
        events: Vec::with_capacity(planned.len()),
    };
    for (index, p) in planned.into_iter().enumerate() {
        let mut outcome = EventOutcome {
            index,
            message_id: p.message_id,
            status: EventStatus::Accepted,
            topic: None,
            code: None,
            message: None,
            errors: Vec::new(),
        };
        let delivered = if p.verdict.is_produced() { results.next() } else { None };
        match (p.verdict, delivered) {
            (_, Some(Err(_))) => {
                outcome.status = EventStatus::Rejected;
                outcome.code = Some(Code::EventTooLarge.as_str());
                outcome.message = Some("the event is larger than Kafka accepts".into());
            }
            (Verdict::Accept(record), _) => outcome.topic = Some(record.topic),
            (Verdict::DeadLetter { record, code, message, errors }, _) => {
                outcome.status = EventStatus::Invalid;
                outcome.topic = Some(record.topic);
                outcome.code = Some(code.as_str());
                outcome.message = Some(message);
                outcome.errors = errors;
            }
            (Verdict::Reject { code, message }, _) => {
                outcome.status = if code == Code::Suppressed { EventStatus::Suppressed } else { EventStatus::Rejected };
                outcome.code = Some(code.as_str());
                outcome.message = Some(message);
            }
            (Verdict::Duplicate { first }, _) => {
                outcome.status = EventStatus::Duplicate;
                outcome.code = Some(Code::DuplicateMessageId.as_str());
                outcome.message = Some(format!("the same `messageId` as event {first} of this request: stored once"));
            }
        }
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

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
