//! PostHog's capture routes on the whole in-process gateway (memory sink):
//! every path and body form its SDKs send, the catalog shape of what is
//! stored, dedupe of a retried request by `uuid`, the answers to bad
//! bodies and keys, and the load-time documents posthog-js asks for.
//! Shapes: `@posthog/core` `sendBatch` (posthog-node), Python `posthog`
//! `request.py` `post`, posthog-js `request.ts` `encodePostData` and
//! `remote-config.ts`. Kafka's side is `conformance.rs` (`posthog_*`).

#[path = "inprocess_support/mod.rs"]
mod support;

use std::io::Write;

use base64::Engine;
use serde_json::{Value, json};
use support::{TestGateway, answer};

const DEMO: &str = "demo-write-key";

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

fn link_clicked(user: &str, uuid: &str) -> Value {
    json!({"event": "link_clicked", "distinct_id": user, "uuid": uuid, "timestamp": "2026-01-01T00:00:00.000Z",
           "properties": {"link": "https://example.com/pricing", "$lib": "posthog-node", "$lib_version": "5.70.0"}})
}

async fn post(gw: &TestGateway, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let (status, _, body) =
        answer(client().post(format!("{}{path}", gw.url)).body(body).send().await.expect("send")).await;
    (status, body)
}

#[actix_web::test]
async fn server_sdk_batches_land_in_catalog_shape_on_every_path() {
    let gw = TestGateway::start().await;
    for (i, path) in ["/batch/", "/batch", "/capture/", "/track/", "/e/", "/i/v0/e/", "/engage/", "/i/v0/ai/batch/"]
        .iter()
        .enumerate()
    {
        let body = json!({"api_key": DEMO, "sent_at": "2026-01-01T00:00:01.000Z",
                          "batch": [link_clicked("u-batch", &format!("uuid-{i}"))]});
        let (status, answer) = post(&gw, path, gzip(body.to_string().as_bytes())).await;
        assert_eq!(status, 200, "{path}: {answer}");
        assert_eq!(answer["status"], 1, "{path}: PostHog's own success field");
        assert_eq!(answer["accepted"], 1, "{path}: {answer}");
    }
    let records = gw.sink.records();
    assert_eq!(records.len(), 8);
    let value: Value = serde_json::from_slice(&records[0].payload).expect("JSON");
    assert_eq!(records[0].topic, "web.tracking");
    assert_eq!(records[0].key, "u-batch");
    assert_eq!(value["event"], "Link Clicked");
    assert_eq!(value["properties"]["href"], "https://example.com/pricing");
    assert_eq!(value["messageId"], "uuid-0");
    assert_eq!(value["context"]["library"]["name"], "posthog-node");
    let header = |name: &str| records[0].headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone());
    assert_eq!(header("event-id").as_deref(), Some("uuid-0"), "uuid is the event id");
    assert_eq!(header("protocol").as_deref(), Some("posthog"), "the record names the protocol it came in");
}

#[actix_web::test]
async fn posthog_js_forms_are_taken_and_its_identify_goes_to_identities() {
    let gw = TestGateway::start().await;
    let page = json!({"event": "$pageview", "uuid": "js-1",
        "properties": {"token": DEMO, "distinct_id": "anon-js", "$device_id": "anon-js",
                       "$current_url": "https://example.com/p", "$pathname": "/p", "$lib": "web"}});
    let identify = json!({"event": "$identify", "uuid": "js-2", "$set": {"plan": "pro"},
        "properties": {"token": DEMO, "distinct_id": "user-js", "$anon_distinct_id": "anon-js"}});
    let text = json!({"api_key": DEMO, "batch": [page, identify]}).to_string();
    let gz = client()
        .post(format!("{}/e/?compression=gzip-js&ver=1.449.2", gw.url))
        .header("content-type", "text/plain")
        .body(gzip(text.as_bytes()));
    let (status, _, body) = answer(gz.send().await.expect("send")).await;
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(2)), "{body}");
    let b64 = base64::engine::general_purpose::STANDARD.encode(json!([page]).to_string());
    let form = client()
        .post(format!("{}/e/?compression=base64", gw.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("data={}", b64.replace('+', "%2B").replace('/', "%2F").replace('=', "%3D")));
    let (status, _, body) = answer(form.send().await.expect("send")).await;
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(1)), "{body}");
    let values = gw.values();
    assert_eq!(values[0]["type"], "page");
    assert_eq!(values[0]["anonymousId"], "anon-js");
    assert_eq!(values[0]["properties"]["url"], "https://example.com/p");
    assert_eq!(values[1]["type"], "identify");
    assert_eq!((values[1]["userId"].as_str(), values[1]["anonymousId"].as_str()), (Some("user-js"), Some("anon-js")));
    assert_eq!(values[1]["traits"]["plan"], "pro");
    assert_eq!(gw.sink.records()[1].topic, "crm.identities");
}

