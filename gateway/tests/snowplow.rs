//! Snowplow's tracker protocol on the whole in-process gateway (memory
//! sink): a `tp2` batch of a page view, a structured event and a
//! self-describing event with a context is stored in its catalog shapes
//! with the `snowplow` protocol header; `GET /i` answers a GIF; a retried
//! event (same `eid`) is stored once; an unmapped event is dead-lettered
//! with what was sent while the rest is stored; an event that cannot be
//! read (bad base64 or JSON in a field, a field not a string) is
//! dead-lettered as sent while the rest is stored; unknown app ids, foreign
//! origins and bodies that cannot be read get clear answers that the
//! trackers do not retry forever. Request shapes: Snowplow's "Snowplow Tracker Protocol"
//! reference, the browser tracker's `libraries/tracker-core/src/payload.ts`
//! (its `ue_px`/`cx` base64url without padding) and the Python tracker's
//! `snowplow_tracker/emitters.py` (`payload_data` 1-0-4 envelope, every
//! field a string, `stm` added when sent). Kafka's side is not written yet.

#[path = "inprocess_support/mod.rs"]
mod support;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gateway::privacy::IpPolicy;
use serde_json::{Value, json};
use support::TestGateway;

const TP2: &str = "/com.snowplowanalytics.snowplow/tp2";
const APP: &str = "demo-web";
const PAYLOAD_DATA: &str = "iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-4";

fn body(events: Vec<Value>) -> String {
    json!({"schema": PAYLOAD_DATA, "data": events}).to_string()
}

fn page_view(eid: &str) -> Value {
    json!({"e": "pv", "eid": eid, "aid": APP, "tna": "sp", "p": "web", "tv": "js-4.1.0", "duid": "duid-1",
           "url": "https://shop.example/pricing?x=1", "page": "Pricing", "refr": "https://search.example/",
           "dtm": "1767225600000", "stm": "1767225600100"})
}

fn b64(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

fn link_click() -> Value {
    let ue = json!({"schema": "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0",
        "data": {"schema": "iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1",
                 "data": {"targetUrl": "https://shop.example/buy", "elementContent": "Buy now"}}});
    let cx = json!({"schema": "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-0",
        "data": [{"schema": "iglu:com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0", "data": {"id": "wp-1"}}]});
    json!({"e": "ue", "eid": "ue-1", "aid": APP, "duid": "duid-1", "uid": "user-7", "ue_px": b64(&ue),
           "cx": b64(&cx), "dtm": "1767225600000"})
}

async fn post(gw: &TestGateway, text: String, origin: Option<&str>) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{}{TP2}", gw.url))
        .header("content-type", "application/json; charset=UTF-8")
        .body(text);
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    support::answer(request.send().await.expect("send")).await
}

fn header<'a>(record: &'a gateway::sink::OutRecord, name: &str) -> Option<&'a str> {
    record.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
}

#[actix_web::test]
async fn a_batch_of_page_view_structured_and_self_describing_events_is_stored_in_catalog_shapes() {
    let gw = TestGateway::start().await;
    let form = json!({"e": "se", "eid": "se-1", "aid": APP, "duid": "duid-1", "se_ca": "form", "se_ac": "submit",
                      "se_la": "newsletter", "dtm": "1767225600000"});
    let (status, _, answer) = post(&gw, body(vec![page_view("pv-1"), form, link_click()]), None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["accepted"], 3, "{answer}");
    let records = gw.sink.records();
    let topics: Vec<&str> = records.iter().map(|r| r.topic.as_str()).collect();
    assert_eq!(topics, ["web.tracking"; 3]);
    assert!(records.iter().all(|r| header(r, "protocol") == Some("snowplow")));
    assert_eq!(header(&records[0], "event-id"), Some("pv-1"), "eid is the event id");
    assert_eq!(header(&records[0], "auth"), Some("app-id"));
    assert_eq!(records[0].key, "duid-1");
    let values = gw.values();
    assert_eq!((values[0]["type"].as_str(), values[0]["name"].as_str()), (Some("page"), Some("Pricing")));
    assert_eq!(values[0]["properties"]["path"], "/pricing");
    assert_eq!(values[0]["context"]["snowplow"]["aid"], APP);
    assert_eq!(values[0]["context"]["library"]["name"], "snowplow-js");
    assert_eq!(values[1]["event"], "Form Submitted");
    assert_eq!(values[1]["properties"]["form_id"], "newsletter");
    assert_eq!(values[2]["event"], "Link Clicked");
    assert_eq!(values[2]["properties"]["href"], "https://shop.example/buy");
    assert_eq!(values[2]["userId"], "user-7");
    assert_eq!(records[2].key, "user-7");
    assert_eq!(values[2]["context"]["snowplow"]["contexts"][0]["data"]["id"], "wp-1", "the context entity kept");
}

