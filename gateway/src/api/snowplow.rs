//! Snowplow's tracker protocol, as its trackers send it (paths in
//! [`super::routes::SNOWPLOW_TP2`] and [`super::routes::SNOWPLOW_PIXEL`]):
//! the ingest path (see [`crate::stages::ingest`]) with
//! [`crate::wire::snowplow`] as its decoder. The protocol carries no key:
//! each event's app id (`aid`) names its source (`sources.snowplow_app_ids`).
//!
//! Answers. `POST …/tp2` is answered `200` with the per-event outcomes once
//! every event is stored, spooled, a duplicate, or dead-lettered (retrying
//! would not change a dead letter), an event the decoder could not read
//! included (`undecodable_event`); `GET /i` the same status with a 1x1
//! GIF. Snowplow's trackers retry every status but 2xx and 400, 401, 403,
//! 410 and 422 (the browser tracker's `out_queue.ts` default
//! `dontRetryStatusCodes`, the Python tracker's `Emitter._should_retry`):
//! so a refusal that retrying cannot change and that the gateway answers
//! with another 4xx elsewhere (`413` too large, `415` media type) is
//! answered `400` here, with the same code and message, or the tracker
//! would send it again forever. `429` and `503` keep their status: they
//! are worth retrying.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};

use super::BatchAnswer;
use super::pixel::gif;
use crate::error::ApiError;
use crate::stages::ingest::{arrive, ingest};
use crate::stages::{Request, authenticate, decode};
use crate::state::AppState;
use crate::wire;
use crate::wire::snowplow::{self as decoder, Decoded, PROTOCOL};

/// The `endpoint` label of `GET /i`'s events.
const PIXEL_ENDPOINT: &str = "snowplow-pixel";

/// Statuses Snowplow's trackers do not retry (besides 2xx).
const NOT_RETRIED: [u16; 5] = [400, 401, 403, 410, 422];

/// `POST /com.snowplowanalytics.snowplow/tp2`.
pub async fn tp2(req: HttpRequest, payload: web::Payload, state: web::Data<AppState>) -> HttpResponse {
    match collect(&req, payload, &state).await {
        Ok(answer) => answer.response(),
        Err(error) => not_retried_forever(&error, error.error_response()),
    }
}

async fn collect(req: &HttpRequest, payload: web::Payload, state: &AppState) -> Result<BatchAnswer, ApiError> {
    let request = arrive(req, state, PROTOCOL).await?;
    let (body, gzip) = decode::inflated(req, payload, state).await?;
    wire::check_media_type(req.headers(), gzip)?;
    let decoded = decoder::decode_post(&body, &state.config.limits, state.config.mappings.of(PROTOCOL))?;
    take(&request, req, decoded).await
}

/// `GET /i` and `GET /com.snowplowanalytics.snowplow/i`: one event in the
/// query, answered with a GIF whatever happened; the status tells what
/// did, and `X-Eventgw-Error` names any error code (as `/v1/pixel.gif`).
pub async fn pixel(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let taken = async {
        let request = arrive(&req, &state, PIXEL_ENDPOINT).await?;
        let decoded =
            decoder::decode_get(req.query_string(), &state.config.limits, state.config.mappings.of(PROTOCOL))?;
        take(&request, &req, decoded).await
    };
    match taken.await {
        Ok(_) => gif(HttpResponse::Ok()),
        Err(error) => {
            let mut answer = error.answer();
            answer.insert_header(("x-eventgw-error", error.code().as_str()));
            not_retried_forever(&error, gif(answer))
        }
    }
}

async fn take(request: &Request<'_>, req: &HttpRequest, decoded: Decoded) -> Result<BatchAnswer, ApiError> {
    let principal = authenticate::app_principal(request, req, decoded.app_ids.iter().map(String::as_str))?;
    ingest(request, &principal, decoded.batch).await
}

/// `answer` with a 4xx that Snowplow's trackers would retry, though
/// retrying cannot change it, turned into `400` (see the module's doc).
fn not_retried_forever(error: &ApiError, mut answer: HttpResponse) -> HttpResponse {
    let status = error.status_code();
    if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS && !NOT_RETRIED.contains(&status.as_u16()) {
        *answer.status_mut() = StatusCode::BAD_REQUEST;
    }
    answer
}
