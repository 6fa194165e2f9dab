//! The path every ingestion endpoint shares, in order: auth → decode →
//! quota → validate → enrich → route → produce → answer. Endpoints differ
//! only in how they find the events in the request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{HttpMessage, HttpRequest, web};
use serde_json::Value;

use crate::AppState;
use crate::api::outcome::{self, BatchAnswer, EventStatus};
use crate::auth::{self, AuthState, Authenticated, Principal};
use crate::enrich::ClientInfo;
use crate::error::ApiError;
use crate::pipeline::Admission;
use crate::wire::{self, BatchRequest};

/// What is known of a request before its body is read.
pub struct Gate {
    /// The client's IP and user agent.
    pub client: ClientInfo,
    /// The full client IP and client hints, for enrichment.
    pub facts: crate::enrichment::RequestFacts,
    /// The principal of the `Authorization` header, if it had one.
    header: Option<Principal>,
    /// The authentication state this request uses from start to end, even
    /// if a reload swaps in another meanwhile.
    auth: Arc<AuthState>,
}

/// Lock-out, per-IP request quota and header credentials: all checked
/// before the body is read, so refused requests cost no body.
pub async fn open(req: &HttpRequest, state: &AppState) -> Result<Gate, ApiError> {
    // Refused before any work: a request Kafka cannot take now costs no
    // body read, parse or validation.
    let depth = state.sink.queue_depth();
    if u64::try_from(depth).unwrap_or(0) >= state.config.kafka.backpressure_threshold() {
        tracing::warn!(depth, "Producer queue above its high-water mark; refusing with 503");
        return Err(ApiError::Backpressure { retry_after: state.config.server.retry_after_secs });
    }
    let client = state.clients.resolve(req);
    let auth = state.auth.load_full();
    auth.check_locked_out(client.ip)?;
    auth.quotas.check_request(client.ip).map_err(ApiError::QuotaExceeded)?;
    let header = match auth::header_credentials(req.headers()) {
        Ok(Some(credentials)) => Some(auth.authenticate(credentials).await.inspect_err(|_| failed(&auth, &client))?),
        Ok(None) => None,
        Err(e) => {
            failed(&auth, &client);
            return Err(e.into());
        }
    };
    let facts = state.edge.facts(req);
    Ok(Gate { client, facts, header, auth })
}

fn failed(auth: &AuthState, client: &ClientInfo) {
    auth.quotas.record_auth_failure(client.ip);
}

/// Reads, inflates and parses a JSON body within every configured limit.
pub async fn read_json(req: &HttpRequest, payload: web::Payload, state: &AppState) -> Result<Value, ApiError> {
    let limits = &state.config.limits;
    let server = &state.config.server;
    let deadline = Duration::from_millis(server.body_timeout_ms);
    let headers = req.headers();
    let read = wire::read_body(headers, payload, limits.max_body_bytes, deadline, server.retry_after_secs);
    let raw = read.await.map_err(|(error, unread)| {
        if let Some(unread) = unread {
            req.extensions_mut().insert(unread);
        }
        error
    })?;
    let (body, gzip) = wire::decode(headers, raw, limits.max_decompressed_bytes)?;
    wire::check_media_type(headers, gzip)?;
    Ok(wire::parse(&body, limits.json())?)
}

/// The principal, from every credential the request carries (see
/// [`identify`]). Then the events are charged to the quotas, all or nothing.
pub fn authorize(req: &HttpRequest, gate: &Gate, request: &BatchRequest) -> Result<Principal, ApiError> {
    let url_key = url_write_key(req);
    let principal = identify(gate, request.write_key.as_deref(), url_key.as_deref())
        .inspect_err(|_| failed(&gate.auth, &gate.client))?;
    req.extensions_mut().insert(Authenticated(Arc::clone(&principal.source)));
    let quotas = &gate.auth.quotas;
    quotas.check_events(&principal.source.id, principal.subject.as_deref(), request.events.len()).map_err(
        |denied| {
            if denied.retry_after.is_some() {
                ApiError::QuotaExceeded(denied)
            } else {
                ApiError::BatchExceedsQuota(denied)
            }
        },
    )?;
    Ok(principal)
}

