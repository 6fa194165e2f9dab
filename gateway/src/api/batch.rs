//! `POST /v1/batch` and the single-event calls `/v1/track`, `/v1/page`,
//! `/v1/screen`, `/v1/identify`, `/v1/group`, `/v1/alias` of the Segment
//! HTTP Tracking API, under every spelling SDKs use (see [`super::routes`]).

use actix_web::{HttpRequest, HttpResponse, web};

use crate::AppState;
use crate::api::{ingest, routes};
use crate::error::ApiError;
use crate::wire::{self, WireError};

/// `POST /v1/batch` (also `/v1/b`, `/v1/import`, `/beacon/v1/batch`).
pub async fn batch(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let gate = ingest::open(&req, &state).await?;
    let body = ingest::read_json(&req, payload, &state).await?;
    let request = wire::decode_batch(body, &state.config.limits)?;
    let principal = ingest::authorize(&req, &gate, &request)?;
    let answer = ingest::ingest(&state, &gate, &principal, request, "batch").await?;
    Ok(HttpResponse::Ok().json(answer))
}

/// `POST /v1/{track|page|screen|identify|group|alias}` (or `/v1/t`, `/v1/p`,
/// ...): one event, whose `type` is the endpoint's.
pub async fn single(
    req: HttpRequest,
    kind: web::Path<String>,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Some(kind) = routes::single_kind(kind.as_str()) else {
        return Err(WireError::InvalidBody(format!("`{kind}` is not a call of this API")).into());
    };
    let gate = ingest::open(&req, &state).await?;
    let body = ingest::read_json(&req, payload, &state).await?;
    let request = wire::decode_single(body, kind)?;
    let principal = ingest::authorize(&req, &gate, &request)?;
    let answer = ingest::ingest(&state, &gate, &principal, request, kind).await?;
    Ok(HttpResponse::Ok().json(answer))
}
