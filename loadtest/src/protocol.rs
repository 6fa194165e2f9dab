//! The front doors a run can knock on: Segment's batch and the tracker
//! protocols the gateway decodes (docs/trackers.md). Each turns the
//! workload's canonical events (catalog examples with fresh ids) into its
//! own batched body, by the inverse of the shipped mapping files
//! (`schemas/mappings/*.toml`), so what arrives maps back to a valid catalog
//! event; an event the protocol cannot express is left out of its workload.

use base64::Engine;
use serde_json::{Map, Value, json};

/// Snowplow's `payload_data` envelope, as the browser tracker sends it.
pub const SNOWPLOW_PAYLOAD: &str = "iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-4";
const SNOWPLOW_UNSTRUCT: &str = "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0";
/// The GA4 stream the requests name (any id: the gateway keeps it in `context.ga4`).
pub const GA4_MEASUREMENT_ID: &str = "G-LOADTEST";

/// Which protocol a run speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Protocol {
    /// `POST /v1/batch`, `{"batch": [...]}`, the write key in Basic auth.
    #[default]
    Segment,
    /// `POST /batch/`, `{"api_key", "batch", "sent_at"}` (posthog-node's shape).
    Posthog,
    /// `POST /mp/collect?measurement_id=…&api_secret=KEY`, one user per request, at most 25 events.
    Ga4,
    /// `POST /com.snowplowanalytics.snowplow/tp2`, `payload_data` with `aid` naming the source.
    Snowplow,
}

/// What a request carries besides its body.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// Segment's write key, PostHog's `api_key`, GA4's `api_secret`.
    pub key: String,
    /// Snowplow's `aid`, which names the source (`snowplow_app_ids`).
    pub app_id: String,
}

impl Protocol {
    /// Every protocol, Segment first.
    pub const ALL: [Protocol; 4] = [Protocol::Segment, Protocol::Posthog, Protocol::Ga4, Protocol::Snowplow];

    /// The endpoint under `base` (`http://host:port`), its query holding GA4's credentials.
    pub fn endpoint(self, base: &str, credentials: &Credentials) -> String {
        let base = base.trim_end_matches('/');
        match self {
            Protocol::Segment => format!("{base}/v1/batch"),
            Protocol::Posthog => format!("{base}/batch/"),
            Protocol::Ga4 => {
                format!("{base}/mp/collect?measurement_id={GA4_MEASUREMENT_ID}&api_secret={}", credentials.key)
            }
            Protocol::Snowplow => format!("{base}/com.snowplowanalytics.snowplow/tp2"),
        }
    }

    /// Whether the write key goes in an `Authorization` header (the others
    /// carry their credential in the body or the URL, as their SDKs do).
    pub fn basic_auth(self) -> bool {
        self == Protocol::Segment
    }

    /// The protocol's form of canonical `event`, or `None` when the shipped
    /// mapping gives it no way to become that catalog event again.
    pub fn event(self, event: &Value, credentials: &Credentials) -> Option<Value> {
        match self {
            Protocol::Segment => Some(event.clone()),
            Protocol::Posthog => posthog(event),
            Protocol::Ga4 => ga4(event),
            Protocol::Snowplow => snowplow(event, &credentials.app_id),
        }
    }

    /// The request body holding canonical `events` (each one this protocol
    /// expresses), sent at `now_ms` (Unix milliseconds).
    pub fn body(self, events: &[Value], credentials: &Credentials, now_ms: u64) -> Value {
        let converted: Vec<Value> = events.iter().filter_map(|e| self.event(e, credentials)).collect();
        match self {
            Protocol::Segment => json!({ "batch": converted }),
            Protocol::Posthog => json!({ "api_key": credentials.key, "batch": converted, "sent_at": rfc3339(now_ms) }),
            Protocol::Ga4 => {
                // One user per request: GA4's ids are the request's, not the event's.
                let first = events.first();
                let client = first.map(user).unwrap_or(Value::Null);
                let mut body = json!({ "client_id": client, "timestamp_micros": now_ms * 1000, "events": converted });
                if let Some(user_id) = first.and_then(|e| e.get("userId")) {
                    body["user_id"] = user_id.clone();
                }
                body
            }
            Protocol::Snowplow => {
                let data: Vec<Value> = converted
                    .into_iter()
                    .map(|mut e| {
                        e["dtm"] = json!(now_ms.to_string());
                        e["stm"] = json!(now_ms.to_string());
                        e
                    })
                    .collect();
                json!({ "schema": SNOWPLOW_PAYLOAD, "data": data })
            }
        }
    }

    /// Whether the answer says every event of the request was taken: a 2xx
    /// whose outcome counts (when it has them) no `invalid` or `rejected`
    /// event. GA4 answers `204` with no body when all were taken.
    pub fn all_taken(status: u16, body: &[u8]) -> bool {
        if !(200..300).contains(&status) {
            return false;
        }
        let Ok(answer) = serde_json::from_slice::<Value>(body) else { return true };
        ["invalid", "rejected"].iter().all(|k| answer.get(k).and_then(Value::as_u64).unwrap_or(0) == 0)
    }
}

fn props(event: &Value) -> Map<String, Value> {
    event.get("properties").and_then(Value::as_object).cloned().unwrap_or_default()
}

fn user(event: &Value) -> Value {
    event.get("userId").or_else(|| event.get("anonymousId")).cloned().unwrap_or(Value::Null)
}

