//! `/readyz` and `/metrics` never wait on Kafka (issue 28, item 7): a
//! gateway whose Kafka is a port with nothing listening (each metadata
//! request blocks for its 2 s timeout) answers both while its readiness
//! probe is provably blocked: the probe counts seen before and after the
//! two requests are equal and show that probe in flight, so the handlers
//! neither waited for it nor made one of their own. No wall-clock bound.
//! Before the fix each handler made its own 2 s metadata request.

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway::AppState;
use gateway::config::Config;
use gateway::sink::{KafkaSink, ProbeCounts, SpoolSink};
use serde_json::Value;

/// A port nothing listens on.
fn dead_broker() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    format!("127.0.0.1:{}", listener.local_addr().expect("addr").port())
}

fn config(extra: &[(&str, String)]) -> Config {
    let env = [("EVENTGW__KAFKA__BROKERS", dead_broker())].into_iter().chain(extra.iter().cloned());
    let path = common::repo_root().join("gateway/config/dev.toml");
    Config::load_with_env(&path, env.map(|(k, v)| (k.to_owned(), v))).expect("config")
}

async fn serve(state: AppState) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    actix_web::rt::spawn(gateway::serve(Arc::new(state), listener).expect("server"));
    url
}

/// Polls the probe counts until `done` (bounded: a hang guard, not a
/// speed assertion).
async fn until(kafka: &KafkaSink, what: &str, done: impl Fn(ProbeCounts) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(kafka.probe_counts()) {
        assert!(Instant::now() < deadline, "{what}: {:?}", kafka.probe_counts());
        actix_web::rt::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `/readyz` (status, body) and `/metrics` (text), answered while one
/// probe stayed in flight from before the first request to after the
/// second; a probe that answered in between (the requests straddled its
/// end) makes it try again with the next one.
async fn answers_while_a_probe_is_blocked(kafka: &KafkaSink, url: &str) -> ((u16, Value), String) {
    until(kafka, "the first probe answers", |c| c.finished >= 1).await;
    for _ in 0..5 {
        until(kafka, "a probe is in flight", |c| c.in_flight()).await;
        let before = kafka.probe_counts();
        let ready = reqwest::get(format!("{url}/readyz")).await.expect("readyz answers");
        let ready = (ready.status().as_u16(), ready.json::<Value>().await.expect("json"));
        let metrics = reqwest::get(format!("{url}/metrics")).await.expect("metrics answers");
        let metrics = metrics.text().await.expect("text");
        let after = kafka.probe_counts();
        if before == after {
            assert!(after.in_flight(), "{after:?}");
            return (ready, metrics);
        }
    }
    panic!("in five tries the handlers never answered within one probe's life: they wait for Kafka");
}

#[actix_web::test]
async fn with_kafka_down_readyz_and_metrics_answer_while_the_probe_is_blocked() {
    let config = config(&[]);
    let kafka = KafkaSink::new(&config.kafka).expect("producer");
    let url = serve(AppState::new(config, Arc::new(kafka.clone())).expect("state")).await;
    let ((status, body), metrics) = answers_while_a_probe_is_blocked(&kafka, &url).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "not_ready", "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("Kafka is unreachable")), "{body}");
    assert!(metrics.contains("eventgw_ready 0"), "{metrics}");
    assert!(metrics.contains("eventgw_producer_queue_depth 0"), "{metrics}");
}

#[actix_web::test]
async fn a_spooling_gateway_stays_ready_while_the_probe_is_blocked() {
    let dir = std::env::temp_dir().join(format!("eventgw-readiness-outage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config =
        config(&[("EVENTGW__SPOOL__ENABLED", "true".into()), ("EVENTGW__SPOOL__DIR", dir.display().to_string())]);
    let kafka = KafkaSink::with_message_timeout(&config.kafka, config.spool.delivery_timeout_ms).expect("producer");
    let spool = SpoolSink::open(&config.spool, kafka.clone()).expect("spool");
    let url = serve(AppState::new(config, Arc::new(spool)).expect("state")).await;
    let ((status, body), metrics) = answers_while_a_probe_is_blocked(&kafka, &url).await;
    assert_eq!(status, 200, "the spool takes events: {body}");
    assert_eq!(body["status"], "ready", "{body}");
    assert!(body["spool"].is_object(), "{body}");
    assert!(metrics.contains("eventgw_ready 1"), "{metrics}");
    assert!(metrics.contains("eventgw_spool_spooling"), "{metrics}");
    let _ = std::fs::remove_dir_all(&dir);
}