#[actix_web::test]
async fn get_i_stores_one_event_and_answers_a_gif_on_both_paths() {
    let gw = TestGateway::start().await;
    for (path, eid) in [("/i", "g-1"), ("/com.snowplowanalytics.snowplow/i", "g-2")] {
        let query = format!("e=pv&eid={eid}&aid={APP}&duid=d&url=https%3A%2F%2Fshop.example%2F&page=Home");
        let response = reqwest::get(format!("{}{path}?{query}", gw.url)).await.expect("send");
        assert_eq!(response.status().as_u16(), 200, "{path}");
        assert_eq!(response.headers()["content-type"], "image/gif");
        assert!(response.bytes().await.expect("body").starts_with(b"GIF89a"), "{path}");
    }
    let ids: Vec<Value> = gw.values().iter().map(|v| v["messageId"].clone()).collect();
    assert_eq!(ids, [json!("g-1"), json!("g-2")]);
    let response = reqwest::get(format!("{}/i?e=pv&aid=nobody", gw.url)).await.expect("send");
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(response.headers()["x-eventgw-error"], "unknown_app_id");
    assert_eq!(response.headers()["content-type"], "image/gif", "a GIF whatever happened");
}

#[actix_web::test]
async fn a_retried_event_is_stored_once() {
    let gw = TestGateway::start_with(|c| c.dedupe.enabled = true).await;
    let text = body(vec![page_view("pv-retry")]);
    assert_eq!(post(&gw, text.clone(), None).await.0, 200);
    let (status, _, answer) = post(&gw, text, None).await;
    assert_eq!((status, answer["events"][0]["status"].as_str()), (200, Some("duplicate")), "{answer}");
    assert_eq!(gw.sink.records().len(), 1, "stored once");
    let duplicates = gw.state.metrics.events.with_label_values(&["snowplow", "duplicate", "web.tracking"]).get();
    assert_eq!(duplicates, 1);
}

#[actix_web::test]
async fn an_unmapped_event_is_dead_lettered_with_what_was_sent_and_the_rest_stored() {
    let gw = TestGateway::start().await;
    let ue = json!({"schema": "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0",
        "data": {"schema": "iglu:com.acme/checkout_started/jsonschema/1-0-0", "data": {"step": 2}}});
    let acme = json!({"e": "ue", "eid": "acme-1", "aid": APP, "duid": "d", "ue_pr": ue.to_string()});
    let (status, _, answer) = post(&gw, body(vec![acme, page_view("pv-2")]), None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["events"][0]["code"], "unknown_event", "{answer}");
    let records = gw.sink.records();
    assert_eq!(records[0].topic, "eventgw.dead-letter");
    assert_eq!(records[1].topic, "web.tracking");
    let values = gw.values();
    assert_eq!(values[0]["reason"], "unknown_event");
    assert_eq!(values[0]["event"]["event"], "iglu:com.acme/checkout_started/jsonschema/1-0-0");
    assert_eq!(values[0]["event"]["properties"]["step"], 2, "what was sent is kept");
}

#[actix_web::test]
async fn unknown_missing_and_mixed_app_ids_are_401_and_nothing_is_stored() {
    let gw = TestGateway::start().await;
    let mut stranger = page_view("x-1");
    stranger["aid"] = json!("nobody");
    let mut anonymous = page_view("x-2");
    anonymous.as_object_mut().expect("event").remove("aid");
    for (what, events, says) in [
        ("unknown", vec![stranger], "unknown Snowplow app id `nobody`"),
        ("missing", vec![page_view("x-3"), anonymous], "an event has no Snowplow app id"),
    ] {
        let (status, _, answer) = post(&gw, body(events), None).await;
        assert_eq!((status, answer["code"].as_str()), (401, Some("unknown_app_id")), "{what}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains(says) && message.contains("snowplow_app_ids"), "{what}: {answer}");
    }
    let gw2 = TestGateway::start_with(|c| {
        let mut other = c.sources[0].clone();
        other.id = "other".into();
        other.write_key = Some("other-write-key".into());
        other.snowplow_app_ids = vec!["other-web".into()];
        c.sources.push(other);
    })
    .await;
    let mut theirs = page_view("x-4");
    theirs["aid"] = json!("other-web");
    let (status, _, answer) = post(&gw2, body(vec![page_view("x-5"), theirs]), None).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("conflicting_app_ids")), "{answer}");
    assert!(gw.sink.records().is_empty() && gw2.sink.records().is_empty());
}

