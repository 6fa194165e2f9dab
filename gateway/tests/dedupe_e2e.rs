//! Dedupe with the embedded store, end to end against a real broker: a
//! client's retry of a batch answered 200 is answered `duplicate` and Kafka
//! holds one copy; a retry after a 503 is produced; an invalid event
//! retried is dead-lettered once; a retry of a spooled event is a duplicate
//! and the spool holds it once. Each test reads the records back.

mod common;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use common::{FailsFirst, TestGateway, brokers, find, unique};
use gateway::AppState;
use gateway::config::Config;
use gateway::sink::KafkaSink;
use serde_json::{Value, json};

/// The dev configuration with dedupe on (memory store), plus `extra`.
pub fn dedupe_config(brokers: &str, extra: &[(&str, String)]) -> Config {
    let mut env = vec![
        ("EVENTGW__KAFKA__BROKERS".to_owned(), brokers.to_owned()),
        ("EVENTGW__DEDUPE__ENABLED".to_owned(), "true".to_owned()),
    ];
    env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    Config::load_with_env(&common::repo_root().join("gateway/config/dev.toml"), env.into_iter()).expect("config loads")
}

fn click(id: &str, user: &str) -> Value {
    json!({"type": "track", "event": "Link Clicked", "userId": user, "messageId": id,
        "properties": {"href": "https://shop.example/next"}})
}

fn statuses(answer: &Value) -> Vec<&str> {
    answer["events"].as_array().expect("events").iter().map(|e| e["status"].as_str().unwrap_or("?")).collect()
}

#[actix_web::test]
async fn a_retry_of_a_stored_batch_is_answered_duplicate_and_stored_once() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(dedupe_config(&brokers(), &[])).await;
    let (a, b, c) = (unique("dd-a"), unique("dd-b"), unique("dd-c"));
    let (status, first) = gw.post("/v1/batch", &json!({"batch": [click(&a, "u1"), click(&b, "u2")]})).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(statuses(&first), ["accepted", "accepted"]);
    // The client did not hear the answer and resends, with one new event.
    let (status, retry) =
        gw.post("/v1/batch", &json!({"batch": [click(&a, "u1"), click(&b, "u2"), click(&c, "u3")]})).await;
    assert_eq!(status, 200, "{retry}");
    assert_eq!(statuses(&retry), ["duplicate", "duplicate", "accepted"], "{retry}");
    assert_eq!(retry["duplicate"], 2);
    assert_eq!(retry["accepted"], 1);
    assert_eq!(retry["events"][0]["code"], "duplicate_message_id");
    for id in [&a, &b, &c] {
        assert_eq!(find(&brokers(), "web.tracking", id).len(), 1, "{id} stored once");
    }
    let metrics = reqwest::get(format!("{}/metrics", gw.url)).await.expect("metrics").text().await.expect("text");
    assert!(metrics.contains("eventgw_dedupe_duplicates_total 2"), "{metrics}");
    gw.stop().await;
}

#[actix_web::test]
async fn the_same_id_from_another_source_is_not_a_duplicate() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(dedupe_config(&brokers(), &[])).await;
    // A billing event: both dev sources (`demo`, `billing-backend`) may send it.
    let (mut event, topic) = gw
        .state
        .catalog
        .events()
        .into_iter()
        .find(|e| &*e.topic == "billing.payments")
        .map(|e| (e.versions().last().expect("a version").examples[0].clone(), e.topic.to_string()))
        .expect("the catalog has a billing event");
    let id = unique("dd-src");
    event["messageId"] = json!(id);
    for key in ["demo-write-key", "billing-backend-key"] {
        let response = reqwest::Client::new()
            .post(format!("{}/v1/batch", gw.url))
            .basic_auth(key, Some(""))
            .json(&json!({"batch": [event.clone()]}))
            .send()
            .await
            .expect("sent");
        let (status, _, answer) = common::answer(response).await;
        assert_eq!((status, statuses(&answer)), (200, vec!["accepted"]), "{key}: {answer}");
    }
    let stored = find(&brokers(), &topic, &id);
    let sources: Vec<&str> = stored.iter().map(|r| r.headers["source"].as_str()).collect();
    assert_eq!(sources, ["demo", "billing-backend"], "ids are per source");
    gw.stop().await;
}

