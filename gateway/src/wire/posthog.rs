//! PostHog's capture protocol → the canonical batch. Bodies come as the
//! SDKs send them: JSON (`{"api_key", "batch": [...], "sent_at"}` from
//! posthog-node and the Python `posthog`, posthog-js's
//! `addSentAtToCaptureBody` in `request.ts`; a bare array or one event
//! from older clients), gzip (`Content-Encoding: gzip`, or posthog-js's
//! `?compression=gzip-js` as `text/plain`), or a form `data=` holding
//! base64 JSON (posthog-js `?compression=base64`, its beacon fallback).
//! Each event then becomes a canonical call by the protocol's mapping
//! (`schemas/mappings/posthog.toml`, see [`crate::config::mapping`]).
//! Pure: bytes in, a batch out.

use base64::Engine;
use serde_json::{Map, Value};

use super::{BatchRequest, WireError, gunzip, parse};
use crate::config::LimitsConfig;
use crate::config::mapping::{Call, EventRule, TrackerMapping};

/// The protocol's name: its mapping file's stem and its routes' label.
pub const PROTOCOL: &str = "posthog";

/// What of the HTTP request the decoder reads besides the body.
#[derive(Debug, Default, Clone, Copy)]
pub struct Framing<'a> {
    /// `Content-Type`, if any.
    pub content_type: Option<&'a str>,
    /// `Content-Encoding`, if any.
    pub content_encoding: Option<&'a str>,
    /// The query string (`compression=…`, posthog-js's `sent_at=` millis).
    pub query: &'a str,
}

/// Decodes one capture request: the body unwrapped, its events mapped.
pub fn decode(
    body: &[u8],
    framing: Framing<'_>,
    limits: &LimitsConfig,
    mapping: &TrackerMapping,
) -> Result<BatchRequest, WireError> {
    let query = form(framing.query)?;
    let json = unwrap_body(body, framing, &query, limits)?;
    let value = parse(&json, limits.json())?;
    let (events, mut top) = match value {
        Value::Array(events) => (events, Map::new()),
        Value::Object(mut top) => match top.remove("batch") {
            Some(Value::Array(events)) => (events, top),
            Some(_) => return Err(invalid("`batch` must be an array of events")),
            None if top.contains_key("event") || top.contains_key("$distinct_id") => {
                (vec![Value::Object(top)], Map::new())
            }
            None => return Err(invalid("the body has no `batch` array and is not one event (no `event`)")),
        },
        _ => return Err(invalid("the body must be a JSON object or array of PostHog events")),
    };
    if events.is_empty() {
        return Err(invalid("`batch` is empty; send at least one event"));
    }
    if events.len() > limits.max_batch_events {
        return Err(WireError::BatchTooLarge { count: events.len(), limit: limits.max_batch_events });
    }
    let write_key = match text(top.remove("api_key")).or_else(|| text(top.remove("token"))) {
        Some(key) => Some(key),
        None => events.iter().find_map(event_key),
    };
    let sent_at = match top.remove("sent_at") {
        None | Some(Value::Null) => query_sent_at(&query),
        Some(Value::String(s)) => Some(s),
        Some(other) => Some(other.to_string()),
    };
    let events = events.into_iter().map(|e| canonical(e, mapping)).collect();
    Ok(BatchRequest { events, sent_at, write_key, undecodable: Vec::new(), protocol: "posthog" })
}

fn invalid(message: &str) -> WireError {
    WireError::InvalidBody(message.to_owned())
}

fn form(text: &str) -> Result<Vec<(String, String)>, WireError> {
    actix_web::web::Query::<Vec<(String, String)>>::from_query(text)
        .map(actix_web::web::Query::into_inner)
        .map_err(|e| invalid(&format!("the form or query string cannot be read: {e}")))
}

fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The body's JSON text: gzip undone, a `data=` form opened, base64 decoded.
fn unwrap_body(
    body: &[u8],
    framing: Framing<'_>,
    query: &[(String, String)],
    limits: &LimitsConfig,
) -> Result<Vec<u8>, WireError> {
    let compression = param(query, "compression").unwrap_or_default().to_ascii_lowercase();
    let encoding = framing.content_encoding.unwrap_or_default().trim().to_ascii_lowercase();
    let gzip = match (compression.as_str(), encoding.as_str()) {
        (_, "gzip" | "x-gzip") | ("gzip" | "gzip-js", _) => true,
        ("" | "base64", "" | "identity") => body.starts_with(&super::GZIP_MAGIC),
        (_, "" | "identity") => return Err(WireError::UnsupportedEncoding(format!("compression={compression}"))),
        (_, other) => return Err(WireError::UnsupportedEncoding(other.to_owned())),
    };
    let body = if gzip { gunzip(body, limits.max_decompressed_bytes)?.to_vec() } else { body.to_vec() };
    let essence = framing.content_type.unwrap_or_default().split(';').next().unwrap_or_default().trim().to_owned();
    let is_form = essence.eq_ignore_ascii_case("application/x-www-form-urlencoded") || body.starts_with(b"data=");
    if !is_form {
        return Ok(body);
    }
    let text = std::str::from_utf8(&body).map_err(|e| WireError::InvalidUtf8(e.valid_up_to()))?;
    let fields = form(text)?;
    let data = param(&fields, "data").ok_or_else(|| invalid("the form has no `data` field"))?.trim();
    let in_form = param(&fields, "compression").unwrap_or_default();
    if data.starts_with(['{', '[']) && in_form != "base64" {
        return Ok(data.as_bytes().to_vec());
    }
    if !in_form.is_empty() && in_form != "base64" {
        return Err(WireError::UnsupportedEncoding(format!("compression={in_form}")));
    }
    let decoded = LENIENT_BASE64
        // A `+` the client left unescaped reads as a space; base64url is read too.
        .decode(data.replace([' ', '-'], "+").replace('_', "/").as_bytes())
        .map_err(|e| invalid(&format!("`data` is neither JSON nor base64: {e}")))?;
    if decoded.len() > limits.max_decompressed_bytes {
        return Err(WireError::DecompressedTooLarge { limit: limits.max_decompressed_bytes });
    }
    Ok(decoded)
}

/// Standard base64, padded or not (clients differ).
const LENIENT_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// posthog-js's `sent_at` query parameter: milliseconds since the epoch.
fn query_sent_at(query: &[(String, String)]) -> Option<String> {
    let raw = param(query, "sent_at")?;
    let time = raw.parse::<i64>().ok().and_then(chrono::DateTime::from_timestamp_millis);
    Some(time.map_or_else(|| raw.to_owned(), |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)))
}

fn text(value: Option<Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.is_empty() => Some(s),
        _ => None,
    }
}

/// An event's own key: posthog-js puts `token` in its properties.
fn event_key(event: &Value) -> Option<String> {
    ["/api_key", "/token", "/properties/token", "/$token"]
        .iter()
        .find_map(|p| event.pointer(p).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned))
}

/// One PostHog event as a canonical call. What it cannot read it leaves for
/// the pipeline to refuse per event (a non-object stays as it is).
fn canonical(event: Value, mapping: &TrackerMapping) -> Value {
    let Value::Object(mut event) = event else { return event };
    // `/engage/`'s body has no event name: it is a `$set`.
    let engage = event.contains_key("$distinct_id") && !event.contains_key("event");
    let name = text(event.remove("event")).or_else(|| engage.then(|| "$set".to_owned())).unwrap_or_default();
    let rule = mapping.events.get(&name);
    let call = rule.map_or(Call::Track, |r| r.call);
    let (distinct, mut posthog, mut props) = properties(&mut event, rule);
    let mut out = Map::new();
    out.insert("type".into(), call.as_str().into());
    if let Some(uuid) = event.remove("uuid") {
        out.insert("messageId".into(), uuid);
    }
    if let Some(timestamp) = event.remove("timestamp") {
        out.insert("timestamp".into(), timestamp);
    }
    identities(&mut out, distinct, &posthog, call);
    // No name stays no name: the pipeline dead-letters it as `missing_event_name`.
    let catalog_name = rule.and_then(|r| r.event.clone()).unwrap_or(name);
    call_fields(&mut out, call, catalog_name, &mut posthog, &mut props);
    if !props.is_empty() || matches!(call, Call::Track | Call::Page | Call::Screen) {
        out.insert("properties".into(), Value::Object(props));
    }
    let mut context = Map::new();
    if let Some(lib) = posthog.get("$lib").cloned() {
        let version = posthog.get("$lib_version").cloned().unwrap_or(Value::Null);
        context.insert("library".into(), serde_json::json!({"name": lib, "version": version}));
    }
    if let Some(version) = rule.and_then(|r| r.version) {
        context.insert("schemaVersion".into(), version.into());
    }
    if !posthog.is_empty() {
        context.insert("posthog".into(), Value::Object(posthog));
    }
    out.insert("context".into(), Value::Object(context));
    Value::Object(out)
}

