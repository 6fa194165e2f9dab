//! The whole ingestion API end to end against a real Kafka broker: the
//! Segment call shapes, beacons, the pixel, CORS, strict sources, enrichment
//! and metrics.

mod common;

use std::io::Write;
use std::sync::Arc;

use base64::Engine;
use common::{TestGateway, answer, brokers, client, config, find, unique};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Value, json};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(data).expect("write");
    encoder.finish().expect("finish")
}

/// Request bodies in the shapes the Segment HTTP Tracking API documents for
/// each call, with our catalog's event names and properties.
fn segment_calls(user: &str) -> Vec<(&'static str, Value, &'static str)> {
    vec![
        (
            "track",
            json!({"userId": user, "event": "Order Completed",
            "properties": {"order_id": format!("{user}-order"), "total": 14.99, "currency": "USD"},
            "context": {"ip": "24.5.68.47"}, "timestamp": "2012-12-02T00:30:12.984Z"}),
            "billing.payments",
        ),
        (
            "page",
            json!({"userId": user, "name": "Tracking HTTP API",
            "properties": {"url": "https://segment.example/docs", "path": "/docs", "title": "Docs"},
            "timestamp": "2015-07-28T19:53:57.104Z"}),
            "web.tracking",
        ),
        (
            "screen",
            json!({"userId": user, "name": "Tracking Screen", "timestamp": "2015-07-28T19:53:57.104Z"}),
            "app.tracking",
        ),
        (
            "identify",
            json!({"userId": user, "traits": {"email": "pgibbons@example.com", "name": "Peter Gibbons",
            "industry": "Technology"}, "context": {"ip": "24.5.68.47"}, "timestamp": "2012-12-02T00:30:08.276Z"}),
            "crm.identities",
        ),
        (
            "group",
            json!({"userId": user, "groupId": "8e9df332ac", "traits": {"name": "Initech",
            "industry": "Technology", "employees": 420}}),
            "crm.identities",
        ),
        (
            "alias",
            json!({"previousId": "39239-239239-239239-23923", "userId": user,
            "timestamp": "2012-12-02T00:30:08.276Z"}),
            "crm.identities",
        ),
    ]
}

#[actix_web::test]
async fn every_segment_call_lands_on_its_topic() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let user = unique("segment");
    for (call, body, topic) in segment_calls(&user) {
        let (status, answer) = gw.post(&format!("/v1/{call}"), &body).await;
        assert_eq!(status, 200, "{call}: {answer}");
        assert_eq!(answer["events"][0]["status"], "accepted", "{call}: {answer}");
        let id = answer["events"][0]["messageId"].as_str().expect("id");
        let found = find(&brokers(), topic, id);
        assert_eq!(found.len(), 1, "{call} lands once on {topic}");
        assert_eq!(found[0].value["type"], call);
        let key = if call == "track" { format!("{user}-order") } else { user.clone() };
        assert_eq!(found[0].key.as_deref(), Some(key.as_str()), "{call}");
    }
    gw.stop().await;
}

#[actix_web::test]
async fn beacons_send_text_plain_and_gzip_with_the_key_in_the_body() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let url = format!("{}/v1/batch", gw.url);
    let body = |id: &str| {
        json!({"writeKey": "demo-write-key", "batch": [{"type": "track", "event": "Link Clicked", "messageId": id,
            "anonymousId": "beacon", "properties": {"href": "https://shop.example/"}}]})
        .to_string()
    };
    let plain = unique("plain");
    let response =
        client().post(&url).header("content-type", "text/plain;charset=UTF-8").body(body(&plain)).send().await;
    assert_eq!(answer(response.expect("sent")).await.0, 200);
    let announced = unique("gzip");
    let response = client()
        .post(&url)
        .header("content-type", "text/plain")
        .header("content-encoding", "gzip")
        .body(gzip(body(&announced).as_bytes()))
        .send()
        .await;
    assert_eq!(answer(response.expect("sent")).await.0, 200);
    // sendBeacon cannot set Content-Encoding: the gzip magic bytes say it.
    let unannounced = unique("magic");
    let response =
        client().post(&url).header("content-type", "text/plain").body(gzip(body(&unannounced).as_bytes())).send();
    assert_eq!(answer(response.await.expect("sent")).await.0, 200);
    for id in [&plain, &announced, &unannounced] {
        assert_eq!(find(&brokers(), "web.tracking", id).len(), 1, "{id}");
    }
    let (status, _, refused) =
        answer(client().post(&url).header("content-type", "application/xml").body("<e/>").send().await.expect("sent"))
            .await;
    assert_eq!((status, refused["code"].as_str()), (415, Some("unsupported_media_type")));
    let (status, _, refused) = answer(
        client().post(&url).header("content-encoding", "br").body(body(&unique("br"))).send().await.expect("sent"),
    )
    .await;
    assert_eq!((status, refused["code"].as_str()), (415, Some("unsupported_encoding")));
    gw.stop().await;
}

