//! The spool in the real server, in process: with Kafka up it stays idle
//! (events are `accepted` and read back from Kafka); with Kafka unreachable
//! the answer is 200 with `spooled` outcomes, `/readyz` stays ready and
//! says it is spooling, and the metrics count what the spool holds.

mod common;

use std::net::TcpListener;
use std::sync::Arc;

use gateway::AppState;
use gateway::config::Config;
use serde_json::{Value, json};

fn spool_config(brokers: &str, name: &str) -> (Config, std::path::PathBuf) {
    spool_config_with(brokers, name, &[])
}

fn spool_config_with(brokers: &str, name: &str, extra: &[(&str, &str)]) -> (Config, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("eventgw-spool-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let env = [
        ("EVENTGW__KAFKA__BROKERS", brokers.to_owned()),
        ("EVENTGW__SPOOL__ENABLED", "true".to_owned()),
        ("EVENTGW__SPOOL__DIR", dir.display().to_string()),
        ("EVENTGW__SPOOL__ACK_TIMEOUT_MS", "500".to_owned()),
    ];
    let env = env.into_iter().chain(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let path = common::repo_root().join("gateway/config/dev.toml");
    let config = Config::load_with_env(&path, env.map(|(k, v)| (k.to_owned(), v))).expect("config");
    (config, dir)
}

async fn serve(state: AppState) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    actix_web::rt::spawn(gateway::serve(Arc::new(state), listener).expect("server"));
    url
}

/// A client that gives up on an answer after 30 s: a gateway that never
/// answers fails the test with the call's name instead of hanging it.
fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build().expect("client")
}

async fn get(url: &str) -> (u16, Value) {
    let response = client().get(url).send().await.expect("get");
    let status = response.status().as_u16();
    let text = response.text().await.expect("text");
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[actix_web::test]
async fn kafka_unreachable_answers_spooled_and_stays_ready() {
    let (config, dir) = spool_config("127.0.0.1:9", "down");
    let url = serve(AppState::serving(config).expect("state")).await;
    let id = common::unique("spooled");
    let body = json!({"batch": [
        {"type": "track", "event": "Link Clicked", "userId": "u1", "messageId": format!("{id}-a"), "properties": {"href": "https://a.example/"}},
        {"type": "track", "event": "Link Clicked", "userId": "u1", "messageId": format!("{id}-b"), "properties": {"href": 42}},
        {"type": "nonsense", "userId": "u1", "messageId": format!("{id}-c")}
    ]});
    let response = client()
        .post(format!("{url}/v1/batch"))
        .basic_auth("demo-write-key", Some(""))
        .json(&body)
        .send()
        .await
        .expect("sent");
    let (status, _, answer) = common::answer(response).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["spooled"], 1, "{answer}");
    assert_eq!(answer["accepted"], 0);
    assert_eq!(answer["invalid"], 1);
    assert_eq!(answer["rejected"], 1);
    assert_eq!(answer["events"][0]["status"], "spooled");
    assert_eq!(answer["events"][0]["topic"], "web.tracking", "where replay will put it");
    assert_eq!(answer["events"][1]["status"], "invalid", "a dead-lettered event keeps its reason");
    assert_eq!(answer["events"][2]["status"], "rejected");

    // While spooling, the next request goes behind the spool (per-key order).
    let one = json!({"type": "track", "event": "Link Clicked", "userId": "u1", "messageId": format!("{id}-d"), "properties": {"href": "https://b.example/"}});
    let response = client().post(format!("{url}/v1/track")).basic_auth("demo-write-key", Some("")).json(&one);
    let (status, _, answer) = common::answer(response.send().await.expect("sent")).await;
    assert_eq!((status, answer["events"][0]["status"].clone()), (200, json!("spooled")), "{answer}");

    let (status, ready) = get(&format!("{url}/readyz")).await;
    assert_eq!(status, 200, "ready while the spool takes events: {ready}");
    assert_eq!(ready["spooling"], true);
    assert_eq!(ready["spool"]["records"], 3, "two spooled events and one dead-letter record: {ready}");
    let (_, metrics) = get(&format!("{url}/metrics")).await;
    let metrics = metrics.as_str().expect("text").to_owned();
    assert!(metrics.contains("eventgw_spool_records 3"), "{metrics}");
    assert!(metrics.contains("eventgw_spool_spooling 1"), "{metrics}");
    assert!(metrics.contains("eventgw_spool_appended_total 3"), "{metrics}");
    assert!(metrics.contains("eventgw_events_total{endpoint=\"batch\",outcome=\"spooled\",topic=\"web.tracking\"} 1"));
    let segments = std::fs::read_dir(&dir).expect("dir").filter_map(Result::ok);
    assert_eq!(segments.filter(|e| e.path().extension().is_some_and(|x| x == "seg")).count(), 1);
}

