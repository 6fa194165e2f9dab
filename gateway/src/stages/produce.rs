//! Produce: every record of the request handed to the sink at once (Kafka,
//! or the spool in front of it when the source allows), waited for within
//! the request's deadline. Anything short of every record stored is one
//! error for the whole request, so the client retries it; otherwise each
//! event comes back with its [`Fate`] in the sink, which [`super::answer`]
//! renders as it stands.

use std::time::{Duration, Instant};

use futures::FutureExt;

use super::Request;
use crate::error::ApiError;
use crate::pipeline::{Planned, Verdict};
use crate::sink::{OutRecord, Sink, SinkError, Stored};

/// What the sink did with one event's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Never handed to the sink: its verdict rejects it, or it repeats an
    /// earlier event of the request (the verdict says which).
    NotProduced,
    /// Stored: acknowledged by Kafka (with its partition and offset), kept
    /// in the spool, or found already stored by dedupe.
    Stored(Stored),
    /// Refused for itself alone (larger than Kafka accepts): the client's
    /// fault, not the request's. Errors that fail the whole request never
    /// get here.
    Failed(SinkError),
}

/// One event of the request, once the sink is done with it.
#[derive(Debug)]
pub struct ProducedEvent {
    /// Its verdict, its record moved out to the sink (only the topic stays).
    pub planned: Planned,
    /// What the sink did with that record.
    pub fate: Fate,
}

/// Produces the records of `planned`; `spool`: whether the source lets
/// them go to the spool.
pub async fn records(
    request: &Request<'_>,
    planned: Vec<Planned>,
    spool: bool,
) -> Result<Vec<ProducedEvent>, ApiError> {
    let state = request.state;
    let deadline = Duration::from_millis(state.config.server.request_timeout_ms);
    let started = Instant::now();
    let produced = store(state.sink.as_ref(), planned, deadline, state.config.server.retry_after_secs, spool).await?;
    state.metrics.produce_latency.observe(started.elapsed().as_secs_f64());
    Ok(produced)
}

/// As [`records`], with the sink and the deadline given: each event of
/// `planned`, in order, with its fate.
pub async fn store(
    sink: &dyn Sink,
    mut planned: Vec<Planned>,
    deadline: Duration,
    retry_after: u64,
    spool: bool,
) -> Result<Vec<ProducedEvent>, ApiError> {
    let records = take_records(&mut planned);
    let sent = records.len();
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
    refuse_request(&stored, retry_after)?;
    if stored.len() != sent {
        // A sink answers each record once, in order; one that does not has
        // stored nothing the answer could vouch for.
        let detail = format!("the sink answered for {} of {sent} records", stored.len());
        return Err(ApiError::KafkaUnavailable { detail, retry_after });
    }
    let mut stored = stored.into_iter();
    let produced = planned.into_iter().map(|planned| {
        let fate = match planned.verdict.is_produced().then(|| stored.next()).flatten() {
            None => Fate::NotProduced,
            Some(Ok(how)) => Fate::Stored(how),
            Some(Err(error)) => Fate::Failed(error),
        };
        ProducedEvent { planned, fate }
    });
    Ok(produced.collect())
}

/// Moves each produced event's record out for the sink, leaving only its
/// topic behind for the answer: payloads are never copied.
fn take_records(planned: &mut [Planned]) -> Vec<OutRecord> {
    planned
        .iter_mut()
        .filter_map(|p| match &mut p.verdict {
            Verdict::Accept(record) | Verdict::DeadLetter { record, .. } => {
                let topic = record.topic.clone();
                Some(std::mem::replace(
                    record,
                    OutRecord { topic, key: String::new(), payload: Default::default(), headers: Vec::new() },
                ))
            }
            Verdict::Reject { .. } | Verdict::Duplicate { .. } => None,
        })
        .collect()
}

/// The error of the whole request when any record was not stored for a
/// reason worth retrying: the spool refused it, the producer's queue was
/// full, or Kafka did not take it (checked in that order).
fn refuse_request(stored: &[Result<Stored, SinkError>], retry_after: u64) -> Result<(), ApiError> {
    let errors = || stored.iter().filter_map(|r| r.as_ref().err());
    if let Some(SinkError::SpoolRefused(detail)) = errors().find(|e| matches!(e, SinkError::SpoolRefused(_))) {
        return Err(ApiError::KafkaUnavailable { detail: detail.clone(), retry_after });
    }
    if errors().any(|e| matches!(e, SinkError::QueueFull)) {
        return Err(ApiError::Backpressure { retry_after });
    }
    if let Some(SinkError::Unavailable(detail)) = errors().find(|e| matches!(e, SinkError::Unavailable(_))) {
        return Err(ApiError::KafkaUnavailable { detail: detail.clone(), retry_after });
    }
    Ok(())
}

#[cfg(test)]
#[path = "produce_tests.rs"]
mod tests;
