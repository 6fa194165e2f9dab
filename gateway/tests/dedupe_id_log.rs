//! The embedded dedupe store's id log (`[dedupe] path`), end to end against
//! a real broker: ids stored before a crash are answered `duplicate` by the
//! restarted gateway, and ids a crash left in doubt are looked up in Kafka
//! (the one there is a duplicate, the one not there is produced). Each test
//! reads the records back. A crash is the log's files as they were at the
//! moment the first gateway ran, copied while it still ran (no clean stop,
//! no settling).
//! The gateway kill -9 scenarios of `faults_gateway.rs` do the same with
//! the real binary killed under load.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{TestGateway, brokers, find, unique};
use gateway::config::Config;
use gateway::dedupe::{EventId, MemoryStore, Reservation};
use serde_json::{Value, json};

fn config(brokers: &str, id_log: Option<&Path>) -> Config {
    let mut env = vec![
        ("EVENTGW__KAFKA__BROKERS".to_owned(), brokers.to_owned()),
        ("EVENTGW__DEDUPE__ENABLED".to_owned(), "true".to_owned()),
    ];
    if let Some(dir) = id_log {
        env.push(("EVENTGW__DEDUPE__PATH".to_owned(), dir.display().to_string()));
    }
    Config::load_with_env(&common::repo_root().join("gateway/config/dev.toml"), env.into_iter()).expect("config loads")
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eventgw-id-log-{name}-{}", uuid::Uuid::new_v4().simple()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Copies the log's files (not its lock), as a crash would leave them.
fn crash_copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "log") {
            std::fs::copy(&path, to.join(path.file_name().expect("name"))).expect("copy");
        }
    }
}

fn click(id: &str, user: &str) -> Value {
    json!({"type": "track", "event": "Link Clicked", "userId": user, "messageId": id,
        "properties": {"href": "https://shop.example/next"}})
}

fn statuses(answer: &Value) -> Vec<String> {
    answer["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["status"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Posts `body` until it is answered 200 (a retry while an id is in doubt
/// is answered 503), like an SDK.
async fn post_until_ok(gw: &TestGateway, body: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, answer) = gw.post("/v1/batch", body).await;
        if status == 200 {
            return answer;
        }
        assert!(status == 503 && Instant::now() < deadline, "{status}: {answer}");
        actix_web::rt::time::sleep(Duration::from_millis(200)).await;
    }
}

#[actix_web::test]
async fn ids_stored_before_a_crash_are_duplicates_after_it() {
    if common::without_kafka() {
        return;
    }
    let (live, after) = (fresh_dir("live"), fresh_dir("after"));
    let first = TestGateway::start(config(&brokers(), Some(&live))).await;
    let (a, b) = (unique("idlog-a"), unique("idlog-b"));
    let (status, answer) = first.post("/v1/batch", &json!({"batch": [click(&a, "u1"), click(&b, "u2")]})).await;
    assert_eq!(status, 200, "{answer}");
    crash_copy(&live, &after);
    // The restarted gateway, on what the crash left.
    let second = TestGateway::start(config(&brokers(), Some(&after))).await;
    let c = unique("idlog-c");
    let retry = post_until_ok(&second, &json!({"batch": [click(&a, "u1"), click(&b, "u2"), click(&c, "u3")]})).await;
    assert_eq!(statuses(&retry), ["duplicate", "duplicate", "accepted"], "{retry}");
    for id in [&a, &b, &c] {
        assert_eq!(find(&brokers(), "web.tracking", id).len(), 1, "{id} stored once");
    }
    // Without the id log the same retry is stored again: what the log prevents.
    let forgetful = TestGateway::start(config(&brokers(), None)).await;
    let retry = post_until_ok(&forgetful, &json!({"batch": [click(&a, "u1")]})).await;
    assert_eq!(statuses(&retry), ["accepted"], "{retry}");
    assert_eq!(find(&brokers(), "web.tracking", &a).len(), 2, "without the id log, stored twice");
    for gw in [first, second, forgetful] {
        gw.stop().await;
    }
}

#[actix_web::test]
async fn ids_a_crash_left_in_doubt_are_looked_up_in_kafka() {
    if common::without_kafka() {
        return;
    }
    // `landed` reached Kafka before the crash (sent by a gateway without
    // dedupe, so its record carries the same headers); `lost` did not.
    let plain = TestGateway::start(common::config(&brokers())).await;
    let (landed, lost) = (unique("idlog-landed"), unique("idlog-lost"));
    let (status, answer) = plain.post("/v1/batch", &json!({"batch": [click(&landed, "u1")]})).await;
    assert_eq!(status, 200, "{answer}");
    let stored = find(&brokers(), "web.tracking", &landed);
    let source = stored[0].headers.get("source").expect("source header").clone();
    // Both were reserved, then the process died before either was settled.
    let dir = fresh_dir("doubt");
    let reserve = |id: &str| Reservation {
        id: EventId { source: source.clone(), message_id: id.to_owned() },
        fingerprint: 0,
        token: 42,
        topic: "web.tracking".into(),
    };
    {
        let (store, _) =
            MemoryStore::open(Duration::from_secs(3600), 1000, Duration::from_secs(20), &dir).expect("id log opens");
        store.reserve_at(&[reserve(&landed), reserve(&lost)], Instant::now());
    }
    let restarted = TestGateway::start(config(&brokers(), Some(&dir))).await;
    let retry = post_until_ok(&restarted, &json!({"batch": [click(&landed, "u1"), click(&lost, "u2")]})).await;
    assert_eq!(statuses(&retry), ["duplicate", "accepted"], "{retry}");
    assert_eq!(find(&brokers(), "web.tracking", &landed).len(), 1, "the landed one is not stored again");
    assert_eq!(find(&brokers(), "web.tracking", &lost).len(), 1, "the lost one is produced");
    plain.stop().await;
    restarted.stop().await;
}