#[actix_web::test]
async fn with_kafka_up_the_spool_stays_idle() {
    if common::without_kafka() {
        return;
    }
    let brokers = common::brokers();
    let (config, _dir) = spool_config(&brokers, "up");
    let state = AppState::serving(config).expect("state");
    gateway::topics::ensure(&state.catalog, &state.config.kafka).await.expect("Kafka answers");
    common::snapshot_ends(&brokers, &["web.tracking".to_owned()]);
    let url = serve(state).await;
    // A cold producer (connect, idempotence PID, fresh topic leaders) may
    // miss the 500 ms: the first event may be spooled. Either way it must
    // end up in Kafka once, and the spool must then go idle.
    let first = common::unique("warm");
    let (status, answer) = track(&url, &first).await;
    assert_eq!(status, 200, "{answer}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while get(&format!("{url}/readyz")).await.1["spooling"] != json!(false) {
        assert!(std::time::Instant::now() < deadline, "the spool drains");
        actix_web::rt::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(common::find(&brokers, "web.tracking", &first).len(), 1, "the first event is in Kafka once");
    let id = common::unique("direct");
    let (status, answer) = track(&url, &id).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["events"][0]["status"], "accepted", "{answer}");
    assert!(answer.get("spooled").is_none(), "no spooled count when nothing was spooled: {answer}");
    let found = common::find(&brokers, "web.tracking", &id);
    assert_eq!(found.len(), 1, "read back from Kafka once");
    assert_eq!(found[0].key.as_deref(), Some("u2"));
    let (status, ready) = get(&format!("{url}/readyz")).await;
    assert_eq!((status, ready["spooling"].clone(), ready["spool"]["records"].clone()), (200, json!(false), json!(0)));
}

async fn track(url: &str, id: &str) -> (u16, Value) {
    let one = json!({"type": "track", "event": "Link Clicked", "userId": "u2", "messageId": id, "properties": {"href": "https://c.example/"}});
    let response = client().post(format!("{url}/v1/track")).basic_auth("demo-write-key", Some("")).json(&one);
    let (status, _, answer) = common::answer(response.send().await.expect("sent")).await;
    (status, answer)
}