#[actix_web::test]
async fn cors_is_granted_per_source_and_never_to_other_origins() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let url = format!("{}/v1/batch", gw.url);
    let preflight = |origin: &'static str| {
        client()
            .request(reqwest::Method::OPTIONS, &url)
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let (status, headers, _) = answer(preflight("http://localhost:3000").await.expect("sent")).await;
    assert_eq!(status, 204);
    assert_eq!(headers["access-control-allow-origin"], "http://localhost:3000");
    assert!(headers["access-control-allow-methods"].to_str().expect("ascii").contains("POST"));
    assert!(headers.get("access-control-allow-credentials").is_none(), "never with credentials");
    let (status, headers, body) = answer(preflight("https://evil.example").await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("origin_not_allowed")));
    assert!(headers.get("access-control-allow-origin").is_none());

    let event = json!({"writeKey": "demo-write-key", "batch": [{"type": "track", "event": "Link Clicked",
        "anonymousId": "cors", "properties": {"href": "https://shop.example/"}}]});
    let send = |origin: &'static str| client().post(&url).header("origin", origin).json(&event).send();
    let (status, headers, _) = answer(send("http://localhost:3000").await.expect("sent")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["access-control-allow-origin"], "http://localhost:3000");
    let (status, headers, _) = answer(send("https://evil.example").await.expect("sent")).await;
    assert_eq!(status, 200, "the event is taken; the page just cannot read the answer");
    assert!(headers.get("access-control-allow-origin").is_none());
    assert!(headers["vary"].to_str().expect("ascii").contains("Origin"));
    gw.stop().await;
}

#[actix_web::test]
async fn the_pixel_answers_a_gif_and_dead_letters_invalid_events() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let encode = |event: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(event.to_string());
    let valid = unique("open");
    let event = json!({"event": "Email Opened", "userId": unique("reader"), "messageId": valid,
        "properties": {"campaign_id": "winter", "email_id": "send-1"}});
    let url = format!("{}/v1/pixel.gif?writeKey=demo-write-key&data={}", gw.url, encode(&event));
    let response = client().get(&url).send().await.expect("sent");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "image/gif");
    assert!(response.headers()["cache-control"].to_str().expect("ascii").contains("no-store"));
    let bytes = response.bytes().await.expect("gif");
    assert!(bytes.starts_with(b"GIF89a") && bytes.len() == 43);
    assert_eq!(find(&brokers(), "marketing.campaign.events", &valid).len(), 1);

    let invalid = unique("open-bad");
    let event = json!({"event": "Email Opened", "userId": "reader", "messageId": invalid, "properties": {}});
    let url = format!("{}/v1/pixel.gif?writeKey=demo-write-key&data={}", gw.url, encode(&event));
    let response = client().get(&url).send().await.expect("sent");
    assert_eq!(response.status().as_u16(), 200, "an invalid open still gets its GIF");
    assert_eq!(response.headers()["content-type"], "image/gif");
    assert_eq!(find(&brokers(), "eventgw.dead-letter", &invalid).len(), 1);

    let url = format!("{}/v1/pixel.gif?writeKey=wrong-key-123&data={}", gw.url, encode(&event));
    let response = client().get(&url).send().await.expect("sent");
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(response.headers()["content-type"], "image/gif");
    assert_eq!(response.headers()["x-eventgw-error"], "invalid_write_key");
    let response = client().get(format!("{}/v1/pixel.gif?writeKey=demo-write-key&data=%%%", gw.url)).send().await;
    assert_eq!(response.expect("sent").headers()["x-eventgw-error"], "invalid_pixel");
    gw.stop().await;
}

#[actix_web::test]
async fn a_strict_source_gets_422_and_nothing_of_the_batch_is_produced() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let good = unique("strict-good");
    let batch = json!({"batch": [
        {"type": "track", "event": "Order Completed", "userId": "u", "messageId": good,
         "properties": {"order_id": "o-s", "total": 10, "currency": "EUR"}},
        {"type": "track", "event": "Order Completed", "userId": "u", "properties": {"order_id": "o-s"}}
    ]});
    let response =
        client().post(format!("{}/v1/batch", gw.url)).basic_auth("billing-backend-key", Some("")).json(&batch);
    let (status, _, body) = answer(response.send().await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("batch_rejected")), "{body}");
    assert_eq!(body["events"][0]["status"], "accepted");
    assert_eq!(body["events"][1]["status"], "invalid");
    assert_eq!(body["events"][1]["code"], "schema_violation");
    assert!(find(&brokers(), "billing.payments", &good).is_empty(), "a refused batch produces nothing");
    gw.stop().await;
}

