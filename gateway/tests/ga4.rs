//! GA4's Measurement Protocol on the whole in-process gateway (memory
//! sink): `/mp/collect` stores each event in its catalog shape, keyed,
//! with the `ga4` protocol header; a retried request is stored once (the
//! derived `messageId`); unmapped and badly named events are dead-lettered
//! with what was sent while the rest of the request is stored; bad secrets
//! and bodies get clear answers; `/debug/mp/collect` answers GA4's
//! `validationMessages` from the catalog's own check and stores nothing.
//! Request shapes: Google's Measurement Protocol reference ("Send
//! Measurement Protocol events", "Validate events"); its `purchase` and
//! `page_view` parameters are those of GA4's recommended events.
//! Kafka's side (read back from a broker) is not written yet.

#[path = "inprocess_support/mod.rs"]
mod support;

use std::io::Write;

use serde_json::{Value, json};
use support::TestGateway;

const DEMO: &str = "demo-write-key";

fn collect(secret: &str) -> String {
    format!("/mp/collect?measurement_id=G-TEST123&api_secret={secret}")
}

fn debug(secret: &str) -> String {
    format!("/debug/mp/collect?measurement_id=G-TEST123&api_secret={secret}")
}

fn purchase(order: &str) -> Value {
    json!({"client_id": "1234.5678", "user_id": "user-ga4", "timestamp_micros": 1_767_225_600_000_000_i64,
           "user_properties": {"plan": {"value": "pro"}}, "non_personalized_ads": true,
           "events": [{"name": "purchase", "params": {
               "transaction_id": order, "value": 42.5, "currency": "EUR", "session_id": "123",
               "engagement_time_msec": 100, "items": [{"item_id": "sku-1", "quantity": 1, "price": 42.5}]}}]})
}

async fn post(gw: &TestGateway, path: &str, body: impl Into<reqwest::Body>) -> (u16, String) {
    let response = reqwest::Client::new().post(format!("{}{path}", gw.url)).body(body).send().await.expect("send");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

async fn post_json(gw: &TestGateway, path: &str, body: &Value) -> (u16, Value) {
    let (status, text) = post(gw, path, body.to_string()).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn header<'a>(record: &'a gateway::sink::OutRecord, name: &str) -> Option<&'a str> {
    record.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
}

#[actix_web::test]
async fn a_purchase_is_the_catalog_order_keyed_by_order_and_answered_204() {
    let gw = TestGateway::start().await;
    let (status, body) = post(&gw, &collect(DEMO), purchase("T-1001").to_string()).await;
    assert_eq!((status, body.as_str()), (204, ""), "GA4's own success answer");
    let records = gw.sink.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].topic, "billing.payments");
    assert_eq!(records[0].key, "T-1001", "keyed by the order (transaction_id)");
    assert_eq!(header(&records[0], "protocol"), Some("ga4"));
    let value = &gw.values()[0];
    assert_eq!(value["event"], "Order Completed");
    assert_eq!((value["userId"].as_str(), value["anonymousId"].as_str()), (Some("user-ga4"), Some("1234.5678")));
    assert_eq!(value["properties"]["order_id"], "T-1001");
    assert_eq!(value["properties"]["total"], 42.5);
    assert!(value["timestamp"].as_str().is_some_and(|t| t.starts_with("2026-01-01T00:00:00")), "{value}");
    assert_eq!(value["context"]["traits"]["plan"], "pro");
    assert_eq!(value["context"]["ga4"]["measurement_id"], "G-TEST123");
    assert_eq!(value["context"]["ga4"]["non_personalized_ads"], true);
    assert_eq!(value["context"]["ga4"]["session_id"], "123");
    assert_eq!(header(&records[0], "event-id"), value["messageId"].as_str(), "the derived id is the event id");
}

