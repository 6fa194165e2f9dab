//! The live events view in-process (memory sink, no Kafka): the stream
//! shows each event as stored (a hashed personal field hashed), with its
//! status, topic, partition and offset or violations; filters; the
//! "skipped" news for a slow viewer; `401 operator_unauthorized` for the
//! page and the stream without the operator token or with another one.

#[path = "support/edge.rs"]
mod edge;
mod inprocess_support;
#[path = "support/mmdb.rs"]
mod mmdb;

use std::time::Duration;

use futures::StreamExt;
use inprocess_support::TestGateway;
use serde_json::{Value, json};

const TOKEN: &str = "an-operator-token-for-tests";

async fn live_gateway(buffer: usize) -> (TestGateway, edge::EdgeFiles) {
    let files = edge::files();
    let catalog = files.dir.join("catalog");
    let gw = TestGateway::start_with(|c| {
        c.catalog.dir = catalog;
        c.privacy.hash_key = Some(edge::HASH_KEY.into());
        c.live.enabled = true;
        c.live.token = TOKEN.into();
        c.live.buffer_events = buffer;
    })
    .await;
    (gw, files)
}

/// `GET {path}` of the gateway with the operator token.
async fn operator_get(gw: &TestGateway, path: &str) -> reqwest::Response {
    reqwest::Client::new().get(format!("{}{path}", gw.url)).bearer_auth(TOKEN).send().await.expect(path)
}

/// Opens the stream with `query`, and waits until it says it is ready.
async fn open(
    gw: &TestGateway,
    query: &str,
) -> futures::stream::BoxStream<'static, reqwest::Result<actix_web::web::Bytes>> {
    let answer = operator_get(gw, &format!("/live/stream?{query}")).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["content-type"], "text/event-stream");
    let mut body = answer.bytes_stream().boxed();
    let first = body.next().await.expect("opening").expect("bytes");
    assert!(String::from_utf8_lossy(&first).contains("event: ready"));
    body
}

/// `GET /live/events/{id}` with the operator token: the stored record.
async fn opened(gw: &TestGateway, id: &Value) -> Value {
    let id = id.as_u64().unwrap_or_else(|| panic!("a numeric id, not {id}"));
    let answer = operator_get(gw, &format!("/live/events/{id}")).await;
    assert_eq!(answer.status(), 200, "event {id}");
    answer.json().await.expect("the stored record is JSON")
}

/// The next `n` SSE events `(name, data)`, within two seconds.
async fn read(
    body: &mut futures::stream::BoxStream<'static, reqwest::Result<actix_web::web::Bytes>>,
    n: usize,
) -> Vec<(String, Value)> {
    let mut text = String::new();
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while seen.len() < n {
        let chunk = tokio::time::timeout_at(deadline, body.next()).await.expect("events within 2 s");
        text.push_str(&String::from_utf8_lossy(&chunk.expect("open").expect("bytes")));
        while let Some(end) = text.find("\n\n") {
            let frame: String = text.drain(..end + 2).collect();
            let name = frame.lines().find_map(|l| l.strip_prefix("event: ")).unwrap_or_default().to_owned();
            if let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) {
                seen.push((name, serde_json::from_str(data).expect("json data")));
            }
        }
    }
    seen
}

async fn send(gw: &TestGateway, batch: Value) -> Value {
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/batch", gw.url))
        .basic_auth("demo-write-key", Some(""))
        .json(&batch)
        .send()
        .await
        .expect("batch");
    assert_eq!(answer.status(), 200);
    answer.json().await.expect("answer")
}

fn form(id: &str, email: &str) -> Value {
    json!({"type": "track", "event": "Form Submitted", "messageId": id, "userId": "u-1",
           "context": {"consent": {"marketing": true}}, "properties": {"form_id": "contact", "email": email}})
}

#[actix_web::test]
async fn the_stream_shows_each_event_as_stored_with_its_fate() {
    let (gw, _files) = live_gateway(64).await;
    let mut all = open(&gw, "").await;
    let mut invalid_only = open(&gw, "source=demo&status=invalid").await;
    let email = "ada@example.com";
    let bad =
        json!({"type": "track", "event": "Form Submitted", "messageId": "bad-1", "userId": "u-2", "properties": {}});
    send(&gw, json!({"batch": [form("good-1", email), bad]})).await;

    let events = read(&mut all, 2).await;
    let (name, good) = &events[0];
    assert_eq!(name, "event");
    assert_eq!(good["status"], "accepted");
    assert_eq!(good["source"], "demo");
    assert_eq!(good["event"], "Form Submitted");
    assert_eq!(good["topic"], "web.tracking");
    assert!(good["partition"].is_i64() && good["offset"].is_i64(), "Kafka's place once acked: {good}");
    assert_eq!(good["stored"], true, "{good}");
    assert!(good.get("payload").is_none(), "the frame carries the row, the record is opened by id: {good}");
    let record = opened(&gw, &good["id"]).await;
    let stored = record.to_string();
    assert!(!stored.contains(email), "the address is hashed as stored, never clear: {stored}");
    for field in ["type", "event", "userId"] {
        assert_eq!(good[field], record[field], "the row's {field} is the record's: {good}");
    }
    assert_eq!(record["properties"]["email"].as_str().map(str::len), Some(64), "hex HMAC: {stored}");

    let bad = &events[1].1;
    assert_eq!(bad["status"], "invalid");
    assert_eq!(bad["topic"], "eventgw.dead-letter");
    assert_eq!(bad["code"], "schema_violation");
    assert!(!bad["violations"].as_array().expect("violations").is_empty(), "{bad}");
    let envelope = opened(&gw, &bad["id"]).await;
    assert_eq!(envelope["reason"], "schema_violation", "the dead-letter envelope as stored");
    assert_eq!((&bad["event"], &bad["userId"]), (&envelope["event"]["event"], &envelope["event"]["userId"]), "{bad}");
    assert_eq!(bad["userId"], "u-2");

    let filtered = read(&mut invalid_only, 1).await;
    assert_eq!(filtered[0].1["messageId"], "bad-1", "only the invalid event passes the filter");
    send(&gw, json!({"batch": [form("good-2", email)]})).await;
    let next = read(&mut all, 1).await;
    assert_eq!(next[0].1["messageId"], "good-2");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), invalid_only.next()).await.is_err(),
        "accepted filtered out"
    );
    assert!(gw.state.live.is_watched());
}

