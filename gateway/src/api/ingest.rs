//! The path every ingestion endpoint shares, in order: auth → decode →
//! validate → enrich → route → produce → answer. Endpoints differ only in
//! how they find the events in the request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{HttpMessage, HttpRequest, web};
use serde_json::Value;

use crate::AppState;
use crate::api::outcome::{self, BatchAnswer};
use crate::auth::{self, Authenticated, Source};
use crate::error::ApiError;
use crate::pipeline::{Admission, Verdict};
use crate::wire::{self, BatchRequest};

/// The write key from the `Authorization` header, checked before the body
/// is read so that a wrong key costs no body.
pub fn header_source(req: &HttpRequest, state: &AppState) -> Result<Option<Arc<Source>>, ApiError> {
    auth::basic_user(req)?.map(|key| state.write_keys.source(&key)).transpose()
}

/// Reads, inflates and parses a JSON body within every configured limit.
pub async fn read_json(req: &HttpRequest, payload: web::Payload, state: &AppState) -> Result<Value, ApiError> {
    let limits = &state.config.limits;
    wire::check_media_type(req)?;
    let deadline = Duration::from_millis(state.config.server.body_timeout_ms);
    let raw = wire::read_body(req, payload, limits.max_body_bytes, deadline).await?;
    let body = wire::decode(req, raw, limits.max_decompressed_bytes)?;
    wire::parse(&body, limits.json())
}

/// The source: from the header if it had one, else from the body's `writeKey`.
pub fn resolve_source(
    req: &HttpRequest,
    state: &AppState,
    from_header: Option<Arc<Source>>,
    request: &BatchRequest,
) -> Result<Arc<Source>, ApiError> {
    let source = match from_header {
        Some(source) => source,
        None => state.write_keys.source(request.write_key.as_deref().ok_or(ApiError::MissingCredentials)?)?,
    };
    req.extensions_mut().insert(Authenticated(Arc::clone(&source)));
    Ok(source)
}

/// Checks, enriches and produces the events of `request`; the answer once
/// Kafka acknowledged every record.
pub async fn ingest(
    req: &HttpRequest,
    state: &AppState,
    source: &Source,
    request: BatchRequest,
    endpoint: &'static str,
) -> Result<BatchAnswer, ApiError> {
    let client = state.clients.resolve(req);
    let admission = Admission {
        catalog: &state.catalog,
        source,
        kafka: &state.config.kafka,
        received_at: (state.clock)(),
        sent_at: request.sent_at.as_deref(),
        auth_method: "write-key",
        client: &client,
        clients: &state.clients,
        max_event_bytes: state.config.limits.max_event_bytes,
    };
    let planned: Vec<_> = request.events.into_iter().map(|event| admission.admit(event)).collect();
    let refused = planned.iter().filter(|p| !matches!(p.verdict, Verdict::Accept(_))).count();
    if source.strict && refused > 0 {
        let preview = outcome::preview(planned);
        count_events(state, endpoint, &preview);
        return Err(ApiError::BatchRejected(refused, preview.events));
    }
    let depth = state.sink.queue_depth();
    if u64::try_from(depth).unwrap_or(0) >= state.config.kafka.backpressure_threshold() {
        tracing::warn!(depth, "Producer queue above its high-water mark; refusing with 503");
        return Err(ApiError::Backpressure { retry_after: state.config.server.retry_after_secs });
    }
    let deadline = Duration::from_millis(state.config.server.request_timeout_ms);
    let started = Instant::now();
    let answer = outcome::produce(state.sink.as_ref(), planned, deadline, state.config.server.retry_after_secs).await?;
    state.metrics.produce_latency.observe(started.elapsed().as_secs_f64());
    count_events(state, endpoint, &answer);
    Ok(answer)
}

fn count_events(state: &AppState, endpoint: &str, answer: &BatchAnswer) {
    for event in &answer.events {
        let topic = event.topic.as_deref().unwrap_or("none");
        state.metrics.events.with_label_values(&[endpoint, event.status, topic]).inc();
        if let ("invalid", Some(code)) = (event.status, event.code) {
            state.metrics.dead_letters.with_label_values(&[code]).inc();
        }
    }
}
