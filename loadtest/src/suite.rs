//! The whole benchmark: throughput searches against the gateway and both
//! ceilings, latency at fixed fractions of the maximum, end-to-end latency,
//! variants (gzip, JWT), memory under 10,000 connections and with Kafka
//! stalled, then BENCHMARKS.md with absolute figures and ratios.

use std::fmt::Write as _;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::producer::FutureProducer;

use crate::args::SuiteArgs;
use crate::generator::{self, Auth, RunConfig, RunResult};
use crate::workload::Workload;
use crate::{e2e, kafka_ceiling, memory};

/// One line of figures for a run.
pub fn summary(label: &str, r: &RunResult) -> String {
    format!(
        "{label}: {:.0} req/s ({:.0} events/s) sent={} ok={} failed={:?} p50={:.2}ms p99={:.2}ms p99.9={:.2}ms max={:.2}ms",
        r.ok_per_sec(),
        r.ok_per_sec() * r.batch as f64,
        r.sent,
        r.ok,
        r.failed,
        r.ms(50.0),
        r.ms(99.0),
        r.ms(99.9),
        r.latency_us.max() as f64 / 1000.0
    )
}

struct Suite {
    client: reqwest::Client,
    seconds: f64,
    p99_bound_ms: f64,
    catalog: PathBuf,
    report: String,
}

impl Suite {
    /// The same settings with an empty report, for warm-up runs.
    fn clone_settings(&self) -> Self {
        Self {
            client: self.client.clone(),
            seconds: self.seconds,
            p99_bound_ms: self.p99_bound_ms,
            catalog: self.catalog.clone(),
            report: String::new(),
        }
    }

    fn workload(&self, batch: usize, gzip: bool) -> anyhow::Result<Arc<Workload>> {
        Ok(Arc::new(Workload::from_catalog(&self.catalog, batch, gzip, 10_000)?))
    }

    /// One run of this suite's length against `url`'s batch endpoint.
    fn run_config(&self, url: &str, rate: f64, auth: &Auth) -> RunConfig {
        RunConfig {
            url: format!("{url}/v1/batch"),
            rate,
            duration: Duration::from_secs_f64(self.seconds),
            auth: auth.clone(),
            timeout: Duration::from_secs(10),
        }
    }

    async fn http(&self, url: &str, rate: f64, workload: Arc<Workload>, auth: &Auth) -> RunResult {
        let config = self.run_config(url, rate, auth);
        let result = generator::run(&self.client, &config, workload, Instant::now()).await;
        eprintln!("  {}", summary(&format!("{url} @ {rate:.0} rps"), &result));
        result
    }

    /// The highest rate at which nothing fails, the achieved rate keeps up
    /// and p99 stays under the bound: doubling, then bisection.
    async fn search<F, Fut>(&self, name: &str, start: f64, run: F) -> (f64, RunResult)
    where
        F: Fn(f64) -> Fut,
        Fut: Future<Output = RunResult>,
    {
        eprintln!("searching the maximum rate of {name}");
        let good = |rate: f64, r: &RunResult| {
            r.failures() == 0 && r.ok as f64 >= 0.97 * rate * self.seconds && r.ms(99.0) <= self.p99_bound_ms
        };
        let (mut low, mut high) = (0.0, start);
        let mut best: Option<RunResult> = None;
        loop {
            let r = run(high).await;
            if !good(high, &r) {
                break;
            }
            low = high;
            best = Some(r);
            high *= 2.0;
            if high > 1_000_000.0 {
                break;
            }
        }
        for _ in 0..3 {
            let mid = (low + high) / 2.0;
            let r = run(mid).await;
            if good(mid, &r) {
                low = mid;
                best = Some(r);
            } else {
                high = mid;
            }
        }
        let best = match best {
            Some(r) => r,
            None => run(start / 4.0).await,
        };
        (low, best)
    }

    fn row(&mut self, what: &str, value: String, ceiling: String, ratio: String, target: &str) {
        let _ = writeln!(self.report, "| {what} | {value} | {ceiling} | {ratio} | {target} |");
    }
}

