//! GA4's Measurement Protocol → the canonical batch. A request is
//! `POST /mp/collect?measurement_id=…&api_secret=…` (or `firebase_app_id=`
//! for apps) with `{"client_id", "user_id", "timestamp_micros",
//! "user_properties": {k: {"value": v}}, "consent", "non_personalized_ads",
//! "events": [{"name", "params", "timestamp_micros"}]}` (Google's
//! "Send Measurement Protocol events" reference). Each event becomes a
//! canonical call by the protocol's mapping (`schemas/mappings/ga4.toml`,
//! see [`crate::config::mapping`]). GA4 events carry no id: each gets a
//! `messageId` derived from what was sent (see [`message_id`]), so a retried
//! identical request is stored once. Pure: bytes in, a batch out, with the
//! protocol's own rules broken listed beside it for `/debug/mp/collect`.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use self::rules::event_findings;
pub use self::rules::{Finding, MAX_NAME_CHARS, MAX_PARAMS};
use super::tracker::view_or_track_fields;
use super::{BatchRequest, WireError, parse};
use crate::config::LimitsConfig;
use crate::config::mapping::{Call, EventRule, TrackerMapping};

/// The protocol's name: its mapping file's stem and its record header.
pub const PROTOCOL: &str = "ga4";

/// Events per request GA4 takes.
pub const MAX_EVENTS: usize = 25;

/// Parameters GA4 itself reads (sessions, engagement, its debug view):
/// kept under `context.ga4`, not the catalog's `properties`, unless a
/// mapping rule renames them into the catalog.
const OWN_PARAMS: [&str; 3] = ["session_id", "engagement_time_msec", "debug_mode"];

/// The URL's parameters: which GA4 stream, and the source's key.
#[derive(Debug, Default, Clone)]
pub struct Stream {
    /// `measurement_id` (web streams, `G-…`).
    pub measurement_id: Option<String>,
    /// `firebase_app_id` (app streams).
    pub firebase_app_id: Option<String>,
    /// `api_secret`: the source's write key.
    pub api_secret: Option<String>,
}

impl Stream {
    /// Reads the query string; a query that is not a form is `invalid_body`.
    pub fn from_query(text: &str) -> Result<Self, WireError> {
        let pairs = actix_web::web::Query::<Vec<(String, String)>>::from_query(text)
            .map_err(|e| WireError::InvalidBody(format!("the query string cannot be read: {e}")))?
            .into_inner();
        let get = |name: &str| pairs.iter().find(|(k, v)| k == name && !v.is_empty()).map(|(_, v)| v.clone());
        Ok(Self {
            measurement_id: get("measurement_id"),
            firebase_app_id: get("firebase_app_id"),
            api_secret: get("api_secret"),
        })
    }

    /// The stream's id, whichever kind it is.
    fn id(&self) -> Option<&str> {
        self.measurement_id.as_deref().or(self.firebase_app_id.as_deref())
    }
}

/// A decoded request: the batch, each event's GA4 name (for reading the
/// pipeline's verdicts back in GA4's terms) and GA4's own rules it breaks.
#[derive(Debug)]
pub struct Decoded {
    /// The canonical batch; `write_key` is the `api_secret`.
    pub batch: BatchRequest,
    /// Each event's `name` as sent, if it was a string.
    pub names: Vec<Option<String>>,
    /// GA4's structural rules broken (names, counts, required ids). The
    /// ingest path does not refuse on these: an event GA4 would not take
    /// still meets the catalog, which decides (an invalid name is never a
    /// catalog event, so it is dead-lettered or refused as unknown).
    pub findings: Vec<Finding>,
}

/// Decodes one request body (already un-gzipped) of `stream`.
pub fn decode(
    body: &[u8],
    stream: &Stream,
    limits: &LimitsConfig,
    mapping: &TrackerMapping,
) -> Result<Decoded, WireError> {
    let Value::Object(mut top) = parse(body, limits.json())? else {
        return Err(invalid("the body must be a JSON object with an `events` array"));
    };
    let events = match top.remove("events") {
        Some(Value::Array(events)) if !events.is_empty() => events,
        Some(Value::Array(_)) => return Err(invalid("`events` is empty; send at least one event")),
        // The Python `ga4mp`'s `postponed_send` sends its one event bare.
        Some(one @ Value::Object(_)) => vec![one],
        Some(_) => return Err(invalid("`events` must be an array of events")),
        None => return Err(invalid("the body has no `events` array")),
    };
    let limit = MAX_EVENTS.min(limits.max_batch_events);
    if events.len() > limit {
        return Err(WireError::BatchTooLarge { count: events.len(), limit });
    }
    let traits = match top.remove("user_properties") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(properties)) => unwrap_values(properties),
        Some(_) => return Err(invalid("`user_properties` must be an object of `{\"value\": …}`")),
    };
    let shared = Shared::new(top, stream, traits);
    let mut findings = shared.findings(stream);
    let mut names = Vec::with_capacity(events.len());
    let events = events
        .into_iter()
        .enumerate()
        .map(|(index, event)| {
            findings.extend(event_findings(index, &event));
            names.push(event.get("name").and_then(Value::as_str).map(str::to_owned));
            shared.canonical(index, event, mapping)
        })
        .collect();
    let batch = BatchRequest {
        events,
        sent_at: None,
        write_key: stream.api_secret.clone(),
        undecodable: Vec::new(),
        protocol: PROTOCOL,
    };
    Ok(Decoded { batch, names, findings })
}

