//! Dedupe with the shared store, against a real Redis/Valkey that
//! `scripts/redis` starts (port `REDIS_PORT`, default 6390, and the two
//! ports above it for the outage tests) and the real broker: an id stored
//! through gateway A is a duplicate on gateway B; with the store stopped,
//! `on_store_error = "produce"` stores without dedupe (and counts it) and
//! `"unavailable"` answers 503 and turns `/readyz` red, both recovering
//! when the store is back.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use common::{FailsFirst, TestGateway, brokers, find, unique};
use gateway::AppState;
use gateway::config::Config;
use gateway::sink::KafkaSink;
use serde_json::{Value, json};

fn base_port() -> u16 {
    std::env::var("REDIS_PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(6390)
}

/// `scripts/redis <action>` for one instance.
fn redis(instance: &str, port: u16, action: &str) {
    let status = Command::new(common::repo_root().join("scripts/redis"))
        .arg(action)
        .env("REDIS_INSTANCE", instance)
        .env("REDIS_PORT", port.to_string())
        .status()
        .expect("scripts/redis runs");
    assert!(status.success(), "scripts/redis {action} ({instance} on {port}) failed");
}

fn redis_config(port: u16, on_store_error: &str) -> Config {
    let env = [
        ("EVENTGW__KAFKA__BROKERS", brokers()),
        ("EVENTGW__DEDUPE__ENABLED", "true".into()),
        ("EVENTGW__DEDUPE__STORE", "redis".into()),
        ("EVENTGW__DEDUPE__REDIS_URL", format!("redis://127.0.0.1:{port}")),
        ("EVENTGW__DEDUPE__ON_STORE_ERROR", on_store_error.into()),
        ("EVENTGW__DEDUPE__STORE_TIMEOUT_MS", "300".into()),
    ];
    let path = common::repo_root().join("gateway/config/dev.toml");
    Config::load_with_env(&path, env.into_iter().map(|(k, v)| (k.to_owned(), v))).expect("config loads")
}

fn click(id: &str) -> Value {
    json!({"batch": [{"type": "track", "event": "Link Clicked", "userId": "u1", "messageId": id,
        "properties": {"href": "https://shop.example/next"}}]})
}

fn status_of(answer: &Value) -> &str {
    answer["events"][0]["status"].as_str().unwrap_or("?")
}

async fn metrics(gw: &TestGateway) -> String {
    reqwest::get(format!("{}/metrics", gw.url)).await.expect("metrics").text().await.expect("text")
}

/// The value of an unlabelled counter in a scrape.
fn counter(text: &str, name: &str) -> u64 {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok()).unwrap_or(0)
}