/// `spool.max_age_secs`: once the oldest record not yet in Kafka is older
/// than that, new requests are refused with 503 `kafka_unavailable` naming
/// the bound (never accepted and dropped), `/readyz` turns red, and what the
/// spool holds stays on disk for replay.
#[actix_web::test]
async fn past_max_age_new_requests_get_503_and_the_spool_keeps_what_it_holds() {
    let (config, dir) = spool_config_with("127.0.0.1:9", "age", &[("EVENTGW__SPOOL__MAX_AGE_SECS", "1")]);
    let url = serve(AppState::serving(config).expect("state")).await;
    let first = common::unique("age-first");
    let (status, answer) = track(&url, &first).await;
    assert_eq!((status, answer["events"][0]["status"].clone()), (200, json!("spooled")), "{answer}");
    let (status, ready) = get(&format!("{url}/readyz")).await;
    assert_eq!(status, 200, "young spool, still ready: {ready}");

    actix_web::rt::time::sleep(std::time::Duration::from_millis(1500)).await;
    let late = common::unique("age-late");
    let response = client()
        .post(format!("{url}/v1/track"))
        .basic_auth("demo-write-key", Some(""))
        .json(&json!({"type": "track", "event": "Link Clicked", "userId": "u2", "messageId": late, "properties": {"href": "https://c.example/"}}))
        .send()
        .await
        .expect("sent");
    let (status, headers, answer) = common::answer(response).await;
    assert_eq!(status, 503, "past max_age a new request is refused, not accepted: {answer}");
    assert_eq!(answer["code"], "kafka_unavailable", "{answer}");
    assert!(answer["message"].as_str().is_some_and(|m| m.contains("spool.max_age_secs")), "{answer}");
    assert!(headers.contains_key("retry-after"), "the client is told when to retry");

    let (status, ready) = get(&format!("{url}/readyz")).await;
    assert_eq!(status, 503, "not ready while the spool refuses: {ready}");
    assert!(ready["message"].as_str().is_some_and(|m| m.contains("spool.max_age_secs")), "{ready}");
    let (_, metrics) = get(&format!("{url}/metrics")).await;
    let metrics = metrics.as_str().expect("text").to_owned();
    assert!(metrics.contains("eventgw_spool_records 1"), "the refused event was not appended: {metrics}");
    // What the spool holds stays on disk for replay: the first event is there, the refused one is not.
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("dir").filter_map(Result::ok) {
        if entry.path().extension().is_some_and(|x| x == "seg") {
            gateway::sink::spool::read_segment(&entry.path(), |r| {
                ids.extend(r.headers.iter().filter(|(k, _)| k == "event-id").map(|(_, v)| v.clone()));
            })
            .expect("segment reads");
        }
    }
    assert_eq!(ids, vec![first], "on disk: the spooled event only");
}

/// `spool = false` on a source: with Kafka away its events get 503
/// `kafka_unavailable` as with the spool off (through its own producer,
/// which gives up within the request deadline) and never reach the spool,
/// while another source's events are spooled and answered 200.
#[actix_web::test]
async fn a_source_without_the_spool_gets_503_while_others_are_spooled() {
    let (mut config, _dir) = spool_config("127.0.0.1:9", "per-source");
    let mut opted_out = config.sources.iter().find(|s| s.id == "demo").expect("demo source").clone();
    opted_out.id = "demo-no-spool".into();
    opted_out.write_key = Some("demo-no-spool-key".into());
    opted_out.spool = false;
    config.sources.push(opted_out);
    let url = serve(AppState::serving(config).expect("state")).await;

    let started = std::time::Instant::now();
    let id = common::unique("no-spool");
    let one = json!({"type": "track", "event": "Link Clicked", "userId": "u3", "messageId": id, "properties": {"href": "https://d.example/"}});
    let response = client()
        .post(format!("{url}/v1/track"))
        .basic_auth("demo-no-spool-key", Some(""))
        .json(&one)
        .send()
        .await
        .expect("sent");
    let (status, headers, answer) = common::answer(response).await;
    assert_eq!(status, 503, "the opted-out source hears 503, as without the spool: {answer}");
    assert_eq!(answer["code"], "kafka_unavailable", "{answer}");
    assert!(headers.contains_key("retry-after"));
    eprintln!("opted-out source answered 503 after {:?}", started.elapsed());
    let (_, metrics) = get(&format!("{url}/metrics")).await;
    let metrics = metrics.as_str().expect("text").to_owned();
    assert!(metrics.contains("eventgw_spool_appended_total 0"), "nothing of it was spooled: {metrics}");

    // The same event from a source that keeps the spool: spooled, 200.
    let (status, answer) = track(&url, &common::unique("with-spool")).await;
    assert_eq!((status, answer["events"][0]["status"].clone()), (200, json!("spooled")), "{answer}");
    // And while the spool holds records, the opted-out source still is not spooled.
    let response = client()
        .post(format!("{url}/v1/track"))
        .basic_auth("demo-no-spool-key", Some(""))
        .json(&json!({"type": "track", "event": "Link Clicked", "userId": "u3", "messageId": common::unique("no-spool-2"), "properties": {"href": "https://d.example/"}}))
        .send()
        .await
        .expect("sent");
    let (status, _, answer) = common::answer(response).await;
    assert_eq!((status, answer["code"].clone()), (503, json!("kafka_unavailable")), "{answer}");
    let (_, ready) = get(&format!("{url}/readyz")).await;
    assert_eq!(ready["spool"]["appendedTotal"], 1, "only the other source's event is spooled: {ready}");
}