/// Runs everything and writes the report to `--out`.
pub async fn suite(args: &SuiteArgs) -> anyhow::Result<()> {
    let (gateway, ceiling, brokers) = (args.gateway.as_str(), args.ceiling.as_str(), args.brokers.as_str());
    let mut s = Suite {
        client: crate::client()?,
        seconds: args.seconds,
        p99_bound_ms: args.p99_ms,
        catalog: args.catalog.clone(),
        report: String::new(),
    };
    let key = Auth::WriteKey(args.key.clone());
    let _ = writeln!(s.report, "| measure | gateway | ceiling | ratio | target |\n| --- | --- | --- | --- | --- |");

    // 0. Warm-up: a fresh broker is still loading its coordinators and the
    // producers have no idempotence PID yet; measuring through that would
    // stop a search at its first step.
    let single = s.workload(1, false)?;
    let warm = Suite { seconds: 3.0, ..s.clone_settings() };
    warm.http(gateway, 200.0, Arc::clone(&single), &key).await;
    warm.http(ceiling, 200.0, Arc::clone(&single), &key).await;

    // 1. Single-event requests against the HTTP ceiling.
    let (gw_max, gw_best) =
        s.search("gateway, single events", 500.0, |r| s.http(gateway, r, Arc::clone(&single), &key)).await;
    let (http_max, _) =
        s.search("HTTP ceiling, single events", 500.0, |r| s.http(ceiling, r, Arc::clone(&single), &key)).await;
    s.row(
        "single-event requests/s (max with p99 under the bound, no failures)",
        format!("{gw_max:.0}"),
        format!("{http_max:.0} (HTTP)"),
        format!("{:.2}", gw_max / http_max.max(1.0)),
        "≥ 0.5",
    );

    // 1b. The gateway's CPU per single-event request at that maximum, its
    // librdkafka threads' share, and a do-nothing HTTP server's at the same
    // rate: what HTTP and producing cost before any of the gateway's own work.
    let pids = Pids {
        gateway: args.gateway_pid.unwrap_or(0),
        broker: args.broker_pid.unwrap_or(0),
        ceiling: args.ceiling_pid.unwrap_or(0),
    };
    let single_cpu = cpu_during(&pids, || s.http(gateway, gw_max.max(1.0), Arc::clone(&single), &key)).await;
    let http_cpu = cpu_during(&pids, || s.http(ceiling, gw_max.max(1.0), Arc::clone(&single), &key)).await;
    s.row(
        &format!("gateway CPU per single-event request at {gw_max:.0} req/s (of which librdkafka's threads)"),
        format!(
            "{} ({})",
            per_event(single_cpu.gateway, &single_cpu),
            per_event(single_cpu.kafka_threads, &single_cpu)
        ),
        format!("{} (HTTP ceiling server, same rate)", per_event(http_cpu.ceiling, &http_cpu)),
        "–".into(),
        "≤ 25 µs",
    );
    let floors = floor_line(&single_cpu, &http_cpu);

    // 2. Batched events against the Kafka ceiling.
    kafka_ceiling::ensure_topic(brokers, "loadtest.ceiling", 6).await?;
    let producer = kafka_ceiling::producer(brokers)?;
    kafka_run(&warm, &producer, 20.0, s.workload(50, false)?).await;
    let batched = s.workload(50, false)?;
    let (gwb_max, _) =
        s.search("gateway, batches of 50", 20.0, |r| s.http(gateway, r, Arc::clone(&batched), &key)).await;
    let (kafka_max, _) =
        s.search("Kafka ceiling, batches of 50", 20.0, |r| kafka_run(&s, &producer, r, Arc::clone(&batched))).await;
    s.row(
        "batched events/s (batches of 50)",
        format!("{:.0}", gwb_max * 50.0),
        format!("{:.0} (Kafka)", kafka_max * 50.0),
        format!("{:.2}", gwb_max / kafka_max.max(1.0)),
        "≥ 0.5",
    );

    // 2b. Where the CPU goes at the batched maximum: the gap to the Kafka
    // ceiling is explained by CPU per event on a machine whose cores the
    // generator, the gateway and the broker share.
    let rate = gwb_max.max(1.0);
    let gw_cpu = cpu_during(&pids, || s.http(gateway, rate, Arc::clone(&batched), &key)).await;
    let kafka_cpu = cpu_during(&pids, || kafka_run(&s, &producer, rate, Arc::clone(&batched))).await;
    s.row(
        &format!(
            "CPU per event at {:.0} events/s: gateway process (of which librdkafka's threads) / broker",
            rate * 50.0
        ),
        format!(
            "{} ({}) / {}",
            per_event(gw_cpu.gateway, &gw_cpu),
            per_event(gw_cpu.kafka_threads, &gw_cpu),
            per_event(gw_cpu.broker, &gw_cpu)
        ),
        format!("– / {} (Kafka ceiling's broker)", per_event(kafka_cpu.broker, &kafka_cpu)),
        "–".into(),
        "gateway ≤ 6 µs",
    );

    // 3. Latency at half the gateway's batched maximum, against Kafka's at the same rate.
    let half = (gwb_max / 2.0).max(1.0);
    let gw_half = s.http(gateway, half, Arc::clone(&batched), &key).await;
    let kafka_half = kafka_run(&s, &producer, half, Arc::clone(&batched)).await;
    s.row(
        &format!("p99 acknowledgement latency at 50% of max ({half:.0} batches/s)"),
        format!("{:.2} ms", gw_half.ms(99.0)),
        format!("{:.2} ms (Kafka produce)", kafka_half.ms(99.0)),
        format!("{:.2}", gw_half.ms(99.0) / kafka_half.ms(99.0).max(0.001)),
        "≤ 2",
    );
    if !floors.is_empty() {
        let _ = write!(s.report, "\n{floors}");
    }

    // 4. Latency profile at 25/50/75% of the single-event maximum.
    let mut profile = String::from(
        "| load | rate (req/s) | p50 | p99 | p99.9 | max | failed |\n| --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for fraction in [0.25, 0.5, 0.75] {
        let rate = (gw_max * fraction).max(1.0);
        let r = s.http(gateway, rate, Arc::clone(&single), &key).await;
        let _ = writeln!(
            profile,
            "| {:.0}% | {rate:.0} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {} |",
            fraction * 100.0,
            r.ms(50.0),
            r.ms(99.0),
            r.ms(99.9),
            r.latency_us.max() as f64 / 1000.0,
            r.failures()
        );
    }

    // 5. Variants at half the single-event maximum: batches of 10, gzip, JWT.
    let mut variants = String::from(
        "| variant | rate (req/s) | events/s | p50 | p99 | failed |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    let mut variant_runs = vec![
        ("batches of 10", s.workload(10, false)?, key.clone()),
        ("batches of 50, gzip", s.workload(50, true)?, key.clone()),
    ];
    if let Some(token) = &args.bearer {
        variant_runs.push(("single events, JWT (HS256)", Arc::clone(&single), Auth::Bearer(token.clone())));
    }
    for (name, workload, auth) in variant_runs {
        let rate = (gw_max / 2.0 / workload.batch as f64).max(1.0);
        let r = s.http(gateway, rate, workload, &auth).await;
        let _ = writeln!(
            variants,
            "| {name} | {rate:.0} | {:.0} | {:.2} ms | {:.2} ms | {} |",
            r.ok_per_sec() * r.batch as f64,
            r.ms(50.0),
            r.ms(99.0),
            r.failures()
        );
    }

    // 6. End-to-end latency (HTTP in → consumer out) at half the single-event maximum.
    let topics: Vec<String> =
        eventgw_schemas::loader::load_catalog(&s.catalog)?.topics().values().map(|(t, _)| t.clone()).collect();
    let e2e_line =
        end_to_end(&s, gateway, brokers, &topics, (gw_max / 2.0).max(1.0), Arc::clone(&single), &key).await?;

    // 7. Memory.
    let memory_lines = memory_section(&s, gateway, args, Arc::clone(&single), &key).await?;

    write_report(&args.out, &s, &gw_best, &profile, &variants, &e2e_line, &memory_lines)?;
    eprintln!("wrote {}", args.out.display());
    Ok(())
}

