//! The GA4 decoder on the documented request shape (Google's Measurement
//! Protocol reference, "Send Measurement Protocol events" and its
//! "Validate events" page) and on bad ones.

use serde_json::{Value, json};

use super::*;
use crate::wire::tracker::url_path;

fn mapping() -> TrackerMapping {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/mappings");
    crate::config::mapping::load_dir(&dir).expect("shipped mappings").of(PROTOCOL).clone()
}

fn stream() -> Stream {
    Stream::from_query("measurement_id=G-TEST&api_secret=secret").expect("query")
}

fn run(body: &Value) -> Result<Decoded, WireError> {
    decode(body.to_string().as_bytes(), &stream(), &LimitsConfig::default(), &mapping())
}

fn purchase() -> Value {
    json!({"client_id": "123.456", "user_id": "u1", "timestamp_micros": 1_700_000_000_000_000_i64,
           "user_properties": {"plan": {"value": "pro"}},
           "consent": {"ad_user_data": "GRANTED"}, "non_personalized_ads": false,
           "events": [{"name": "purchase", "params": {"transaction_id": "T-1", "value": 30.5, "currency": "EUR",
                                                       "session_id": "s1", "items": [{"item_id": "sku"}]}}]})
}

#[test]
fn a_purchase_becomes_the_catalog_order() {
    let decoded = run(&purchase()).expect("valid");
    assert_eq!(decoded.batch.write_key.as_deref(), Some("secret"));
    assert_eq!(decoded.batch.protocol, "ga4");
    assert!(decoded.findings.is_empty(), "{:?}", decoded.findings);
    let event = &decoded.batch.events[0];
    assert_eq!(event["type"], "track");
    assert_eq!(event["event"], "Order Completed");
    assert_eq!((event["userId"].as_str(), event["anonymousId"].as_str()), (Some("u1"), Some("123.456")));
    assert_eq!(event["timestamp"], "2023-11-14T22:13:20.000000Z");
    assert_eq!(event["properties"]["order_id"], "T-1");
    assert_eq!(event["properties"]["total"], 30.5);
    assert!(event["properties"].get("session_id").is_none(), "GA4's own param kept aside");
    assert_eq!(event["context"]["ga4"]["session_id"], "s1");
    assert_eq!(event["context"]["ga4"]["measurement_id"], "G-TEST");
    assert_eq!(event["context"]["ga4"]["consent"], json!({"ad_user_data": "GRANTED"}));
    assert_eq!(event["context"]["ga4"]["non_personalized_ads"], false);
    assert_eq!(event["context"]["traits"], json!({"plan": "pro"}), "values unwrapped");
}

#[test]
fn a_page_view_is_a_page_call_with_its_path() {
    let body = json!({"client_id": "c", "events": [{"name": "page_view", "timestamp_micros": 1_000_000,
        "params": {"page_location": "https://shop.example/a/b?q=1", "page_title": "B", "page_referrer": "https://r.example/"}}]});
    let event = &run(&body).expect("valid").batch.events[0];
    assert_eq!(event["type"], "page");
    assert_eq!(event["name"], "B");
    assert_eq!(event["timestamp"], "1970-01-01T00:00:01.000000Z", "the event's own time wins");
    assert_eq!(
        event["properties"],
        json!({"url": "https://shop.example/a/b?q=1", "title": "B", "referrer": "https://r.example/", "path": "/a/b"})
    );
    assert_eq!(url_path("https://shop.example"), Some("/".into()));
    assert_eq!(url_path("/relative"), None);
}

#[test]
fn ids_are_derived_stable_and_distinct() {
    let one = run(&purchase()).expect("valid").batch.events[0]["messageId"].clone();
    let again = run(&purchase()).expect("valid").batch.events[0]["messageId"].clone();
    assert_eq!(one, again, "a retried identical request has the same ids");
    assert_eq!(one.as_str().map(str::len), Some(36), "a UUID: {one}");
    let mut reordered = purchase();
    reordered["events"][0]["params"] = json!({"currency": "EUR", "value": 30.5, "transaction_id": "T-1",
                                              "items": [{"item_id": "sku"}], "session_id": "s1"});
    assert_eq!(run(&reordered).expect("valid").batch.events[0]["messageId"], one, "key order does not matter");
    let mut other_client = purchase();
    other_client["client_id"] = json!("999");
    assert_ne!(run(&other_client).expect("valid").batch.events[0]["messageId"], one);
    let twins = json!({"client_id": "c", "events": [{"name": "x"}, {"name": "x"}]});
    let batch = run(&twins).expect("valid").batch;
    assert_ne!(batch.events[0]["messageId"], batch.events[1]["messageId"], "two events, two ids");
}

#[test]
fn the_event_limit_is_exact() {
    let events = |n: usize| json!({"client_id": "c", "events": vec![json!({"name": "e"}); n]});
    assert_eq!(run(&events(MAX_EVENTS)).expect("at the limit").batch.events.len(), MAX_EVENTS);
    let err = run(&events(MAX_EVENTS + 1)).expect_err("one past");
    assert_eq!(err.code(), "batch_too_large");
}