#[actix_web::test]
async fn an_authorization_header_must_name_the_app_ids_source() {
    let gw = TestGateway::start().await;
    let with_key = |key: &str| {
        reqwest::Client::new()
            .post(format!("{}{TP2}", gw.url))
            .basic_auth(key, Some(""))
            .header("content-type", "application/json")
            .body(body(vec![page_view("h-1")]))
            .send()
    };
    let (status, _, answer) = support::answer(with_key("billing-backend-key").await.expect("send")).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("conflicting_app_ids")), "{answer}");
    let (status, _, answer) = support::answer(with_key("demo-write-key").await.expect("send")).await;
    assert_eq!(status, 200, "{answer}");
    let records = gw.sink.records();
    assert_eq!(records.len(), 1);
    assert_eq!(header(&records[0], "auth"), Some("write-key"), "the header's principal says more than an app id");
}

#[actix_web::test]
async fn cors_grants_credentials_to_an_allowed_origin_only() {
    let gw = TestGateway::start().await;
    let client = reqwest::Client::new();
    let preflight = |origin: &'static str| {
        client
            .request(reqwest::Method::OPTIONS, format!("{}{TP2}", gw.url))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let allowed = preflight("http://localhost:3000").await.expect("send");
    assert_eq!(allowed.status().as_u16(), 204);
    assert_eq!(allowed.headers()["access-control-allow-origin"], "http://localhost:3000");
    assert_eq!(allowed.headers()["access-control-allow-credentials"], "true");
    let refused = preflight("https://evil.example").await.expect("send");
    assert_eq!(refused.status().as_u16(), 403);
    assert!(refused.headers().get("access-control-allow-credentials").is_none());
    let (status, headers, _) = post(&gw, body(vec![page_view("c-1")]), Some("http://localhost:3000")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["access-control-allow-origin"], "http://localhost:3000");
    assert_eq!(headers["access-control-allow-credentials"], "true");
    let (_, headers, _) = post(&gw, body(vec![page_view("c-2")]), Some("https://evil.example")).await;
    assert!(headers.get("access-control-allow-origin").is_none(), "the page may not read it");
    assert!(headers.get("access-control-allow-credentials").is_none());
    let other = client
        .request(reqwest::Method::OPTIONS, format!("{}/v1/batch", gw.url))
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .expect("send");
    assert!(other.headers().get("access-control-allow-credentials").is_none(), "only Snowplow's paths");
}

#[actix_web::test]
async fn malformed_bodies_get_their_codes_with_statuses_the_trackers_do_not_retry() {
    let gw = TestGateway::start_with(|c| c.limits.max_batch_events = 2).await;
    let stored = body(vec![page_view("ok-1")]);
    assert_eq!(post(&gw, stored, None).await.0, 200);
    for (what, text, code) in [
        ("invalid JSON", "{\"schema\": ".to_owned(), "malformed_json"),
        ("wrong envelope", json!({"schema": "iglu:x/y/jsonschema/1-0-0", "data": []}).to_string(), "invalid_body"),
        ("data not an array", json!({"schema": PAYLOAD_DATA, "data": {}}).to_string(), "invalid_body"),
        ("too many events", body(vec![page_view("a"), page_view("b"), page_view("c")]), "batch_too_large"),
    ] {
        let (status, _, answer) = post(&gw, text, None).await;
        assert_eq!((status, answer["code"].as_str()), (400, Some(code)), "{what}: {answer}");
        assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}");
    }
    let response = reqwest::Client::new()
        .post(format!("{}{TP2}", gw.url))
        .header("content-type", "application/xml")
        .body(body(vec![page_view("xml")]))
        .send()
        .await
        .expect("send");
    let (status, _, answer) = support::answer(response).await;
    assert_eq!((status, answer["code"].as_str()), (400, Some("unsupported_media_type")), "415 elsewhere");
    assert_eq!(gw.sink.records().len(), 1, "nothing of a refused request stored, nothing earlier lost");
}

