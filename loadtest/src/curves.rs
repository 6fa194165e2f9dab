//! Cost curves: how the gateway's CPU per event and its p99 grow with the
//! work. One dimension moves at a time from a base point (batches of 50,
//! events of about 200 bytes, 10 event types, no gzip, the client pool's
//! connections): batch size, event size, gzip, distinct event types, and
//! open connections. Every point runs `--runs` times at a fixed offered
//! load; the report gives the median and the spread (min–max) of each
//! figure, and the gateway's idle CPU so the fixed background cost can be
//! told apart from the cost of work.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::args::CurvesArgs;
use crate::bench_catalog;
use crate::generator::{self, Auth, RunConfig, RunResult};
use crate::memory;
use crate::suite::summary;
use crate::workload::Workload;

mod reading;
use reading::{Median, Spread, reading};

/// One point of a curve.
#[derive(Debug, Clone)]
struct Point {
    curve: &'static str,
    label: String,
    batch: usize,
    bytes: usize,
    types: usize,
    gzip: bool,
    /// A fixed number of connections, or the HTTP client's pool.
    connections: Option<usize>,
    events_per_sec: f64,
}

/// The points of every curve, from the base point.
fn points(events_per_sec: f64) -> Vec<Point> {
    let base = Point {
        curve: "",
        label: String::new(),
        batch: 50,
        bytes: 200,
        types: 10,
        gzip: false,
        connections: None,
        events_per_sec,
    };
    let mut out = Vec::new();
    for batch in [1, 10, 50, 200, 500] {
        out.push(Point { curve: "batch size", label: format!("{batch} per request"), batch, ..base.clone() });
    }
    for bytes in [200, 2_000, 16_000] {
        // Batches of 10 keep 16 KB events under the body limit; the offered
        // bytes per second are capped at 16 MB/s so Kafka is not the bound.
        let rate = events_per_sec.min(16e6 / bytes as f64);
        out.push(Point {
            curve: "event size",
            label: format!("{bytes} B"),
            batch: 10,
            bytes,
            events_per_sec: rate,
            ..base.clone()
        });
    }
    for gzip in [false, true] {
        let label = if gzip { "gzip" } else { "plain" }.to_owned();
        out.push(Point { curve: "compression", label, gzip, ..base.clone() });
    }
    for types in [1, 200] {
        out.push(Point { curve: "event types", label: format!("{types} in the mix"), types, ..base.clone() });
    }
    // The base batch of 50 (160 requests/s at 8000 events/s): each of ten
    // HTTP/1.1 connections carries one request at a time, so ten carry at
    // most 10 / (acknowledgement latency) requests/s, about 400 at 25 ms;
    // more than that would measure the client's queue, not the gateway.
    for connections in [10, 10_000] {
        out.push(Point {
            curve: "connections",
            label: format!("{connections} open"),
            connections: Some(connections),
            ..base.clone()
        });
    }
    out
}

/// Figures of one run.
struct Sample {
    cpu_us_per_event: f64,
    p99_ms: f64,
    failed: u64,
}

/// Median and spread of `values`.
fn stats(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 };
    (median, values[0], values[n - 1])
}

