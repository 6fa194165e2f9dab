//! Cost curves: how the gateway's CPU per event and its p99 grow with the
//! work. One dimension moves at a time from a base point (batches of 50,
//! events of about 200 bytes, 10 event types, no gzip, the client pool's
//! connections): batch size, event size, gzip, distinct event types, and
//! open connections. Every point runs `--runs` times at a fixed offered
//! load; the report gives the median and the spread (min–max) of each
//! figure, and the gateway's idle CPU so the fixed background cost can be
//! told apart from the cost of work.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::args::Args;
use crate::bench_catalog;
use crate::generator::{self, Auth, RunConfig, RunResult};
use crate::memory;
use crate::suite::summary;
use crate::workload::Workload;

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
    for connections in [10, 10_000] {
        out.push(Point {
            curve: "connections",
            label: format!("{connections} open"),
            batch: 10,
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
pub async fn curves(args: &Args) -> anyhow::Result<()> {
    let gateway = args.required("gateway")?;
    let catalog: PathBuf = args.required("catalog")?.into();
    let pid: u32 = args.get("gateway-pid", 0)?;
    anyhow::ensure!(pid != 0, "--gateway-pid is required: the curves are CPU per event");
    let seconds: f64 = args.get("seconds", 4.0)?;
    let runs: usize = args.get("runs", 3)?;
    let events_per_sec: f64 = args.get("events-per-sec", 8000.0)?;
    let only: String = args.get("only", String::new())?;
    let auth = Auth::WriteKey(args.get("key", "bench-write-key".to_owned())?);
    let loaded = eventgw_schemas::loader::load_catalog(&catalog)?;
    let mut examples: Vec<(String, serde_json::Value)> = loaded
        .events()
        .iter()
        .filter(|e| e.name.starts_with(bench_catalog::EVENT_PREFIX))
        .filter_map(|e| Some((e.name.clone(), e.latest().examples.first()?.clone())))
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
        medians.push(Median { curve: point.curve, batch: point.batch, bytes: point.bytes, cpu: cpu_median });
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

/// One point's median CPU per event, for the reading.
struct Median {
    curve: &'static str,
    batch: usize,
    bytes: usize,
    cpu: f64,
}

/// The paragraph reading the curves, worked out from their medians: the
/// batch-size curve fitted as CPU per request = fixed + per event × batch
/// (least squares), and each other curve as the change from its first point.
fn reading(medians: &[Median]) -> Option<String> {
    let batch: Vec<(f64, f64)> =
        medians.iter().filter(|m| m.curve == "batch size").map(|m| (m.batch as f64, m.cpu * m.batch as f64)).collect();
    if batch.len() < 3 {
        return None;
    }
    let n = batch.len() as f64;
    let (sx, sy) = batch.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = batch.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = batch.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let per_event = sxy / sxx;
    let fixed = my - per_event * mx;
    let change = |curve: &str| -> Option<f64> {
        let points: Vec<f64> = medians.iter().filter(|m| m.curve == curve).map(|m| m.cpu).collect();
        Some((points.last()? - points.first()?) * 100.0 / points.first()?)
    };
    let size: Vec<(f64, f64)> =
        medians.iter().filter(|m| m.curve == "event size").map(|m| (m.bytes as f64, m.cpu)).collect();
    let per_kb = match (size.first(), size.get(1)) {
        (Some(a), Some(b)) if b.0 > a.0 => format!("{:.1} µs per extra KB", (b.1 - a.1) * 1000.0 / (b.0 - a.0)),
        _ => "n/a".to_owned(),
    };
    let pct = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:+.0}%"));
    Some(format!(
        "**Reading** (worked out from the medians above by `loadtest curves`). CPU per request grows linearly with \
         the batch: a least-squares line through the batch-size curve gives **{fixed:.0} µs fixed per request** \
         (HTTP, authentication, quotas, the answer, one completion) plus **{per_event:.1} µs per event** (decode, \
         validation, enrichment, the record, librdkafka's share). The fixed part equals {knee:.0} events' work, so \
         batches below about {knee:.0} events pay mostly per request and batches above about {knee10:.0} are within \
         10% of the per-event floor: that is the knee. Event size is linear too: {per_kb} (JSON decode, copy, \
         compression). gzip changes the cost per event by {gzip} (inflating is cheap next to the rest); 200 event \
         types in the mix instead of 1 by {types} (more schemas and routes in the caches); 10,000 open connections \
         instead of 10 by {conns} (epoll and per-connection buffers). At this offered rate the gateway also pays for \
         waking its threads per request, so every figure here is above the cost at saturation (the Targets table).",
        knee = fixed / per_event.max(f64::EPSILON),
        knee10 = 10.0 * fixed / per_event.max(f64::EPSILON),
        gzip = pct(change("compression")),
        types = pct(change("event types")),
        conns = pct(change("connections")),
    ))
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

#[cfg(test)]
mod reading_tests {
    use super::{Median, reading};

    #[test]
    fn the_batch_curve_is_read_as_fixed_plus_per_event_cost() {
        // 100 µs per request plus 2 µs per event, exactly.
        let mut medians: Vec<Median> = [1usize, 10, 50, 200]
            .iter()
            .map(|&b| Median { curve: "batch size", batch: b, bytes: 200, cpu: (100.0 + 2.0 * b as f64) / b as f64 })
            .collect();
        medians.push(Median { curve: "event size", batch: 10, bytes: 200, cpu: 10.0 });
        medians.push(Median { curve: "event size", batch: 10, bytes: 2200, cpu: 14.0 });
        medians.push(Median { curve: "connections", batch: 10, bytes: 200, cpu: 10.0 });
        medians.push(Median { curve: "connections", batch: 10, bytes: 200, cpu: 12.5 });
        let text = reading(&medians).expect("a reading");
        assert!(text.contains("**100 µs fixed per request**"), "{text}");
        assert!(text.contains("**2.0 µs per event**"), "{text}");
        assert!(text.contains("about 50 events pay mostly per request"), "{text}");
        assert!(text.contains("2.0 µs per extra KB"), "{text}");
        assert!(text.contains("instead of 10 by +25%"), "{text}");
        assert!(text.contains("gzip changes the cost per event by n/a"), "{text}");
    }

    #[test]
    fn no_reading_without_the_batch_curve() {
        assert!(reading(&[Median { curve: "event size", batch: 10, bytes: 200, cpu: 10.0 }]).is_none());
    }
}
