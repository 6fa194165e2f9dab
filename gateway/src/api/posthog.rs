//! PostHog's capture API, as its SDKs call it (paths in
//! [`super::routes::POSTHOG_CAPTURE`]): the ingest path (see
//! [`crate::stages::ingest`]) with [`crate::wire::posthog`] as its decoder,
//! the project token (`api_key`, `token`) as the source's write key.
//!
//! Answers: `200 {"status": 1, ...}` with the per-event outcomes beside
//! PostHog's own `status`. Errors keep the gateway's statuses, which the
//! SDKs read as PostHog's own: posthog-node (`@posthog/core`
//! `fetchWithRetry`) counts only 2xx as sent and retries the rest a bounded
//! number of times; the Python `posthog` (`consumer.py` `is_retryable`)
//! retries 5xx, 408 and 429 and drops other 4xx; posthog-js retries 5xx
//! and network errors from its retry queue.
//!
//! The load-time calls of posthog-js (`/array/{token}/config`, its
//! `config.js` form, `/flags/`, and `/decide/` of older versions) get one
//! minimal document that keeps the SDK capturing and turns off what the
//! gateway does not serve (recording, surveys, flags, heatmaps,
//! autocapture), whatever the token: never an error to retry.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE};
use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::stages::authenticate;
use crate::stages::ingest::{arrive, ingest};
use crate::state::AppState;
use crate::wire::posthog::{self as decoder, Framing, PROTOCOL};
use crate::wire::{self, WireError};

/// `POST /e/`, `/i/v0/e/`, `/capture/`, `/batch/`, `/track/`, `/engage/`
/// (with or without the slash); `GET` of the same with `data=` in the
/// query, as the oldest posthog-js image transport sends it.
pub async fn capture(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let request = arrive(&req, &state, PROTOCOL).await?;
    let body = read(&req, payload, &state).await?;
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    let framing = Framing {
        content_type: header(CONTENT_TYPE),
        content_encoding: header(CONTENT_ENCODING),
        query: req.query_string(),
    };
    let (body, framing) = if body.is_empty() && req.method() == actix_web::http::Method::GET {
        (
            req.query_string().as_bytes().to_vec(),
            Framing { content_type: Some("application/x-www-form-urlencoded"), ..framing },
        )
    } else {
        (body.to_vec(), framing)
    };
    let batch = decoder::decode(&body, framing, &state.config.limits, state.config.mappings.of(PROTOCOL))?;
    let principal = authenticate::principal(&request, &req, batch.write_key.as_deref())?;
    let answer = ingest(&request, &principal, batch).await?;
    let mut document = serde_json::to_value(&answer).unwrap_or_else(|_| json!({}));
    if let Value::Object(fields) = &mut document {
        fields.insert("status".into(), json!(1));
    }
    Ok(HttpResponse::Ok().json(document))
}

/// The raw body within `limits.max_body_bytes` (see [`wire::read_body`]).
async fn read(req: &HttpRequest, payload: web::Payload, state: &AppState) -> Result<web::Bytes, ApiError> {
    let (limits, server) = (&state.config.limits, &state.config.server);
    let deadline = std::time::Duration::from_millis(server.body_timeout_ms);
    let read = wire::read_body(
        req.headers(),
        payload,
        limits.max_body_bytes,
        &state.bodies,
        deadline,
        server.retry_after_secs,
    );
    read.await.map_err(|(error, unread): (WireError, _)| {
        if let Some(unread) = unread {
            req.extensions_mut().insert(unread);
        }
        error.into()
    })
}

/// What the gateway serves of PostHog's configuration: capture only.
fn remote_config(token: &str) -> Value {
    json!({
        "token": token,
        "supportedCompression": ["gzip", "gzip-js"],
        "hasFeatureFlags": false,
        "featureFlags": {},
        "featureFlagPayloads": {},
        "flags": {},
        "errorsWhileComputingFlags": false,
        "quotaLimited": [],
        "captureDeadClicks": false,
        "capturePerformance": false,
        "autocapture_opt_out": true,
        "autocaptureExceptions": false,
        "analytics": {"endpoint": "/i/v0/e/"},
        "elementsChainAsString": true,
        "sessionRecording": false,
        "heatmaps": false,
        "surveys": false,
        "productTours": false,
        "defaultIdentifiedOnly": true,
        "siteApps": [],
        "toolbarParams": {},
        "isAuthenticated": false,
        "config": {"enable_collect_everything": false},
    })
}

fn cached(mut builder: actix_web::HttpResponseBuilder) -> actix_web::HttpResponseBuilder {
    builder.insert_header((CACHE_CONTROL, "private, max-age=300"));
    builder
}

/// `GET /array/{token}/config`.
pub async fn config(token: web::Path<String>) -> HttpResponse {
    cached(HttpResponse::Ok()).json(remote_config(&token))
}

/// `GET /array/{token}/config.js`: the same document as a script that
/// hands it to posthog-js (`window._POSTHOG_REMOTE_CONFIG[token]`).
pub async fn config_js(token: web::Path<String>) -> HttpResponse {
    let document = json!({"config": remote_config(&token), "siteApps": []});
    // Both are JSON texts, so nothing in the token can break out of the script.
    let quoted = Value::String(token.into_inner()).to_string();
    let script = format!(
        "(function(){{window._POSTHOG_REMOTE_CONFIG=window._POSTHOG_REMOTE_CONFIG||{{}};\
         window._POSTHOG_REMOTE_CONFIG[{quoted}]={document};}})();"
    );
    cached(HttpResponse::Ok()).insert_header((CONTENT_TYPE, "application/javascript")).body(script)
}

/// `GET /static/{file}.js`: posthog-js loads its surveys bundle even with
/// surveys off; an empty script (not a 404 it logs, twice) ends that.
pub async fn extension() -> HttpResponse {
    cached(HttpResponse::Ok())
        .insert_header((CONTENT_TYPE, "application/javascript"))
        .body("/* eventgw serves PostHog capture only: no extensions */\n")
}

/// `POST|GET /flags/` and `/decide/`: no flags, nothing but capture on.
/// The body is not read: whatever it holds, the answer is the same.
pub async fn flags() -> HttpResponse {
    HttpResponse::Ok().insert_header((CACHE_CONTROL, "no-store")).json(remote_config(""))
}
