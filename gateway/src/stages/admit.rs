//! Validate → enrich → route, for each event of the batch: the verdict of
//! every event (accepted with its record, dead-lettered with its reason,
//! rejected, or a duplicate within the request). The per-event steps are in
//! [`crate::pipeline`]; this stage gives them the request's context once,
//! and refuses a strict source's batch whole when any event would not be
//! accepted.

use chrono::{DateTime, Utc};

use super::{Request, answer};
use crate::auth::Principal;
use crate::enrich::ClientInfo;
use crate::enrichment::request::EdgeRequest;
use crate::error::ApiError;
use crate::pipeline::{self, Admission, Planned};
use crate::registry::SchemaIds;
use crate::state::AppState;
use crate::telemetry::Metrics;
use crate::wire::BatchRequest;

/// What one request adds to the gateway's state and its principal to make
/// an [`Admission`] (borrowed: the caller keeps them alive).
pub struct Arrival<'a> {
    /// When the gateway received the request.
    pub received_at: DateTime<Utc>,
    /// `received_at` formatted ([`pipeline::format_time`]).
    pub received_at_text: &'a str,
    /// The batch's `sentAt`, if any.
    pub sent_at: Option<&'a str>,
    /// The client's IP and user agent.
    pub client: &'a ClientInfo,
    /// The Schema Registry ids loaded for this request.
    pub schema_ids: &'a SchemaIds,
    /// The request's enrichment context.
    pub edge: &'a EdgeRequest<'a>,
}

/// The one way an [`Admission`] is built: the stage's and the benchmarks'.
pub fn admission<'a>(state: &'a AppState, principal: &'a Principal, arrival: Arrival<'a>) -> Admission<'a> {
    let Arrival { received_at, received_at_text, sent_at, client, schema_ids, edge } = arrival;
    Admission {
        catalog: &state.catalog,
        source: &principal.source,
        kafka: &state.config.kafka,
        received_at,
        received_at_text,
        sent_at,
        auth_method: principal.method,
        subject: principal.subject.as_deref(),
        vouched: &principal.identities,
        client,
        clients: &state.clients,
        max_event_bytes: state.config.limits.max_event_bytes,
        schema_ids,
        edge,
    }
}

/// The verdict of each event of `batch`, in order.
pub fn events(request: &Request, principal: &Principal, batch: BatchRequest) -> Result<Vec<Planned>, ApiError> {
    let state = request.state;
    let source = &principal.source;
    state.edge.admits(&source.id).map_err(ApiError::NotReady)?;
    let received_at = (state.clock)();
    let received_at_text = pipeline::format_time(received_at);
    let schema_ids = state.schema_ids.load();
    let edge = EdgeRequest::new(
        &state.edge,
        &state.catalog,
        &source.id,
        &request.facts,
        &request.client,
        received_at.timestamp(),
    );
    let arrival = Arrival {
        received_at,
        received_at_text: &received_at_text,
        sent_at: batch.sent_at.as_deref(),
        client: &request.client,
        schema_ids: &schema_ids,
        edge: &edge,
    };
    let planned = admission(state, principal, arrival).admit_all(batch.events);
    edge.flush(&state.metrics);
    count_violations(&state.metrics, &planned);
    let refused = planned.iter().filter(|p| p.verdict.refuses_strict_batch()).count();
    if source.strict && refused > 0 {
        answer::count_refused_batch(request, planned.len());
        return Err(ApiError::BatchRejected(refused, answer::preview(planned).events));
    }
    Ok(planned)
}

/// Counts the schemas broken in `eventgw_contract_violations_total` (by
/// schema and rollout), one counter update per distinct label pair; also
/// for a strict source's batch that is then refused.
pub fn count_violations(metrics: &Metrics, planned: &[Planned]) {
    let mut counts: Vec<(&pipeline::ContractViolation, u64)> = Vec::new();
    for violation in planned.iter().filter_map(|p| p.violation.as_ref()) {
        match counts.iter_mut().find(|(v, _)| *v == violation) {
            Some((_, n)) => *n += 1,
            None => counts.push((violation, 1)),
        }
    }
    for (violation, n) in counts {
        metrics.contract_violations.with_label_values(&[&violation.schema, violation.rollout.as_str()]).inc_by(n);
    }
}

#[cfg(test)]
#[path = "admit_tests.rs"]
mod tests;
