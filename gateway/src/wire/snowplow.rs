//! Snowplow's tracker protocol → the canonical batch. A request is
//! `POST /com.snowplowanalytics.snowplow/tp2` with
//! `{"schema": "iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-4",
//! "data": [{event}, ...]}`, or `GET /i?e=pv&aid=...` with one event in
//! the query. Every field of an event is a string (Snowplow's "Snowplow
//! Tracker Protocol" reference; the browser tracker's `payload.ts` and the
//! Python tracker's `payload.py` build them so). Each event becomes a
//! canonical call by the protocol's mapping (`schemas/mappings/snowplow.toml`,
//! see [`crate::config::mapping`]): page views (`e=pv`) are page calls,
//! self-describing events (`e=ue`) are looked up by their schema URI,
//! structured events (`e=se`) by category and action. Fields the canonical
//! event has no place for are kept under `context.snowplow` by their
//! protocol names. Pure: bytes in, a batch out.

use serde_json::{Map, Value};

use self::fields::{contexts, json_field};
use self::kinds::What;
use super::tracker::{url_path, view_or_track_fields};
use super::{BatchRequest, Undecodable, WireError, parse};
use crate::config::LimitsConfig;
use crate::config::mapping::{Call, TrackerMapping};

/// The protocol's name: its mapping file's stem and its record header.
pub const PROTOCOL: &str = "snowplow";

/// The POST body's schema, any 1-x-x version.
pub const PAYLOAD_DATA: &str = "iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-";

/// The envelope of `ue_pr`/`ue_px`, any 1-x-x version.
const UNSTRUCT_EVENT: &str = "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-";

/// Fields the canonical event holds in its own places; every other field
/// is kept under `context.snowplow` as sent.
const MAPPED: &[&str] = &[
    "eid", "uid", "dtm", "ttm", "stm", "url", "page", "refr", "lang", "tz", "ua", "ip", "res", "co", "cx", "ue_pr",
    "ue_px",
];

/// One event's fields as sent: every value a string.
pub type Fields = Map<String, Value>;

/// A decoded request: the batch, and its events' app ids (`aid`), which
/// name the source.
#[derive(Debug)]
pub struct Decoded {
    /// The canonical batch; it carries no write key.
    pub batch: BatchRequest,
    /// Each readable event's `aid` (empty when it has none, refused as
    /// unknown), and each undecodable event's if it has a readable one.
    pub app_ids: Vec<String>,
}

/// Decodes a `tp2` body (already un-gzipped).
pub fn decode_post(body: &[u8], limits: &LimitsConfig, mapping: &TrackerMapping) -> Result<Decoded, WireError> {
    let Value::Object(mut top) = parse(body, limits.json())? else {
        return Err(invalid(
            "the body must be a JSON object `{\"schema\": \"iglu:…/payload_data/…\", \"data\": [...]}`",
        ));
    };
    match top.get("schema") {
        Some(Value::String(schema)) if schema.starts_with(PAYLOAD_DATA) => {}
        Some(Value::String(schema)) => {
            return Err(invalid(&format!("`schema` is `{schema}`; a tp2 body is a {PAYLOAD_DATA}x-x")));
        }
        _ => return Err(invalid("the body has no `schema` string (payload_data)")),
    }
    let events = match top.remove("data") {
        Some(Value::Array(events)) if !events.is_empty() => events,
        Some(Value::Array(_)) => return Err(invalid("`data` is empty; send at least one event")),
        Some(_) => return Err(invalid("`data` must be an array of events")),
        None => return Err(invalid("the body has no `data` array")),
    };
    if events.len() > limits.max_batch_events {
        return Err(WireError::BatchTooLarge { count: events.len(), limit: limits.max_batch_events });
    }
    decode_events(events, limits, mapping, fields)
}

