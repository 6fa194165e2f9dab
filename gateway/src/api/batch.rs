//! `POST /v1/batch` and the single-event calls `/v1/track`, `/v1/page`,
//! `/v1/screen`, `/v1/identify`, `/v1/group`, `/v1/alias` of the Segment
//! HTTP Tracking API, under every spelling SDKs use (see [`super::routes`]).
//! Each handler is the ingest path (see [`crate::stages::ingest`]) with
//! its decoder between arrival and authentication.

use actix_web::{HttpRequest, HttpResponse, web};

use crate::api::routes;
use crate::error::ApiError;
use crate::stages::ingest::{arrive, ingest};
use crate::stages::{authenticate, decode};
use crate::state::AppState;
use crate::wire::WireError;

/// `POST /v1/batch` (also `/v1/b`, `/v1/import`, `/beacon/v1/batch`).
pub async fn batch(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let request = arrive(&req, &state, "batch").await?;
    let body = decode::body(&req, payload, &state).await?;
    let batch = decode::batch(body, &state.config.limits)?;
    let principal = authenticate::principal(&request, &req, batch.write_key.as_deref())?;
    Ok(ingest(&request, &principal, batch).await?.response())
}

/// `POST /v1/{track|page|screen|identify|group|alias}` (or `/v1/t`, `/v1/p`,
/// ...): one event, whose `type` is the endpoint's.
pub async fn single(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Some(kind) = routes::single_call(req.path()) else {
        return Err(WireError::InvalidBody(format!("`{}` is not a call of this API", req.path())).into());
    };
    let request = arrive(&req, &state, kind).await?;
    let body = decode::body(&req, payload, &state).await?;
    let batch = decode::single(body, kind)?;
    let principal = authenticate::principal(&request, &req, batch.write_key.as_deref())?;
    Ok(ingest(&request, &principal, batch).await?.response())
}
