//! The targets table: the single-event and batched maxima against their
//! ceilings, the gateway's CPU at each (split into librdkafka's threads and
//! the rest, beside a do-nothing HTTP server's and the load generator's),
//! and p99 at half the batched maximum against Kafka's own, measured
//! `--rounds` times in the same run; each row gives the median and the
//! rounds' spread.

use std::fmt::Write as _;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rdkafka::producer::FutureProducer;

use super::{Suite, summary};
use crate::args::SuiteArgs;
use crate::generator::{Auth, RunResult};
use crate::workload::Workload;
use crate::{kafka_ceiling, memory};

/// Writes the targets table into the suite's report; returns the median
/// single-event maximum and the summary of a run at it.
pub(super) async fn targets(
    s: &mut Suite,
    args: &SuiteArgs,
    key: &Auth,
    warm: &Suite,
    single: &Arc<Workload>,
) -> anyhow::Result<(f64, String)> {
    let (gateway, ceiling, brokers) = (args.gateway.as_str(), args.ceiling.as_str(), args.brokers.as_str());
    let pids = Pids {
        gateway: args.gateway_pid.unwrap_or(0),
        broker: args.broker_pid.unwrap_or(0),
        ceiling: args.ceiling_pid.unwrap_or(0),
    };
    kafka_ceiling::ensure_topic(brokers, "loadtest.ceiling", 6).await?;
    let producer = kafka_ceiling::producer(brokers)?;
    kafka_run(warm, &producer, 20.0, s.workload(50, false)?).await;
    let batched = s.workload(50, false)?;
    let mut rounds: Vec<Round> = Vec::new();
    for round in 1..=args.rounds.max(1) {
        eprintln!("targets, round {round} of {}", args.rounds.max(1));
        rounds.push(targets_round(s, &pids, (gateway, ceiling), &producer, (single, &batched), key).await);
    }
    let figure = |f: fn(&Round) -> f64| Figure(rounds.iter().map(f).collect());
    let gw_max = figure(|r| r.single_max).median();
    let gw_best = rounds.iter().min_by(|a, b| (a.single_max - gw_max).abs().total_cmp(&(b.single_max - gw_max).abs()));
    let gw_best = gw_best.map(|r| r.single_best.clone()).context("at least one round")?;
    s.row(
        "single-event requests/s (max with p99 under the bound, no failures)",
        figure(|r| r.single_max).text(0),
        format!("{} (HTTP)", figure(|r| r.http_max).text(0)),
        figure(|r| r.single_max / r.http_max.max(1.0)).text(2),
        "≥ 0.6",
    );
    s.row(
        "gateway CPU per single-event request at that maximum, µs (of which librdkafka's threads)",
        format!("{} ({})", figure(|r| r.single_cpu).text(1), figure(|r| r.single_kafka_cpu).text(1)),
        format!("{} (HTTP ceiling server, same rate)", figure(|r| r.http_cpu).text(1)),
        "–".into(),
        "≤ 40 µs",
    );
    s.row(
        "batched events/s (batches of 50)",
        figure(|r| r.batched_max * 50.0).text(0),
        format!("{} (Kafka)", figure(|r| r.kafka_max * 50.0).text(0)),
        figure(|r| r.batched_max / r.kafka_max.max(1.0)).text(2),
        "≥ 0.5",
    );
    s.row(
        "CPU per event at the batched maximum, µs: gateway process (of which librdkafka's threads) / broker / \
         load generator",
        format!(
            "{} ({}) / {} / {}",
            figure(|r| r.batched_cpu).text(1),
            figure(|r| r.batched_kafka_cpu).text(1),
            figure(|r| r.batched_broker_cpu).text(1),
            figure(|r| r.batched_generator_cpu).text(1)
        ),
        format!(
            "– / {} / {} (the Kafka ceiling's broker / its generator and producer)",
            figure(|r| r.ceiling_broker_cpu).text(1),
            figure(|r| r.ceiling_generator_cpu).text(1)
        ),
        "–".into(),
        "gateway ≤ 8 µs",
    );
    s.row(
        "p99 acknowledgement latency at 50% of the batched max, ms",
        figure(|r| r.half_p99).text(2),
        format!("{} (Kafka produce)", figure(|r| r.kafka_half_p99).text(2)),
        figure(|r| r.half_p99 / r.kafka_half_p99.max(0.001)).text(2),
        "≤ 2",
    );
    let _ = write!(
        s.report,
        "\nEach row: the median of {} rounds, with the rounds' spread (min–max) in brackets.\n",
        rounds.len()
    );
    let floors = floor_line(&figure(|r| r.single_cpu), &figure(|r| r.single_kafka_cpu), &figure(|r| r.http_cpu));
    let held = held_line(
        &figure(|r| r.single_cpu - r.single_kafka_cpu),
        &figure(|r| r.http_cpu),
        &figure(|r| r.held_cpu),
        &figure(|r| r.hold_ms),
    );
    if !floors.is_empty() {
        let _ = write!(s.report, "\n{floors}");
    }
    if !held.is_empty() {
        let _ = write!(s.report, "\n{held}");
    }
    let generator = generator_line(&figure(|r| r.single_generator_cpu), &figure(|r| r.http_generator_cpu));
    if !generator.is_empty() {
        let _ = write!(s.report, "\n{generator}");
    }
    Ok((gw_max, gw_best))
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
    /// This process: the load generator (and the Kafka ceiling's producer).
    generator: Option<f64>,
    events: f64,
}