/// Who the request speaks for: the `Authorization` header's principal, a
/// `writeKey` in the body (beacons cannot set headers) or in the URL (the
/// pixel, RudderStack's beacon path). Every key present must name the same
/// source, else `conflicting_write_keys`; a key in a URL must belong to a
/// source whose key may travel there, else `key_not_allowed_in_url`.
pub fn identify(gate: &Gate, body_key: Option<&str>, url_key: Option<&str>) -> Result<Principal, ApiError> {
    let mut principal = gate.header.clone();
    for (key, place) in [(body_key, "body"), (url_key, "URL")] {
        let Some(key) = key else { continue };
        let found = gate.auth.by_write_key(key);
        if place == "URL" && found.as_ref().is_ok_and(|p| !p.source.key_in_url) {
            return Err(ApiError::KeyNotAllowedInUrl);
        }
        match (&principal, found) {
            (None, found) => principal = Some(found?),
            (Some(held), Ok(other)) if held.source.id == other.source.id => {}
            (Some(_), _) => return Err(ApiError::ConflictingWriteKeys(place)),
        }
    }
    principal.ok_or(ApiError::MissingCredentials)
}

/// The `writeKey` query parameter, if the URL has one.
pub fn url_write_key(req: &HttpRequest) -> Option<String> {
    web::Query::<std::collections::HashMap<String, String>>::from_query(req.query_string())
        .ok()
        .and_then(|query| query.into_inner().remove("writeKey"))
}

/// Checks, enriches and produces the events of `request`; the answer once
/// Kafka acknowledged every record.
pub async fn ingest(
    state: &AppState,
    gate: &Gate,
    principal: &Principal,
    request: BatchRequest,
    endpoint: &'static str,
) -> Result<BatchAnswer, ApiError> {
    let source = &principal.source;
    state.edge.admits(&source.id).map_err(ApiError::NotReady)?;
    let received_at = (state.clock)();
    let received_at_text = crate::pipeline::format_time(received_at);
    let schema_ids = state.schema_ids.load();
    let edge = crate::enrichment::request::EdgeRequest::new(
        &state.edge,
        &state.catalog,
        &source.id,
        &gate.facts,
        &gate.client,
        received_at.timestamp(),
    );
    let admission = Admission {
        catalog: &state.catalog,
        source,
        kafka: &state.config.kafka,
        received_at,
        received_at_text: &received_at_text,
        sent_at: request.sent_at.as_deref(),
        auth_method: principal.method,
        subject: principal.subject.as_deref(),
        client: &gate.client,
        clients: &state.clients,
        max_event_bytes: state.config.limits.max_event_bytes,
        metrics: &state.metrics,
        schema_ids: &schema_ids,
        edge: &edge,
    };
    let planned = admission.admit_all(request.events);
    edge.flush(&state.metrics);
    let refused = planned.iter().filter(|p| p.verdict.refuses_strict_batch()).count();
    if source.strict && refused > 0 {
        // Nothing of a refused batch is produced: every event counts as
        // rejected, whatever the preview says it would have been.
        let count = u64::try_from(planned.len()).unwrap_or(u64::MAX);
        state.metrics.events.with_label_values(&[endpoint, "rejected", "none"]).inc_by(count);
        return Err(ApiError::BatchRejected(refused, outcome::preview(planned).events));
    }
    let deadline = Duration::from_millis(state.config.server.request_timeout_ms);
    let started = Instant::now();
    let retry_after = state.config.server.retry_after_secs;
    let answer = outcome::produce(state.sink.as_ref(), planned, deadline, retry_after, source.spool).await?;
    state.metrics.produce_latency.observe(started.elapsed().as_secs_f64());
    count_events(state, endpoint, &answer);
    Ok(answer)
}

/// Counts a request's events with one counter update per distinct label
/// set, not one per event: a batch of 500 mostly shares one.
fn count_events(state: &AppState, endpoint: &str, answer: &BatchAnswer) {
    let mut events: Vec<((&str, &str), u64)> = Vec::new();
    let mut dead: Vec<(&str, u64)> = Vec::new();
    for event in &answer.events {
        let labels = (event.status.as_str(), event.topic.as_deref().unwrap_or("none"));
        bump(&mut events, labels);
        if let (EventStatus::Invalid, Some(code)) = (event.status, event.code) {
            bump(&mut dead, code);
        }
    }
    for ((status, topic), n) in events {
        state.metrics.events.with_label_values(&[endpoint, status, topic]).inc_by(n);
    }
    for (code, n) in dead {
        state.metrics.dead_letters.with_label_values(&[code]).inc_by(n);
    }
}

fn bump<K: PartialEq>(counts: &mut Vec<(K, u64)>, key: K) {
    match counts.iter_mut().find(|(k, _)| *k == key) {
        Some((_, n)) => *n += 1,
        None => counts.push((key, 1)),
    }
}
