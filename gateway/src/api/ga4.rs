//! GA4's Measurement Protocol, as Google documents it (paths in
//! [`super::routes::GA4_COLLECT`] and [`super::routes::GA4_DEBUG`]): the
//! ingest path (see [`crate::stages::ingest`]) with [`crate::wire::ga4`]
//! as its decoder, the URL's `api_secret` as the source's write key.
//!
//! Answers. GA4's `/mp/collect` answers `204 No Content` to everything;
//! its clients never read a body and retry only on 5xx and network errors.
//! Here: `204` when every event was taken (stored, spooled, already stored,
//! or suppressed by the user's wish); `200` with the per-event outcomes
//! when any was not (dead-lettered or refused: retrying would not change
//! that, so it is still a success to the client, and the body says why for
//! whoever looks). A missing or unknown `api_secret` is `401` (GA4 would
//! answer 2xx and drop the events silently), and every other error keeps
//! the gateway's status and code: a 503 is retried, nothing answered 2xx
//! is lost.
//!
//! `/debug/mp/collect` runs the same decoder and the pipeline's own
//! verdicts ([`admit::dry_run`]) without producing anything, and answers
//! GA4's `{"validationMessages": [...]}`: GA4's structural rules and every
//! reason the catalog would refuse an event, in GA4's field paths.

use actix_web::{HttpRequest, HttpResponse, web};
use eventgw_schemas::SchemaViolation;
use serde_json::json;

use crate::code::Code;
use crate::config::mapping::TrackerMapping;
use crate::error::ApiError;
use crate::outcome::EventStatus;
use crate::pipeline::{Planned, Verdict};
use crate::stages::ingest::{arrive, ingest};
use crate::stages::{admit, authenticate, charge, decode};
use crate::state::AppState;
use crate::wire::ga4::{self as decoder, Decoded, Finding, PROTOCOL, Stream};

/// The `endpoint` label of `/debug/mp/collect`'s requests.
const DEBUG_ENDPOINT: &str = "ga4-debug";

/// `POST /mp/collect?measurement_id=…&api_secret=…`.
pub async fn collect(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let request = arrive(&req, &state, PROTOCOL).await?;
    let stream = Stream::from_query(req.query_string())?;
    let principal = authenticate::url_principal(&request, &req, stream.api_secret.as_deref())?;
    let (body, _) = decode::inflated(&req, payload, &state).await?;
    let decoded = decoder::decode(&body, &stream, &state.config.limits, state.config.mappings.of(PROTOCOL))?;
    let answer = ingest(&request, &principal, decoded.batch).await?;
    let taken = |status| {
        matches!(
            status,
            EventStatus::Accepted | EventStatus::Spooled | EventStatus::Duplicate | EventStatus::Suppressed
        )
    };
    if answer.events.iter().all(|e| taken(e.status)) {
        return Ok(HttpResponse::NoContent().finish());
    }
    Ok(answer.response())
}

/// `POST /debug/mp/collect?…`: what `/mp/collect` would do with the same
/// request, as GA4's validation messages; nothing is produced.
pub async fn debug(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let request = arrive(&req, &state, DEBUG_ENDPOINT).await?;
    let stream = Stream::from_query(req.query_string())?;
    let principal = authenticate::url_principal(&request, &req, stream.api_secret.as_deref())?;
    let (body, _) = decode::inflated(&req, payload, &state).await?;
    let mapping = state.config.mappings.of(PROTOCOL);
    let Decoded { batch, names, mut findings } = match decoder::decode(&body, &stream, &state.config.limits, mapping) {
        Ok(decoded) => decoded,
        Err(error) => return Ok(messages(&[body_finding(&ApiError::from(error))])),
    };
    // Validation costs what ingesting would: the same quota.
    charge::events(&request, &principal, batch.events.len())?;
    let planned = admit::dry_run(&request, &principal, batch)?;
    for (index, planned) in planned.iter().enumerate() {
        let name = names.get(index).cloned().flatten();
        findings.extend(verdict_findings(index, planned, name.as_deref(), mapping));
    }
    Ok(messages(&findings))
}

