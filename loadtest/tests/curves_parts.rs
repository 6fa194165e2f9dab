//! The pieces the cost curves stand on measure what they claim: the
//! generated catalog loads with 200 distinct events whose examples pass
//! their schemas, padded events have the size asked for and stay valid, and
//! the fixed-connection generator really uses exactly N connections (with
//! one connection and a 20 ms server, requests queue behind each other).

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use eventgw_loadtest::workload::Workload;
use eventgw_loadtest::{bench_catalog, connections};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eventgw-loadtest-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn the_bench_catalog_has_200_valid_events_and_padding_sets_the_size() {
    let dir = temp_dir("catalog");
    bench_catalog::write(&dir, 200).expect("write");
    let catalog = eventgw_schemas::loader::load_catalog(&dir).expect("the generated catalog loads");
    let events = catalog.events();
    assert_eq!(events.len(), 200);
    let examples: Vec<_> = events.iter().map(|e| e.latest().examples[0].clone()).collect();
    for (event, example) in events.iter().zip(&examples) {
        event.check(example, None).unwrap_or_else(|v| panic!("{}: example invalid: {v:?}", event.name));
    }
    for bytes in [200usize, 2_000, 16_000] {
        let workload = Workload::from_examples(examples.clone(), 1, false, 100).expect("workload").padded_to(bytes);
        for n in [0u64, 7, 123_456] {
            let event = workload.event(n, 1_000_000);
            let size = serde_json::to_vec(&event).expect("json").len();
            // Ids and times vary in length by a few bytes; an example already
            // longer than asked is left alone (the smallest is about 200 B).
            assert!(size.abs_diff(bytes) <= bytes / 20 + 10, "asked {bytes} B, got {size} B");
            let name = event["event"].as_str().expect("name");
            catalog.event(name).expect("known").check(&event, None).expect("padded event still valid");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_connection_generator_uses_exactly_the_connections_it_is_given() {
    let server = common::Ceiling::start(Duration::from_millis(20));
    let workload = common::workload(2, true);
    let config = common::config(server.url.clone(), 200.0, 1);
    let runtime = common::runtime();
    // Ten connections carry 200 req/s of a 20 ms server easily (500 req/s).
    let many = runtime.block_on(connections::run(&config, 10, Arc::clone(&workload))).expect("run");
    assert_eq!((many.sent, many.ok, many.failures()), (200, 200, 0));
    assert!(many.ms(99.0) < 500.0, "ten connections keep up: p99 {} ms", many.ms(99.0));
    // One connection does at most 50 req/s: 200 requests take about 4 s, so
    // the last ones wait seconds behind the others.
    let one = runtime.block_on(connections::run(&config, 1, workload)).expect("run");
    assert_eq!((one.sent, one.ok, one.failures()), (200, 200, 0));
    assert!(one.ms(99.0) > 2_000.0, "one connection serialises: p99 {} ms", one.ms(99.0));
    server.stop();
}