/// The processes whose CPU the suite reads (0: not measured).
struct Pids {
    gateway: u32,
    broker: u32,
    ceiling: u32,
}

/// CPU seconds each process used while a run ran, and the events it got acknowledged.
struct CpuUse {
    gateway: Option<f64>,
    /// The gateway's librdkafka threads (included in `gateway`).
    kafka_threads: Option<f64>,
    broker: Option<f64>,
    ceiling: Option<f64>,
    events: f64,
}

/// CPU microseconds per acknowledged event, or "n/a".
fn per_event(cpu: Option<f64>, run: &CpuUse) -> String {
    cpu.map_or("n/a".to_owned(), |c| format!("{:.1} µs", c * 1e6 / run.events.max(1.0)))
}

async fn cpu_during<F, Fut>(pids: &Pids, run: F) -> CpuUse
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = RunResult>,
{
    let read = |pid: u32| if pid == 0 { None } else { memory::cpu_seconds(pid) };
    let threads = |pid: u32| if pid == 0 { None } else { memory::kafka_thread_seconds(pid) };
    let before = [read(pids.gateway), threads(pids.gateway), read(pids.broker), read(pids.ceiling)];
    let result = run().await;
    let after = [read(pids.gateway), threads(pids.gateway), read(pids.broker), read(pids.ceiling)];
    let delta = |i: usize| Some(after[i]? - before[i]?);
    CpuUse {
        gateway: delta(0),
        kafka_threads: delta(1),
        broker: delta(2),
        ceiling: delta(3),
        events: (result.ok * result.batch as u64) as f64,
    }
}

