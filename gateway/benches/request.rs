//! The gateway's own work per single-event request, in process: the real
//! app (every route, the `edge` middleware, the dev configuration without
//! quotas) driven through actix's test service, over a sink that answers
//! at once. What is left out is what a do-nothing HTTP server pays as well
//! (reading and parsing the request off a socket, writing the answer) and
//! librdkafka's threads: `BENCHMARKS.md`'s floor. So this figure is the
//! "our own work" of issue 33, and `perf record` of this bench is its
//! profile without Kafka or the load generator in the samples.
//!
//! Each request is a `POST /v1/batch` with one of the catalog's examples
//! (a fresh `messageId`, one of 1,000 users), as `loadtest` sends them;
//! then the same with batches of 50 (per event), then those batches again
//! with five live-view viewers of every event (`/live/stream`'s body
//! drained on the same thread, so their work is counted: issue 30's cost
//! of watching, without the sockets). `cargo bench -p eventgw --bench
//! request` measures (7 runs of 20,000 single-event requests and of 800
//! batches; the median run and the spread); under `cargo test` it runs one
//! short run of each only, to prove it still works.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use actix_web::{App, test, web};
use futures::future::{BoxFuture, FutureExt};
use gateway::AppState;
use gateway::config::Config;
use gateway::sink::{Delivered, OutRecord, Sink, SinkError};
use serde_json::{Value, json};

/// The gateway's own allocator (`main.rs`), so the figures are the ones it
/// pays, with a count of the allocations made (one relaxed atomic add
/// each, the same in every row): what "no per-request allocation that can
/// be avoided" (issue 33) is measured by.
#[global_allocator]
static ALLOCATOR: Counted = Counted(mimalloc::MiMalloc);

/// Allocations made so far, reallocations included.
static ALLOCATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

struct Counted(mimalloc::MiMalloc);

// SAFETY: every call is forwarded to mimalloc unchanged; the count is a side note.
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

fn allocations() -> u64 {
    ALLOCATIONS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Nanoseconds this thread has spent on a CPU (`/proc/thread-self/schedstat`):
/// the figure a busy machine's preemptions do not inflate, as wall time
/// would.
fn thread_cpu_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    text.split_whitespace().next().and_then(|n| n.parse().ok()).expect("schedstat's first field")
}

/// A sink that acknowledges every record at once and keeps nothing.
struct NullSink;

impl Sink for NullSink {
    fn send_all(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        let answers =
            records.iter().enumerate().map(|(i, _)| Ok(Delivered { partition: 0, offset: i as i64 })).collect();
        drop(black_box(records));
        async move { answers }.boxed()
    }