#[actix_web::test]
async fn a_retried_request_stores_each_uuid_once() {
    let gw = TestGateway::start_with(|c| c.dedupe.enabled = true).await;
    let body = json!({"api_key": DEMO, "batch": [link_clicked("u-retry", "same-uuid")]}).to_string();
    assert_eq!(post(&gw, "/batch/", body.clone()).await.0, 200);
    let (status, again) = post(&gw, "/batch/", body).await;
    assert_eq!(status, 200, "a retry is a success: {again}");
    assert_eq!(again["events"][0]["status"], "duplicate", "{again}");
    assert_eq!(gw.sink.records().len(), 1, "stored once");
}

#[actix_web::test]
async fn unmapped_events_meet_the_sources_unknown_events_rule() {
    let gw = TestGateway::start().await;
    let body = json!({"api_key": DEMO, "batch": [{"event": "$autocapture", "distinct_id": "u", "uuid": "dl-1",
                                                  "properties": {"$event_type": "click"}}]});
    let (status, answer) = post(&gw, "/batch/", body.to_string()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["invalid"], 1, "dead-lettered, not lost: {answer}");
    let records = gw.sink.records();
    assert_eq!(records[0].topic, "eventgw.dead-letter");
    let letter: Value = serde_json::from_slice(&records[0].payload).expect("JSON");
    assert_eq!(letter["reason"], "unknown_event");
    assert_eq!(letter["event"]["context"]["posthog"]["$event_type"], "click", "what was sent is kept");
}

#[actix_web::test]
async fn bad_keys_and_bodies_get_clear_answers() {
    let gw = TestGateway::start().await;
    let wrong = json!({"api_key": "phc_nobody", "batch": [link_clicked("u", "x")]}).to_string();
    let (status, body) = post(&gw, "/batch/", wrong).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("invalid_write_key")), "{body}");
    let (status, body) = post(&gw, "/batch/", json!({"batch": [link_clicked("u", "x")]}).to_string()).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("missing_credentials")), "{body}");
    for (what, path, body, code) in [
        ("truncated JSON", "/e/", "{\"batch\": [".to_owned(), "malformed_json"),
        ("no events", "/batch/", json!({"api_key": DEMO}).to_string(), "invalid_body"),
        ("truncated base64", "/e/?compression=base64", "data=eyJldmVudCI6I!".to_owned(), "invalid_body"),
        ("lz64", "/e/?compression=lz64", "data=x".to_owned(), "unsupported_encoding"),
        ("gzip-js not gzip", "/e/?compression=gzip-js", "{}".to_owned(), "malformed_gzip"),
    ] {
        let (status, answer) = post(&gw, path, body).await;
        assert_eq!(answer["code"], code, "{what}: {answer}");
        assert!((400..500).contains(&status), "{what}: {status}");
        assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}");
    }
    assert!(gw.sink.records().is_empty(), "nothing stored from a refused body");
}

#[actix_web::test]
async fn load_time_calls_keep_posthog_js_capturing_and_turn_the_rest_off() {
    let gw = TestGateway::start().await;
    let get = |path: &str| client().get(format!("{}{path}", gw.url)).send();
    let (status, _, config) = answer(get("/array/phc_any/config").await.expect("config")).await;
    assert_eq!(status, 200);
    assert_eq!(config["sessionRecording"], false);
    assert_eq!(config["surveys"], false);
    assert_eq!(config["hasFeatureFlags"], false);
    assert_eq!(config["supportedCompression"], json!(["gzip", "gzip-js"]));
    let script = get("/array/phc_any/config.js").await.expect("config.js").text().await.expect("text");
    assert!(script.contains("_POSTHOG_REMOTE_CONFIG[\"phc_any\"]"), "{script}");
    for path in ["/flags/?v=2&config=true", "/decide/?v=3"] {
        let (status, body) = post(&gw, path, "{\"token\": \"x\"}").await;
        assert_eq!((status, body["featureFlags"].clone()), (200, json!({})), "{path}: {body}");
    }
    let preflight = client()
        .request(reqwest::Method::OPTIONS, format!("{}/e/", gw.url))
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .expect("preflight");
    assert!(preflight.status().is_success(), "an allowed origin may post: {}", preflight.status());
}

/// Until `eventgw-catalog check` reads the mappings: every catalog event the
/// shipped PostHog mapping names exists in the shipped catalog, so no
/// mapped event is dead-lettered for a typo in the mapping.
#[actix_web::test]
async fn the_shipped_mapping_names_only_catalog_events() {
    let gw = TestGateway::start().await;
    let mapping = gw.state.config.mappings.of("posthog");
    assert!(!mapping.events.is_empty(), "schemas/mappings/posthog.toml was read");
    for (name, rule) in &mapping.events {
        if let Some(event) = &rule.event {
            assert!(gw.state.catalog.event(event).is_some(), "`{name}` maps to `{event}`, not in the catalog");
        }
    }
}