/// What a single-event request costs before any of the gateway's own work:
/// a do-nothing HTTP server's CPU per request at the same rate plus the
/// gateway's librdkafka threads' per record.
fn floor_line(gateway: &CpuUse, http: &CpuUse) -> String {
    let per = |cpu: Option<f64>, run: &CpuUse| cpu.map(|c| c * 1e6 / run.events.max(1.0));
    match (per(gateway.gateway, gateway), per(gateway.kafka_threads, gateway), per(http.ceiling, http)) {
        (Some(total), Some(kafka), Some(http)) => format!(
            "Floor of a single-event request on this machine: a do-nothing HTTP server spends {http:.1} µs per request \
             at the same rate and the gateway's librdkafka threads {kafka:.1} µs per record, {:.1} µs before any of the \
             gateway's own work; the gateway's HTTP workers spend {:.1} µs, {:.1} µs above the HTTP server.\n",
            http + kafka,
            total - kafka,
            total - kafka - http
        ),
        _ => String::new(),
    }
}

async fn kafka_run(s: &Suite, producer: &FutureProducer, rate: f64, workload: Arc<Workload>) -> RunResult {
    let r = kafka_ceiling::run(producer, "loadtest.ceiling", rate, Duration::from_secs_f64(s.seconds), workload).await;
    eprintln!("  {}", summary(&format!("Kafka ceiling @ {rate:.0}/s"), &r));
    r
}

#[allow(clippy::too_many_arguments)]
async fn end_to_end(
    s: &Suite,
    gateway: &str,
    brokers: &str,
    topics: &[String],
    rate: f64,
    workload: Arc<Workload>,
    auth: &Auth,
) -> anyhow::Result<String> {
    let consumer = e2e::consumer_at_end(brokers, topics)?;
    let start = Instant::now();
    let expected = (rate * s.seconds).round() as u64;
    let reader =
        std::thread::spawn(move || e2e::measure(&consumer, start, expected, start + Duration::from_secs_f64(60.0)));
    let config = s.run_config(gateway, rate, auth);
    let acked = generator::run(&s.client, &config, workload, start).await;
    let (latency, seen) = reader.join().map_err(|_| anyhow::anyhow!("the e2e consumer panicked"))?;
    let ms = |p: f64| latency.value_at_percentile(p) as f64 / 1000.0;
    Ok(format!(
        "At {rate:.0} single-event requests/s: acknowledgement p50 {:.2} ms / p99 {:.2} ms; end to end (intended send → record consumed) p50 {:.2} ms / p99 {:.2} ms / max {:.2} ms over {seen} of {} records.",
        acked.ms(50.0),
        acked.ms(99.0),
        ms(50.0),
        ms(99.0),
        latency.max() as f64 / 1000.0,
        acked.ok
    ))
}