/// `loadtest curves`: runs every point and prints the report section.
pub async fn curves(args: &CurvesArgs) -> anyhow::Result<()> {
    let gateway = &args.gateway;
    // Checked here rather than by clap so a missing pid keeps exit code 1.
    let pid = args.gateway_pid.unwrap_or(0);
    anyhow::ensure!(pid != 0, "--gateway-pid is required: the curves are CPU per event");
    let (seconds, runs, events_per_sec) = (args.seconds, args.runs, args.events_per_sec);
    let only = args.only.as_deref().unwrap_or("");
    let auth = Auth::WriteKey(args.key.clone());
    let loaded = eventgw_schemas::loader::load_catalog(&args.catalog)?;
    let mut examples: Vec<(String, serde_json::Value)> = loaded
        .events()
        .iter()
        .filter(|e| e.name.starts_with(bench_catalog::EVENT_PREFIX))
        .filter_map(|e| Some((e.name.to_string(), e.latest().examples.first()?.clone())))
        .collect();
    examples.sort_by(|a, b| a.0.cmp(&b.0));
    anyhow::ensure!(examples.len() >= 200, "the catalog needs the 200-event bench domain (`loadtest bench-catalog`)");
    let client = crate::client()?;

    let idle_before = memory::cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    let idle_ms_per_sec = match (idle_before, memory::cpu_seconds(pid)) {
        (Some(a), Some(b)) => format!("{:.1} ms", (b - a) * 1000.0 / seconds),
        _ => "n/a".to_owned(),
    };

    let mut report = String::new();
    let _ = writeln!(
        report,
        "## Cost curves\n\nWritten by `scripts/bench curves` (`loadtest curves`). One dimension moves at a time from the \
         base point (batches of 50, events of about 200 bytes, 10 event types, no gzip, the HTTP client's connection \
         pool), at {events_per_sec:.0} events/s offered (event size: at most 16 MB/s), {seconds} s per run, {runs} runs \
         per point. Gateway CPU is user + system time of the gateway process (all its threads, librdkafka's included) \
         over the run, divided by the events answered 200; p99 is the acknowledgement latency from the intended send \
         time. Each figure is the median of the runs, with the spread (min–max). The idle gateway uses \
         {idle_ms_per_sec} of CPU per second, which is in every figure below.\n\n\
         | curve | point | events/s | requests/s | CPU µs per event | CPU µs per request | p99 ms | failed |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    let mut medians: Vec<Median> = Vec::new();
    for point in points(events_per_sec).into_iter().filter(|p| only.is_empty() || p.curve == only) {
        let chosen: Vec<_> = examples.iter().take(point.types).map(|(_, e)| e.clone()).collect();
        let workload =
            Arc::new(Workload::from_examples(chosen, point.batch, point.gzip, 10_000)?.padded_to(point.bytes));
        let rate = point.events_per_sec / point.batch as f64;
        let config = RunConfig {
            url: format!("{gateway}/v1/batch"),
            rate,
            duration: Duration::from_secs_f64(seconds),
            auth: auth.clone(),
            timeout: Duration::from_secs(10),
        };
        // A short warm-up: connections, caches, producer batches.
        let warm = RunConfig { duration: Duration::from_secs_f64(1.0), ..config.clone() };
        let _ = one_run(&client, &warm, point.connections, Arc::clone(&workload)).await?;
        let mut samples = Vec::with_capacity(runs);
        for _ in 0..runs {
            let before = memory::cpu_seconds(pid);
            let result = one_run(&client, &config, point.connections, Arc::clone(&workload)).await?;
            let after = memory::cpu_seconds(pid);
            let events = (result.ok * result.batch as u64).max(1) as f64;
            let cpu = match (before, after) {
                (Some(a), Some(b)) => (b - a) * 1e6 / events,
                _ => f64::NAN,
            };
            eprintln!("  {} / {}: {} cpu={cpu:.2}µs/event", point.curve, point.label, summary("run", &result));
            samples.push(Sample { cpu_us_per_event: cpu, p99_ms: result.ms(99.0), failed: result.failures() });
        }
        let mut cpu: Vec<f64> = samples.iter().map(|s| s.cpu_us_per_event).collect();
        let mut p99: Vec<f64> = samples.iter().map(|s| s.p99_ms).collect();
        let failed: u64 = samples.iter().map(|s| s.failed).sum();
        let (cpu_median, cpu_min, cpu_max) = stats(&mut cpu);
        let (p99_median, p99_min, p99_max) = stats(&mut p99);
        let cpu = Spread { median: cpu_median, min: cpu_min, max: cpu_max };
        medians.push(Median { curve: point.curve, batch: point.batch, bytes: point.bytes, cpu });
        let _ = writeln!(
            report,
            "| {} | {} | {:.0} | {:.0} | {cpu_median:.2} ({cpu_min:.2}–{cpu_max:.2}) | {:.1} | {p99_median:.2} ({p99_min:.2}–{p99_max:.2}) | {failed} |",
            point.curve,
            point.label,
            point.events_per_sec,
            rate,
            cpu_median * point.batch as f64,
        );
    }
    if let Some(reading) = reading(&medians) {
        let _ = writeln!(report, "\n{reading}");
    }
    println!("{report}");
    Ok(())
}

async fn one_run(
    client: &reqwest::Client,
    config: &RunConfig,
    connections: Option<usize>,
    workload: Arc<Workload>,
) -> anyhow::Result<RunResult> {
    match connections {
        Some(n) => crate::connections::run(config, n, workload).await,
        None => Ok(generator::run(client, config, workload, Instant::now()).await),
    }
}