fn invalid(message: &str) -> WireError {
    WireError::InvalidBody(format!("{message} (GA4 Measurement Protocol)"))
}

/// `{"k": {"value": v}}` → `{"k": v}`; a property without `value` is kept as sent.
fn unwrap_values(properties: Map<String, Value>) -> Map<String, Value> {
    properties
        .into_iter()
        .map(|(k, v)| match v {
            Value::Object(mut inner) if inner.contains_key("value") => (k, inner.remove("value").unwrap_or_default()),
            other => (k, other),
        })
        .collect()
}

/// What the request says for all of its events.
struct Shared {
    /// The request's fields the events' ids derive from, as sent.
    identity: Value,
    user_id: Option<Value>,
    anonymous_id: Option<Value>,
    timestamp_micros: Option<Value>,
    traits: Map<String, Value>,
    /// `context.ga4`: the stream, consent and ads flags.
    ga4: Map<String, Value>,
}

impl Shared {
    fn new(mut top: Map<String, Value>, stream: &Stream, traits: Map<String, Value>) -> Self {
        let user_id = top.remove("user_id").filter(|v| !v.is_null());
        let client_id = top.remove("client_id").filter(|v| !v.is_null());
        let app_instance_id = top.remove("app_instance_id").filter(|v| !v.is_null());
        let timestamp_micros = top.remove("timestamp_micros").filter(|v| !v.is_null());
        let identity = serde_json::json!({
            "stream": stream.id(), "client_id": client_id, "app_instance_id": app_instance_id,
            "user_id": user_id, "timestamp_micros": timestamp_micros,
        });
        let mut ga4 = Map::new();
        for (key, value) in [("measurement_id", &stream.measurement_id), ("firebase_app_id", &stream.firebase_app_id)] {
            if let Some(value) = value {
                ga4.insert(key.into(), value.clone().into());
            }
        }
        for key in ["consent", "non_personalized_ads", "user_location", "device", "user_data", "ip_override"] {
            if let Some(value) = top.remove(key) {
                ga4.insert(key.into(), value);
            }
        }
        let anonymous_id = client_id.or(app_instance_id);
        Self { identity, user_id, anonymous_id, timestamp_micros, traits, ga4 }
    }

    /// GA4's rules for the request's own fields.
    fn findings(&self, stream: &Stream) -> Vec<Finding> {
        let mut found = Vec::new();
        if stream.id().is_none() {
            let message = "the URL names no stream: add `measurement_id` (web) or `firebase_app_id` (app)";
            found.push(Finding::new("measurement_id".into(), "VALUE_REQUIRED", message.into()));
        }
        match &self.anonymous_id {
            None => {
                let message = "`client_id` (web) or `app_instance_id` (app) is required";
                found.push(Finding::new("client_id".into(), "VALUE_REQUIRED", message.into()));
            }
            Some(Value::String(_)) => {}
            Some(_) => found.push(Finding::new("client_id".into(), "VALUE_INVALID", "must be a string".into())),
        }
        if self.traits.len() > MAX_PARAMS {
            let message = format!("{} user properties; GA4 takes at most {MAX_PARAMS}", self.traits.len());
            found.push(Finding::new("user_properties".into(), "EXCEEDED_MAX_ENTITIES", message));
        }
        found
    }

