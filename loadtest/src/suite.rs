//! The whole benchmark: throughput searches against the gateway and both
//! ceilings, latency at fixed fractions of the maximum, end-to-end latency,
//! variants (gzip, JWT), memory under 10,000 connections and with Kafka
//! stalled, then BENCHMARKS.md with absolute figures and ratios.

use std::fmt::Write as _;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::args::SuiteArgs;
use crate::generator::{self, Auth, RunConfig, RunResult};
use crate::workload::Workload;
use crate::{e2e, memory};

mod latency;
mod targets;

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
            url: url.to_owned(),
            rate,
            duration: Duration::from_secs_f64(self.seconds),
            auth: auth.clone(),
            timeout: Duration::from_secs(10),
        }
    }

    /// A run against `url`'s `/v1/batch`.
    async fn http(&self, url: &str, rate: f64, workload: Arc<Workload>, auth: &Auth) -> RunResult {
        self.http_to(&format!("{url}/v1/batch"), rate, workload, auth).await
    }

    /// A run against `url` as it is (a path and query of its own).
    async fn http_to(&self, url: &str, rate: f64, workload: Arc<Workload>, auth: &Auth) -> RunResult {
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

    // 1–3. The targets, `--rounds` times in the same run as their ceilings.
    let (gw_max, gw_best) = targets::targets(&mut s, args, &key, &warm, &single).await?;

    // 4. Latency at 25/50/75% of the single-event maximum against Kafka's at the same rate.
    let producer = crate::kafka_ceiling::producer(brokers)?;
    let profile = latency::table(&s, gateway, &producer, &single, &key, gw_max, args.rounds).await;

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
    let config = s.run_config(&format!("{gateway}/v1/batch"), rate, auth);
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
    let idle_heap = memory::heap_words(memory::heap_mib(gateway).await);
    let count = args.connections;
    let addr = gateway.trim_start_matches("http://");
    let (held, failed) = memory::hold_connections(addr, count).await;
    let (with_connections, peak) = memory::rss_kib(pid)?;
    let held_heap = memory::heap_words(memory::heap_mib(gateway).await);
    let _ = writeln!(
        lines,
        "- {} keep-alive connections held open ({failed} failed to open): RSS {} MiB, {held_heap} (idle before: {} MiB, \
         {idle_heap}; RSS peak so far {} MiB).",
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
        let heap = memory::heap_words(memory::heap_mib(gateway).await);
        let _ = std::process::Command::new("kill").args(["-CONT", &broker.to_string()]).status();
        let _ = writeln!(
            lines,
            "- Kafka paused (SIGSTOP) under 2000 req/s for {:.0} s: {} answered 200, refused {:?}; RSS {} MiB, {heap}, \
             RSS peak {} MiB.",
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
    best: &str,
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
         - Nothing is pinned to a core: with 2 cores, pinning the generator to one would leave the gateway and the broker one core between them; the ceilings are measured under the same sharing.\n\
         - Each run lasts {:.0} s; a rate counts as sustained when nothing fails, ≥ 97% of requests are answered 200 in time and p99 ≤ {:.0} ms.\n\
         - Producer (gateway and Kafka ceiling alike): idempotent, acks=all, lz4, linger.ms 20, batch.size 1 MB.\n\
         - Kafka ceiling: the same events produced straight to the broker (from the generator's process), each to the domain topic and with the partition key the gateway gives it.\n\
         - Events: the catalog's examples (page views, clicks, email opens, lead changes, orders, payments) with unique ids over 10,000 users.\n\n\
         ## Targets\n\n{}\nBest single-event run at the maximum: {}\n\n\
         ## Latency at fixed fractions of the single-event maximum\n\n{profile}\n\
         ## Variants (at half the single-event maximum, in requests)\n\n{variants}\n\
         ## End to end\n\n{e2e}\n\n## Memory\n\n{memory}\n",
        s.seconds, s.p99_bound_ms, s.report, best,
    );
    std::fs::write(out, text)?;
    Ok(())
}