impl CpuUse {
    /// `cpu` in microseconds per acknowledged event; NaN when not measured.
    fn micros(&self, cpu: Option<f64>) -> f64 {
        cpu.map_or(f64::NAN, |c| c * 1e6 / self.events.max(1.0))
    }
}

async fn cpu_during<F, Fut>(pids: &Pids, run: F) -> CpuUse
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = RunResult>,
{
    let read = |pid: u32| if pid == 0 { None } else { memory::cpu_seconds(pid) };
    let threads = |pid: u32| if pid == 0 { None } else { memory::kafka_thread_seconds(pid) };
    let own = std::process::id();
    let before = [read(pids.gateway), threads(pids.gateway), read(pids.broker), read(pids.ceiling), read(own)];
    let result = run().await;
    let after = [read(pids.gateway), threads(pids.gateway), read(pids.broker), read(pids.ceiling), read(own)];
    let delta = |i: usize| Some(after[i]? - before[i]?);
    CpuUse {
        gateway: delta(0),
        kafka_threads: delta(1),
        broker: delta(2),
        ceiling: delta(3),
        generator: delta(4),
        events: (result.ok * result.batch as u64) as f64,
    }
}

/// What a single-event request costs before any of the gateway's own work:
/// a do-nothing HTTP server's CPU per request at the same rate plus the
/// gateway's librdkafka threads' per record (medians of the rounds).
fn floor_line(total: &Figure, kafka: &Figure, http: &Figure) -> String {
    let (total, kafka, http) = (total.median(), kafka.median(), http.median());
    if !(total.is_finite() && kafka.is_finite() && http.is_finite()) {
        return String::new();
    }
    format!(
        "Floor of a single-event request on this machine (medians): a do-nothing HTTP server spends {http:.1} µs per \
         request at the same rate and the gateway's librdkafka threads {kafka:.1} µs per record, {:.1} µs before any \
         of the gateway's own work; the gateway's HTTP workers spend {:.1} µs, {:.1} µs above the HTTP server.\n",
        http + kafka,
        total - kafka,
        total - kafka - http
    )
}

/// What the load generator itself spends per single-event request, in the
/// gateway's run and the HTTP ceiling's at the same rate (medians): it
/// shares the 2 cores with what it measures, so the heavier it is, the
/// nearer every maximum sits to its own limit.
fn generator_line(gateway_run: &Figure, ceiling_run: &Figure) -> String {
    let (gateway_run, ceiling_run) = (gateway_run.median(), ceiling_run.median());
    if !(gateway_run.is_finite() && ceiling_run.is_finite()) {
        return String::new();
    }
    format!(
        "The load generator (this suite's own process, on the gateway's allocator) spends {gateway_run:.1} µs per \
         single-event request sending to the gateway at its maximum and {ceiling_run:.1} µs sending to the HTTP \
         ceiling at the same rate, on the same cores as what it measures.\n"
    )
}

/// The floor of a request held until Kafka acknowledges it: the gateway
/// answers once its events are stored, after the producer's linger, so it
/// holds hundreds of requests (and connections) at a time, which costs a
/// do-nothing server too (`loadtest/profiles/README.md`, "The floor of a
/// held answer"). `workers`: the gateway's CPU but librdkafka's threads.
fn held_line(workers: &Figure, http: &Figure, held: &Figure, hold_ms: &Figure) -> String {
    let (workers, http, held, hold_ms) = (workers.median(), http.median(), held.median(), hold_ms.median());
    if !(workers.is_finite() && http.is_finite() && held.is_finite() && hold_ms.is_finite()) {
        return String::new();
    }
    format!(
        "Held as long as the gateway holds its answers (its p50 at that maximum, {hold_ms:.0} ms), the do-nothing \
         server spends {held:.1} µs per request, {:+.1} µs more than answering at once: the gateway's HTTP workers \
         spend {:+.1} µs above that floor.\n",
        held - http,
        workers - held
    )
}