/// Moves `from` to `to` in `props` (the inverse of a mapping's rename).
fn rename(props: &mut Map<String, Value>, pairs: &[(&str, &str)]) {
    for (from, to) in pairs {
        if let Some(value) = props.remove(*from) {
            props.insert((*to).into(), value);
        }
    }
}

/// posthog-node's capture (`@posthog/core` `buildPayload`): an unmapped
/// name stays a track call of its own name, so any track event is itself.
fn posthog(event: &Value) -> Option<Value> {
    let mut properties = props(event);
    let name = match event.get("type").and_then(Value::as_str)? {
        "track" => event.get("event")?.clone(),
        "page" => {
            rename(&mut properties, &[("url", "$current_url"), ("path", "$pathname"), ("referrer", "$referrer")]);
            json!("$pageview")
        }
        "screen" => {
            properties.insert("$screen_name".into(), event.get("name")?.clone());
            json!("$screen")
        }
        _ => return None,
    };
    let uuid = event.get("messageId").and_then(Value::as_str).map(message_uuid)?;
    Some(json!({ "event": name, "distinct_id": user(event), "uuid": uuid, "properties": properties }))
}

/// A UUID for PostHog's `uuid` and Snowplow's `eid`, as their SDKs send:
/// the loadtest's `messageId` ends in a v4 UUID's hex.
fn message_uuid(message_id: &str) -> String {
    let hex = message_id.rsplit('-').next().unwrap_or_default();
    uuid::Uuid::try_parse(hex).map_or_else(|_| uuid::Uuid::new_v4().to_string(), |u| u.to_string())
}

/// `schemas/mappings/ga4.toml` inverted: page_view, screen_view, purchase,
/// click, form_submit. Other catalog names break GA4's naming rules.
fn ga4(event: &Value) -> Option<Value> {
    let mut params = props(event);
    let name = match (event.get("type").and_then(Value::as_str)?, event.get("event").and_then(Value::as_str)) {
        ("page", _) => {
            rename(&mut params, &[("url", "page_location"), ("referrer", "page_referrer"), ("title", "page_title")]);
            params.remove("path"); // taken from page_location
            "page_view"
        }
        ("screen", _) => {
            params.insert("screen_name".into(), event.get("name")?.clone());
            "screen_view"
        }
        ("track", Some("Order Completed")) => {
            rename(&mut params, &[("order_id", "transaction_id"), ("total", "value")]);
            "purchase"
        }
        ("track", Some("Link Clicked")) => {
            rename(&mut params, &[("href", "link_url"), ("text", "link_text"), ("page_url", "page_location")]);
            "click"
        }
        ("track", Some("Form Submitted")) => "form_submit",
        _ => return None,
    };
    Some(json!({ "name": name, "params": params }))
}

/// `schemas/mappings/snowplow.toml` inverted, in the browser tracker's
/// form (`ue_px` base64, `tv`, `p`, `dtm`): page views, transactions and
/// the link-click, form and screen-view self-describing events.
fn snowplow(event: &Value, app_id: &str) -> Option<Value> {
    let mut props = props(event);
    let mut out = Map::new();
    let unstruct = |schema: &str, data: Map<String, Value>| {
        let envelope = json!({"schema": SNOWPLOW_UNSTRUCT, "data": {"schema": schema, "data": data}});
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(envelope.to_string())
    };
    match (event.get("type").and_then(Value::as_str)?, event.get("event").and_then(Value::as_str)) {
        ("page", _) => {
            out.insert("e".into(), json!("pv"));
            for (from, to) in [("url", "url"), ("title", "page"), ("referrer", "refr")] {
                if let Some(v) = props.remove(from) {
                    out.insert(to.into(), v);
                }
            }
        }
        ("screen", _) => {
            props.insert("name".into(), event.get("name")?.clone());
            out.insert("e".into(), json!("ue"));
            out.insert(
                "ue_px".into(),
                json!(unstruct("iglu:com.snowplowanalytics.mobile/screen_view/jsonschema/1-0-0", props)),
            );
        }
        ("track", Some("Order Completed")) => {
            out.insert("e".into(), json!("tr"));
            for (from, to) in [("order_id", "tr_id"), ("total", "tr_tt"), ("currency", "tr_cu")] {
                out.insert(to.into(), json!(text(props.get(from)?)));
            }
        }
        ("track", Some("Link Clicked")) => {
            rename(&mut props, &[("href", "targetUrl"), ("text", "elementContent")]);
            out.insert("e".into(), json!("ue"));
            out.insert(
                "ue_px".into(),
                json!(unstruct("iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1", props)),
            );
        }
        ("track", Some("Form Submitted")) => {
            rename(&mut props, &[("form_id", "formId")]);
            out.insert("e".into(), json!("ue"));
            out.insert(
                "ue_px".into(),
                json!(unstruct("iglu:com.snowplowanalytics.snowplow/submit_form/jsonschema/1-0-0", props)),
            );
        }
        _ => return None,
    }
    let eid = event.get("messageId").and_then(Value::as_str).map(message_uuid)?;
    out.insert("eid".into(), json!(eid));
    out.insert("aid".into(), json!(app_id));
    out.insert("tv".into(), json!("js-4.1.0"));
    out.insert("p".into(), json!("web"));
    let id_field = if event.get("userId").is_some() { "uid" } else { "duid" };
    out.insert(id_field.into(), user(event));
    Some(Value::Object(out))
}

/// Every field of a Snowplow event is a string.
fn text(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}

/// Unix milliseconds as RFC 3339 (UTC, milliseconds), PostHog's `sent_at`.
fn rfc3339(ms: u64) -> String {
    let (secs, millis) = (ms / 1000, ms % 1000);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