#[actix_web::test]
async fn an_unreadable_event_is_dead_lettered_as_sent_and_the_others_stored() {
    let cases = [
        (
            "truncated base64 cx",
            json!({"e": "pv", "eid": "bad", "aid": APP, "cx": "eyJzY2hlbWEiO"}),
            "`data[1].cx` is not base64",
        ),
        (
            "base64 cx of truncated JSON",
            json!({"e": "pv", "aid": APP, "cx": "eyJzY2hlbWEi"}),
            "`data[1].cx` is not JSON",
        ),
        ("bad base64 ue_px", json!({"e": "ue", "aid": APP, "ue_px": "e30.!"}), "`data[1].ue_px` is not base64"),
        ("a field not a string", json!({"e": "pv", "aid": APP, "dtm": [1]}), "`data[1].dtm` must be a string"),
        ("not an object", json!("e=pv"), "`data[1]` must be an object"),
    ];
    for (what, bad, says) in cases {
        let gw = TestGateway::start().await;
        let (status, _, answer) = post(&gw, body(vec![page_view("a"), bad.clone(), page_view("c")]), None).await;
        assert_eq!(status, 200, "{what}: {answer}");
        assert_eq!((answer["accepted"].as_u64(), answer["invalid"].as_u64()), (Some(2), Some(1)), "{what}: {answer}");
        let outcome = &answer["events"][1];
        assert_eq!(
            (outcome["status"].as_str(), outcome["code"].as_str()),
            (Some("invalid"), Some("undecodable_event"))
        );
        let records = gw.sink.records();
        let stored: Vec<Option<&str>> =
            records.iter().filter(|r| r.topic == "web.tracking").map(|r| header(r, "event-id")).collect();
        assert_eq!(stored, [Some("a"), Some("c")], "{what}: the others stored");
        let dead: Vec<_> = records.iter().filter(|r| r.topic == "eventgw.dead-letter").collect();
        assert_eq!(dead.len(), 1, "{what}");
        assert_eq!(header(dead[0], "dead-letter-reason"), Some("undecodable_event"));
        assert_eq!(header(dead[0], "protocol"), Some("snowplow"));
        let letter: Value = serde_json::from_slice(&dead[0].payload).expect("a JSON dead letter");
        assert_eq!(letter["reason"], "undecodable_event", "{what}");
        assert!(letter["message"].as_str().is_some_and(|m| m.contains(says)), "{what}: {letter}");
        assert_eq!(letter["event"], bad, "{what}: the event as sent");
        assert_eq!(records.len(), 3, "{what}: nothing else");
    }
}

#[actix_web::test]
async fn an_unreadable_get_is_dead_lettered_as_its_fields_and_answered_a_gif() {
    let gw = TestGateway::start().await;
    let query = format!("e=pv&eid=g-bad&aid={APP}&cx=eyJ");
    let response = reqwest::get(format!("{}/i?{query}", gw.url)).await.expect("send");
    assert_eq!(response.status().as_u16(), 200, "taken: dead-lettered");
    assert_eq!(response.headers()["content-type"], "image/gif");
    assert!(response.headers().get("x-eventgw-error").is_none(), "as /v1/pixel.gif for a dead-lettered event");
    let records = gw.sink.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].topic, "eventgw.dead-letter");
    let letter: Value = serde_json::from_slice(&records[0].payload).expect("a JSON dead letter");
    assert!(letter["message"].as_str().is_some_and(|m| m.contains("`data[0].cx` is not base64")), "{letter}");
    assert_eq!(letter["event"], json!({"e": "pv", "eid": "g-bad", "aid": APP, "cx": "eyJ"}), "the query's fields");
}

/// Until `eventgw-catalog check` reads the mappings: every catalog event the
/// shipped Snowplow mapping names exists in the shipped catalog.
#[actix_web::test]
async fn the_shipped_mapping_names_only_catalog_events() {
    let gw = TestGateway::start().await;
    let mapping = gw.state.config.mappings.of("snowplow");
    assert!(mapping.events.contains_key("pv"), "schemas/mappings/snowplow.toml was read");
    for (key, rule) in &mapping.events {
        if let Some(event) = &rule.event {
            assert!(gw.state.catalog.event(event).is_some(), "`{key}` maps to `{event}`, not in the catalog");
        }
    }
}