#[actix_web::test]
async fn a_page_view_is_a_page_call() {
    let gw = TestGateway::start().await;
    let body = json!({"client_id": "anon-ga4", "events": [{"name": "page_view", "params": {
        "page_location": "https://shop.example/pricing?x=1", "page_title": "Pricing",
        "page_referrer": "https://search.example/"}}]});
    let (status, text) = post(&gw, &collect(DEMO), body.to_string()).await;
    assert_eq!(status, 204, "{text}");
    let records = gw.sink.records();
    assert_eq!((records[0].topic.as_str(), records[0].key.as_str()), ("web.tracking", "anon-ga4"));
    let value = &gw.values()[0];
    assert_eq!(value["type"], "page");
    assert_eq!(value["name"], "Pricing");
    assert_eq!(value["properties"]["url"], "https://shop.example/pricing?x=1");
    assert_eq!(value["properties"]["path"], "/pricing", "taken from page_location");
    assert_eq!(value["properties"]["referrer"], "https://search.example/");
}

#[actix_web::test]
async fn a_retried_request_is_stored_once() {
    let gw = TestGateway::start_with(|c| c.dedupe.enabled = true).await;
    let body = purchase("T-retry").to_string();
    assert_eq!(post(&gw, &collect(DEMO), body.clone()).await.0, 204);
    assert_eq!(post(&gw, &collect(DEMO), body).await.0, 204, "a retry is a success");
    assert_eq!(gw.sink.records().len(), 1, "stored once");
    let duplicates = gw.state.metrics.events.with_label_values(&["ga4", "duplicate", "billing.payments"]).get();
    assert_eq!(duplicates, 1, "the retry was answered as a duplicate");
    // Another order is another event: the id is not just the client's.
    assert_eq!(post(&gw, &collect(DEMO), purchase("T-other").to_string()).await.0, 204);
    assert_eq!(gw.sink.records().len(), 2);
}

#[actix_web::test]
async fn unmapped_and_badly_named_events_are_dead_lettered_and_the_rest_stored() {
    let gw = TestGateway::start().await;
    let body = json!({"client_id": "c-1", "events": [
        {"name": "login", "params": {"method": "Google"}},
        {"name": "page_view", "params": {"page_location": "https://shop.example/"}},
        {"name": "1-bad name", "params": {"x": 1}},
    ]});
    let (status, answer) = post_json(&gw, &collect(DEMO), &body).await;
    assert_eq!(status, 200, "not everything was taken: the body says why");
    assert_eq!((answer["accepted"].as_u64(), answer["invalid"].as_u64()), (Some(1), Some(2)), "{answer}");
    assert_eq!(answer["events"][0]["code"], "unknown_event");
    assert_eq!(answer["events"][2]["code"], "unknown_event");
    let records = gw.sink.records();
    let topics: Vec<&str> = records.iter().map(|r| r.topic.as_str()).collect();
    assert_eq!(topics, ["eventgw.dead-letter", "web.tracking", "eventgw.dead-letter"]);
    let values = gw.values();
    assert_eq!(values[0]["reason"], "unknown_event");
    assert_eq!(values[0]["event"]["event"], "login", "what was sent is kept");
    assert_eq!(values[0]["event"]["properties"]["method"], "Google");
    assert_eq!(values[2]["event"]["event"], "1-bad name");
    assert_eq!(header(&records[0], "protocol"), Some("ga4"));
}

#[actix_web::test]
async fn bad_secrets_are_401_and_a_server_sources_secret_stays_out_of_urls() {
    let gw = TestGateway::start().await;
    let body = purchase("T-1");
    for path in [collect("nobody"), debug("nobody")] {
        let (status, answer) = post_json(&gw, &path, &body).await;
        assert_eq!((status, answer["code"].as_str()), (401, Some("invalid_write_key")), "{path}: {answer}");
    }
    let (status, answer) = post_json(&gw, "/mp/collect?measurement_id=G-TEST123", &body).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("missing_credentials")), "{answer}");
    let (status, answer) = post_json(&gw, &collect("billing-backend-key"), &body).await;
    assert_eq!((status, answer["code"].as_str()), (403, Some("key_not_allowed_in_url")), "{answer}");
    assert!(gw.sink.records().is_empty());
}

