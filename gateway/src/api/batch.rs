//! `POST /v1/batch`: the Segment-compatible batch endpoint. The request's
//! whole path reads top to bottom here.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};

use crate::AppState;
use crate::api::outcome;
use crate::auth;
use crate::error::ApiError;
use crate::pipeline::Admission;
use crate::wire;

/// auth → decode → validate → enrich → route → produce → answer.
pub async fn batch(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let received_at = (state.clock)();
    // A header key is checked before the body is read; a body key after.
    let header_source = auth::basic_user(&req)?.map(|key| state.write_keys.source(&key)).transpose()?;
    let body = wire::read_body(&req, payload, state.config.limits.max_body_bytes).await?;
    let batch = wire::decode_batch(&body, &state.config.limits)?;
    let source = match header_source {
        Some(source) => source,
        None => state.write_keys.source(batch.write_key.as_deref().ok_or(ApiError::MissingCredentials)?)?,
    };
    let admission = Admission {
        catalog: &state.catalog,
        source: &source,
        kafka: &state.config.kafka,
        received_at,
        sent_at: batch.sent_at.as_deref(),
        auth_method: "write-key",
    };
    let planned = batch.events.into_iter().map(|event| admission.admit(event)).collect();
    let deadline = Duration::from_millis(state.config.server.request_timeout_ms);
    let answer = outcome::produce(state.sink.as_ref(), planned, deadline, state.config.server.retry_after_secs).await?;
    tracing::debug!(source = %source.id, accepted = answer.accepted, invalid = answer.invalid, rejected = answer.rejected, "Batch answered");
    Ok(HttpResponse::Ok().json(answer))
}
