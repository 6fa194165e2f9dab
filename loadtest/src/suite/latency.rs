//! Latency at 25, 50 and 75% of the single-event maximum, against Kafka's
//! own produce latency at the same rate (single events straight to the
//! broker), `--rounds` times with the order of the loads alternating, each
//! load settled before it is measured.
//!
//! Why rounds and settling: the first table measured each load once,
//! right after the targets' last run (the Kafka ceiling at half the batched
//! maximum). Its 25% row, the first, had p99 195 ms against 37 ms at 50%.
//! That did not come back in separate runs at the same rate (p99 23.7 to
//! 28.1 ms over three repetitions, settled or straight after a 70,000
//! events/s burst through the gateway): one run per load cannot tell a
//! transient from the load's own tail. So each load is measured in every
//! round, after a discarded run at its own rate, in alternating order, and
//! the table gives the median with the spread.

use std::fmt::Write as _;
use std::sync::Arc;

use rdkafka::producer::FutureProducer;

use super::targets::{Figure, kafka_run};
use super::{Suite, summary};
use crate::generator::{Auth, RunResult};
use crate::workload::Workload;

/// The loads, as fractions of the single-event maximum.
const FRACTIONS: [f64; 3] = [0.25, 0.5, 0.75];

/// Seconds of the discarded run at a load's rate before it is measured.
const SETTLE_SECS: f64 = 2.0;

/// One load's measured run and Kafka's at the same rate.
struct Point {
    gateway: RunResult,
    kafka: RunResult,
}

/// The table "Latency at fixed fractions of the single-event maximum".
pub(super) async fn table(
    s: &Suite,
    gateway: &str,
    producer: &FutureProducer,
    single: &Arc<Workload>,
    key: &Auth,
    gw_max: f64,
    rounds: usize,
) -> String {
    let settle = Suite { seconds: SETTLE_SECS, ..s.clone_settings() };
    let mut points: Vec<Vec<Point>> = FRACTIONS.iter().map(|_| Vec::new()).collect();
    for round in 1..=rounds.max(1) {
        let mut order: Vec<usize> = (0..FRACTIONS.len()).collect();
        if round % 2 == 0 {
            order.reverse();
        }
        eprintln!("latency at fixed fractions, round {round} of {}", rounds.max(1));
        for i in order {
            let rate = (gw_max * FRACTIONS[i]).max(1.0);
            settle.http(gateway, rate, Arc::clone(single), key).await;
            let gateway = s.http(gateway, rate, Arc::clone(single), key).await;
            let kafka = kafka_run(s, producer, rate, Arc::clone(single)).await;
            eprintln!("  {}", summary(&format!("measured {:.0}%", FRACTIONS[i] * 100.0), &gateway));
            points[i].push(Point { gateway, kafka });
        }
    }
    let mut out = String::from(
        "| load | rate (req/s) | p50 | p99 | p99.9 | max | failed | Kafka produce p99, same rate | p99 ratio | target |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for (i, runs) in points.iter().enumerate() {
        let f = |g: fn(&Point) -> f64| Figure(runs.iter().map(g).collect());
        let _ = writeln!(
            out,
            "| {:.0}% | {:.0} | {} ms | {} ms | {} ms | {} ms | {} | {} ms | {} | ≤ 2 |",
            FRACTIONS[i] * 100.0,
            (gw_max * FRACTIONS[i]).max(1.0),
            f(|p| p.gateway.ms(50.0)).text(2),
            f(|p| p.gateway.ms(99.0)).text(2),
            f(|p| p.gateway.ms(99.9)).text(2),
            f(|p| p.gateway.latency_us.max() as f64 / 1000.0).text(2),
            runs.iter().map(|p| p.gateway.failures()).sum::<u64>(),
            f(|p| p.kafka.ms(99.0)).text(2),
            f(|p| p.gateway.ms(99.0) / p.kafka.ms(99.0).max(0.001)).text(2),
        );
    }
    let _ = write!(
        out,
        "\nEach load: the median of {} rounds with the spread, the loads in alternating order, each after a \
         discarded {SETTLE_SECS:.0} s run at its rate; Kafka's p99 is the same single events produced straight to \
         the broker at the same rate, right after. `failed` is the sum over the rounds.\n",
        rounds.max(1)
    );
    out
}