#[test]
fn name_and_param_rules_are_found_exactly() {
    let exactly = "a".repeat(MAX_NAME_CHARS);
    let long = "a".repeat(MAX_NAME_CHARS + 1);
    let params = |n: usize| (0..n).map(|i| (format!("p{i}"), json!(i))).collect::<serde_json::Map<_, _>>();
    let body = json!({"client_id": "c", "events": [
        {"name": exactly, "params": params(MAX_PARAMS)},
        {"name": long},
        {"name": "1st"},
        {"name": "has-dash", "params": params(MAX_PARAMS + 1)},
        {"name": "first_visit"},
        {"name": 7},
        {"params": {"bad name": 1}},
    ]});
    let found: Vec<(String, &str)> =
        run(&body).expect("decoded").findings.into_iter().map(|f| (f.field_path, f.validation_code)).collect();
    let want = [
        ("events[1].name", "NAME_INVALID"),
        ("events[2].name", "NAME_INVALID"),
        ("events[3].name", "NAME_INVALID"),
        ("events[3].params", "EXCEEDED_MAX_ENTITIES"),
        ("events[4].name", "NAME_RESERVED"),
        ("events[5].name", "VALUE_INVALID"),
        ("events[6].name", "VALUE_REQUIRED"),
        ("events[6].params.bad name", "NAME_INVALID"),
    ];
    assert_eq!(found, want.map(|(p, c)| (p.to_owned(), c)).to_vec());
}

#[test]
fn the_request_needs_a_stream_and_a_client() {
    let body = json!({"events": [{"name": "e"}]});
    let decoded =
        decode(body.to_string().as_bytes(), &Stream::default(), &LimitsConfig::default(), &mapping()).expect("decoded");
    let paths: Vec<&str> = decoded.findings.iter().map(|f| f.field_path.as_str()).collect();
    assert_eq!(paths, ["measurement_id", "client_id"]);
    assert_eq!(decoded.batch.write_key, None);
}

#[test]
fn bad_bodies_have_their_codes() {
    let raw = |text: &str| decode(text.as_bytes(), &stream(), &LimitsConfig::default(), &mapping());
    assert_eq!(raw("{\"events\": [").expect_err("truncated").code(), "malformed_json");
    assert_eq!(raw("[]").expect_err("array").code(), "invalid_body");
    assert_eq!(run(&json!({"events": []})).expect_err("empty").code(), "invalid_body");
    assert_eq!(run(&json!({"events": "e"})).expect_err("a string").code(), "invalid_body");
    assert_eq!(run(&json!({"client_id": "c"})).expect_err("no events").code(), "invalid_body");
    let props = json!({"client_id": "c", "user_properties": [1], "events": [{"name": "e"}]});
    assert_eq!(run(&props).expect_err("user_properties").code(), "invalid_body");
}

#[test]
fn wrong_event_types_are_left_for_the_pipeline() {
    let body = json!({"client_id": "c", "events": [5, {"name": "e", "params": [1], "timestamp_micros": "soon"}]});
    let batch = run(&body).expect("decoded").batch;
    assert_eq!(batch.events[0], json!(5), "refused per event as event_not_object");
    assert_eq!(batch.events[1]["properties"], json!([1]), "refused per event by its schema");
    assert_eq!(batch.events[1]["timestamp"], "soon", "dead-lettered per event as invalid_timestamp");
}

#[test]
fn ga4mps_postponed_single_event_is_one_event() {
    // ga4mp 2.0.4 `ga4mp.py` `_http_post(postpone=True)`: `"events": {"name", "params"}`.
    let body = json!({"client_id": "c", "timestamp_micros": 1_000_000, "events": {"name": "page_view", "params": {}}});
    let batch = run(&body).expect("decoded").batch;
    assert_eq!(batch.events.len(), 1);
    assert_eq!(batch.events[0]["type"], "page");
}

mod fuzz {
    use proptest::prelude::*;

    use super::*;

    /// JSON values a client might put anywhere in a request.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            ".{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-z_]{1,8}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_bytes_decode_or_refuse_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes, &stream(), &LimitsConfig::default(), &mapping());
        }

        #[test]
        fn every_decoded_event_has_a_derived_id(
            top in prop::collection::btree_map("client_id|user_id|timestamp_micros|consent|x", any_json(), 0..4),
            events in prop::collection::vec(any_json(), 1..30),
        ) {
            let mut body: serde_json::Map<String, Value> = top.into_iter().collect();
            let count = events.len();
            body.insert("events".into(), Value::Array(events));
            match run(&Value::Object(body)) {
                Ok(decoded) => {
                    prop_assert!(count <= MAX_EVENTS);
                    prop_assert_eq!(decoded.batch.events.len(), count);
                    prop_assert_eq!(decoded.names.len(), count);
                    for event in decoded.batch.events.iter().filter(|e| e.is_object()) {
                        prop_assert_eq!(event["messageId"].as_str().map(str::len), Some(36));
                    }
                }
                Err(error) => prop_assert!(count > MAX_EVENTS && error.code() == "batch_too_large", "{error}"),
            }
        }
    }
}