/// Decodes a `GET /i` query string: one event. A field sent twice keeps
/// its first value.
pub fn decode_get(query: &str, limits: &LimitsConfig, mapping: &TrackerMapping) -> Result<Decoded, WireError> {
    if query.len() > limits.max_body_bytes {
        return Err(WireError::BodyTooLarge { limit: limits.max_body_bytes });
    }
    let pairs = actix_web::web::Query::<Vec<(String, String)>>::from_query(query)
        .map_err(|e| invalid(&format!("the query string cannot be read: {e}")))?
        .into_inner();
    if pairs.is_empty() {
        return Err(invalid("the query string holds no event (`e=pv&aid=...`)"));
    }
    let mut event = Fields::new();
    for (key, value) in pairs {
        event.entry(key).or_insert(Value::String(value));
    }
    // Kept as sent (its fields, as a POST's event is) should it be
    // unreadable: an object, so the dead letter's privacy handling finds
    // the tracker's `ip` as in a POST.
    let (sent, mut event) = (Value::Object(event.clone()), Some(event));
    decode_events(vec![sent], limits, mapping, |_, _| Ok(event.take().unwrap_or_default()))
}

/// Each event as a canonical call, by `fields` then [`canonical`]. An event
/// either cannot read (`invalid_body`) is kept as sent and marked
/// [`Undecodable`] with the reason, for the ingest path to dead-letter on
/// its own; a limit broken refuses the request with its code.
fn decode_events(
    sent: Vec<Value>,
    limits: &LimitsConfig,
    mapping: &TrackerMapping,
    mut fields: impl FnMut(usize, &Value) -> Result<Fields, WireError>,
) -> Result<Decoded, WireError> {
    let mut events = Vec::with_capacity(sent.len());
    let (mut app_ids, mut undecodable) = (Vec::with_capacity(sent.len()), Vec::new());
    for (index, original) in sent.into_iter().enumerate() {
        let read = fields(index, &original);
        let aid = read.as_ref().ok().map(|event| text(event, "aid").unwrap_or_default().to_owned());
        match read.and_then(|event| canonical(index, event, limits, mapping)) {
            Ok(event) => {
                events.push(event);
                app_ids.extend(aid);
            }
            Err(WireError::InvalidBody(reason)) => {
                // Its app id, if one can be read, names the source whose
                // dead letter it is; without one, the others' source does.
                let aid = aid.or_else(|| original.get("aid").and_then(Value::as_str).map(str::to_owned));
                app_ids.extend(aid.filter(|a| !a.is_empty()));
                undecodable.push(Undecodable { index, reason });
                events.push(original);
            }
            Err(limit) => return Err(limit),
        }
    }
    let batch = BatchRequest { events, sent_at: None, write_key: None, protocol: PROTOCOL, undecodable };
    Ok(Decoded { batch, app_ids })
}

fn invalid(message: &str) -> WireError {
    WireError::InvalidBody(format!("{message} (Snowplow tracker protocol)"))
}

/// An event's fields: an object of strings. Numbers and booleans are taken
/// as their text, `null` as absent; anything else makes it undecodable. The
/// event itself is kept as sent, for its dead letter if it is.
fn fields(index: usize, event: &Value) -> Result<Fields, WireError> {
    let Value::Object(event) = event else {
        return Err(invalid(&format!("`data[{index}]` must be an object of string fields")));
    };
    let mut out = Fields::new();
    for (key, value) in event {
        let value = match value {
            Value::Null => continue,
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => return Err(invalid(&format!("`data[{index}].{key}` must be a string"))),
        };
        out.insert(key.clone(), Value::String(value));
    }
    Ok(out)
}

/// A non-empty string field.
fn text<'a>(event: &'a Fields, key: &str) -> Option<&'a str> {
    event.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// One event as a canonical call.