/// Waits (bounded) until `/readyz` says `want`; what it says last.
async fn readyz_until(gw: &TestGateway, want: u16) -> (u16, String) {
    let started = Instant::now();
    loop {
        let response = reqwest::get(format!("{}/readyz", gw.url)).await.expect("readyz");
        let status = response.status().as_u16();
        let body = response.text().await.expect("text");
        if status == want || started.elapsed() > Duration::from_secs(30) {
            return (status, body);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[actix_web::test]
async fn an_id_stored_through_one_gateway_is_a_duplicate_on_another() {
    if common::without_kafka() || common::without_redis() {
        return;
    }
    let port = base_port();
    redis("test", port, "start");
    let config = redis_config(port, "produce");
    let failing =
        Arc::new(FailsFirst { kafka: KafkaSink::new(&config.kafka).expect("producer"), fail: AtomicUsize::new(1) });
    let a = TestGateway::start_state(AppState::new(config, failing).expect("state")).await;
    let b = TestGateway::start(redis_config(port, "produce")).await;

    // A 503 on A, retried on B: produced there (the reservation was released).
    let failed = unique("dd-redis-503");
    assert_eq!(a.post("/v1/batch", &click(&failed)).await.0, 503);
    let (status, answer) = b.post("/v1/batch", &click(&failed)).await;
    assert_eq!((status, status_of(&answer)), (200, "accepted"), "{answer}");

    // A 200 on A, retried on B: a duplicate there.
    let id = unique("dd-redis");
    let (status, answer) = a.post("/v1/batch", &click(&id)).await;
    assert_eq!((status, status_of(&answer)), (200, "accepted"), "{answer}");
    let (status, answer) = b.post("/v1/batch", &click(&id)).await;
    assert_eq!((status, status_of(&answer)), (200, "duplicate"), "{answer}");
    assert_eq!(answer["events"][0]["code"], "duplicate_message_id");

    for id in [&failed, &id] {
        assert_eq!(find(&brokers(), "web.tracking", id).len(), 1, "{id} stored once");
    }
    assert!(metrics(&b).await.contains("eventgw_dedupe_duplicates_total 1"));
    a.stop().await;
    b.stop().await;
}

#[actix_web::test]
async fn store_down_with_produce_stores_without_dedupe_counts_it_and_recovers() {
    if common::without_kafka() || common::without_redis() {
        return;
    }
    let port = base_port() + 1;
    redis("dedupe-outage-produce", port, "start");
    let gw = TestGateway::start(redis_config(port, "produce")).await;
    let before = unique("dd-before");
    assert_eq!(status_of(&gw.post("/v1/batch", &click(&before)).await.1), "accepted");

    redis("dedupe-outage-produce", port, "stop");
    let during = unique("dd-during");
    for _ in 0..2 {
        let (status, answer) = gw.post("/v1/batch", &click(&during)).await;
        assert_eq!((status, status_of(&answer)), (200, "accepted"), "{answer}");
    }
    // The price of availability: the retry was stored again, and counted.
    assert_eq!(find(&brokers(), "web.tracking", &during).len(), 2);
    let text = metrics(&gw).await;
    assert!(text.contains("eventgw_dedupe_unchecked_total 2"), "{text}");
    assert!(text.contains("eventgw_dedupe_store_errors_total{operation=\"reserve\"} 2"), "{text}");
    assert_eq!(readyz_until(&gw, 200).await.0, 200, "produce keeps the gateway ready");

    redis("dedupe-outage-produce", port, "start");
    // Reconnects by itself: fresh probe ids until one passed the store (the
    // unchecked count stops growing); until then requests are produced
    // unchecked, as configured.
    let started = Instant::now();
    let mut unchecked = counter(&metrics(&gw).await, "eventgw_dedupe_unchecked_total");
    loop {
        let (status, _) = gw.post("/v1/batch", &click(&unique("dd-probe"))).await;
        assert_eq!(status, 200);
        let now = counter(&metrics(&gw).await, "eventgw_dedupe_unchecked_total");
        if now == unchecked || started.elapsed() > Duration::from_secs(30) {
            break;
        }
        unchecked = now;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The id stored before the outage is still known (the server's
    // append-only file kept it).
    let answer = gw.post("/v1/batch", &click(&before)).await;
    assert_eq!((answer.0, status_of(&answer.1)), (200, "duplicate"), "{}", answer.1);
    assert_eq!(find(&brokers(), "web.tracking", &before).len(), 1, "stored once before the outage");
    gw.stop().await;
    redis("dedupe-outage-produce", port, "stop");
}

#[actix_web::test]
async fn store_down_with_unavailable_answers_503_not_ready_and_recovers() {
    if common::without_kafka() || common::without_redis() {
        return;
    }
    let port = base_port() + 2;
    redis("dedupe-outage-refuse", port, "start");
    let gw = TestGateway::start(redis_config(port, "unavailable")).await;
    assert_eq!(readyz_until(&gw, 200).await.0, 200);

    redis("dedupe-outage-refuse", port, "stop");
    let id = unique("dd-refused");
    let response = reqwest::Client::new()
        .post(format!("{}/v1/batch", gw.url))
        .basic_auth("demo-write-key", Some(""))
        .json(&click(&id))
        .send()
        .await
        .expect("sent");
    let (status, headers, answer) = common::answer(response).await;
    assert_eq!(status, 503, "{answer}");
    assert!(headers.contains_key("retry-after"), "{headers:?}");
    assert!(answer["message"].as_str().unwrap_or("").contains("dedupe store"), "{answer}");
    assert!(find(&brokers(), "web.tracking", &id).is_empty(), "nothing stored unchecked");
    let (status, body) = readyz_until(&gw, 503).await;
    assert_eq!(status, 503);
    assert!(body.contains("dedupe store"), "{body}");

    redis("dedupe-outage-refuse", port, "start");
    assert_eq!(readyz_until(&gw, 200).await.0, 200, "ready again once the store answers");
    let (status, answer) = gw.post("/v1/batch", &click(&id)).await;
    assert_eq!((status, status_of(&answer)), (200, "accepted"), "{answer}");
    assert_eq!(find(&brokers(), "web.tracking", &id).len(), 1);
    gw.stop().await;
    redis("dedupe-outage-refuse", port, "stop");
}

#[actix_web::test]
async fn ids_of_a_gateway_that_died_mid_request_are_looked_up_in_kafka() {
    if common::without_kafka() || common::without_redis() {
        return;
    }
    use gateway::dedupe::{EventId, RedisStore, Reservation, Store as _};
    let port = base_port();
    redis("test", port, "start");
    // `landed` reached Kafka, `lost` did not; a gateway reserved both and
    // died (its 300 ms lease runs out, nobody settles them).
    let plain = TestGateway::start(common::config(&brokers())).await;
    let (landed, lost) = (unique("dd-redis-landed"), unique("dd-redis-lost"));
    assert_eq!(plain.post("/v1/batch", &click(&landed)).await.0, 200);
    let source = find(&brokers(), "web.tracking", &landed)[0].headers.get("source").expect("source").clone();
    let reservation = |id: &str| Reservation {
        id: EventId { source: source.clone(), message_id: id.to_owned() },
        fingerprint: 0,
        token: 42,
        topic: "web.tracking".into(),
    };
    let url = format!("redis://127.0.0.1:{port}/");
    let dead = RedisStore::new(&url, Duration::from_secs(3600), Duration::from_millis(300), Duration::from_secs(2))
        .expect("store");
    dead.reserve(vec![reservation(&landed), reservation(&lost)]).await.expect("reserved");
    let gw = TestGateway::start(redis_config(port, "unavailable")).await;
    // Once the lease ran out, the retry finds the ids in doubt and looks them up.
    actix_web::rt::time::sleep(Duration::from_millis(400)).await;
    let (status, answer) = gw.post("/v1/batch", &click(&landed)).await;
    assert_eq!((status, status_of(&answer)), (200, "duplicate"), "{answer}");
    let (status, answer) = gw.post("/v1/batch", &click(&lost)).await;
    assert_eq!((status, status_of(&answer)), (200, "accepted"), "{answer}");
    for id in [&landed, &lost] {
        assert_eq!(find(&brokers(), "web.tracking", id).len(), 1, "{id} stored once");
    }
    plain.stop().await;
    gw.stop().await;
}

/// Extending answers how many reservations are no longer the caller's: a
/// lease that lapsed with nobody taking it over is simply extended again
/// (the holder was out of reach, not dead); one a retry took over is lost.
#[actix_web::test]
async fn extending_counts_the_reservations_a_retry_took_over() {
    if common::without_redis() {
        return;
    }
    use gateway::dedupe::{Claim, EventId, RedisStore, Reservation, Store as _};
    let port = base_port();
    redis("test", port, "start");
    let url = format!("redis://127.0.0.1:{port}/");
    let lease = Duration::from_millis(300);
    let store = RedisStore::new(&url, Duration::from_secs(3600), lease, Duration::from_secs(2)).expect("store");
    store.settle().store(0, std::sync::atomic::Ordering::Relaxed);
    let reservation = |id: &str, token: u64| Reservation {
        id: EventId { source: "lease-test".into(), message_id: id.to_owned() },
        fingerprint: 7,
        token,
        topic: "web.tracking".into(),
    };
    let (kept, taken) = (unique("dd-lease-kept"), unique("dd-lease-taken"));
    let held = vec![reservation(&kept, 1), reservation(&taken, 1)];
    assert_eq!(store.reserve(held.clone()).await.expect("reserved"), vec![Claim::New, Claim::New]);
    actix_web::rt::time::sleep(lease + Duration::from_millis(200)).await;
    // Both leases lapsed; a retry (another token) takes `taken` over.
    let retry = store.reserve(vec![reservation(&taken, 2)]).await.expect("retry");
    assert!(matches!(retry[0], Claim::InDoubt(7, _)), "{retry:?}");
    assert_eq!(store.extend(held.clone()).await.expect("extended"), 1, "`taken` is lost, `kept` extended");
    // `kept` holds again: another retry waits.
    assert_eq!(store.reserve(vec![reservation(&kept, 3)]).await.expect("kept"), vec![Claim::Pending]);
    assert_eq!(store.extend(vec![reservation(&taken, 2)]).await.expect("the taker's"), 0);
}

/// A lapsed lease is taken over only once it has been out for the settle
/// time (a record its dead gateway sent last is then below the high
/// watermark, where the look-up sees it); until then a retry waits.
#[actix_web::test]
async fn a_lapsed_lease_is_taken_over_only_after_the_settle_time() {
    if common::without_redis() {
        return;
    }
    use gateway::dedupe::{Claim, EventId, RedisStore, Reservation, Store as _};
    let port = base_port();
    redis("test", port, "start");
    let url = format!("redis://127.0.0.1:{port}/");
    let lease = Duration::from_millis(200);
    let store = RedisStore::new(&url, Duration::from_secs(3600), lease, Duration::from_secs(2)).expect("store");
    assert_eq!(store.settle().load(std::sync::atomic::Ordering::Relaxed), 50_000, "the long wait until Kafka says");
    store.settle().store(600, std::sync::atomic::Ordering::Relaxed);
    let reservation = |token: u64| Reservation {
        id: EventId { source: "settle-test".into(), message_id: unique("dd-settle") },
        fingerprint: 9,
        token,
        topic: "web.tracking".into(),
    };
    let first = reservation(1);
    let retry = Reservation { token: 2, ..first.clone() };
    assert_eq!(store.reserve(vec![first]).await.expect("reserved"), vec![Claim::New]);
    actix_web::rt::time::sleep(lease + Duration::from_millis(150)).await;
    assert_eq!(store.reserve(vec![retry.clone()]).await.expect("early"), vec![Claim::Pending], "lapsed, not settled");
    actix_web::rt::time::sleep(Duration::from_millis(700)).await;
    let late = store.reserve(vec![retry]).await.expect("late");
    assert!(matches!(late[0], Claim::InDoubt(9, _)), "lapsed and settled: in doubt ({late:?})");
}
