//! The nemesis run and the soak (issue 32), over the production-like
//! set-up of `nemesis_harness::topology`. Both are long and start their own
//! brokers, Redis, gateways and HAProxy on ports 24000-24060: run them with
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
            faults::run(plan, targets, (started, started + s.run_for), &history)
        );
    }
    eprintln!("nemesis: load and faults over after {:.0} s; draining the spools", started.elapsed().as_secs_f64());
    for gw in &top.gateways {
        spool_support::wait_drained(&gw.url, Duration::from_secs(300)).await;
    }
    let (stored, settled) = checker::read_back(&top.cluster.brokers(), &run).await;
    history.write(&s.out).expect("history");
    save_logs(&top, &s.out);
    let (verdict, summary) = {
        let log = history.0.borrow();
        let verdict = checker::check(&log, &stored, t0);
        let minutes = s.run_for.as_secs_f64() / 60.0;
        let summary = report::summary(&log, &verdict, s.seed, minutes, settled.as_secs_f64());
        report::write_timeline(&log, t0, &s.out).expect("timeline");
        std::fs::write(s.out.join("summary.md"), &summary).expect("summary");
        std::fs::write(s.out.join("order-violations.txt"), verdict.order_violations.join("\n")).expect("violations");
        eprintln!("{summary}");
        (verdict, summary)
    };
    // Every gateway binary counts its heap, restarted ones too (after
    // kill -9 and SIGTERM): `eventgw_heap_bytes` and its peak on /metrics.
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("client");
    let mut heaps = Vec::new();
    for gw in &top.gateways {
        heaps.push(soak::sample(&client, gw).await);
    }
    top.stop().await;
    assert!(verdict.passed(), "nemesis: the history does not check out (see {}):\n{summary}", s.out.display());
    for (i, m) in heaps.iter().enumerate() {
        assert!(
            m.heap_mib > 0.0 && m.heap_peak_mib >= m.heap_mib,
            "gw{}: /metrics lacks the heap's bytes in use or its peak: {m:?}",
            i + 1
        );
    }
}

