//! Produce: every record of the request handed to the sink at once (Kafka,
//! or the spool in front of it when the source allows), waited for within
//! the request's deadline. Anything short of every record stored is one
//! error for the whole request, so the client retries it.

use std::time::{Duration, Instant};

use futures::FutureExt;

use super::Request;
use crate::error::ApiError;
use crate::pipeline::{Planned, Verdict};
use crate::sink::{Delivered, OutRecord, Sink, SinkError, Stored};

/// What the sink did with a request's records.
#[derive(Debug)]
pub struct Produced {
    /// Each event's verdict, its record moved out to the sink.
    pub planned: Vec<Planned>,
    /// The delivery of each produced record, in the order of the events
    /// that produce one.
    pub results: Vec<Result<Delivered, SinkError>>,
    /// Indexes of the events whose record went to the spool.
    pub spooled: Vec<usize>,
    /// Indexes of the events whose `messageId` was already stored.
    pub repeated: Vec<usize>,
}

/// Produces the records of `planned`; `spool`: whether the source lets
/// them go to the spool.
pub async fn records(request: &Request<'_>, planned: Vec<Planned>, spool: bool) -> Result<Produced, ApiError> {
    let state = request.state;
    let deadline = Duration::from_millis(state.config.server.request_timeout_ms);
    let started = Instant::now();
    let produced = store(state.sink.as_ref(), planned, deadline, state.config.server.retry_after_secs, spool).await?;
    state.metrics.produce_latency.observe(started.elapsed().as_secs_f64());
    Ok(produced)
}

/// As [`records`], with the sink and the deadline given.
pub async fn store(
    sink: &dyn Sink,
    mut planned: Vec<Planned>,
    deadline: Duration,
    retry_after: u64,
    spool: bool,
) -> Result<Produced, ApiError> {
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
    Ok(Produced { planned, results, spooled, repeated })
}

/// Where a spooled record will land is not known yet.
const UNKNOWN_OFFSET: Delivered = Delivered { partition: -1, offset: -1 };

/// Indexes of the events whose record was stored as `how` (records are in
/// the order of the events that produce one).
fn events_where(planned: &[Planned], stored: &[Result<Stored, SinkError>], how: Stored) -> Vec<usize> {
    let produced = planned.iter().enumerate().filter(|(_, p)| p.verdict.is_produced());
    produced.zip(stored).filter(|(_, s)| matches!(s, Ok(s) if *s == how)).map(|((index, _), _)| index).collect()
}

#[cfg(test)]
#[path = "produce_tests.rs"]
mod tests;
