//! Each protocol's body as its SDK sends it (posthog-node's `/batch/`
//! payload, GA4's documented `/mp/collect` request, the browser tracker's
//! `payload_data` POST; see docs/trackers.md for the sources), ids unique.

use std::collections::HashSet;
use std::path::Path;

use base64::Engine;
use serde_json::Value;

use super::*;
use crate::workload::Workload;

fn credentials() -> Credentials {
    Credentials { key: "demo-write-key".into(), app_id: "demo-web".into() }
}

fn workload(protocol: Protocol, batch: usize, shared: bool) -> Workload {
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas");
    Workload::from_catalog(&catalog, batch, false, 100)
        .and_then(|w| w.speaking(protocol, credentials(), shared))
        .expect("the shipped catalog loads")
}

/// Three requests' bodies, parsed.
fn bodies(protocol: Protocol) -> Vec<Value> {
    let w = workload(protocol, 25, false);
    (0..3).map(|seq| serde_json::from_slice(&w.body(seq, seq * 1000)).expect("JSON")).collect()
}

fn events<'a>(body: &'a Value, field: &str) -> &'a Vec<Value> {
    body[field].as_array().expect("an array of events")
}

fn assert_unique(ids: Vec<String>, count: usize) {
    assert_eq!(ids.len(), count, "every event has an id");
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), count, "ids are unique: {ids:?}");
}

#[test]
fn segment_is_the_batch_call_with_unique_message_ids() {
    let bodies = bodies(Protocol::Segment);
    let ids = bodies.iter().flat_map(|b| events(b, "batch")).filter_map(|e| e["messageId"].as_str()).map(String::from);
    assert_unique(ids.collect(), 75);
    assert!(Protocol::Segment.basic_auth());
    assert_eq!(Protocol::Segment.endpoint("http://h:1/", &credentials()), "http://h:1/v1/batch");
}

#[test]
fn posthog_is_posthog_nodes_batch_with_unique_uuids() {
    let bodies = bodies(Protocol::Posthog);
    for body in &bodies {
        assert_eq!(body["api_key"], "demo-write-key");
        assert!(body["sent_at"].as_str().is_some_and(|s| s.ends_with('Z')), "{body}");
        for event in events(body, "batch") {
            assert!(event["event"].is_string() && event["distinct_id"].is_string(), "{event}");
            assert!(event["properties"].is_object());
        }
    }
    let all: Vec<&Value> = bodies.iter().flat_map(|b| events(b, "batch")).collect();
    let page = all.iter().find(|e| e["event"] == "$pageview").expect("page views become $pageview");
    assert!(page["properties"]["$current_url"].is_string() && page["properties"].get("url").is_none());
    assert!(all.iter().any(|e| e["event"] == "$screen" && e["properties"]["$screen_name"].is_string()));
    assert!(all.iter().any(|e| e["event"] == "Payment Captured"), "an unmapped name stays a track call of its name");
    let uuids: Vec<String> = all.iter().filter_map(|e| e["uuid"].as_str()).map(String::from).collect();
    assert!(uuids.iter().all(|u| uuid::Uuid::try_parse(u).is_ok()), "{uuids:?}");
    assert_unique(uuids, 75);
    assert!(!Protocol::Posthog.basic_auth());
    assert_eq!(Protocol::Posthog.endpoint("http://h:1", &credentials()), "http://h:1/batch/");
}

#[test]
fn ga4_is_the_measurement_protocol_one_user_per_request_at_most_25_events() {
    for body in bodies(Protocol::Ga4) {
        assert!(body["client_id"].is_string() && body["timestamp_micros"].is_u64(), "{body}");
        let events = events(&body, "events");
        assert_eq!(events.len(), 25, "GA4's maximum");
        for event in events {
            let name = event["name"].as_str().expect("a name");
            let ok = name.len() <= 40
                && name.starts_with(|c: char| c.is_ascii_alphabetic())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            assert!(ok, "GA4's naming rule: {name}");
            assert!(event["params"].as_object().is_some_and(|p| p.len() <= 25));
        }
        let names: HashSet<&str> = events.iter().filter_map(|e| e["name"].as_str()).collect();
        let mapped = ["page_view", "screen_view", "purchase", "click", "form_submit"];
        assert_eq!(names, mapped.into_iter().collect(), "the names schemas/mappings/ga4.toml maps");
    }
    assert_eq!(
        Protocol::Ga4.endpoint("http://h:1", &credentials()),
        "http://h:1/mp/collect?measurement_id=G-LOADTEST&api_secret=demo-write-key"
    );
}

#[test]
fn snowplow_is_payload_data_with_unique_eids_and_the_app_id() {
    let bodies = bodies(Protocol::Snowplow);
    let mut eids = Vec::new();
    for body in &bodies {
        assert_eq!(body["schema"], SNOWPLOW_PAYLOAD);
        for event in events(body, "data") {
            assert_eq!(event["aid"], "demo-web");
            assert!(event["uid"].is_string() || event["duid"].is_string(), "{event}");
            let fields = event.as_object().expect("an object");
            assert!(fields.values().all(Value::is_string), "every field is a string: {event}");
            if event["e"] == "ue" {
                let text = event["ue_px"].as_str().expect("ue_px");
                let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).expect("base64");
                let envelope: Value = serde_json::from_slice(&raw).expect("JSON");
                assert!(envelope["data"]["schema"].as_str().is_some_and(|s| s.starts_with("iglu:")));
            }
            eids.push(event["eid"].as_str().expect("eid").to_owned());
        }
    }
    assert!(eids.iter().all(|u| uuid::Uuid::try_parse(u).is_ok()));
    assert_unique(eids, 75);
    let kinds: HashSet<&str> = bodies.iter().flat_map(|b| events(b, "data")).filter_map(|e| e["e"].as_str()).collect();
    assert_eq!(kinds, ["pv", "tr", "ue"].into_iter().collect());
}

#[test]
fn shared_events_are_the_ones_every_protocol_expresses() {
    let kinds = |p| workload(p, 1, true).kinds();
    assert_eq!(kinds(Protocol::Segment), 5, "page, screen, order, link click, form");
    assert!(Protocol::ALL.iter().all(|p| kinds(*p) == 5));
    assert!(workload(Protocol::Posthog, 1, false).kinds() > workload(Protocol::Ga4, 1, false).kinds());
}

#[test]
fn an_answer_counts_as_taken_only_when_no_event_was_dead_lettered_or_refused() {
    assert!(Protocol::all_taken(204, b""), "GA4: every event taken");
    assert!(Protocol::all_taken(200, br#"{"accepted": 25, "invalid": 0, "rejected": 0}"#));
    assert!(!Protocol::all_taken(200, br#"{"accepted": 24, "invalid": 1, "rejected": 0}"#));
    assert!(!Protocol::all_taken(200, br#"{"status": 1, "accepted": 0, "rejected": 1}"#));
    assert!(!Protocol::all_taken(503, b""));
    assert!(Protocol::all_taken(200, b"ok"), "the ceiling server's answer");
}

#[test]
fn sent_at_is_rfc3339_utc() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339(1_798_761_600_123), "2027-01-01T00:00:00.123Z");
    assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
}
