//! Validate → enrich → route, for each event of the batch: the verdict of
//! every event (accepted with its record, dead-lettered with its reason,
//! rejected, or a duplicate within the request). The per-event steps are in
//! [`crate::pipeline`]; this stage gives them the request's context once,
//! and refuses a strict source's batch whole when any event would not be
//! accepted.

use chrono::{DateTime, Utc};

use super::{Request, answer};
use crate::auth::Principal;
use crate::enrichment::request::EdgeRequest;
use crate::error::ApiError;
use crate::pipeline::{self, Admission, Planned};
use crate::telemetry::Metrics;
use crate::wire::BatchRequest;

/// The pipeline's view of `request` for the events `principal` sent,
/// received at `received_at`: the one way an [`Admission`] is built (the
/// stage's, the tests' and the benchmarks'). Everything about the client
/// comes from the request's context, resolved once when it arrived.
pub fn admission<'a>(
    request: &'a Request<'_>,
    principal: &'a Principal,
    received_at: DateTime<Utc>,
    sent_at: Option<&'a str>,
) -> Admission<'a> {
    let state = request.state;
    let source = &principal.source;
    let edge = EdgeRequest::new(&state.edge, &state.catalog, &source.id, &request.client, received_at.timestamp());
    Admission {
        catalog: &state.catalog,
        source,
        kafka: &state.config.kafka,
        received_at,
        received_at_text: pipeline::format_time(received_at).into(),
        sent_at,
        auth_method: principal.method,
        protocol: crate::wire::SEGMENT,
        subject: principal.subject.as_deref(),
        vouched: &principal.identities,
        client: &request.client,
        clients: &state.clients,
        max_event_bytes: state.config.limits.max_event_bytes,
        schema_ids: state.schema_ids.load_full(),
        edge,
        shown: None,
    }
}

/// The verdict of each event of `batch`, in order.
pub fn events(request: &Request, principal: &Principal, batch: BatchRequest) -> Result<Vec<Planned>, ApiError> {
    let state = request.state;
    let source = &principal.source;
    state.edge.admits(&source.id).map_err(ApiError::NotReady)?;
    let mut admission = admission(request, principal, (state.clock)(), batch.sent_at.as_deref());
    admission.protocol = batch.protocol;
    if state.live.watches(&source.id) {
        admission.shown = Some(pipeline::ShownSlot::default());
    }
    let planned = admission.admit_all(batch.events, batch.undecodable);
    admission.edge.flush(&state.metrics);
    count_violations(&state.metrics, &planned);
    let refused = planned.iter().filter(|p| p.verdict.refuses_strict_batch()).count();
    if source.strict && refused > 0 {
        answer::count_refused_batch(request, planned.len());
        return Err(ApiError::BatchRejected(refused, answer::preview(planned).events));
    }
    Ok(planned)
}

/// The verdict each event of `batch` would get, without producing
/// anything or counting it in the metrics: the validation endpoints
/// (`/debug/mp/collect`) answer exactly what [`events`] would decide.
/// A strict source's batch is not refused here; each verdict says whether
/// its event would be taken.
pub fn dry_run(request: &Request, principal: &Principal, batch: BatchRequest) -> Result<Vec<Planned>, ApiError> {
    let state = request.state;
    state.edge.admits(&principal.source.id).map_err(ApiError::NotReady)?;
    let mut admission = admission(request, principal, (state.clock)(), batch.sent_at.as_deref());
    admission.protocol = batch.protocol;
    Ok(admission.admit_all(batch.events, batch.undecodable))
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
