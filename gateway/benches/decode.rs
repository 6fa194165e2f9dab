//! The cost of decoding request bodies: the strict parser of `wire::json`
//! (limits scan, duplicate keys, finite numbers) on a batch of 50 typical
//! events (a page view, a click, an order, with the context an analytics
//! SDK sends), printed in nanoseconds per event, beside serde_json's own
//! `Value` parse of the same bytes (the cost of the tree alone); then the
//! same for a batch of the catalog's own examples (the events `scripts/bench`
//! sends), and their schema check (jsonschema on the parsed tree).
//! `cargo bench -p eventgw --bench decode` measures; under `cargo test` (no
//! `--bench` argument) it runs a few iterations only, to prove it works.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use gateway::wire::{JsonLimits, parse};
use serde_json::{Value, json};

/// A decoder under test: true when the body parsed.
type Decoder = dyn Fn(&[u8]) -> bool + 'static;

fn event(i: usize) -> Value {
    let context = json!({
        "library": {"name": "analytics.js", "version": "5.2.0"},
        "page": {"path": "/pricing", "referrer": "https://www.example.com/", "search": "?plan=pro",
                 "title": "Pricing", "url": "https://shop.example.com/pricing?plan=pro"},
        "userAgent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0 Safari/537.36",
        "locale": "en-GB", "timezone": "Europe/London",
        "campaign": {"name": "winter", "source": "newsletter", "medium": "email"}
    });
    let common = json!({"messageId": format!("msg-{i:08}"), "anonymousId": format!("anon-{:05}", i % 9973),
        "userId": format!("user-{:05}", i % 10_000), "timestamp": "2026-12-03T12:00:00.000Z",
        "sentAt": "2026-12-03T12:00:00.120Z", "context": context});
    let mut event = common;
    let extra = match i % 3 {
        0 => json!({"type": "page", "name": "Pricing", "properties": {"path": "/pricing", "title": "Pricing"}}),
        1 => json!({"type": "track", "event": "Button Clicked", "properties": {"button": "signup", "position": 3}}),
        _ => json!({"type": "track", "event": "Order Completed", "properties": {"orderId": format!("o-{i}"),
            "total": 129.5, "currency": "EUR", "products": [{"sku": "A-1", "price": 99.5, "quantity": 1},
            {"sku": "B-2", "price": 30.0, "quantity": 1}]}}),
    };
    if let (Some(target), Value::Object(more)) = (event.as_object_mut(), extra) {
        target.extend(more);
    }
    event
}

/// Median, min and max nanoseconds per event of `work` over a batch of 50.
fn per_event(runs: usize, rounds: u32, mut work: impl FnMut()) -> (f64, f64, f64) {
    let mut per_event: Vec<f64> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..rounds {
                work();
            }
            started.elapsed().as_nanos() as f64 / f64::from(rounds) / 50.0
        })
        .collect();
    per_event.sort_by(f64::total_cmp);
    (per_event[per_event.len() / 2], per_event[0], per_event[per_event.len() - 1])
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (runs, rounds) = if full { (7, 2000) } else { (1, 3) };
    let limits = JsonLimits { max_depth: 32, max_string_bytes: 32 * 1024 };
    let catalog = eventgw_schemas::loader::load_catalog(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schemas"))
        .expect("the catalog");
    let examples: Vec<(Value, &eventgw_schemas::EventType)> =
        catalog.events().into_iter().filter_map(|e| e.latest().examples.first().map(|x| (x.clone(), e))).collect();
    let cycled: Vec<&(Value, &eventgw_schemas::EventType)> = examples.iter().cycle().take(50).collect();
    let bodies = [
        ("typical SDK events", serde_json::to_vec(&json!({"batch": (0..50).map(event).collect::<Vec<_>>()}))),
        (
            "the catalog's examples",
            serde_json::to_vec(&json!({"batch": cycled.iter().map(|(x, _)| x).collect::<Vec<_>>()})),
        ),
    ];
    for (what, body) in bodies {
        let body = body.expect("body");
        println!("batch of 50 {what}, {} bytes ({} per event)", body.len(), body.len() / 50);
        let strict = move |b: &[u8]| parse(b, limits).is_ok();
        let reference = |b: &[u8]| serde_json::from_slice::<Value>(b).is_ok();
        let decoders: [(&str, &Decoder); 2] = [
            ("  strict parse (wire::json::parse)", &strict),
            ("  serde_json::from_slice::<Value> (reference)", &reference),
        ];
        for (name, decode) in decoders {
            let (median, min, max) = per_event(runs, rounds, || assert!(decode(black_box(&body)), "{name}: parses"));
            println!("{name:<48} {median:>8.0} ns/event  (runs {min:.0}–{max:.0}, {runs} runs of {rounds} batches)");
        }
    }
    let (median, min, max) = per_event(runs, rounds, || {
        for (example, declared) in &cycled {
            assert!(declared.check(black_box(example), None).is_ok(), "{}: the example is valid", declared.name);
        }
    });
    let name = "  schema check of the catalog's examples";
    println!("{name:<48} {median:>8.0} ns/event  (runs {min:.0}–{max:.0}, {runs} runs of {rounds} batches)");
}
