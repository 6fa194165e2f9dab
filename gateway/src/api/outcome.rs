//! Turns verdicts and Kafka's acknowledgements into the answer: 200 with
//! each event's outcome only when every produced record was acknowledged;
//! otherwise one error for the whole request, so the client retries it.

use std::time::Duration;

use futures::FutureExt;
use serde::Serialize;

use crate::error::ApiError;
use crate::pipeline::{Planned, Verdict};
use crate::privacy::SUPPRESSED;
use crate::sink::{Delivered, OutRecord, Sink, SinkError, Stored};

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

/// What happened to one event; serialised as its lowercase name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventStatus {
    /// Produced to its domain topic.
    Accepted,
    /// Broke its contract: produced to the dead-letter topic.
    Invalid,
    /// Produced nowhere.
    Rejected,
    /// Repeats a `messageId` already stored: not stored again.
    Duplicate,
    /// Kept in the local spool for replay to its topic.
    Spooled,
    /// A suppressed user's: produced nowhere by their wish.
    Suppressed,
}

impl EventStatus {
    /// The name in answers and in the `outcome` label of `eventgw_events_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Invalid => "invalid",
            Self::Rejected => "rejected",
            Self::Duplicate => "duplicate",
            Self::Spooled => "spooled",
            Self::Suppressed => "suppressed",
        }
    }
}

/// One event's outcome.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventOutcome {
    /// Position in the request.
    pub index: usize,
    /// Its `messageId`, generated when the client sent none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// What happened to it.
    pub status: EventStatus,
    /// The topic it went to (domain topic or dead-letter topic).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Stable machine code of the reason, unless accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    /// The reason in words, unless accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Schema violations, for `schema_violation`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<eventgw_schemas::SchemaViolation>,
}

/// Produces every record of `planned` at once and builds the answer;
/// `spool`: whether the source lets its records go to the spool.
pub async fn produce(
    sink: &dyn Sink,
    planned: Vec<Planned>,
    deadline: Duration,
    retry_after: u64,
    spool: bool,
) -> Result<BatchAnswer, ApiError> {
    let mut planned = planned;
    // Move each record out to the producer, leaving only its topic behind for
    // the answer: payloads are never copied.
    let records: Vec<OutRecord> = planned
        .iter_mut()
        .filter_map(|p| match &mut p.verdict {
            Verdict::Accept(record) | Verdict::DeadLetter { record, .. } => {
                let topic = record.topic.clone();
                Some(std::mem::replace(
                    record,
                    OutRecord { topic, key: String::new(), payload: Vec::new(), headers: Vec::new() },
                ))
            }
            Verdict::Reject { .. } | Verdict::Duplicate { .. } => None,
        })
        .collect();
    let stored = if records.is_empty() {
        Vec::new()
    } else {
        let stored = if spool {
            sink.store_all(records, deadline)
        } else {
            let sent = sink.send_direct(records);
            async move { sent.await.into_iter().map(|r| r.map(Stored::Kafka)).collect() }.boxed()
        };
        actix_web::rt::time::timeout(deadline, stored).await.map_err(|_| ApiError::KafkaUnavailable {
            detail: "no acknowledgement before the request deadline".into(),
            retry_after,
        })?
    };
    if let Some(Err(SinkError::SpoolRefused(detail))) =
        stored.iter().find(|r| matches!(r, Err(SinkError::SpoolRefused(_))))
    {
        return Err(ApiError::KafkaUnavailable { detail: detail.clone(), retry_after });
    }
    let spooled = events_where(&planned, &stored, Stored::Spooled);
    let repeated = events_where(&planned, &stored, Stored::Duplicate);
    let results: Vec<_> =
        stored.into_iter().map(|r| r.map(|s| if let Stored::Kafka(d) = s { d } else { UNKNOWN_OFFSET })).collect();
    if results.iter().any(|r| matches!(r, Err(SinkError::QueueFull))) {
        return Err(ApiError::Backpressure { retry_after });
    }
    if let Some(Err(SinkError::Unavailable(detail))) =
        results.iter().find(|r| matches!(r, Err(SinkError::Unavailable(_))))
    {
        return Err(ApiError::KafkaUnavailable { detail: detail.clone(), retry_after });
    }
    let mut answer = assemble(planned, results.into_iter());
    mark_spooled(&mut answer, &spooled);
    mark_repeated(&mut answer, &repeated);
    Ok(answer)
}

/// Where a spooled record will land is not known yet.
const UNKNOWN_OFFSET: Delivered = Delivered { partition: -1, offset: -1 };

/// Indexes of the events whose record was stored as `how` (records are in
/// the order of the events that produce one).
fn events_where(planned: &[Planned], stored: &[Result<Stored, SinkError>], how: Stored) -> Vec<usize> {
    let produced = planned.iter().enumerate().filter(|(_, p)| p.verdict.is_produced());
    produced.zip(stored).filter(|(_, s)| matches!(s, Ok(s) if *s == how)).map(|((index, _), _)| index).collect()
}

/// An accepted event whose `messageId` was already stored (a client's
/// retry) says `duplicate`; a dead-lettered one keeps `invalid` and its
/// reason (not dead-lettered again), which is what its sender needs to know.
fn mark_repeated(answer: &mut BatchAnswer, repeated: &[usize]) {
    for &index in repeated {
        if let Some(event) = answer.events.get_mut(index).filter(|e| e.status == EventStatus::Accepted) {
            event.status = EventStatus::Duplicate;
            event.code = Some("duplicate_message_id");
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
                outcome.code = Some("event_too_large");
                outcome.message = Some("the event is larger than Kafka accepts".into());
            }
            (Verdict::Accept(record), _) => outcome.topic = Some(record.topic),
            (Verdict::DeadLetter { record, code, message, errors }, _) => {
                outcome.status = EventStatus::Invalid;
                outcome.topic = Some(record.topic);
                outcome.code = Some(code);
                outcome.message = Some(message);
                outcome.errors = errors;
            }
            (Verdict::Reject { code, message }, _) => {
                outcome.status = if code == SUPPRESSED { EventStatus::Suppressed } else { EventStatus::Rejected };
                outcome.code = Some(code);
                outcome.message = Some(message);
            }
            (Verdict::Duplicate { first }, _) => {
                outcome.status = EventStatus::Duplicate;
                outcome.code = Some("duplicate_message_id");
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
mod tests {
    use super::*;

    #[test]
    fn each_status_is_answered_by_the_same_name_as_before() {
        for (status, name) in [
            (EventStatus::Accepted, "accepted"),
            (EventStatus::Invalid, "invalid"),
            (EventStatus::Rejected, "rejected"),
            (EventStatus::Duplicate, "duplicate"),
            (EventStatus::Spooled, "spooled"),
            (EventStatus::Suppressed, "suppressed"),
        ] {
            assert_eq!(serde_json::to_string(&status).expect("serialises"), format!("\"{name}\""));
            assert_eq!(status.as_str(), name);
        }
        let outcome = EventOutcome {
            index: 2,
            message_id: Some("m".into()),
            status: EventStatus::Invalid,
            topic: Some("t".into()),
            code: Some("schema_violation"),
            message: Some("why".into()),
            errors: Vec::new(),
        };
        assert_eq!(
            serde_json::to_string(&outcome).expect("serialises"),
            r#"{"index":2,"messageId":"m","status":"invalid","topic":"t","code":"schema_violation","message":"why"}"#
        );
    }
}