#[actix_web::test]
async fn an_invalid_event_retried_is_answered_invalid_and_dead_lettered_once() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(dedupe_config(&brokers(), &[])).await;
    let id = unique("dd-invalid");
    let bad = json!({"type": "track", "event": "Link Clicked", "userId": "u1", "messageId": id,
        "properties": {"href": 42}});
    for attempt in 0..2 {
        let (status, answer) = gw.post("/v1/batch", &json!({"batch": [bad.clone()]})).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(statuses(&answer), ["invalid"], "attempt {attempt}: {answer}");
        assert_eq!(answer["events"][0]["code"], "schema_violation", "the reason is told again");
    }
    assert_eq!(find(&brokers(), "eventgw.dead-letter", &id).len(), 1, "dead-lettered once");
    gw.stop().await;
}

#[actix_web::test]
async fn a_retry_after_a_503_is_produced() {
    if common::without_kafka() {
        return;
    }
    let config = dedupe_config(&brokers(), &[]);
    let kafka = KafkaSink::new(&config.kafka).expect("producer");
    let sink = Arc::new(FailsFirst { kafka, fail: AtomicUsize::new(1) });
    let gw = TestGateway::start_state(AppState::new(config, sink).expect("state")).await;
    let id = unique("dd-503");
    let (status, answer) = gw.post("/v1/batch", &json!({"batch": [click(&id, "u1")]})).await;
    assert_eq!(status, 503, "{answer}");
    assert!(find(&brokers(), "web.tracking", &id).is_empty(), "nothing stored by the failed attempt");
    let (status, answer) = gw.post("/v1/batch", &json!({"batch": [click(&id, "u1")]})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(statuses(&answer), ["accepted"], "the retry after a 503 is produced, not dropped");
    let (status, answer) = gw.post("/v1/batch", &json!({"batch": [click(&id, "u1")]})).await;
    assert_eq!((status, statuses(&answer)), (200, vec!["duplicate"]));
    assert_eq!(find(&brokers(), "web.tracking", &id).len(), 1);
    gw.stop().await;
}

#[actix_web::test]
async fn dedupe_off_stores_a_retry_twice() {
    if common::without_kafka() {
        return;
    }
    // The control: without dedupe the same retry is stored again, so the
    // tests above could have failed.
    let gw = TestGateway::start(common::config(&brokers())).await;
    let id = unique("dd-off");
    for _ in 0..2 {
        let (status, answer) = gw.post("/v1/batch", &json!({"batch": [click(&id, "u1")]})).await;
        assert_eq!((status, statuses(&answer)), (200, vec!["accepted"]));
    }
    assert_eq!(find(&brokers(), "web.tracking", &id).len(), 2);
    gw.stop().await;
}

#[actix_web::test]
async fn a_retry_of_a_spooled_event_is_a_duplicate_and_spooled_once() {
    let dir = std::env::temp_dir().join(format!("eventgw-dedupe-spool-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Nothing listens on port 9: Kafka never acknowledges, so records go to the spool.
    let config = dedupe_config(
        "127.0.0.1:9",
        &[
            ("EVENTGW__SPOOL__ENABLED", "true".into()),
            ("EVENTGW__SPOOL__DIR", dir.display().to_string()),
            ("EVENTGW__SPOOL__ACK_TIMEOUT_MS", "500".into()),
        ],
    );
    let state = Arc::new(AppState::serving(config).expect("state"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    actix_web::rt::spawn(gateway::serve(Arc::clone(&state), listener).expect("server"));
    let id = unique("dd-spool");
    let send = || async {
        let response = reqwest::Client::new()
            .post(format!("{url}/v1/batch"))
            .basic_auth("demo-write-key", Some(""))
            .json(&json!({"batch": [click(&id, "u1")]}))
            .send()
            .await
            .expect("sent");
        common::answer(response).await
    };
    let (status, _, first) = send().await;
    assert_eq!((status, statuses(&first)), (200, vec!["spooled"]), "{first}");
    let (status, _, retry) = send().await;
    assert_eq!((status, statuses(&retry)), (200, vec!["duplicate"]), "{retry}");
    let spool = state.sink.spool_status().expect("the spool is on");
    assert_eq!(spool.records, 1, "the retry was not spooled again: {spool:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