/// One figure over the rounds; NaN where a round could not measure it.
pub(super) struct Figure(pub(super) Vec<f64>);

impl Figure {
    pub(super) fn median(&self) -> f64 {
        let mut known: Vec<f64> = self.0.iter().copied().filter(|v| v.is_finite()).collect();
        known.sort_by(f64::total_cmp);
        known.get(known.len() / 2).copied().unwrap_or(f64::NAN)
    }

    /// `median (min–max)`, or "n/a" when no round measured it.
    pub(super) fn text(&self, decimals: usize) -> String {
        let known: Vec<f64> = self.0.iter().copied().filter(|v| v.is_finite()).collect();
        let (Some(min), Some(max)) = (known.iter().copied().reduce(f64::min), known.iter().copied().reduce(f64::max))
        else {
            return "n/a".into();
        };
        let median = self.median();
        if known.len() == 1 {
            return format!("{median:.decimals$}");
        }
        format!("{median:.decimals$} ({min:.decimals$}–{max:.decimals$})")
    }
}

/// What one round of the targets measured.
struct Round {
    single_max: f64,
    /// The summary line of its best single-event run.
    single_best: String,
    http_max: f64,
    /// Gateway CPU per single-event request at `single_max`, µs, and its librdkafka threads' part.
    single_cpu: f64,
    single_kafka_cpu: f64,
    /// The HTTP ceiling server's CPU per request at `single_max`, µs.
    http_cpu: f64,
    /// The load generator's CPU per request at `single_max`, sending to the
    /// gateway and to the HTTP ceiling, µs.
    single_generator_cpu: f64,
    http_generator_cpu: f64,
    /// The same server's when it holds each answer `hold_ms` (the gateway's
    /// p50 at `single_max`).
    held_cpu: f64,
    hold_ms: f64,
    /// Requests (batches of 50) per second.
    batched_max: f64,
    kafka_max: f64,
    /// CPU per event at `batched_max`, µs.
    batched_cpu: f64,
    batched_kafka_cpu: f64,
    batched_broker_cpu: f64,
    /// The load generator's (this process's) CPU per event at `batched_max`, µs.
    batched_generator_cpu: f64,
    ceiling_broker_cpu: f64,
    /// This process's CPU per event producing the Kafka ceiling at `batched_max`, µs.
    ceiling_generator_cpu: f64,
    /// p99 at half `batched_max`, ms.
    half_p99: f64,
    kafka_half_p99: f64,
}

/// One round of the targets: the single-event and batched maxima against
/// their ceilings, the CPU at each maximum, and p99 at half the batched one.
async fn targets_round(
    s: &Suite,
    pids: &Pids,
    (gateway, ceiling): (&str, &str),
    producer: &FutureProducer,
    (single, batched): (&Arc<Workload>, &Arc<Workload>),
    key: &Auth,
) -> Round {
    let (single_max, single_best) =
        s.search("gateway, single events", 500.0, |r| s.http(gateway, r, Arc::clone(single), key)).await;
    let (http_max, _) =
        s.search("HTTP ceiling, single events", 500.0, |r| s.http(ceiling, r, Arc::clone(single), key)).await;
    let rate = single_max.max(1.0);
    let single_cpu = cpu_during(pids, || s.http(gateway, rate, Arc::clone(single), key)).await;
    let http_cpu = cpu_during(pids, || s.http(ceiling, rate, Arc::clone(single), key)).await;
    let hold_ms = single_best.ms(50.0).round().max(1.0);
    let held = format!("{ceiling}/v1/batch?hold_ms={hold_ms:.0}");
    let held_cpu = cpu_during(pids, || s.http_to(&held, rate, Arc::clone(single), key)).await;
    let (batched_max, _) =
        s.search("gateway, batches of 50", 20.0, |r| s.http(gateway, r, Arc::clone(batched), key)).await;
    let (kafka_max, _) =
        s.search("Kafka ceiling, batches of 50", 20.0, |r| kafka_run(s, producer, r, Arc::clone(batched))).await;
    let rate = batched_max.max(1.0);
    let batched_cpu = cpu_during(pids, || s.http(gateway, rate, Arc::clone(batched), key)).await;
    let ceiling_cpu = cpu_during(pids, || kafka_run(s, producer, rate, Arc::clone(batched))).await;
    let half = (batched_max / 2.0).max(1.0);
    let gw_half = s.http(gateway, half, Arc::clone(batched), key).await;
    let kafka_half = kafka_run(s, producer, half, Arc::clone(batched)).await;
    Round {
        single_max,
        single_best: summary("gateway", &single_best),
        http_max,
        single_cpu: single_cpu.micros(single_cpu.gateway),
        single_kafka_cpu: single_cpu.micros(single_cpu.kafka_threads),
        http_cpu: http_cpu.micros(http_cpu.ceiling),
        single_generator_cpu: single_cpu.micros(single_cpu.generator),
        http_generator_cpu: http_cpu.micros(http_cpu.generator),
        held_cpu: held_cpu.micros(held_cpu.ceiling),
        hold_ms,
        batched_max,
        kafka_max,
        batched_cpu: batched_cpu.micros(batched_cpu.gateway),
        batched_kafka_cpu: batched_cpu.micros(batched_cpu.kafka_threads),
        batched_broker_cpu: batched_cpu.micros(batched_cpu.broker),
        batched_generator_cpu: batched_cpu.micros(batched_cpu.generator),
        ceiling_broker_cpu: ceiling_cpu.micros(ceiling_cpu.broker),
        ceiling_generator_cpu: ceiling_cpu.micros(ceiling_cpu.generator),
        half_p99: gw_half.ms(99.0),
        kafka_half_p99: kafka_half.ms(99.0),
    }
}

