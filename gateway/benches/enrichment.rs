//! The cost per event of geo + device + bot enrichment, printed in
//! nanoseconds: a request's set-up, each event's enrichment and the
//! request's metrics, timed over copies of the event made beforehand (so
//! copying is not counted). `cargo bench -p eventgw --bench enrichment`
//! measures; under `cargo test` (no `--bench` argument) it runs one round
//! only, to prove it still works. The geo database is the one the tests build.

#[path = "../tests/support/edge.rs"]
mod edge;
#[path = "../tests/support/mmdb.rs"]
mod mmdb;

use std::hint::black_box;

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use std::net::IpAddr;
use std::time::Instant;

use gateway::enrich::ClientInfo;
use gateway::enrichment::device::ClientHints;
use gateway::enrichment::request::EdgeRequest;
use gateway::enrichment::{BotPolicy, Edge, RequestFacts};
use gateway::telemetry::Metrics;
use serde_json::{Map, Value, json};

/// The gateway's own allocator (`main.rs`), so the figures are the ones it pays.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CHROME: &str =
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const AGENTS: [&str; 4] = [
    CHROME,
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
];

/// Events enriched per timed round: their copies are made before the
/// clock starts, so only enrichment is timed. Rounds are short (about a
/// millisecond), so on a shared machine most run without being preempted,
/// and the median round is the machine's own speed, not its load.
const ROUND: usize = 200;

/// What every timed request shares.
#[derive(Clone, Copy)]
struct Setup<'a> {
    edge: &'a Edge,
    catalog: &'a eventgw_schemas::Catalog,
    facts: &'a RequestFacts,
    client: &'a ClientInfo,
    metrics: &'a Metrics,
}

/// Nanoseconds per event (median of `rounds` rounds) of enriching
/// [`ROUND`] copies of `templates` (in turn) in requests of `per_request`
/// events: a request's set-up, each event's `finish` and the request's
/// metrics flush.
fn time(setup: &Setup<'_>, rounds: usize, templates: &[Map<String, Value>], per_request: usize) -> f64 {
    let mut per_event = Vec::with_capacity(rounds);
    for round in 0..=rounds {
        let mut events: Vec<Map<String, Value>> = (0..ROUND).map(|i| templates[i % templates.len()].clone()).collect();
        let started = Instant::now();
        for request in events.chunks_mut(per_request) {
            let edge = EdgeRequest::new(setup.edge, setup.catalog, "demo", setup.facts, setup.client, 1_700_000_000);
            for event in request {
                black_box(edge.finish("Page Viewed", None, event));
            }
            edge.flush(setup.metrics);
        }
        let elapsed = started.elapsed();
        // The first round warms the caches, as a running gateway's are.
        if round > 0 {
            per_event.push(elapsed.as_nanos() as f64 / ROUND as f64);
        }
        black_box(events);
    }
    per_event.sort_by(f64::total_cmp);
    per_event[per_event.len() / 2]
}

fn event(ip: &str, agent: &str) -> Map<String, Value> {
    let event = json!({"type": "page", "anonymousId": "a-1", "properties": {"url": "https://shop.example/", "path": "/"},
                       "context": {"ip": ip, "userAgent": agent, "library": {"name": "eventgw-sdk-js", "version": "0.1.0"}}});
    match event {
        Value::Object(map) => map,
        _ => unreachable!("an object literal"),
    }
}

/// The low-entropy hints Chromium sends on every HTTPS request.
fn chrome_hints() -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("sec-ch-ua", r#""Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24""#),
        ("sec-ch-ua-mobile", "?0"),
        ("sec-ch-ua-platform", r#""Windows""#),
    ] {
        headers.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
    }
    headers
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
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

    let metrics = Metrics::new();
    let setup = Setup { edge: &edge, catalog: &catalog, facts: &facts, client: &client, metrics: &metrics };
    let rounds = if full { 1_000 } else { 1 };

    println!("geo + device + bot cost per event ({})", if full { "measured" } else { "smoke run, not a measurement" });
    for batch in [1usize, 10, 100] {
        let per_event = time(&setup, rounds, std::slice::from_ref(&template), batch);
        println!("{:<58} {per_event:>8.0} ns", format!("one device, {batch} events per request"));
    }
    let mixed: Vec<Map<String, Value>> =
        (0..12).map(|i| event(["203.0.113.9", "198.51.100.7", "2001:db8::1"][i % 3], AGENTS[i % 4])).collect();
    let hinted = RequestFacts { full_ip: None, hints: Some(ClientHints::from_headers(&chrome_hints())) };
    let with_hints = Setup { facts: &hinted, ..setup };
    let per_event = time(&with_hints, rounds, std::slice::from_ref(&template), 1);
    println!("{:<58} {per_event:>8.0} ns", "one device with client hints, 1 event per request");
    let per_event = time(&setup, rounds, &mixed, 1);
    println!("{:<58} {per_event:>8.0} ns", "4 agents x 3 addresses mixed, 1 event per request");
    let per_event = time(&setup, rounds, &mixed, 100);
    println!("{:<58} {per_event:>8.0} ns", "4 agents x 3 addresses mixed, 100 events per request");
    let _ = std::fs::remove_dir_all(&files.dir);
}
