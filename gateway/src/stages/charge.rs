//! Charge: what a request costs against the gateway's capacity and the
//! quotas. Capacity and the per-IP request quota are charged before the
//! body is read; the events after, all or nothing, in an order that never
//! spends one quota for a batch another refuses (see `Quotas::check_events`).

use super::Request;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::state::AppState;

/// Refuses with 503 while the producer's queue is above its high-water
/// mark: a request Kafka cannot take now costs no body read, parse or
/// validation.
pub fn capacity(state: &AppState) -> Result<(), ApiError> {
    let depth = state.sink.queue_depth();
    if u64::try_from(depth).unwrap_or(0) >= state.config.kafka.backpressure_threshold() {
        tracing::warn!(depth, "Producer queue above its high-water mark; refusing with 503");
        return Err(ApiError::Backpressure { retry_after: state.config.server.retry_after_secs });
    }
    Ok(())
}

/// One request against the client address's request quota.
pub fn request(request: &Request) -> Result<(), ApiError> {
    request.auth.quotas.check_request(request.client.ip).map_err(ApiError::QuotaExceeded)
}

/// `events` events against the source's, the subject's and the global
/// quota: all charged, or none. A batch larger than a quota's burst can
/// never conform (413), otherwise it is worth retrying later (429).
pub fn events(request: &Request, principal: &Principal, events: usize) -> Result<(), ApiError> {
    let quotas = &request.auth.quotas;
    quotas.check_events(&principal.source.id, principal.subject.as_deref(), events).map_err(|denied| {
        if denied.retry_after.is_some() { ApiError::QuotaExceeded(denied) } else { ApiError::BatchExceedsQuota(denied) }
    })
}

#[cfg(test)]
#[path = "charge_tests.rs"]
mod tests;