/// The dead letter of an unreadable event holds no more than the domain
/// topic may: the tracker's top-level `ip` meets the source's IP policy,
/// for a `POST` and for a `GET /i` (the raw event is still kept, so it can
/// be recovered).
#[actix_web::test]
async fn an_unreadable_events_ip_meets_the_sources_policy_in_its_dead_letter() {
    for (policy, want) in [(IpPolicy::Truncate, Some("203.0.113.0")), (IpPolicy::Drop, None)] {
        let gw = TestGateway::start_with(|config| {
            for source in &mut config.sources {
                source.privacy.ip = policy;
            }
        })
        .await;
        let bad = json!({"e": "pv", "eid": "ip-bad", "aid": APP, "ip": "203.0.113.77", "uid": "u-1", "cx": "eyJ"});
        let (status, _, answer) = post(&gw, body(vec![bad]), None).await;
        assert_eq!(status, 200, "{answer}");
        let query = format!("e=pv&eid=g-ip&aid={APP}&ip=203.0.113.77&cx=eyJ");
        let response = reqwest::get(format!("{}/i?{query}", gw.url)).await.expect("send");
        assert_eq!(response.status().as_u16(), 200);
        let records = gw.sink.records();
        assert_eq!(records.len(), 2, "{policy:?}: two dead letters");
        for record in &records {
            assert_eq!(record.topic, "eventgw.dead-letter");
            let letter: Value = serde_json::from_slice(&record.payload).expect("a JSON dead letter");
            assert_eq!(letter["reason"], "undecodable_event");
            assert_eq!(letter["event"].get("ip").and_then(Value::as_str), want, "{policy:?}: {letter}");
            assert!(!String::from_utf8_lossy(&record.payload).contains("203.0.113.77"), "{policy:?}: {letter}");
            assert_eq!(letter["event"]["cx"], "eyJ", "{policy:?}: the rest as sent");
        }
    }
}

/// A tracker configured with a custom `postPath` (and a custom GET path)
/// reaches the gateway through `server.path_aliases`: the request is served
/// exactly as on Snowplow's own path, its CORS preflight included; a path
/// that is no alias is still `404`.
#[actix_web::test]
async fn a_custom_post_path_is_served_as_tp2_through_an_alias() {
    let gw = TestGateway::start_with(|config| {
        config.server.path_aliases.insert("/com.acme/track".into(), TP2.into());
        config.server.path_aliases.insert("/com.acme/i".into(), "/i".into());
    })
    .await;
    let client = reqwest::Client::new();
    let answer = client
        .post(format!("{}/com.acme/track", gw.url))
        .header("content-type", "application/json; charset=UTF-8")
        .body(body(vec![page_view("alias-1")]))
        .send()
        .await
        .expect("send");
    assert_eq!(answer.status().as_u16(), 200);
    let response =
        reqwest::get(format!("{}/com.acme/i?e=pv&eid=alias-2&aid={APP}&url=https%3A%2F%2Fshop.example%2F", gw.url))
            .await
            .expect("send");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "image/gif");
    let records = gw.sink.records();
    let ids: Vec<Option<&str>> = records.iter().map(|r| header(r, "event-id")).collect();
    assert_eq!(ids, [Some("alias-1"), Some("alias-2")], "both stored as Snowplow events");
    assert!(records.iter().all(|r| header(r, "protocol") == Some("snowplow")));
    let preflight = client
        .request(reqwest::Method::OPTIONS, format!("{}/com.acme/track", gw.url))
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .expect("preflight");
    let direct = client
        .request(reqwest::Method::OPTIONS, format!("{}{TP2}", gw.url))
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .expect("preflight");
    assert_eq!(preflight.status(), direct.status(), "the alias's preflight is tp2's");
    assert!(preflight.status().is_success(), "an allowed origin: {}", preflight.status());
    assert_eq!(
        preflight.headers().get("access-control-allow-credentials"),
        direct.headers().get("access-control-allow-credentials")
    );
    assert_eq!(preflight.headers()["access-control-allow-credentials"], "true");
    let elsewhere = client.post(format!("{}/com.acme/other", gw.url)).body("{}").send().await.expect("send");
    assert_eq!(elsewhere.status().as_u16(), 404, "only the configured alias");
}
