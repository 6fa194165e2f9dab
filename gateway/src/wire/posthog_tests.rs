//! The PostHog decoder on every body form its SDKs send, and on bad ones.
//! Shapes: posthog-node / `@posthog/core` `sendBatch` (`posthog-core-stateless.ts`),
//! Python `posthog` `request.py` `post`, posthog-js `request.ts`
//! (`encodePostData`, `addSentAtToCaptureBody`).

use std::io::Write;

use base64::Engine;
use serde_json::{Value, json};

use super::*;
use crate::config::mapping::{EventRule, TrackerMapping};

fn mapping() -> TrackerMapping {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/mappings");
    crate::config::mapping::load_dir(&dir).expect("shipped mappings").of(PROTOCOL).clone()
}

fn run(body: &[u8], framing: Framing<'_>) -> Result<BatchRequest, WireError> {
    decode(body, framing, &LimitsConfig::default(), &mapping())
}

fn json_body(value: &Value) -> Result<BatchRequest, WireError> {
    run(value.to_string().as_bytes(), Framing::default())
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).expect("write");
    encoder.finish().expect("finish")
}

fn node_batch() -> Value {
    json!({"api_key": "phc_key", "sent_at": "2026-01-01T00:00:05.000Z", "batch": [
        {"event": "link_clicked", "distinct_id": "u1", "uuid": "0190-a", "timestamp": "2026-01-01T00:00:00.000Z",
         "properties": {"link": "https://example.com/x", "$lib": "posthog-node", "$lib_version": "5.70.0"}, "type": "capture"},
        {"event": "$identify", "distinct_id": "u1", "uuid": "0190-b",
         "properties": {"$set": {"plan": "pro"}, "$set_once": {"first": "a", "plan": "free"}}},
    ]})
}

#[test]
fn a_server_batch_becomes_catalog_calls() {
    let batch = json_body(&node_batch()).expect("valid");
    assert_eq!(batch.write_key.as_deref(), Some("phc_key"));
    assert_eq!(batch.sent_at.as_deref(), Some("2026-01-01T00:00:05.000Z"));
    let track = &batch.events[0];
    assert_eq!(track["type"], "track");
    assert_eq!(track["event"], "Link Clicked", "renamed by the mapping");
    assert_eq!(track["userId"], "u1");
    assert_eq!(track["messageId"], "0190-a");
    assert_eq!(track["timestamp"], "2026-01-01T00:00:00.000Z");
    assert_eq!(track["properties"], json!({"href": "https://example.com/x"}));
    assert_eq!(track["context"]["library"], json!({"name": "posthog-node", "version": "5.70.0"}));
    let identify = &batch.events[1];
    assert_eq!(identify["type"], "identify");
    assert_eq!(identify["traits"], json!({"plan": "pro", "first": "a"}), "$set wins over $set_once");
    assert!(identify.get("properties").is_none());
}