pub(super) async fn kafka_run(s: &Suite, producer: &FutureProducer, rate: f64, workload: Arc<Workload>) -> RunResult {
    let r = kafka_ceiling::run(producer, "loadtest.ceiling", rate, Duration::from_secs_f64(s.seconds), workload).await;
    eprintln!("  {}", summary(&format!("Kafka ceiling @ {rate:.0}/s"), &r));
    r
}

#[cfg(test)]
mod figure_tests {
    use super::{Figure, floor_line, held_line};

    #[test]
    fn a_figure_is_its_median_with_the_spread_and_skips_what_was_not_measured() {
        assert_eq!(Figure(vec![12.0, 10.0, 30.0]).text(1), "12.0 (10.0–30.0)");
        assert_eq!(Figure(vec![f64::NAN, 7.0, 5.0]).text(0), "7 (5–7)");
        assert_eq!(Figure(vec![4.25]).text(2), "4.25");
        assert_eq!(Figure(vec![f64::NAN, f64::NAN]).text(1), "n/a");
        assert!(Figure(vec![]).median().is_nan());
    }

    #[test]
    fn the_floor_adds_http_and_librdkafka_and_says_what_is_left_above_it() {
        let line = floor_line(&Figure(vec![80.0]), &Figure(vec![12.0]), &Figure(vec![22.0]));
        assert!(line.contains("22.0 µs per request"), "{line}");
        assert!(line.contains("34.0 µs before any"), "{line}");
        assert!(line.contains("spend 68.0 µs, 46.0 µs above"), "{line}");
        assert_eq!(floor_line(&Figure(vec![80.0]), &Figure(vec![f64::NAN]), &Figure(vec![22.0])), "");
    }

    #[test]
    fn the_generator_line_gives_both_runs_or_nothing() {
        let line = super::generator_line(&Figure(vec![14.0, 15.0, 13.0]), &Figure(vec![9.5]));
        assert!(line.contains("spends 14.0 µs per single-event request sending to the gateway"), "{line}");
        assert!(line.contains("9.5 µs sending to the HTTP ceiling"), "{line}");
        assert_eq!(super::generator_line(&Figure(vec![14.0]), &Figure(vec![f64::NAN])), "");
    }

    #[test]
    fn the_held_floor_says_what_holding_costs_and_what_is_left_above_it() {
        let line = held_line(&Figure(vec![58.0]), &Figure(vec![19.5]), &Figure(vec![34.0]), &Figure(vec![16.0]));
        assert!(line.contains("16 ms"), "{line}");
        assert!(line.contains("spends 34.0 µs per request, +14.5 µs more"), "{line}");
        assert!(line.contains("spend +24.0 µs above that floor"), "{line}");
        let unmeasured =
            held_line(&Figure(vec![58.0]), &Figure(vec![19.5]), &Figure(vec![f64::NAN]), &Figure(vec![16.0]));
        assert_eq!(unmeasured, "");
    }
}