type Properties = Map<String, Value>;

/// The event's distinct id, its `$` properties and the others, the rule's
/// renames applied and the credentials removed.
fn properties(event: &mut Properties, rule: Option<&EventRule>) -> (Option<String>, Properties, Properties) {
    let mut props = as_object(event.remove("properties"));
    // posthog-js sends `$set`/`$set_once` beside the properties; `/engage/` has no properties.
    for key in ["$set", "$set_once"] {
        if let Some(v) = event.remove(key) {
            props.entry(key).or_insert(v);
        }
    }
    let distinct = ["distinct_id", "$distinct_id"]
        .iter()
        .find_map(|k| id(event.remove(*k)))
        .or_else(|| id(props.remove("distinct_id")));
    for key in ["token", "api_key", "$token"] {
        props.remove(key);
    }
    for (from, to) in rule.map(|r| &r.rename).into_iter().flatten() {
        if let Some(v) = props.remove(from) {
            props.insert(to.clone(), v);
        }
    }
    let (posthog, props) = props.into_iter().partition(|(k, _)| k.starts_with('$'));
    (distinct, posthog, props)
}

/// The fields of the canonical call itself.
fn call_fields(out: &mut Properties, call: Call, name: String, posthog: &mut Properties, props: &mut Properties) {
    match call {
        Call::Track if !name.is_empty() => {
            out.insert("event".into(), name.into());
        }
        Call::Track => {}
        Call::Page | Call::Screen => {
            if let Some(title) = props.get("name").or_else(|| props.get("title")).filter(|v| v.is_string()) {
                out.insert("name".into(), title.clone());
            }
        }
        Call::Identify => {
            let mut traits = as_object(posthog.remove("$set_once"));
            traits.extend(as_object(posthog.remove("$set")));
            out.insert("traits".into(), Value::Object(traits));
        }
        Call::Group => {
            if let Some(group) = id(posthog.remove("$group_key")) {
                out.insert("groupId".into(), group.into());
            }
            out.insert("traits".into(), Value::Object(as_object(posthog.remove("$group_set"))));
        }
        Call::Alias => {
            if let Some(alias) = id(props.remove("alias")) {
                out.insert("previousId".into(), alias.into());
            }
        }
    }
}

/// `distinct_id` → `userId`, or `anonymousId` while posthog-js says the
/// person is not identified (`$is_identified: false`, or the id is the
/// device's own). An identified person's device id, or an identify's
/// `$anon_distinct_id`, is the `anonymousId`; an alias keeps the id as user.
fn identities(out: &mut Map<String, Value>, distinct: Option<String>, posthog: &Map<String, Value>, call: Call) {
    let device = id(posthog.get("$anon_distinct_id").cloned()).or_else(|| id(posthog.get("$device_id").cloned()));
    let Some(distinct) = distinct else { return };
    let anonymous = call != Call::Alias
        && (posthog.get("$is_identified") == Some(&Value::Bool(false)) || device.as_deref() == Some(&distinct));
    if anonymous {
        out.insert("anonymousId".into(), distinct.into());
        return;
    }
    out.insert("userId".into(), distinct.into());
    if let Some(device) = device {
        out.insert("anonymousId".into(), device.into());
    }
}

/// An id as PostHog allows it: a non-empty string or a number.
fn id(value: Option<Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.is_empty() => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn as_object(value: Option<Value>) -> Map<String, Value> {
    match value {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
#[path = "posthog_tests.rs"]
mod tests;