#[test]
fn posthog_js_gzip_js_and_base64_forms_decode_alike() {
    let events = json!([{"event": "$pageview", "uuid": "m1", "timestamp": "2026-01-01T00:00:00Z",
        "properties": {"token": "phc_js", "distinct_id": "anon-1", "$device_id": "anon-1",
                       "$current_url": "https://example.com/p", "$pathname": "/p", "title": "P"}}]);
    let text = events.to_string();
    let gz = gzip(text.as_bytes());
    let plain =
        Framing { content_type: Some("text/plain"), query: "compression=gzip-js&ver=1.449.2", ..Framing::default() };
    let b64 = base64::engine::general_purpose::STANDARD.encode(&text);
    let form_body = format!("data={}", urlencode(&b64));
    let form = Framing {
        content_type: Some("application/x-www-form-urlencoded"),
        query: "compression=base64&sent_at=1767225605000",
        ..Framing::default()
    };
    let unencoded = Framing { content_type: Some("application/x-www-form-urlencoded"), ..Framing::default() };
    for (what, body, framing) in [
        ("gzip-js", gz.clone(), plain),
        ("gzip header", gz, Framing { content_encoding: Some("gzip"), ..Framing::default() }),
        ("base64 form", form_body.into_bytes(), form),
        ("json form", format!("data={}", urlencode(&text)).into_bytes(), unencoded),
        ("json", text.clone().into_bytes(), Framing::default()),
    ] {
        let batch = run(&body, framing).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(batch.write_key.as_deref(), Some("phc_js"), "{what}");
        let page = &batch.events[0];
        assert_eq!(page["type"], "page", "{what}");
        assert_eq!(page["anonymousId"], "anon-1", "{what}: the device's own id is anonymous");
        assert!(page.get("userId").is_none(), "{what}");
        assert_eq!(page["properties"], json!({"url": "https://example.com/p", "path": "/p", "title": "P"}), "{what}");
        assert_eq!(page["context"]["posthog"]["$device_id"], "anon-1", "{what}: `$` properties kept aside");
        if what == "base64 form" {
            assert_eq!(batch.sent_at.as_deref(), Some("2026-01-01T00:00:05.000Z"), "millis in the query");
        }
    }
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[test]
fn a_single_event_and_engage_are_batches_of_one() {
    let one = json_body(&json!({"api_key": "k", "event": "Form Submitted", "distinct_id": 42,
                                "properties": {"form_id": "f"}}))
    .expect("one");
    assert_eq!(one.events.len(), 1);
    assert_eq!(one.events[0]["userId"], "42", "numeric ids become strings");
    assert_eq!(one.events[0]["event"], "Form Submitted", "no rule: the name as sent");
    let engage = json_body(&json!({"$token": "k", "$distinct_id": "u", "$set": {"a": 1}})).expect("engage");
    assert_eq!(engage.write_key.as_deref(), Some("k"));
    assert_eq!(engage.events[0]["type"], "identify");
    assert_eq!(engage.events[0]["traits"], json!({"a": 1}));
}

#[test]
fn group_alias_screen_and_identified_browsers_map() {
    let batch = json_body(&json!({"api_key": "k", "batch": [
        {"event": "$groupidentify", "distinct_id": "u", "properties": {"$group_type": "company", "$group_key": "acme",
                                                                      "$group_set": {"name": "Acme"}}},
        {"event": "$create_alias", "distinct_id": "u", "properties": {"alias": "old-anon"}},
        {"event": "$screen", "distinct_id": "u", "properties": {"$screen_name": "Home"}},
        {"event": "$pageview", "properties": {"distinct_id": "u", "$device_id": "d", "$is_identified": true}},
    ]}))
    .expect("valid");
    let e = &batch.events;
    assert_eq!((e[0]["type"].as_str(), e[0]["groupId"].as_str()), (Some("group"), Some("acme")));
    assert_eq!(e[0]["traits"], json!({"name": "Acme"}));
    assert_eq!((e[1]["type"].as_str(), e[1]["userId"].as_str()), (Some("alias"), Some("u")));
    assert_eq!(e[1]["previousId"], "old-anon");
    assert_eq!((e[2]["type"].as_str(), e[2]["name"].as_str()), (Some("screen"), Some("Home")));
    assert_eq!((e[3]["userId"].as_str(), e[3]["anonymousId"].as_str()), (Some("u"), Some("d")));
}

#[test]
fn a_pinned_version_travels_as_the_schema_version() {
    let mut mapping = TrackerMapping::default();
    let rule = EventRule {
        call: Call::Track,
        event: Some("Link Clicked".into()),
        version: Some(1),
        rename: Default::default(),
    };
    mapping.events.insert("click".into(), rule);
    let body = json!({"api_key": "k", "batch": [{"event": "click", "distinct_id": "u"}]}).to_string();
    let batch = decode(body.as_bytes(), Framing::default(), &LimitsConfig::default(), &mapping).expect("valid");
    assert_eq!(batch.events[0]["context"]["schemaVersion"], 1);
}

#[test]
fn bad_bodies_have_stable_codes() {
    let cases: [(&str, Vec<u8>, Framing<'_>, &str); 9] = [
        ("not JSON", b"{\"batch\": [".to_vec(), Framing::default(), "malformed_json"),
        ("a number", b"5".to_vec(), Framing::default(), "invalid_body"),
        ("no batch, no event", b"{\"api_key\": \"k\"}".to_vec(), Framing::default(), "invalid_body"),
        ("batch not an array", b"{\"batch\": {}}".to_vec(), Framing::default(), "invalid_body"),
        ("empty", b"[]".to_vec(), Framing::default(), "invalid_body"),
        (
            "truncated base64",
            b"data=eyJldmVudCI6I!".to_vec(),
            Framing { query: "compression=base64", ..Framing::default() },
            "invalid_body",
        ),
        (
            "gzip-js that is not gzip",
            b"{}".to_vec(),
            Framing { query: "compression=gzip-js", ..Framing::default() },
            "malformed_gzip",
        ),
        (
            "lz64",
            b"data=x".to_vec(),
            Framing { query: "compression=lz64", ..Framing::default() },
            "unsupported_encoding",
        ),
        (
            "form without data",
            b"x=1".to_vec(),
            Framing { content_type: Some("application/x-www-form-urlencoded"), ..Framing::default() },
            "invalid_body",
        ),
    ];
    for (what, body, framing, code) in cases {
        let error = run(&body, framing).expect_err(what);
        assert_eq!(error.code(), code, "{what}: {error}");
        assert!(!error.to_string().is_empty());
    }
}

#[test]
fn limits_hold_on_every_form() {
    let limits = LimitsConfig { max_batch_events: 2, max_decompressed_bytes: 1000, ..LimitsConfig::default() };
    let events = |n: usize| json!({"api_key": "k", "batch": vec![json!({"event": "x", "distinct_id": "u"}); n]});
    let ok = decode(events(2).to_string().as_bytes(), Framing::default(), &limits, &mapping()).expect("at the limit");
    assert_eq!(ok.events.len(), 2);
    let err = decode(events(3).to_string().as_bytes(), Framing::default(), &limits, &mapping()).expect_err("one past");
    assert_eq!(err.code(), "batch_too_large");
    let big = gzip(&vec![b' '; 1001]);
    let gz = Framing { query: "compression=gzip-js", ..Framing::default() };
    assert_eq!(decode(&big, gz, &limits, &mapping()).expect_err("inflates past").code(), "decompressed_too_large");
    let b64 = base64::engine::general_purpose::STANDARD.encode(vec![b' '; 1001]);
    let form = format!("data={}", urlencode(&b64));
    let err = decode(form.as_bytes(), Framing::default(), &limits, &mapping()).expect_err("base64 past the cap");
    assert_eq!(err.code(), "decompressed_too_large");
}

#[test]
fn a_non_object_event_is_left_for_the_pipeline_to_refuse() {
    let batch = json_body(&json!({"api_key": "k", "batch": [5, {"event": "x", "distinct_id": "u"}]})).expect("valid");
    assert_eq!(batch.events[0], json!(5));
    assert_eq!(batch.events[1]["type"], "track");
    let nameless = json_body(&json!({"api_key": "k", "batch": [{"distinct_id": "u"}]})).expect("valid");
    assert_eq!(nameless.events[0]["type"], "track");
    assert!(nameless.events[0].get("event").is_none(), "no name invented: the pipeline says it is missing");
}
