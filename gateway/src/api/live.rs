//! `GET /live/` (the page), `GET /live/stream` (Server-Sent Events) and
//! `GET /live/events/{id}` (one event's stored record): the live events view behind the operator token (`[live]`), registered
//! only when `live.enabled`. See docs/live.md.

use std::time::Duration;

use actix_web::http::header::{self, HeaderMap};
use actix_web::{HttpRequest, HttpResponse, web};
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::live::{Filter, Record, page, sse};
use crate::state::AppState;

/// The cookie the page sets so its own stream request is authorised.
const COOKIE: &str = "eventgw_live";

/// The page. `?token=` is taken once and turned into an `HttpOnly`
/// cookie (the page then drops it from the address bar).
pub async fn page(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let token = authorise(&req, &state)?;
    let sources: Vec<&str> = state.config.sources.iter().map(|s| s.id.as_str()).collect();
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((
            "Content-Security-Policy",
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'",
        ))
        .insert_header((header::SET_COOKIE, format!("{COOKIE}={token}; Path=/live; HttpOnly; SameSite=Strict")))
        .body(page::render(&sources)))
}

/// The stream of events passing the query's filters.
pub async fn stream(
    req: HttpRequest,
    state: web::Data<AppState>,
    filter: web::Query<Filter>,
) -> Result<HttpResponse, ApiError> {
    authorise(&req, &state)?;
    let filter = filter.into_inner();
    let viewer = state.live.watch(filter.source());
    let heartbeat = Duration::from_secs(state.config.live.heartbeat_secs);
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(sse::stream(viewer, filter, heartbeat)))
}

/// The stored record of event `id` of the stream, as Kafka holds it (the
/// dead-letter envelope for an invalid event): read back from Kafka at the
/// row's partition and offset, or the bytes the view kept of a record Kafka
/// does not hold yet (spooled). `204` for an event with nothing stored,
/// `404 live_event_gone` once the view no longer holds the row or Kafka the
/// record, `503 live_event_unreadable` when Kafka does not answer or
/// [`crate::live::READ_BACKS`] reads are under way.
pub async fn opened(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    authorise(&req, &state)?;
    let id = id.into_inner();
    let gone = || ApiError::LiveEventGone(id.chars().take(24).collect());
    let record = id.parse::<u64>().ok().and_then(|n| state.live.opened(n)).ok_or_else(gone)?;
    let bytes = match record {
        Record::Kept(bytes) => Some(bytes),
        Record::Kafka { topic, partition, offset } => {
            let _reading = state.live.reading().ok_or_else(|| {
                ApiError::LiveEventUnreadable(format!("{} rows are being read back already", crate::live::READ_BACKS))
            })?;
            let read = state.sink.read_back(&topic, partition, offset).await;
            Some(read.map_err(ApiError::LiveEventUnreadable)?.ok_or_else(gone)?)
        }
        Record::Nothing => None,
    };
    let mut answer = HttpResponse::build(match bytes {
        Some(_) => actix_web::http::StatusCode::OK,
        None => actix_web::http::StatusCode::NO_CONTENT,
    });
    answer.insert_header((header::CACHE_CONTROL, "no-store"));
    Ok(match bytes {
        Some(bytes) => answer.content_type("application/json").body(bytes),
        None => answer.finish(),
    })
}

/// The operator token the request carries (bearer header, cookie, or
/// `?token=`), when it is the configured one; compared in constant time.
fn authorise(req: &HttpRequest, state: &AppState) -> Result<String, ApiError> {
    let given = bearer(req.headers())
        .or_else(|| cookie(req.headers()))
        .or_else(|| query_token(req.query_string()))
        .ok_or(ApiError::OperatorUnauthorized(
            "the live view needs the operator token: `Authorization: Bearer <live.token>`, or open /live/?token=<live.token>",
        ))?;
    let expected = state.config.live.token.as_bytes();
    if expected.is_empty() || !bool::from(given.as_bytes().ct_eq(expected)) {
        return Err(ApiError::OperatorUnauthorized("the operator token is not the configured `live.token`"));
    }
    Ok(given)
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    value.strip_prefix("Bearer ").map(|t| t.trim().to_owned())
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    headers.get_all(header::COOKIE).filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE).then(|| value.to_owned())
    })
}

fn query_token(query: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        (name == "token").then(|| percent_decode(value))
    })
}

/// `%XX` and `+` decoded; a malformed escape is kept as sent.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