    /// One GA4 event as a canonical call. What it cannot read it leaves for
    /// the pipeline to refuse per event (a non-object stays as it is; a
    /// name that is not a string is no name).
    fn canonical(&self, index: usize, event: Value, mapping: &TrackerMapping) -> Value {
        let id = message_id(&self.identity, index, &event);
        let Value::Object(mut event) = event else { return event };
        let name = match event.remove("name") {
            Some(Value::String(name)) => name,
            _ => String::new(),
        };
        let rule = mapping.events.get(&name);
        let call = rule.map_or(Call::Track, |r| r.call);
        let (mut props, own) = params(event.remove("params"), rule);
        let mut out = Map::new();
        out.insert("type".into(), call.as_str().into());
        out.insert("messageId".into(), id.into());
        if let Some(micros) = event.remove("timestamp_micros").or_else(|| self.timestamp_micros.clone()) {
            out.insert("timestamp".into(), time(micros));
        }
        for (field, value) in [("userId", &self.user_id), ("anonymousId", &self.anonymous_id)] {
            if let Some(value) = value {
                out.insert(field.into(), value.clone());
            }
        }
        let catalog_name = rule.and_then(|r| r.event.clone()).unwrap_or(name);
        self.call_fields(&mut out, call, catalog_name, &mut props);
        out.insert("properties".into(), props);
        let mut context = Map::new();
        if !self.traits.is_empty() {
            context.insert("traits".into(), Value::Object(self.traits.clone()));
        }
        if let Some(version) = rule.and_then(|r| r.version) {
            context.insert("schemaVersion".into(), version.into());
        }
        let mut ga4 = self.ga4.clone();
        ga4.extend(own);
        if !ga4.is_empty() {
            context.insert("ga4".into(), Value::Object(ga4));
        }
        out.insert("context".into(), Value::Object(context));
        Value::Object(out)
    }

    /// The fields of the canonical call itself.
    fn call_fields(&self, out: &mut Map<String, Value>, call: Call, name: String, props: &mut Value) {
        if view_or_track_fields(out, call, name, props) {
            return;
        }
        match (call, props.as_object_mut()) {
            (Call::Identify, _) => {
                out.insert("traits".into(), Value::Object(self.traits.clone()));
            }
            (Call::Group, Some(props)) => {
                if let Some(group) = props.remove("group_id") {
                    out.insert("groupId".into(), group);
                }
                out.insert("traits".into(), Value::Object(Map::new()));
            }
            _ => {}
        }
    }
}

/// The event's `params` with the rule's renames applied, and GA4's own
/// parameters taken aside. Params that are not an object stay as sent, for
/// the catalog to refuse.
fn params(params: Option<Value>, rule: Option<&EventRule>) -> (Value, Map<String, Value>) {
    let mut props = match params {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(props)) => props,
        Some(other) => return (other, Map::new()),
    };
    for (from, to) in rule.map(|r| &r.rename).into_iter().flatten() {
        if let Some(v) = props.remove(from) {
            props.insert(to.clone(), v);
        }
    }
    let own = OWN_PARAMS.iter().filter_map(|k| props.remove(*k).map(|v| ((*k).to_owned(), v))).collect();
    (Value::Object(props), own)
}

/// Microseconds since the epoch → RFC 3339; anything else stays as sent,
/// for the pipeline to dead-letter as `invalid_timestamp`.
fn time(micros: Value) -> Value {
    let parsed = micros.as_i64().and_then(chrono::DateTime::from_timestamp_micros);
    parsed.map_or(micros, |t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true).into())
}

/// The id of event `index` of a request: a UUID (version 8) made of the
/// SHA-256 of the stream id, `client_id`, `app_instance_id`, `user_id`, the
/// request's `timestamp_micros`, the event's index and the event as sent
/// (keys sorted). A retried identical request gets the same ids and is
/// stored once; two identical events of one request stay two events.
pub fn message_id(identity: &Value, index: usize, event: &Value) -> String {
    let mut hash = Sha256::new();
    canonical_json(identity, &mut hash);
    hash.update(index.to_be_bytes());
    canonical_json(event, &mut hash);
    let digest = hash.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    uuid::Uuid::from_bytes(bytes).to_string()
}

/// Feeds `value` to `hash` as JSON with every object's keys sorted, so the
/// id does not depend on the order the client wrote them in.
fn canonical_json(value: &Value, hash: &mut Sha256) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            hash.update(b"{");
            for key in keys {
                hash.update(Value::String(key.clone()).to_string().as_bytes());
                hash.update(b":");
                canonical_json(&map[key], hash);
                hash.update(b",");
            }
            hash.update(b"}");
        }
        Value::Array(items) => {
            hash.update(b"[");
            for item in items {
                canonical_json(item, hash);
                hash.update(b",");
            }
            hash.update(b"]");
        }
        other => hash.update(other.to_string().as_bytes()),
    }
}

#[path = "ga4_rules.rs"]
mod rules;

#[cfg(test)]
#[path = "ga4_tests.rs"]
mod tests;
