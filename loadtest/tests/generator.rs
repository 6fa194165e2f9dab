//! The generator measures what it claims: against the ceiling server with a
//! known 20 ms delay it sends exactly rate × duration requests, spread over
//! the duration, and no latency it records is below the delay.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eventgw_loadtest::client;
use eventgw_loadtest::generator;
use eventgw_loadtest::workload::Workload;

#[test]
fn it_hits_the_requested_rate_and_its_histogram_sees_the_known_delay() {
    let server = common::Ceiling::start(Duration::from_millis(20));
    let workload = common::workload(1, false);
    let config = common::config(server.url.clone(), 200.0, 2);
    let runtime = common::runtime();
    let started = Instant::now();
    let result = runtime.block_on(generator::run(&client().expect("client"), &config, workload, Instant::now()));
    let took = started.elapsed();
    assert_eq!(result.sent, 400, "rate × duration");
    assert_eq!((result.ok, result.failures()), (400, 0));
    assert!(
        took >= Duration::from_millis(1995 + 20),
        "open loop: the last request is due at 1.995 s, then 20 ms: {took:?}"
    );
    assert!(result.latency_us.min() >= 20_000, "no answer beats the server's delay: {} µs", result.latency_us.min());
    assert!(result.ms(50.0) >= 20.0 && result.ms(50.0) < 1000.0, "p50 {} ms", result.ms(50.0));
    server.stop();
}

#[test]
fn the_ceiling_holds_a_request_that_asks_for_it_and_answers_the_rest_at_once() {
    let server = common::Ceiling::start(Duration::ZERO);
    let workload = common::workload(1, false);
    let runtime = common::runtime();
    let run = |url: String| {
        let config = common::config(url, 50.0, 1);
        runtime.block_on(generator::run(&client().expect("client"), &config, Arc::clone(&workload), Instant::now()))
    };
    let held = run(format!("{}?hold_ms=60", server.url));
    assert_eq!((held.ok, held.failures()), (50, 0));
    assert!(held.latency_us.min() >= 60_000, "every held answer waits 60 ms: {} µs", held.latency_us.min());
    let at_once = run(server.url.clone());
    assert_eq!((at_once.ok, at_once.failures()), (50, 0));
    assert!(at_once.ms(50.0) < 60.0, "unheld answers do not wait: p50 {} ms", at_once.ms(50.0));
    server.stop();
}

#[test]
fn workload_bodies_are_gzipped_and_carry_unique_ids_and_the_intended_time() {
    let workload = Workload::from_catalog(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schemas"), 3, true, 10)
        .expect("workload");
    let body = workload.body(7, 123);
    assert_eq!(&body[..2], &[0x1f, 0x8b], "gzip bodies start with the magic bytes");
    let event = workload.event(5, 42);
    assert_eq!(event["properties"]["loadtest_intended_ns"], 42);
    assert!(event["messageId"].as_str().is_some_and(|id| id.starts_with("lt-5-")));
}

#[test]
fn the_kafka_ceiling_sends_each_event_where_the_gateway_would() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schemas");
    let catalog = eventgw_schemas::loader::load_catalog(&dir).expect("catalog");
    let workload = Workload::from_catalog(&dir, 1, false, 10).expect("workload");
    let (mut topics, mut checked) = (std::collections::BTreeSet::new(), 0);
    for n in 0..workload.kinds() as u64 {
        let event = workload.event(n, 0);
        let (topic, key) = workload.destination(n, &event).expect("a catalog event has a destination");
        let name = event.get("event").and_then(|v| v.as_str());
        if let Some(declared) = name.and_then(|name| catalog.event(name)) {
            assert_eq!(topic, &*declared.topic, "{name:?} goes to its domain topic");
            assert_eq!(Some(key.clone()), declared.key.extract(&event), "{name:?} is keyed as declared");
            checked += 1;
        }
        assert!(!key.is_empty(), "event {n} has a key");
        topics.insert(topic.to_owned());
    }
    assert!(topics.len() > 1 && checked > 1, "the examples span several domain topics: {topics:?}");
    let bare = Workload::from_examples(vec![serde_json::json!({"type": "track", "event": "x"})], 1, false, 1)
        .expect("workload");
    assert!(bare.destination(0, &bare.event(0, 0)).is_none(), "bare examples have no catalog route");
}
