//! The cost per event of enrichment, printed in nanoseconds: each event's
//! enrich step (`receivedAt`, `timestamp`, `context.ip`/`userAgent`, then
//! geo + device + bot and the IP policy) and the writing of its record
//! value, plus the request's set-up and metrics, timed over copies of the
//! event made beforehand (so copying is not counted). Every case runs with
//! geo + device + bot on and off (the same source otherwise), so the
//! difference is what they cost. `cargo bench -p eventgw --bench
//! enrichment` measures; under `cargo test` (no `--bench` argument) it runs
//! one round only, to prove it still works. The geo database is the one
//! the tests build.

#[path = "../tests/support/edge.rs"]
mod edge;
#[path = "../tests/support/mmdb.rs"]
mod mmdb;

use std::hint::black_box;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use gateway::AppState;
use gateway::auth::Principal;
use gateway::enrichment::BotPolicy;
use gateway::enrichment::client::Client;
use gateway::enrichment::hints::ClientHints;
use gateway::pipeline::EventTime;
use gateway::sink::MemorySink;
use gateway::stages::Request;
use gateway::stages::admit::admission;
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

/// Events per timed round: their copies are made before the clock starts.
/// Rounds are short (well under a millisecond), so on a shared machine
/// most run without being preempted and the median round is the
/// machine's own speed, not its load.
const ROUND: usize = 100;
/// Runs per figure (on and off interleaved); each run is the median of
/// its rounds, and a figure is the median run with the runs' spread.
const RUNS: usize = 7;

/// What every timed request shares.
#[derive(Clone, Copy)]
struct Setup<'a> {
    state: &'a AppState,
    principal: &'a Principal,
    /// The request's context, with its client.
    request: &'a Request<'a>,
}

/// Nanoseconds per event (median of `rounds` rounds) of enriching
/// [`ROUND`] copies of `templates` (in turn) in requests of `per_request`
/// events: a request's set-up, each event's enrich step and record value,
/// and the request's metrics flush.
fn time(setup: &Setup<'_>, rounds: usize, templates: &[Map<String, Value>], per_request: usize) -> f64 {
    let state = setup.state;
    let received_at = chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("time");
    let time = EventTime { timestamp: received_at, flag: None };
    let mut per_event = Vec::with_capacity(rounds);
    for round in 0..=rounds {
        let mut events: Vec<Map<String, Value>> = (0..ROUND).map(|i| templates[i % templates.len()].clone()).collect();
        let started = Instant::now();
        while !events.is_empty() {
            let request = events.split_off(events.len().saturating_sub(per_request));
            let admission = admission(setup.request, setup.principal, received_at, None);
            for event in request {
                black_box(admission.enriched_payload("Page Viewed", event, &time, None));
            }
            admission.edge.flush(&state.metrics);
        }
        let elapsed = started.elapsed();
        // The first round warms the caches, as a running gateway's are.
        if round > 0 {
            per_event.push(elapsed.as_nanos() as f64 / ROUND as f64);
        }
    }
    median(&mut per_event)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A page view as a browser SDK sends it (after the envelope step);
/// `forwarded` adds the `context.ip` and `userAgent` a server SDK forwards.
fn event(forwarded: Option<(&str, &str)>) -> Map<String, Value> {
    let mut event = json!({"type": "page", "messageId": "0193a0b4-6c1e-7cc2-9d0e-5f3c2a1b4d5e", "anonymousId": "a-1",
        "timestamp": "2024-11-14T22:13:19.512Z", "properties": {"url": "https://shop.example/", "path": "/"},
        "context": {"library": {"name": "eventgw-sdk-js", "version": "0.1.0"}, "locale": "en-US",
                    "page": {"path": "/", "title": "Shop", "url": "https://shop.example/"}}});
    if let Some((ip, agent)) = forwarded {
        event["context"]["ip"] = json!(ip);
        event["context"]["userAgent"] = json!(agent);
    }
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

/// One case: on and off interleaved over [`RUNS`] runs.
fn case(label: &str, on: &Setup<'_>, off: &Setup<'_>, rounds: usize, templates: &[Map<String, Value>], batch: usize) {
    let runs = if rounds > 1 { RUNS } else { 1 };
    let (mut ons, mut offs, mut diffs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let a = time(on, rounds, templates, batch);
        let b = time(off, rounds, templates, batch);
        ons.push(a);
        offs.push(b);
        diffs.push(a - b);
    }
    let spread = |v: &mut Vec<f64>| {
        let m = median(v);
        format!("{m:>6.0} ({:>5.0}-{:<5.0})", v[0], v[v.len() - 1])
    };
    println!("{label:<44} {} {} {}", spread(&mut ons), spread(&mut offs), spread(&mut diffs));
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let files = edge::files();
    let mut config = edge::config("127.0.0.1:1", &files);
    let mut plain = edge::extra_source(&config, "plain", "plain-write-key");
    (plain.enrichment.geo, plain.enrichment.device, plain.enrichment.bots) = (false, false, BotPolicy::Off);
    let source = &mut config.sources[0].enrichment;
    (source.geo, source.device, source.bots) = (true, true, BotPolicy::Label);
    config.sources.push(plain);
    let state = AppState::new(config, Arc::new(MemorySink::default())).expect("state");
    let auth = state.auth.load();
    let (demo, plain) =
        (auth.by_write_key("demo-write-key").expect("demo"), auth.by_write_key("plain-write-key").expect("plain"));
    let ip: IpAddr = "203.0.113.9".parse().expect("ip");
    let client = Client { ip: Some(ip), full_ip: Some(ip), user_agent: Some(CHROME.into()), hints: None };
    let request = Request::from_client(&state, "batch", client.clone());
    let on = Setup { state: &state, principal: &demo, request: &request };
    let off = Setup { principal: &plain, ..on };
    let rounds = if full { 400 } else { 1 };

    let runs = if full { RUNS } else { 1 };
    println!(
        "enrichment cost per event in ns, median of {runs} runs (min-max) ({})",
        if full { "measured" } else { "smoke run, not a measurement" }
    );
    println!("{:<44} {:>19} {:>19} {:>19}", "case", "geo+device+bot on", "off", "on - off");
    let browser = [event(None)];
    for batch in [1usize, 100] {
        case(&format!("one device, {batch} events per request"), &on, &off, rounds, &browser, batch);
    }
    let hinted = Client { hints: Some(ClientHints::from_headers(&chrome_hints())), ..client };
    let hinted = Request::from_client(&state, "batch", hinted);
    let (on_hints, off_hints) = (Setup { request: &hinted, ..on }, Setup { request: &hinted, ..off });
    case("one device with client hints, 1 per request", &on_hints, &off_hints, rounds, &browser, 1);
    let mixed: Vec<Map<String, Value>> =
        (0..12).map(|i| event(Some((["203.0.113.9", "198.51.100.7", "2001:db8::1"][i % 3], AGENTS[i % 4])))).collect();
    for batch in [1usize, 100] {
        case(&format!("4 agents x 3 addresses, {batch} per request"), &on, &off, rounds, &mixed, batch);
    }
    let _ = std::fs::remove_dir_all(&files.dir);
}