#[actix_web::test]
async fn twenty_five_events_are_taken_and_twenty_six_refused() {
    let gw = TestGateway::start().await;
    let events = |n: usize| {
        let page = json!({"name": "page_view", "params": {"page_location": "https://shop.example/"}});
        json!({"client_id": "c-many", "events": vec![page; n]})
    };
    let (status, text) = post(&gw, &collect(DEMO), events(25).to_string()).await;
    assert_eq!(status, 204, "{text}");
    assert_eq!(gw.sink.records().len(), 25, "identical events of one request are distinct events");
    let (status, answer) = post_json(&gw, &collect(DEMO), &events(26)).await;
    assert_eq!((status, answer["code"].as_str()), (413, Some("batch_too_large")), "{answer}");
    assert!(answer["message"].as_str().is_some_and(|m| m.contains("25")), "{answer}");
    assert_eq!(gw.sink.records().len(), 25, "nothing of the refused request stored, nothing earlier lost");
}

#[actix_web::test]
async fn bad_bodies_get_their_codes() {
    let gw = TestGateway::start().await;
    for (what, body, code) in [
        ("truncated JSON", "{\"events\": [".to_owned(), "malformed_json"),
        ("no events", json!({"client_id": "c"}).to_string(), "invalid_body"),
        ("events not an array", json!({"client_id": "c", "events": 5}).to_string(), "invalid_body"),
        ("user_properties wrong", json!({"user_properties": 1, "events": [{"name": "e"}]}).to_string(), "invalid_body"),
    ] {
        let (status, text) = post(&gw, &collect(DEMO), body).await;
        let answer: Value = serde_json::from_str(&text).expect("JSON error");
        assert_eq!((status, answer["code"].as_str()), (400, Some(code)), "{what}: {answer}");
        assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}");
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(purchase("T-gzip").to_string().as_bytes()).expect("gzip");
    let response = reqwest::Client::new()
        .post(format!("{}{}", gw.url, collect(DEMO)))
        .header("content-encoding", "gzip")
        .body(gz.finish().expect("gzip"))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 204, "gzip is read");
    assert_eq!(gw.sink.records().len(), 1, "only the gzip request stored");
}

#[actix_web::test]
async fn debug_answers_the_catalogs_check_and_stores_nothing() {
    let gw = TestGateway::start().await;
    let (status, good) = post_json(&gw, &debug(DEMO), &purchase("T-debug")).await;
    assert_eq!((status, good.clone()), (200, json!({"validationMessages": []})), "a good event: no messages");
    let mut broken = purchase("T-debug");
    broken["events"][0]["params"]["currency"] = json!("euro");
    broken["events"][0]["params"].as_object_mut().expect("params").remove("transaction_id");
    broken["events"].as_array_mut().expect("events").push(json!({"name": "bad-name!"}));
    let (status, answer) = post_json(&gw, &debug(DEMO), &broken).await;
    assert_eq!(status, 200, "{answer}");
    let messages = answer["validationMessages"].as_array().expect("messages");
    let has = |path: &str, code: &str| {
        messages.iter().any(|m| m["fieldPath"] == path && m["validationCode"] == code && m["description"].is_string())
    };
    assert!(has("events[0].params.currency", "VALUE_INVALID"), "the schema's pattern, at GA4's name: {answer}");
    assert!(has("events[0].params.transaction_id", "VALUE_REQUIRED"), "the missing order id, GA4's name: {answer}");
    assert!(has("events[1].name", "NAME_INVALID"), "GA4's name rule: {answer}");
    assert!(
        messages.iter().any(|m| m["description"].as_str().is_some_and(|d| d.starts_with("schema_violation: "))),
        "the pipeline's code is named: {answer}"
    );
    let (status, answer) = post_json(&gw, &debug(DEMO), &json!({"events": []})).await;
    assert_eq!(status, 200, "a body GA4 cannot read is a message too: {answer}");
    assert_eq!(answer["validationMessages"][0]["validationCode"], "VALUE_INVALID");
    assert!(gw.sink.records().is_empty(), "validation produced nothing");
}

/// Until `eventgw-catalog check` reads the mappings: every catalog event the
/// shipped GA4 mapping names exists in the shipped catalog.
#[actix_web::test]
async fn the_shipped_mapping_names_only_catalog_events() {
    let gw = TestGateway::start().await;
    let mapping = gw.state.config.mappings.of("ga4");
    assert!(mapping.events.contains_key("purchase"), "schemas/mappings/ga4.toml was read");
    for (name, rule) in &mapping.events {
        if let Some(event) = &rule.event {
            assert!(gw.state.catalog.event(event).is_some(), "`{name}` maps to `{event}`, not in the catalog");
        }
    }
}