#[actix_web::test]
async fn a_slow_viewer_is_told_how_many_events_it_skipped() {
    let (gw, _files) = live_gateway(2).await;
    // A viewer of its own, never read while five requests are answered
    // (the ring keeps whole requests, two events' worth).
    let mut viewer = gw.state.live.watch(Some("demo"));
    for i in 0..5 {
        send(&gw, json!({ "batch": [form(&format!("lag-{i}"), "x@example.com")] })).await;
    }
    match viewer.next().await {
        gateway::live::Next::Skipped(n) => assert_eq!(n, 3),
        other => panic!("expected the skipped news, got {other:?}"),
    }
    let metrics = reqwest::get(format!("{}/metrics", gw.url)).await.expect("metrics").text().await.expect("text");
    assert!(metrics.contains("eventgw_live_skipped_events_total 3"), "{metrics}");
    assert!(metrics.contains("eventgw_live_viewers 1"), "{metrics}");
}

#[actix_web::test]
async fn without_the_operator_token_page_and_stream_answer_401() {
    let (gw, _files) = live_gateway(8).await;
    let client = reqwest::Client::new();
    for path in ["/live/", "/live/stream", "/live/events/1"] {
        for token in [None, Some("not-the-operator-token")] {
            let mut request = client.get(format!("{}{path}", gw.url));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let answer = request.send().await.expect("answer");
            assert_eq!(answer.status(), 401, "{path} with {token:?}");
            let body: Value = answer.json().await.expect("json error");
            assert_eq!(body["code"], "operator_unauthorized");
            assert!(!body["message"].as_str().unwrap_or_default().contains(TOKEN));
        }
    }
    let page = client.get(format!("{}/live/?token={TOKEN}", gw.url)).send().await.expect("page");
    assert_eq!(page.status(), 200);
    let cookie = page.headers()["set-cookie"].to_str().expect("cookie").to_owned();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(page.text().await.expect("html").contains("\"demo\""), "the source picker lists the sources");
    let with_cookie = client
        .get(format!("{}/live/stream", gw.url))
        .header("cookie", cookie.split(';').next().expect("pair"))
        .send()
        .await
        .expect("stream");
    assert_eq!(with_cookie.status(), 200, "the page's cookie opens the stream");
}

#[actix_web::test]
async fn an_event_the_view_no_longer_holds_answers_404_live_event_gone() {
    let (gw, _files) = live_gateway(64).await;
    let mut all = open(&gw, "").await;
    send(&gw, json!({"batch": [form("held-1", "x@example.com")]})).await;
    let id = read(&mut all, 1).await[0].1["id"].as_u64().expect("id");
    for (asked, status) in
        [(id.to_string(), 200), ((id + 1).to_string(), 404), ("0".into(), 404), ("x".repeat(40), 404)]
    {
        let answer = operator_get(&gw, &format!("/live/events/{asked}")).await;
        assert_eq!(answer.status(), status, "event {asked}");
        if status == 404 {
            let body: Value = answer.json().await.expect("json error");
            assert_eq!(body["code"], "live_event_gone", "{body}");
            assert!(body["message"].as_str().is_some_and(|m| m.contains("offset") && m.len() < 300), "{body}");
        }
    }
}

#[actix_web::test]
async fn a_record_kafka_does_not_return_answers_503_live_event_unreadable_then_opens_once_it_does() {
    let (gw, _files) = live_gateway(64).await;
    let mut all = open(&gw, "").await;
    send(&gw, json!({"batch": [form("unreadable-1", "x@example.com")]})).await;
    let id = read(&mut all, 1).await[0].1["id"].as_u64().expect("id");
    gw.sink.fail_with(Some(gateway::sink::SinkError::Unavailable("the broker is gone".into())));
    let answer = operator_get(&gw, &format!("/live/events/{id}")).await;
    assert_eq!(answer.status(), 503);
    let body: Value = answer.json().await.expect("json error");
    assert_eq!(body["code"], "live_event_unreadable", "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("the broker is gone")), "{body}");
    gw.sink.fail_with(None);
    assert_eq!(opened(&gw, &json!(id)).await["messageId"], "unreadable-1", "opens once Kafka answers");
}

#[actix_web::test]
async fn off_unless_enabled() {
    let gw = TestGateway::start_with(|c| c.live.enabled = false).await;
    let answer = reqwest::get(format!("{}/live/stream", gw.url)).await.expect("answer");
    assert_eq!(answer.status(), 404);
    send(&gw, json!({"batch": [{"type": "track", "event": "Page Viewed", "userId": "u"}]})).await;
    assert!(!gw.state.live.is_watched());
}