#[actix_web::test]
async fn a_device_clock_an_hour_fast_is_corrected_and_the_client_ip_comes_from_trusted_proxies() {
    if common::without_kafka() {
        return;
    }
    let mut state = gateway::AppState::with_kafka(config(&brokers())).expect("state");
    let now = chrono::DateTime::parse_from_rfc3339("2026-06-01T12:00:00Z").expect("time").to_utc();
    state.clock = Arc::new(move || now);
    let gw = TestGateway::start_state(state).await;
    let id = unique("skew");
    // The device's clock is an hour fast: it says it sent at 13:00:00 an
    // event that happened 5 s before that.
    let body = json!({"sentAt": "2026-06-01T13:00:00Z", "batch": [{"type": "track", "event": "Link Clicked",
        "userId": "skewed", "messageId": id, "timestamp": "2026-06-01T12:59:55Z",
        "properties": {"href": "https://shop.example/"}}]});
    let response = client()
        .post(format!("{}/v1/batch", gw.url))
        .basic_auth("demo-write-key", Some(""))
        .header("x-forwarded-for", "198.51.100.1, 203.0.113.7")
        .header("user-agent", "TestAgent/1.0")
        .json(&body);
    assert_eq!(answer(response.send().await.expect("sent")).await.0, 200);
    let record = &find(&brokers(), "web.tracking", &id)[0];
    assert_eq!(record.value["receivedAt"], "2026-06-01T12:00:00.000Z");
    assert_eq!(record.value["timestamp"], "2026-06-01T11:59:55.000Z");
    assert_eq!(record.value["originalTimestamp"], "2026-06-01T12:59:55Z");
    // 127.0.0.1 is a trusted proxy in the dev config; the hop it saw wins.
    assert_eq!(record.value["context"]["ip"], "203.0.113.7");
    assert_eq!(record.value["context"]["userAgent"], "TestAgent/1.0");
    gw.stop().await;
}

#[actix_web::test]
async fn anonymised_ips_lose_their_last_octet_and_untrusted_forwarding_is_ignored() {
    if common::without_kafka() {
        return;
    }
    let mut cfg = config(&brokers());
    cfg.enrichment.anonymize_ip = true;
    cfg.enrichment.trusted_proxies = vec!["10.0.0.0/8".into()];
    let gw = TestGateway::start(cfg).await;
    let id = unique("anon");
    let body = json!({"batch": [{"type": "track", "event": "Link Clicked", "userId": "a", "messageId": id,
        "properties": {"href": "https://shop.example/"}}]});
    let response = client()
        .post(format!("{}/v1/batch", gw.url))
        .basic_auth("demo-write-key", Some(""))
        .header("x-forwarded-for", "203.0.113.7")
        .json(&body);
    assert_eq!(answer(response.send().await.expect("sent")).await.0, 200);
    let record = &find(&brokers(), "web.tracking", &id)[0];
    assert_eq!(record.value["context"]["ip"], "127.0.0.0", "the peer, not the forged header, anonymised");
    gw.stop().await;
}

fn metric(text: &str, name: &str, labels: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name) && labels.split(',').all(|label| l.contains(label)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[actix_web::test]
async fn metrics_count_requests_events_dead_letters_and_errors() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let scrape = || async {
        client().get(format!("{}/metrics", gw.url)).send().await.expect("sent").text().await.expect("text")
    };
    let before = scrape().await;
    let batch = json!({"batch": [
        {"type": "track", "event": "Link Clicked", "userId": "m", "properties": {"href": "https://shop.example/"}},
        {"type": "track", "event": "Link Clicked", "userId": "m", "properties": {"href": 5}}
    ]});
    assert_eq!(gw.post("/v1/batch", &batch).await.0, 200);
    let (status, _) = gw.post("/v1/batch", &json!({"batch": []})).await;
    assert_eq!(status, 400);
    let after = scrape().await;
    let delta = |name: &str, labels: &str| metric(&after, name, labels) - metric(&before, name, labels);
    assert_eq!(delta("eventgw_events_total", r#"outcome="accepted",topic="web.tracking""#), 1.0);
    assert_eq!(delta("eventgw_events_total", r#"outcome="invalid",topic="eventgw.dead-letter""#), 1.0);
    assert_eq!(delta("eventgw_dead_letters_total", r#"reason="schema_violation""#), 1.0);
    assert_eq!(delta("eventgw_http_requests_total", r#"endpoint="/v1/batch",status="200""#), 1.0);
    assert_eq!(delta("eventgw_http_requests_total", r#"endpoint="/v1/batch",status="400""#), 1.0);
    assert_eq!(delta("eventgw_rejected_requests_total", r#"code="invalid_body""#), 1.0);
    assert_eq!(delta("eventgw_produce_latency_seconds_count", ""), 1.0);
    assert!(after.contains("eventgw_producer_queue_depth"));
    gw.stop().await;
}
