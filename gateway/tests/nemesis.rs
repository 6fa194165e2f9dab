//! The nemesis run and the soak (issue 32), over the production-like
//! set-up of `nemesis_harness::topology`. Both are long and start their own
//! brokers, Redis, gateways and HAProxy on ports 39000-39060: run them with
//! scripts/nemesis (`--seed N --minutes M`) and scripts/soak (`--minutes M`),
//! which set the environment, mount the spools' small file systems, draw
//! the pictures and clean up whatever a failed run left.

mod common;
mod faults_harness;
mod nemesis_harness;
mod spool_support;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use nemesis_harness::clients::{self, Clients};
use nemesis_harness::history::{History, now};
use nemesis_harness::topology::Topology;
use nemesis_harness::{Settings, checker, faults, report, soak};

fn save_logs(top: &Topology, dir: &std::path::Path) {
    for (i, gw) in top.gateways.iter().enumerate() {
        let _ = std::fs::write(dir.join(format!("gw{}.log", i + 1)), gw.log_text());
    }
}

#[actix_web::test]
#[ignore = "minutes long, three brokers, three gateways, HAProxy and Redis: run by scripts/nemesis"]
async fn nemesis_run() {
    let s = Settings::from_env();
    let plan = faults::plan(&s);
    let text: String = plan.iter().flatten().map(|p| format!("{p:?}\n")).collect();
    std::fs::write(s.out.join("plan.txt"), text).expect("plan");
    let mut top = Topology::start(&s).await;
    let run = faults_harness::run_id("nm");
    let history = History::default();
    let (t0, started) = (now(), Instant::now());
    let url = top.balancer.url();
    let load = Clients { run_for: s.run_for, ..Clients::default() };
    {
        let targets = top.targets(&s);
        futures::join!(
            clients::run(load, s.seed, run.clone(), url, history.clone()),
            faults::run(plan, targets, started, &history)
        );
    }
    eprintln!("nemesis: load and faults over after {:.0} s; draining the spools", started.elapsed().as_secs_f64());
    for gw in &top.gateways {
        spool_support::wait_drained(&gw.url, Duration::from_secs(300)).await;
    }
    let (stored, settled) = checker::read_back(&top.cluster.brokers(), &run).await;
    history.write(&s.out).expect("history");
    save_logs(&top, &s.out);
    let log = history.0.borrow();
    let verdict = checker::check(&log, &stored, t0);
    let minutes = s.run_for.as_secs_f64() / 60.0;
    let summary = report::summary(&log, &verdict, s.seed, minutes, settled.as_secs_f64());
    report::write_timeline(&log, t0, &s.out).expect("timeline");
    std::fs::write(s.out.join("summary.md"), &summary).expect("summary");
    std::fs::write(s.out.join("order-violations.txt"), verdict.order_violations.join("\n")).expect("violations");
    eprintln!("{summary}");
    drop(log);
    top.stop().await;
    assert!(verdict.passed(), "nemesis: the history does not check out (see {}):\n{summary}", s.out.display());
}

#[actix_web::test]
#[ignore = "minutes to an hour long, the nemesis set-up under steady load: run by scripts/soak"]
async fn soak_run() {
    let s = Settings::from_env();
    // Half the batched maximum of BENCHMARKS.md (72 000 events/s, release build) unless told.
    let rate: u64 = std::env::var("SOAK_RATE").ok().and_then(|r| r.parse().ok()).unwrap_or(36_000);
    let top = Topology::start(&s).await;
    let run = faults_harness::run_id("soak");
    let url = top.balancer.url();
    let (answers, tsv) =
        futures::join!(soak::load(&url, rate, s.run_for, &run), soak::sampler(&top.gateways, s.run_for));
    std::fs::write(s.out.join("soak.tsv"), &tsv).expect("soak.tsv");
    save_logs(&top, &s.out);
    let mut md = format!(
        "### Soak: {:.0} min at {rate} events/s offered (batches of 50, 8 connections, through HAProxy)\n\n\
         Answers by status: {answers:?}.\n\n| gateway | RSS MiB first / last / max | descriptors first / last / max | \
         spool bytes max | producer queue max |\n| --- | --- | --- | --- | --- |\n",
        s.run_for.as_secs_f64() / 60.0
    );
    let rows: Vec<Vec<f64>> = tsv
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').filter_map(|x| x.parse().ok()).collect())
        .collect();
    for gw in 1..=nemesis_harness::GATEWAYS {
        let mine: Vec<&Vec<f64>> = rows.iter().filter(|r| r.len() == 7 && r[1] == f64::from(gw)).collect();
        let col = |c: usize| mine.iter().map(|r| r[c]).collect::<Vec<_>>();
        let (rss, fds, spool, queue) = (col(2), col(3), col(4), col(5));
        let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(
            md,
            "| gw{gw} | {:.0} / {:.0} / {:.0} | {:.0} / {:.0} / {:.0} | {:.0} | {:.0} |",
            rss.first().unwrap_or(&0.0),
            rss.last().unwrap_or(&0.0),
            max(&rss),
            fds.first().unwrap_or(&0.0),
            fds.last().unwrap_or(&0.0),
            max(&fds),
            max(&spool),
            max(&queue)
        );
    }
    let keys: Vec<f64> = rows.iter().filter_map(|r| r.get(6).copied()).collect();
    let _ = writeln!(
        md,
        "\nShared dedupe store (Redis DBSIZE): first {:.0}, last {:.0}.",
        keys.first().unwrap_or(&0.0),
        keys.last().unwrap_or(&0.0)
    );
    std::fs::write(s.out.join("soak.md"), &md).expect("soak.md");
    eprintln!("{md}");
    top.stop().await;
    assert!(answers.get("200").copied().unwrap_or(0) > 0, "soak: no request was answered 200: {answers:?}");
}