fn messages(findings: &[Finding]) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "validationMessages": findings }))
}

/// A body the decoder refused, as GA4 reports it: one message on the body.
fn body_finding(error: &ApiError) -> Finding {
    let code = if error.code() == Code::BatchTooLarge { "EXCEEDED_MAX_ENTITIES" } else { "VALUE_INVALID" };
    Finding {
        field_path: String::new(),
        description: describe(error.code(), &error.to_string()),
        validation_code: code,
    }
}

fn describe(code: Code, message: &str) -> String {
    format!("{}: {message}", code.as_str())
}

/// Why the pipeline would not take event `index`, in GA4's terms; nothing
/// for an event it would take.
fn verdict_findings(index: usize, planned: &Planned, name: Option<&str>, mapping: &TrackerMapping) -> Vec<Finding> {
    let at = |field: &str| format!("events[{index}]{field}");
    let (code, message, errors) = match &planned.verdict {
        Verdict::Accept(_) | Verdict::Duplicate { .. } | Verdict::Reject { code: Code::Suppressed, .. } => {
            return Vec::new();
        }
        Verdict::DeadLetter { code, message, errors, .. } => (*code, message, errors.as_slice()),
        Verdict::Reject { code, message } => (*code, message, &[][..]),
    };
    if !errors.is_empty() {
        let renames = name.and_then(|n| mapping.events.get(n)).map(|r| &r.rename);
        let ga4_name = |field: &str| {
            renames
                .and_then(|r| r.iter().find(|(_, to)| *to == field))
                .map_or(field, |(from, _)| from.as_str())
                .to_owned()
        };
        return errors.iter().map(|e| schema_finding(index, e, &ga4_name)).collect();
    }
    let (field, validation_code) = match code {
        Code::UnknownEvent => (".name", "NAME_INVALID"),
        Code::MissingEventName => (".name", "VALUE_REQUIRED"),
        Code::DomainNotAllowed => (".name", "VALUE_INVALID"),
        Code::InvalidTimestamp => (".timestamp_micros", "VALUE_INVALID"),
        Code::MissingKey => ("", "VALUE_REQUIRED"),
        _ => ("", "VALUE_INVALID"),
    };
    vec![Finding { field_path: at(field), description: describe(code, message), validation_code }]
}

/// One schema violation at its GA4 path: `/properties/order_id` of a
/// purchase is `events[0].params.transaction_id`, `/userId` is `user_id`.
fn schema_finding(index: usize, error: &SchemaViolation, ga4_name: &dyn Fn(&str) -> String) -> Finding {
    let mut segments: Vec<&str> = error.path.split('/').skip(1).filter(|p| !p.is_empty()).collect();
    // A missing property is reported at its parent: name the property itself.
    if let Some(missing) = error.message.strip_prefix('"').and_then(|m| m.split_once("\" is a required property")) {
        segments.push(missing.0);
    }
    let mut parts = segments.into_iter();
    let field_path = match parts.next() {
        None => format!("events[{index}]"),
        Some("userId") => "user_id".into(),
        Some("anonymousId") => "client_id".into(),
        Some("properties") => {
            let rest: Vec<String> =
                parts.enumerate().map(|(i, p)| if i == 0 { ga4_name(p) } else { p.to_owned() }).collect();
            std::iter::once(format!("events[{index}].params")).chain(rest).collect::<Vec<_>>().join(".")
        }
        Some(other) => {
            let rest: Vec<&str> = std::iter::once(other).chain(parts).collect();
            format!("events[{index}].{}", rest.join("."))
        }
    };
    let required = error.message.contains("required");
    Finding {
        field_path,
        description: describe(
            Code::SchemaViolation,
            &format!("{} (at `{}` of the catalog event)", error.message, error.path),
        ),
        validation_code: if required { "VALUE_REQUIRED" } else { "VALUE_INVALID" },
    }
}
