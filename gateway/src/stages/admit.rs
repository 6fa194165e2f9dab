//! Validate → enrich → route, for each event of the batch: the verdict of
//! every event (accepted with its record, dead-lettered with its reason,
//! rejected, or a duplicate within the request). The per-event steps are in
//! [`crate::pipeline`]; this stage gives them the request's context once,
//! and refuses a strict source's batch whole when any event would not be
//! accepted.

use super::{Request, answer};
use crate::auth::Principal;
use crate::enrichment::request::EdgeRequest;
use crate::error::ApiError;
use crate::pipeline::{self, Admission, Planned};
use crate::wire::BatchRequest;

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
    let admission = Admission {
        catalog: &state.catalog,
        source,
        kafka: &state.config.kafka,
        received_at,
        received_at_text: &received_at_text,
        sent_at: batch.sent_at.as_deref(),
        auth_method: principal.method,
        subject: principal.subject.as_deref(),
        client: &request.client,
        clients: &state.clients,
        max_event_bytes: state.config.limits.max_event_bytes,
        metrics: &state.metrics,
        schema_ids: &schema_ids,
        edge: &edge,
    };
    let planned = admission.admit_all(batch.events);
    edge.flush(&state.metrics);
    let refused = planned.iter().filter(|p| p.verdict.refuses_strict_batch()).count();
    if source.strict && refused > 0 {
        answer::count_refused_batch(request, planned.len());
        return Err(ApiError::BatchRejected(refused, answer::preview(planned).events));
    }
    Ok(planned)
}

#[cfg(test)]
#[path = "admit_tests.rs"]
mod tests;