    fn check_ready(&self) -> BoxFuture<'static, Result<(), String>> {
        async { Ok(()) }.boxed()
    }

    fn queue_depth(&self) -> i64 {
        0
    }

    fn flush(&self, _timeout: std::time::Duration) -> Result<(), String> {
        Ok(())
    }
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let (runs, per_run) = if measuring { (7, 20_000) } else { (1, 200) };
    let per_batch_run = if measuring { 800 } else { 10 };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut config = Config::load_with_env(&root.join("config/dev.toml"), std::iter::empty()).expect("dev config");
    // As the benchmarks run it: the dev profile without quotas.
    config.quotas.source = None;
    config.quotas.auth_failures = None;
    // In process, requests come faster than at the gateway's real rate: a
    // ring that holds one pace of them, so the viewers see every event.
    config.live.buffer_events = 32_768;
    let catalog = eventgw_schemas::loader::load_catalog(&config.catalog.dir).expect("catalog");
    let examples: Vec<Value> = catalog.events().iter().filter_map(|e| e.latest().examples.first().cloned()).collect();
    let event = |n: usize| {
        let mut event = examples[n % examples.len()].clone();
        event["messageId"] = json!(format!("bench-{n}-{}", uuid::Uuid::new_v4().simple()));
        let user = json!(format!("user-{}", n % 1000));
        if event.get("userId").is_some() {
            event["userId"] = user;
        } else {
            event["anonymousId"] = user;
        }
        event
    };
    let singles: Vec<Vec<u8>> = (0..4096).map(|n| json!({ "batch": [event(n)] }).to_string().into_bytes()).collect();
    let batches: Vec<Vec<u8>> = (0..256)
        .map(|b| {
            let events: Vec<Value> = (0..50).map(|i| event(b * 50 + i)).collect();
            json!({ "batch": events }).to_string().into_bytes()
        })
        .collect();
    let state = AppState::new(config, Arc::new(NullSink)).expect("state");
    let site = eventgw_catalog::site::Site::for_catalog(&state.catalog, &state.config.catalog.dir);
    let live = state.config.live.enabled;
    let data = web::Data::new(state);
    actix_web::rt::System::new().block_on(async move {
        let app = test::init_service(
            App::new()
                .app_data(data.clone())
                .wrap_fn(gateway::server::edge)
                .configure(|app| gateway::server::routes(app, site, live)),
        )
        .await;
        for (what, bodies, requests, events, viewers) in [
            ("single-event request", &singles, per_run, 1, 0),
            ("batched event (batches of 50)", &batches, per_batch_run, 50, 0),
            ("batched event, five live viewers", &batches, per_batch_run, 50, 5),
        ] {
            // `REQUEST_BENCH=live` (or a part of another name) runs only those, for `perf record`.
            if std::env::var("REQUEST_BENCH").is_ok_and(|only| !what.contains(&only)) {
                continue;
            }
            let skipped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let watching: Vec<_> = (0..viewers)
                .map(|_| {
                    let body = gateway::live::sse::stream(
                        data.live.watch(None),
                        gateway::live::Filter::default(),
                        std::time::Duration::from_secs(15),
                    );
                    let skipped = Arc::clone(&skipped);
                    actix_web::rt::spawn(async move {
                        use futures::StreamExt;
                        let mut body = std::pin::pin!(body);
                        while let Some(Ok(chunk)) = body.next().await {
                            // Counts what was skipped (a look at the chunk's start, not a scan of every frame).
                            if let Some(rest) = black_box(&chunk).strip_prefix(b"event: skipped\ndata: {\"skipped\":") {
                                let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                                let n: usize =
                                    std::str::from_utf8(&rest[..digits]).ok().and_then(|n| n.parse().ok()).unwrap_or(0);
                                skipped.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    })
                })
                .collect();
            let mut figures = Vec::new();
            for run in 0..runs {
                let (started, cpu, allocated) = (Instant::now(), thread_cpu_ns(), allocations());
                for i in 0..requests {
                    let body = bodies[(run * requests + i) % bodies.len()].clone();
                    let req = test::TestRequest::post()
                        .uri("/v1/batch")
                        .insert_header(("authorization", "Basic ZGVtby13cml0ZS1rZXk6"))
                        .insert_header(("content-type", "application/json"))
                        .insert_header(("user-agent", "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0.0.0 Safari/537.36"))
                        .peer_addr("203.0.113.7:50000".parse().expect("addr"))
                        .set_payload(body)
                        .to_request();
                    let answer = test::call_service(&app, req).await;
                    assert!(answer.status().is_success(), "{}", answer.status());
                    black_box(test::read_body(answer).await);
                    // Lets the viewers' streams run between requests, as
                    // the gateway's event loop would.
                    actix_web::rt::task::yield_now().await;
                }
                let per = |ns: f64| ns / (requests * events) as f64 / 1000.0;
                let made = (allocations() - allocated) as f64 / (requests * events) as f64;
                figures.push((per((thread_cpu_ns() - cpu) as f64), per(started.elapsed().as_nanos() as f64), made));
            }
            let median = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                (v[v.len() / 2], v[0], v[v.len() - 1])
            };
            let (cpu, cpu_lo, cpu_hi) = median(figures.iter().map(|f| f.0).collect());
            let (wall, wall_lo, wall_hi) = median(figures.iter().map(|f| f.1).collect());
            let (made, ..) = median(figures.iter().map(|f| f.2).collect());
            println!(
                "{what}, in process (our own work): CPU {cpu:.2} µs ({cpu_lo:.2}-{cpu_hi:.2}), \
                 wall {wall:.2} µs ({wall_lo:.2}-{wall_hi:.2}), {made:.1} allocations; \
                 medians of {runs} runs of {requests} requests of {events} events"
            );
            data.live.close();
            for viewer in watching {
                viewer.await.expect("a viewer's stream ends when the view closes");
            }
            if viewers > 0 {
                let sent = viewers * runs * requests * events;
                let skipped = skipped.load(std::sync::atomic::Ordering::Relaxed);
                println!("  the viewers received {:.1}% of the events", 100.0 - 100.0 * skipped as f64 / sent as f64);
            }
        }
    });
}