async fn memory_section(
    s: &Suite,
    gateway: &str,
    args: &SuiteArgs,
    workload: Arc<Workload>,
    auth: &Auth,
) -> anyhow::Result<String> {
    let pid = args.gateway_pid.unwrap_or(0);
    if pid == 0 {
        return Ok("Memory not measured (no --gateway-pid).".into());
    }
    let mut lines = String::new();
    let (idle, _) = memory::rss_kib(pid)?;
    let count = args.connections;
    let addr = gateway.trim_start_matches("http://");
    let (held, failed) = memory::hold_connections(addr, count).await;
    let (with_connections, peak) = memory::rss_kib(pid)?;
    let _ = writeln!(
        lines,
        "- {} keep-alive connections held open ({failed} failed to open): RSS {} MiB (idle before: {} MiB; peak so far {} MiB).",
        held.len(),
        with_connections / 1024,
        idle / 1024,
        peak / 1024
    );
    drop(held);
    if let Some(broker) = args.broker_pid
        && broker != 0
    {
        let _ = std::process::Command::new("kill").args(["-STOP", &broker.to_string()]).status();
        let stalled = s.http(gateway, 2000.0, workload, auth).await;
        let (rss, peak) = memory::rss_kib(pid)?;
        let _ = std::process::Command::new("kill").args(["-CONT", &broker.to_string()]).status();
        let _ = writeln!(
            lines,
            "- Kafka paused (SIGSTOP) under 2000 req/s for {:.0} s: {} answered 200, refused {:?}; RSS {} MiB, peak {} MiB.",
            s.seconds,
            stalled.ok,
            stalled.failed,
            rss / 1024,
            peak / 1024
        );
    }
    Ok(lines)
}

fn write_report(
    out: &PathBuf,
    s: &Suite,
    best: &RunResult,
    profile: &str,
    variants: &str,
    e2e: &str,
    memory: &str,
) -> anyhow::Result<()> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let text = format!(
        "# Benchmarks\n\nWritten by `scripts/bench` (loadtest suite); do not edit by hand.\n\n\
         ## Machine and settings\n\n- CPU: {cpu}, {cores} cores, shared by the load generator, the gateway (release build, 2 workers) and a single-node Kafka 4.1 (KRaft) on loopback.\n\
         - Open-loop generator: constant arrival rate, latency from the intended send time (no coordinated omission), HdrHistogram.\n\
         - Each run lasts {:.0} s; a rate counts as sustained when nothing fails, ≥ 97% of requests are answered 200 in time and p99 ≤ {:.0} ms.\n\
         - Producer (gateway and Kafka ceiling alike): idempotent, acks=all, lz4, linger.ms 20, batch.size 1 MB.\n\
         - Kafka ceiling: the same events produced straight to the broker (from the generator's process), each to the domain topic and with the partition key the gateway gives it.\n\
         - Events: the catalog's examples (page views, clicks, email opens, lead changes, orders, payments) with unique ids over 10,000 users.\n\n\
         ## Targets\n\n{}\nBest single-event run at the maximum: {}\n\n\
         ## Latency at fixed fractions of the single-event maximum\n\n{profile}\n\
         ## Variants (at half the single-event maximum, in requests)\n\n{variants}\n\
         ## End to end\n\n{e2e}\n\n## Memory\n\n{memory}\n",
        s.seconds,
        s.p99_bound_ms,
        s.report,
        summary("gateway", best),
    );
    std::fs::write(out, text)?;
    Ok(())
}
