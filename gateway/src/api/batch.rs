//! `POST /v1/batch` and the single-event calls `/v1/track`, `/v1/page`,
//! `/v1/screen`, `/v1/identify`, `/v1/group`, `/v1/alias` of the Segment
//! HTTP Tracking API, under every spelling SDKs use (see [`super::routes`]).
//! Each handler is the request's path, one call per stage (see
//! [`crate::stages`]).

use actix_web::{HttpRequest, HttpResponse, web};

use crate::api::routes;
use crate::error::ApiError;
use crate::stages::{Request, admit, answer, authenticate, charge, decode, produce};
use crate::state::AppState;
use crate::wire::WireError;

/// `POST /v1/batch` (also `/v1/b`, `/v1/import`, `/beacon/v1/batch`).
pub async fn batch(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    charge::capacity(&state)?;
    let mut request = Request::new(&req, &state, "batch");
    authenticate::not_locked_out(&request)?;
    charge::request(&request)?;
    authenticate::header(&mut request, req.headers()).await?;
    let body = decode::body(&req, payload, &state).await?;
    let batch = decode::batch(body, &state.config.limits)?;
    let principal = authenticate::principal(&request, &req, batch.write_key.as_deref())?;
    charge::events(&request, &principal, batch.events.len())?;
    let planned = admit::events(&request, &principal, batch)?;
    let produced = produce::records(&request, planned, principal.source.spool).await?;
    Ok(HttpResponse::Ok().json(answer::events(&request, produced)))
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
    charge::capacity(&state)?;
    let mut request = Request::new(&req, &state, kind);
    authenticate::not_locked_out(&request)?;
    charge::request(&request)?;
    authenticate::header(&mut request, req.headers()).await?;
    let body = decode::body(&req, payload, &state).await?;
    let batch = decode::single(body, kind)?;
    let principal = authenticate::principal(&request, &req, batch.write_key.as_deref())?;
    charge::events(&request, &principal, batch.events.len())?;
    let planned = admit::events(&request, &principal, batch)?;
    let produced = produce::records(&request, planned, principal.source.spool).await?;
    Ok(HttpResponse::Ok().json(answer::events(&request, produced)))
}
