//! Turns verdicts and Kafka's acknowledgements into the answer: 200 with
//! each event's outcome only when every produced record was acknowledged;
//! otherwise one error for the whole request, so the client retries it.

use std::time::Duration;

use serde::Serialize;

use crate::error::ApiError;
use crate::pipeline::{Planned, Verdict};
use crate::privacy::SUPPRESSED;
use crate::sink::{Delivered, OutRecord, Sink, SinkError};

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
    /// Events of suppressed users, produced nowhere by their wish.
    #[serde(skip_serializing_if = "is_zero")]
    pub suppressed: usize,
    /// One entry per event, in request order.
    pub events: Vec<EventOutcome>,
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
    /// `accepted`, `invalid`, `rejected` or `suppressed`.
    pub status: &'static str,
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

/// Produces every record of `planned` at once and builds the answer.
pub async fn produce(
    sink: &dyn Sink,
    planned: Vec<Planned>,
    deadline: Duration,
    retry_after: u64,
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
            Verdict::Reject { .. } => None,
        })
        .collect();
    let results = if records.is_empty() {
        Vec::new()
    } else {
        actix_web::rt::time::timeout(deadline, sink.send_all(records)).await.map_err(|_| {
            ApiError::KafkaUnavailable { detail: "no acknowledgement before the request deadline".into(), retry_after }
        })?
    };
    if results.iter().any(|r| matches!(r, Err(SinkError::QueueFull))) {
        return Err(ApiError::Backpressure { retry_after });
    }
    if let Some(Err(SinkError::Unavailable(detail))) =
        results.iter().find(|r| matches!(r, Err(SinkError::Unavailable(_))))
    {
        return Err(ApiError::KafkaUnavailable { detail: detail.clone(), retry_after });
    }
    Ok(assemble(planned, results.into_iter()))
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
    let mut answer =
        BatchAnswer { accepted: 0, invalid: 0, rejected: 0, suppressed: 0, events: Vec::with_capacity(planned.len()) };
    for (index, p) in planned.into_iter().enumerate() {
        let mut outcome = EventOutcome {
            index,
            message_id: p.message_id,
            status: "accepted",
            topic: None,
            code: None,
            message: None,
            errors: Vec::new(),
        };
        let delivered = match &p.verdict {
            Verdict::Reject { .. } => None,
            _ => results.next(),
        };
        match (p.verdict, delivered) {
            (_, Some(Err(_))) => {
                outcome.status = "rejected";
                outcome.code = Some("event_too_large");
                outcome.message = Some("the event is larger than Kafka accepts".into());
            }
            (Verdict::Accept(record), _) => outcome.topic = Some(record.topic),
            (Verdict::DeadLetter { record, code, message, errors }, _) => {
                outcome.status = "invalid";
                outcome.topic = Some(record.topic);
                outcome.code = Some(code);
                outcome.message = Some(message);
                outcome.errors = errors;
            }
            (Verdict::Reject { code, message }, _) => {
                outcome.status = if code == SUPPRESSED { SUPPRESSED } else { "rejected" };
                outcome.code = Some(code);
                outcome.message = Some(message);
            }
        }
        match outcome.status {
            "accepted" => answer.accepted += 1,
            "invalid" => answer.invalid += 1,
            SUPPRESSED => answer.suppressed += 1,
            _ => answer.rejected += 1,
        }
        answer.events.push(outcome);
    }
    answer
}
