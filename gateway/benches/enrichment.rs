//! The cost per event of geo + device + bot enrichment, printed in
//! nanoseconds. `cargo bench -p eventgw --bench enrichment` measures; under
//! `cargo test` (no `--bench` argument) it runs a few iterations only, to
//! prove it still works. The geo database is the one the tests build.

#[path = "../tests/support/edge.rs"]
mod edge;
#[path = "../tests/support/mmdb.rs"]
mod mmdb;

use std::hint::black_box;
use std::net::IpAddr;
use std::time::Instant;

use gateway::enrich::ClientInfo;
use gateway::enrichment::request::EdgeRequest;
use gateway::enrichment::{BotPolicy, Edge, RequestFacts};
use serde_json::{Map, Value, json};

const CHROME: &str =
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const AGENTS: [&str; 4] = [
    CHROME,
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
];

/// Runs `f` `n` times and returns nanoseconds per call.
fn time(n: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..n.min(1_000) {
        f();
    }
    let started = Instant::now();
    for _ in 0..n {
        f();
    }
    started.elapsed().as_nanos() as f64 / f64::from(n)
}

fn event(ip: &str, agent: &str) -> Map<String, Value> {
    let event = json!({"type": "page", "anonymousId": "a-1", "properties": {"url": "https://shop.example/", "path": "/"},
                       "context": {"ip": ip, "userAgent": agent, "library": {"name": "eventgw-sdk-js", "version": "0.1.0"}}});
    match event {
        Value::Object(map) => map,
        _ => unreachable!("an object literal"),
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = |iterations: u32| if full { iterations } else { 10 };
    let files = edge::files();
    let mut config = edge::config("127.0.0.1:1", &files);
    let source = &mut config.sources[0].enrichment;
    (source.geo, source.device, source.bots) = (true, true, BotPolicy::Label);
    let catalog = eventgw_schemas::loader::load_catalog(&config.catalog.dir).expect("catalog");
    let edge = Edge::new(&config).expect("edge");
    let ip: IpAddr = "203.0.113.9".parse().expect("ip");
    let client = ClientInfo { ip: Some(ip), user_agent: Some(CHROME.into()) };
    let facts = RequestFacts::default();
    let template = event("203.0.113.9", CHROME);

    println!("geo + device + bot cost per event ({})", if full { "measured" } else { "smoke run, not a measurement" });
    let copy = time(n(200_000), || {
        black_box(template.clone());
    });
    println!("{:<58} {copy:>8.0} ns", "copying the event (baseline, paid with or without enrichment)");
    for batch in [1usize, 10, 100] {
        let requests = n(if batch == 1 { 200_000 } else { 20_000 / u32::try_from(batch).unwrap_or(1) });
        let per_request = time(requests, || {
            let request = EdgeRequest::new(&edge, &catalog, "demo", &facts, &client, 1_700_000_000);
            for _ in 0..batch {
                let mut event = template.clone();
                black_box(request.finish("Page Viewed", None, &mut event));
                black_box(event);
            }
        });
        let per_event = per_request / batch as f64 - copy;
        println!("{:<58} {per_event:>8.0} ns", format!("one device, {batch} events per request"));
    }
    let mixed: Vec<Map<String, Value>> =
        (0..100).map(|i| event(["203.0.113.9", "198.51.100.7", "2001:db8::1"][i % 3], AGENTS[i % 4])).collect();
    let per_request = time(n(500), || {
        let request = EdgeRequest::new(&edge, &catalog, "demo", &facts, &client, 1_700_000_000);
        for template in &mixed {
            let mut event = template.clone();
            black_box(request.finish("Page Viewed", None, &mut event));
            black_box(event);
        }
    });
    println!("{:<58} {:>8.0} ns", "4 agents x 3 addresses mixed, 100 events per request", per_request / 100.0 - copy);
    let _ = std::fs::remove_dir_all(&files.dir);
}
