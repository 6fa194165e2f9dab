//! Benchmarks, printed rather than asserted:
//!
//! 1. the cost of one `track` call (encode, stamp, queue), as percentiles
//!    over many calls, while the worker delivers to a local gateway in the
//!    background (target: p99 under 5 µs);
//! 2. the events per second one client delivers to a local gateway (real
//!    gateway in-process, real Kafka), from the first call to the end of
//!    `flush`, with one and with four requests in flight.
//!
//! `cargo bench -p eventgw-sdk` runs the full measurement; without `--bench`
//! (as `cargo test --all-targets` runs it) a tiny version checks it works.

#[allow(dead_code)]
#[path = "../tests/common/gateway.rs"]
mod gateway;
#[path = "../../gateway/tests/common/servers.rs"]
mod servers;

use std::time::{Duration, Instant};

use eventgw_sdk::{CallKind, Client, Credentials, Identity, OverflowPolicy, TypedEvent};
use serde_json::json;

/// The topic benchmark events go to, so they never flood the catalog's
/// topics that tests read.
const BENCH_TOPIC: &str = "eventgw-sdk.bench";

/// A typed event shaped like the generated ones (`Order Completed`), but
/// outside the catalog: the gateway passes it to [`BENCH_TOPIC`].
#[derive(serde::Serialize)]
struct BenchOrder {
    order_id: String,
    total: f64,
    currency: &'static str,
}

impl TypedEvent for BenchOrder {
    const NAME: &'static str = "SDK Bench Order";
    const KIND: CallKind = CallKind::Track;
    const SCHEMA: &'static str = "bench/sdk_bench_order";
    const VERSION: u32 = 1;
    const TOPIC: &'static str = BENCH_TOPIC;
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    if servers::without_kafka() {
        return;
    }
    let (calls, events): (usize, usize) = if full { (200_000, 200_000) } else { (2_000, 1_000) };
    let gateway = gateway::RunningGateway::start_with(vec![
        ("EVENTGW__SOURCES__0__UNKNOWN_EVENTS".into(), "pass".into()),
        ("EVENTGW__KAFKA__UNCLASSIFIED_TOPIC".into(), BENCH_TOPIC.into()),
    ]);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        // The call alone: the first request never gets an answer, so the
        // worker waits and calls only queue. Rounds of at most 10 000 calls
        // per client keep the queue's memory recycled; one ever-growing
        // queue would measure the kernel's page faults instead.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let silent_url = format!("http://{}", silent.local_addr().expect("addr"));
        let mut parked = Samples::default();
        for _ in 0..calls.div_ceil(10_000) {
            track_cost(&silent_url, calls.min(10_000), Duration::ZERO, &mut parked).await;
        }
        parked.print("worker parked");
        // The call while the worker, the gateway and Kafka share the 2 cores.
        let mut busy = Samples::default();
        track_cost(&gateway.url, calls, Duration::from_secs(300), &mut busy).await;
        busy.print("while delivering to the local gateway");
        for in_flight in [1, 4] {
            throughput(&gateway.url, events, in_flight).await;
        }
    });
}

/// Nanoseconds per call, typed and untyped.
#[derive(Default)]
struct Samples {
    typed: Vec<u64>,
    untyped: Vec<u64>,
}

impl Samples {
    fn print(&mut self, label: &str) {
        print_percentiles(&format!("record(typed event), {label}"), &mut self.typed);
        print_percentiles(&format!("track(json! properties), {label}"), &mut self.untyped);
    }
}

async fn track_cost(url: &str, calls: usize, deadline: Duration, samples: &mut Samples) {
    let client = Client::builder(url, Credentials::write_key("demo-write-key"))
        .linger(Duration::from_millis(5))
        .request_timeout(Duration::from_secs(3600))
        .queue_max_events(calls * 2 + 1000)
        .queue_max_bytes(1 << 30)
        .build()
        .expect("client");
    let user = Identity::user("bench-user");
    let typed = BenchOrder { order_id: "order-1".into(), total: 42.5, currency: "EUR" };
    let untyped =
        json!({"href": "https://shop.example/signup", "text": "Sign up", "page_url": "https://shop.example/"});
    // Warm up allocator, caches and the HTTP connection.
    for _ in 0..1000 {
        client.record(&user, &typed).await.expect("queued");
    }
    for _ in 0..calls {
        let start = Instant::now();
        client.record(&user, &typed).await.expect("queued");
        samples.typed.push(start.elapsed().as_nanos() as u64);
        let start = Instant::now();
        client.track(&user, "SDK Bench Click", &untyped).await.expect("queued");
        samples.untyped.push(start.elapsed().as_nanos() as u64);
    }
    let report = client.shutdown(deadline).await;
    if deadline > Duration::ZERO {
        println!("  delivered while measuring: {report:?}");
    }
}

fn print_percentiles(name: &str, samples: &mut [u64]) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize] as f64 / 1000.0;
    println!(
        "{name}: {} calls, p50 {:.2} µs, p90 {:.2} µs, p99 {:.2} µs, p99.9 {:.2} µs, max {:.1} µs",
        samples.len(),
        at(0.50),
        at(0.90),
        at(0.99),
        at(0.999),
        at(1.0)
    );
}

async fn throughput(url: &str, events: usize, in_flight: usize) {
    let client = Client::builder(url, Credentials::write_key("demo-write-key"))
        .max_in_flight(in_flight)
        .linger(Duration::from_millis(5))
        .overflow(OverflowPolicy::Wait(Duration::from_secs(60)))
        .build()
        .expect("client");
    let user = Identity::user("bench-user");
    let start = Instant::now();
    for i in 0..events {
        let event = BenchOrder { order_id: format!("order-{}", i % 1000), total: 1.0, currency: "EUR" };
        client.record(&user, &event).await.expect("queued");
    }
    client.flush().await;
    let elapsed = start.elapsed();
    let metrics = client.metrics();
    let report = client.shutdown(Duration::from_secs(10)).await;
    println!(
        "delivery to a local gateway, {in_flight} in flight: {} events in {:.2} s = {:.0} events/s ({} requests, {} event retries; {report:?})",
        events,
        elapsed.as_secs_f64(),
        report.sent as f64 / elapsed.as_secs_f64(),
        metrics.requests,
        metrics.retried,
    );
    assert_eq!(report.sent as usize, events, "every event delivered");
}