#[actix_web::test]
#[ignore = "minutes to an hour long, the nemesis set-up under steady load: run by scripts/soak"]
async fn soak_run() {
    let mut s = Settings::from_env();
    // Half of this set-up's batched maximum on the 2-core machine unless
    // told (see scripts/soak).
    let rate: u64 = std::env::var("SOAK_RATE").ok().and_then(|r| r.parse().ok()).unwrap_or(6_500);
    // Every feature of the nemesis set-up stays on. The source quota stays
    // on too, above the offered rate as in the benchmarks (dev.toml's 2,000
    // events/s per source would answer most of the load 429). The dedupe
    // window is a sixth of the run (30 s to 5 min) so the store turns over
    // inside it: its plateau is window × rate, which a day's window would
    // not reach in an hour.
    let window = (s.run_for.as_secs() / 6).clamp(30, 300);
    let warm_up = (s.run_for.as_secs_f64() / 3.0).min(600.0);
    s.extra_env.extend(
        [
            ("EVENTGW__QUOTAS__SOURCE__PER_SECOND", (rate * 4).to_string()),
            ("EVENTGW__QUOTAS__SOURCE__BURST", (rate * 8).to_string()),
            ("EVENTGW__DEDUPE__WINDOW_SECS", window.to_string()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let top = Topology::start(&s).await;
    let run = faults_harness::run_id("soak");
    let url = top.balancer.url();
    let samples = s.out.join("soak.tsv");
    let (answers, tsv) =
        futures::join!(soak::load(&url, rate, s.run_for, &run), soak::sampler(&top.gateways, s.run_for, &samples));
    std::fs::write(&samples, &tsv).expect("soak.tsv");
    save_logs(&top, &s.out);
    let accepted = answers.get("200").copied().unwrap_or(0) as f64 * 50.0 / s.run_for.as_secs_f64();
    let mut md = format!(
        "### Soak: {:.0} min at {rate} events/s offered (batches of 50, {} connections, through HAProxy)\n\n\
         Accepted {accepted:.0} events/s. Answers by status: {answers:?}. Dedupe window {window} s. \
         Slopes are least-squares fits over the samples after the first {warm_up:.0} s (warm-up), per hour.\n\n\
         | gateway | RSS MiB first / last / max | RSS slope MiB/h | anonymous RSS MiB last / max | heap in use MiB \
         first / last / max | heap slope MiB/h | heap peak MiB at 10 min / last | threads first / last / max | descriptors first / last / max | \
         descriptors slope /h | spool bytes max | producer queue max | queue slope /h |\n| --- | --- | --- | --- | --- \
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        s.run_for.as_secs_f64() / 60.0,
        soak::WORKERS
    );
    let rows: Vec<Vec<f64>> = tsv
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').filter_map(|x| x.parse().ok()).collect())
        .collect();
    let slope =
        |points: Vec<(f64, f64)>| soak::slope_per_hour(&points).map_or_else(|| "-".to_owned(), |v| format!("{v:+.1}"));
    for gw in 1..=nemesis_harness::GATEWAYS {
        let mine: Vec<&Vec<f64>> = rows.iter().filter(|r| r.len() == 11 && r[1] == f64::from(gw)).collect();
        let col = |c: usize| mine.iter().map(|r| r[c]).collect::<Vec<_>>();
        let settled = |c: usize| mine.iter().filter(|r| r[0] >= warm_up).map(|r| (r[0], r[c])).collect::<Vec<_>>();
        let (rss, fds, spool, queue, anon, threads, heap) = (col(2), col(3), col(4), col(5), col(7), col(8), col(9));
        // A scrape that timed out reads 0; nine in ten is the gateway binary counting.
        assert!(
            heap.iter().filter(|&&h| h > 0.0).count() * 10 >= heap.len() * 9,
            "gw{gw}: the heap's bytes in use (eventgw_heap_bytes) missing from most samples"
        );
        let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(
            md,
            "| gw{gw} | {:.0} / {:.0} / {:.0} | {} | {:.0} / {:.0} | {:.1} / {:.1} / {:.1} | {} | {:.1} / {:.1} | {:.0} / {:.0} / {:.0} \
             | {:.0} / {:.0} / {:.0} | {} | {:.0} | {:.0} | {} |",
            rss.first().unwrap_or(&0.0),
            rss.last().unwrap_or(&0.0),
            max(&rss),
            slope(settled(2)),
            anon.last().unwrap_or(&0.0),
            max(&anon),
            heap.first().unwrap_or(&0.0),
            heap.last().unwrap_or(&0.0),
            max(&heap),
            slope(settled(9)),
            settled(10).first().map_or(0.0, |p| p.1),
            col(10).last().unwrap_or(&0.0),
            threads.first().unwrap_or(&0.0),
            threads.last().unwrap_or(&0.0),
            max(&threads),
            fds.first().unwrap_or(&0.0),
            fds.last().unwrap_or(&0.0),
            max(&fds),
            slope(settled(3)),
            max(&spool),
            max(&queue),
            slope(settled(5)),
        );
    }
    let keys: Vec<(f64, f64)> =
        rows.iter().filter(|r| r.len() == 11 && r[1] == 1.0 && r[6] >= 0.0).map(|r| (r[0], r[6])).collect();
    let settled_keys: Vec<(f64, f64)> = keys.iter().copied().filter(|k| k.0 >= warm_up).collect();
    let _ = writeln!(
        md,
        "\nShared dedupe store (Redis DBSIZE): first {:.0}, last {:.0}, max {:.0}; slope after warm-up {} keys/h \
         (the window × the accepted rate is {:.0}).",
        keys.first().map_or(0.0, |k| k.1),
        keys.last().map_or(0.0, |k| k.1),
        keys.iter().map(|k| k.1).fold(0.0, f64::max),
        slope(settled_keys),
        window as f64 * accepted,
    );
    std::fs::write(s.out.join("soak.md"), &md).expect("soak.md");
    eprintln!("{md}");
    top.stop().await;
    assert!(answers.get("200").copied().unwrap_or(0) > 0, "soak: no request was answered 200: {answers:?}");
}

/// The checker can fail: a synthetic history with one lost id, one stored
/// twice, one key out of order and one stored after a 400 is judged so, and
/// the same history with the faults removed passes. Needs no broker.
#[test]
fn the_checker_finds_loss_duplicates_disorder_and_refused_events() {
    use std::collections::HashMap;

    use nemesis_harness::checker::{Copy, check};
    use nemesis_harness::history::{Kind, Log, Request};

    let request = |ids: &[&str], key: &str, (start, end): (f64, f64), status: u16| Request {
        via: "gw1".into(),
        client: "sdk0".into(),
        kind: Kind::Sdk,
        key: key.into(),
        attempt: 1,
        ids: ids.iter().map(|s| (*s).to_owned()).collect(),
        start,
        end,
        status,
        code: String::new(),
        outcomes: if status == 200 { vec!["accepted".into(); ids.len()] } else { Vec::new() },
    };
    let log = Log {
        requests: vec![
            request(&["r-a"], "k1", (0.0, 1.0), 200),
            request(&["r-b"], "k1", (2.0, 3.0), 200),
            request(&["r-c"], "k2", (0.0, 1.0), 200),
            request(&["r-d"], "k2", (0.0, 1.0), 400),
            request(&["r-e"], "k2", (0.0, 1.0), 503),
        ],
        faults: Vec::new(),
    };
    let at = |offset: i64| Copy { topic: "web.tracking".into(), partition: 0, offset };
    let good: HashMap<String, Vec<Copy>> =
        [("r-a", vec![at(1)]), ("r-b", vec![at(2)]), ("r-c", vec![at(3)]), ("r-e", vec![at(4)])]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
    let v = check(&log, &good, 0.0);
    assert!(v.passed(), "{v:?}");
    assert_eq!(v.unacked_stored.get("503"), Some(&1), "a 503 that landed is allowed and counted");

    let mut bad = good.clone();
    bad.insert("r-a".into(), vec![at(5)]); // acknowledged before r-b was sent, stored after it
    bad.insert("r-b".into(), vec![at(2), at(6)]); // twice
    bad.remove("r-c"); // lost
    bad.insert("r-d".into(), vec![at(7)]); // stored after a 400
    let v = check(&log, &bad, 0.0);
    assert!(!v.passed());
    assert_eq!(v.lost, vec!["r-c".to_owned()]);
    assert_eq!(v.duplicated, vec!["r-b".to_owned()]);
    assert_eq!(v.order_violations.len(), 1, "{:?}", v.order_violations);
    assert_eq!(v.refused_stored, vec!["r-d".to_owned()]);

    // A spooled event is ordered before later events through its own gateway,
    // not before those another gateway stored direct (docs/spool.md).
    let mut log = log;
    log.requests[0].outcomes = vec!["spooled".into()];
    let mut overtaken = good.clone();
    overtaken.insert("r-a".into(), vec![at(5)]);
    assert_eq!(check(&log, &overtaken, 0.0).order_violations.len(), 1, "same gateway: out of order");
    log.requests[1].via = "gw2".into();
    let v = check(&log, &overtaken, 0.0);
    assert!(v.order_violations.is_empty(), "another gateway may overtake a spooled event: {v:?}");
    log.requests[0].outcomes = vec!["accepted".into()];
    assert_eq!(check(&log, &overtaken, 0.0).order_violations.len(), 1, "an event in Kafka is never overtaken");

    // B first sent through gw3 (503; it stored B direct), then answered
    // `duplicate` by gw1, which had spooled A: gw1 did not store B, so its
    // spool does not order it (nemesis seed 3). A in Kafka still does.
    log.requests[0].outcomes = vec!["spooled".into()];
    log.requests[1] = request(&["r-b"], "k1", (2.0, 3.0), 503);
    log.requests[1].via = "gw3".into();
    let mut retry = request(&["r-b"], "k1", (4.0, 5.0), 200);
    retry.attempt = 2;
    retry.outcomes = vec!["duplicate".into()];
    log.requests.push(retry);
    let v = check(&log, &overtaken, 0.0);
    assert!(v.order_violations.is_empty(), "a duplicate is not ordered by the gateway that answered it: {v:?}");
    log.requests[5].outcomes = vec!["spooled".into()];
    assert_eq!(check(&log, &overtaken, 0.0).order_violations.len(), 1, "control: spooled by gw1, it is ordered");
    log.requests[5].outcomes = vec!["duplicate".into()];
    log.requests[0].outcomes = vec!["accepted".into()];
    assert_eq!(check(&log, &overtaken, 0.0).order_violations.len(), 1, "control: A in Kafka orders the duplicate");
}