fn canonical(
    index: usize,
    mut event: Fields,
    limits: &LimitsConfig,
    mapping: &TrackerMapping,
) -> Result<Value, WireError> {
    let contexts = contexts(index, &mut event, limits)?;
    let what = What::of(index, &mut event, limits)?;
    let rule = what.keys.iter().find_map(|key| mapping.events.get(key));
    let call = rule.map_or(what.call, |r| r.call);
    let mut props = what.properties;
    if let Value::Object(props) = &mut props {
        for (from, to) in rule.map(|r| &r.rename).into_iter().flatten() {
            if let Some(v) = props.remove(from) {
                props.insert(to.clone(), v);
            }
        }
    }
    let mut out = Map::new();
    out.insert("type".into(), call.as_str().into());
    if let Some(id) = text(&event, "eid") {
        out.insert("messageId".into(), id.into());
    }
    times(&event, &mut out);
    if let Some(user) = text(&event, "uid") {
        out.insert("userId".into(), user.into());
    }
    if let Some(anonymous) = ["duid", "nuid", "tnuid", "sid"].iter().find_map(|k| text(&event, k)) {
        out.insert("anonymousId".into(), anonymous.into());
    }
    let name = rule.and_then(|r| r.event.clone()).unwrap_or(what.name);
    call_fields(&mut out, call, name, &mut props);
    out.insert("properties".into(), props);
    let mut context = page_context(&event);
    if let Some(version) = rule.and_then(|r| r.version) {
        context.insert("schemaVersion".into(), version.into());
    }
    let mut snowplow: Fields = event.into_iter().filter(|(k, _)| !MAPPED.contains(&k.as_str())).collect();
    if let Some(schema) = what.schema {
        snowplow.insert("schema".into(), schema.into());
    }
    if let Some(contexts) = contexts {
        snowplow.insert("contexts".into(), contexts);
    }
    context.insert(PROTOCOL.into(), Value::Object(snowplow));
    out.insert("context".into(), Value::Object(context));
    Ok(Value::Object(out))
}

/// `timestamp`: the true timestamp (`ttm`) if sent, else the device's
/// (`dtm`); `sentAt` the device's send time (`stm`), for clock-skew
/// correction, except beside a true timestamp, which is not corrected.
/// Milliseconds that are not a time stay as sent, for the pipeline to
/// dead-letter (`invalid_timestamp`) or flag.
fn times(event: &Fields, out: &mut Map<String, Value>) {
    let true_time = text(event, "ttm");
    if let Some(ms) = true_time.or_else(|| text(event, "dtm")) {
        out.insert("timestamp".into(), time(ms));
    }
    if let (None, Some(ms)) = (true_time, text(event, "stm")) {
        out.insert("sentAt".into(), time(ms));
    }
}

fn time(ms: &str) -> Value {
    let parsed = ms.trim().parse::<i64>().ok().and_then(chrono::DateTime::from_timestamp_millis);
    parsed.map_or_else(|| ms.into(), |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true).into())
}

/// The fields of the canonical call itself.
fn call_fields(out: &mut Map<String, Value>, call: Call, name: String, props: &mut Value) {
    if !view_or_track_fields(out, call, name, props)
        && matches!(call, Call::Identify | Call::Group)
        && let Some(props) = props.as_object()
    {
        out.insert("traits".into(), Value::Object(props.clone()));
    }
}

/// The Segment context fields the protocol has: page, locale, time zone,
/// user agent, IP, screen and the tracker (`tv`, `js-4.1.0`).
fn page_context(event: &Fields) -> Map<String, Value> {
    let mut context = Map::new();
    if let Some(url) = text(event, "url") {
        let mut page = Map::new();
        page.insert("url".into(), url.into());
        if let Some(path) = url_path(url) {
            page.insert("path".into(), path.into());
        }
        for (field, key) in [("page", "title"), ("refr", "referrer")] {
            if let Some(value) = text(event, field) {
                page.insert(key.into(), value.into());
            }
        }
        context.insert("page".into(), Value::Object(page));
    }
    for (field, key) in [("lang", "locale"), ("tz", "timezone"), ("ua", "userAgent"), ("ip", "ip")] {
        if let Some(value) = text(event, field) {
            context.insert(key.into(), value.into());
        }
    }
    let screen = text(event, "res").and_then(|r| r.split_once('x'));
    if let Some((Ok(width), Ok(height))) = screen.map(|(w, h)| (w.parse::<u32>(), h.parse::<u32>())) {
        context.insert("screen".into(), serde_json::json!({"width": width, "height": height}));
    }
    if let Some(tracker) = text(event, "tv") {
        let (name, version) = tracker.split_once('-').unwrap_or((tracker, ""));
        context.insert("library".into(), serde_json::json!({"name": format!("snowplow-{name}"), "version": version}));
    }
    context
}

#[path = "snowplow_fields.rs"]
mod fields;

#[path = "snowplow_kinds.rs"]
mod kinds;

#[cfg(test)]
#[path = "snowplow_tests.rs"]
mod tests;
