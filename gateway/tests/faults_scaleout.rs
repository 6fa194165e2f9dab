//! Several gateways behind a real HAProxy (scripts/haproxy) in front of a
//! three-broker cluster (RF 3, `min.insync.replicas=2`): retrying SDK
//! clients and beacon clients send steadily through the balancer while
//! every gateway is restarted in turn (SIGTERM), one is `kill -9`ed, and a
//! broker is `kill -9`ed. Every id answered 200 must be in Kafka; the
//! balancer must never send to a gateway it took out. With a gateway build
//! that has `[dedupe]` (store = "redis", scripts/redis), ids stored more
//! than once must be 0; without it they are counted and reported. And the
//! quota arithmetic across instances, measured through the balancer.
//! Ports: brokers 29200-29208 (cluster `scaleout`, shared with
//! scripts/scaleout), HAProxy 29245-29247, gateways 29255-29257, Redis 29260.
//! Long-running: `cargo test -p eventgw --test faults_scaleout -- --ignored --test-threads=1`.

mod common;
mod faults_harness;
mod spool_support;

use std::process::Command;
use std::time::{Duration, Instant};

use faults_harness::balancer::{Balancer, Routed, unix_now};
use faults_harness::cluster::Cluster;
use faults_harness::gateway_process::{GatewayProcess, accepts_overrides};
use faults_harness::load::{self, BatchLog, Load, duplicate_answers};
use faults_harness::reconcile::{Reconciliation, read_back, reconcile};
use faults_harness::{blocking, run_id, sleep};
use spool_support::{Beacons, beacons};

const KAFKA_BASE: u16 = 29200;
const LB_PORT: u16 = 29245;
const GW_BASE: u16 = 29255;
const REDIS_PORT: u16 = 29260;
const GATEWAYS: u16 = 3;
const DRAIN_GRACE_SECS: &str = "3";

/// What the gateway build under test can do; scenarios switch their
/// dedupe and drain assertions on these (the lead re-runs after merging).
#[derive(Debug, Clone, Copy)]
struct Features {
    /// `[dedupe] store = "redis"` is known and scripts/redis exists.
    dedupe: bool,
    /// `server.drain_grace_secs` is known: SIGTERM turns /readyz 503 first.
    drain: bool,
}

fn dedupe_env() -> Vec<(String, String)> {
    vec![
        ("EVENTGW__DEDUPE__ENABLED".into(), "true".into()),
        ("EVENTGW__DEDUPE__STORE".into(), "redis".into()),
        ("EVENTGW__DEDUPE__REDIS_URL".into(), format!("redis://127.0.0.1:{REDIS_PORT}/")),
    ]
}

fn features() -> Features {
    let redis_script = crate::common::repo_root().join("scripts/redis").exists();
    let off = std::env::var("SCALEOUT_DEDUPE").is_ok_and(|v| v == "off");
    Features {
        dedupe: !off && redis_script && accepts_overrides(&spool_support::borrowed(&dedupe_env())),
        drain: accepts_overrides(&[("EVENTGW__SERVER__DRAIN_GRACE_SECS", DRAIN_GRACE_SECS)]),
    }
}

fn redis(arg: &str) -> bool {
    Command::new(crate::common::repo_root().join("scripts/redis"))
        .arg(arg)
        .env("REDIS_INSTANCE", "scaleout")
        .env("REDIS_PORT", REDIS_PORT.to_string())
        .status()
        .is_ok_and(|s| s.success())
}

/// Brokers, Redis when dedupe is on, N gateways, HAProxy in front.
struct Topology {
    cluster: Cluster,
    gateways: Vec<GatewayProcess>,
    balancer: Balancer,
    features: Features,
}

impl Topology {
    async fn start(name: &str, extra: &[(&str, &str)]) -> Self {
        let cluster = Cluster::new("scaleout", 3, KAFKA_BASE);
        // Idempotent: a cluster left running by the scenario before (or by scripts/scaleout) is reused.
        assert!(cluster.run(&["start"]).await, "cluster scaleout starts");
        let features = blocking(features).await;
        let mut env: Vec<(String, String)> = Vec::new();
        if features.dedupe {
            assert!(blocking(|| redis("start")).await, "scripts/redis start");
            env.extend(dedupe_env());
        }
        if features.drain {
            env.push(("EVENTGW__SERVER__DRAIN_GRACE_SECS".into(), DRAIN_GRACE_SECS.into()));
        }
        env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut gateways = Vec::new();
        for i in 0..GATEWAYS {
            let gw_name = format!("scaleout-{name}-gw{}", i + 1);
            gateways.push(GatewayProcess::start_on(&gw_name, GW_BASE + i, &cluster.brokers(), 3, &env).await);
        }
        // A balancer retry after an empty answer may repeat a produced request: only with dedupe.
        let retry_on = if features.dedupe { "conn-failure empty-response" } else { "conn-failure" };
        let ports: Vec<u16> = (0..GATEWAYS).map(|i| GW_BASE + i).collect();
        let balancer = Balancer::new("faults-scaleout", LB_PORT, &ports, retry_on);
        balancer.start().await;
        for i in 1..=GATEWAYS {
            balancer.wait_state(&format!("gw{i}"), true, Duration::from_secs(30)).await;
        }
        eprintln!("scaleout topology up: {features:?}, balancer {}", balancer.url());
        Self { cluster, gateways, balancer, features }
    }

    async fn stop(mut self) {
        self.balancer.stop().await;
        for gw in &mut self.gateways {
            gw.terminate().await;
        }
        if self.features.dedupe {
            blocking(|| redis("stop")).await;
        }
        // scripts/faults keeps the cluster for the next scenario and stops it at the end.
        if std::env::var_os("SCALEOUT_KEEP_CLUSTER").is_none() {
            self.cluster.stop().await;
        }
    }

    fn peak(&self) -> String {
        let mibs: Vec<String> = self.gateways.iter().map(|g| format!("{:.0}", g.peak_mib())).collect();
        format!("gateways {} MiB", mibs.join(" / "))
    }

    fn gateway_logs(&self) -> String {
        self.gateways.iter().map(GatewayProcess::log_text).collect::<Vec<_>>().join("\n")
    }
}

/// Retrying SDK users and beacon users side by side, through the balancer.
async fn clients<F: std::future::Future<Output = Instant>>(
    run: &str,
    url: &str,
    run_for: Duration,
    fault: F,
) -> (Vec<BatchLog>, Instant) {
    let sdk = Load { users: 10, run_for, ..Load::default() };
    let beacon = Beacons { users: 6, run_for, ..Beacons::default() };
    let (mut logs, (beacon_logs, _), healed) = futures::join!(
        load::run(sdk, run.to_owned(), url.to_owned()),
        beacons(beacon, format!("{run}-beacon"), url.to_owned()),
        fault
    );
    logs.extend(beacon_logs);
    (logs, healed)
}

/// One gateway taken out: when it was signalled, when the balancer saw it
/// down, and when it was started again.
#[derive(Debug, Clone)]
struct Outage {
    server: String,
    signalled: f64,
    seen_down: f64,
    restarted: f64,
}

/// What the balancer's access log says about one outage: requests it sent
/// to the gateway between the signal and seeing it down (the gateway was
/// draining or dying), and after it saw it down until the restart (must be 0).
fn routed_during(log: &[Routed], o: &Outage) -> (Vec<Routed>, usize) {
    let to_it = log.iter().filter(|r| r.server == o.server && r.path.starts_with("/v1/"));
    let before_down: Vec<Routed> =
        to_it.clone().filter(|r| r.sent_at >= o.signalled && r.sent_at < o.seen_down).cloned().collect();
    let after_down = to_it.filter(|r| r.sent_at >= o.seen_down && r.sent_at < o.restarted).count();
    (before_down, after_down)
}

/// Reads back, reconciles, adds the balancer's view, asserts the shared
/// guarantees (nothing acknowledged lost; with dedupe, nothing stored twice).
async fn settle(
    top: &Topology,
    run: &str,
    (title, injected): (&str, &str),
    logs: &[BatchLog],
    healed: Instant,
    duplicates_before: usize,
) -> Reconciliation {
    let stored = read_back(&top.cluster.brokers(), run).await;
    let mut r = reconcile(title, injected, logs, &stored, Some(healed));
    r.peak_rss = top.peak();
    r.explain_by_gateway_log(&top.gateway_logs());
    let log = top.balancer.access_log();
    let through: Vec<&Routed> = log.iter().filter(|x| x.path.starts_with("/v1/")).collect();
    let redispatched = through.iter().filter(|x| x.retries.starts_with('+')).count();
    let no_server = through.iter().filter(|x| x.server == "<NOSRV>").count();
    r.notes.push(format!(
        "{} gateways behind HAProxy (roundrobin, `GET /readyz` every 1 s, fall 1, rise 2, `retry-on {}`, \
         `option redispatch`); 10 retrying SDK users and 6 beacon users (never retry). Dedupe (`[dedupe] store = \
         \"redis\"`): {}; drain readiness (`server.drain_grace_secs = {DRAIN_GRACE_SECS}`): {}. Events answered \
         `duplicate`: {}. Balancer: {} requests routed, {} redispatched to another gateway after a failed \
         connection, {} answered by the balancer itself for want of a gateway.",
        GATEWAYS,
        top.balancer.retry_on,
        if top.features.dedupe { "on" } else { "off (this build has no `[dedupe]`)" },
        if top.features.drain { "on" } else { "off (this build has no `server.drain_grace_secs`)" },
        duplicate_answers() - duplicates_before,
        through.len(),
        redispatched,
        no_server
    ));
    r
}

fn assert_dedupe(r: &Reconciliation, f: Features) {
    if f.dedupe {
        assert_eq!(r.duplicates, 0, "{}: with dedupe on, no id is stored twice", r.scenario);
    } else {
        eprintln!("{}: dedupe is off in this build; {} ids stored twice (not asserted)", r.scenario, r.duplicates);
    }
}

#[actix_web::test]
#[ignore = "starts a three-broker cluster, three gateways and HAProxy; run by scripts/faults"]
async fn scaleout_rolling_restart_behind_the_balancer_loses_nothing() {
    let mut top = Topology::start("rolling", &[]).await;
    let run = run_id("roll");
    let url = top.balancer.url();
    let started = unix_now();
    let dups = duplicate_answers();
    let mut outages = Vec::new();
    let mut exits = Vec::new();
    let (logs, healed) = {
        let (gateways, balancer) = (&mut top.gateways, &top.balancer);
        clients(&run, &url, Duration::from_secs(34), async {
            sleep(Duration::from_secs(4)).await;
            for (i, gw) in gateways.iter_mut().enumerate() {
                let server = format!("gw{}", i + 1);
                let signalled = unix_now();
                let (exit, seen_down) =
                    futures::join!(gw.terminate(), balancer.wait_state(&server, false, Duration::from_secs(20)));
                exits.push(exit);
                sleep(Duration::from_secs(1)).await;
                let restarted = unix_now();
                gw.spawn().await;
                balancer.wait_state(&server, true, Duration::from_secs(30)).await;
                outages.push(Outage { server, signalled, seen_down, restarted });
                sleep(Duration::from_secs(2)).await;
            }
            Instant::now()
        })
        .await
    };
    let mut r = settle(
        &top,
        &run,
        (
            "Scale-out: rolling restart of every gateway behind HAProxy",
            "Three gateways behind HAProxy, three brokers. 4 s into the load gateway 1 gets SIGTERM; once it \
             exited it is started again 1 s later, and when the balancer sees it up again (two good `/readyz`) \
             and 2 s passed, gateway 2 gets SIGTERM, then gateway 3.",
        ),
        &logs,
        healed,
        dups,
    )
    .await;
    let log: Vec<Routed> = top.balancer.access_log().into_iter().filter(|x| x.sent_at >= started).collect();
    let mut after_down_total = 0;
    let mut failed_while_draining = 0;
    for o in &outages {
        let (before, after) = routed_during(&log, o);
        let not_ok = before.iter().filter(|x| x.status != 200).count();
        r.notes.push(format!(
            "{}: seen down by the balancer {:.2} s after SIGTERM; requests it sent there in between (the gateway \
             draining): {} ({} not answered 200); after it saw it down until the restart: **{after}**.",
            o.server,
            o.seen_down - o.signalled,
            before.len(),
            not_ok
        ));
        after_down_total += after;
        failed_while_draining += not_ok;
    }
    let exit_codes: Vec<String> = exits.iter().map(ToString::to_string).collect();
    r.notes.push(format!("Gateway exit statuses after SIGTERM: {}.", exit_codes.join(", ")));
    r.write("70-scaleout-rolling-restart");
    r.assert_no_loss();
    assert_dedupe(&r, top.features);
    assert_eq!(outages.len(), GATEWAYS as usize, "every gateway was restarted");
    assert_eq!(after_down_total, 0, "the balancer sent requests to a gateway it had taken out");
    assert!(exits.iter().all(std::process::ExitStatus::success), "every gateway exits cleanly: {exit_codes:?}");
    if top.features.drain {
        assert_eq!(failed_while_draining, 0, "a draining gateway answered a request with something else than 200");
    }
    top.stop().await;
}

#[actix_web::test]
#[ignore = "starts a three-broker cluster, three gateways and HAProxy; run by scripts/faults"]
async fn scaleout_gateway_kill9_behind_the_balancer_loses_nothing() {
    let mut top = Topology::start("gwkill", &[]).await;
    let run = run_id("sokill");
    let url = top.balancer.url();
    let started = unix_now();
    let dups = duplicate_answers();
    let mut outage = None;
    let (logs, healed) = {
        let (gw, balancer) = (&mut top.gateways[1], &top.balancer);
        clients(&run, &url, Duration::from_secs(16), async {
            sleep(Duration::from_secs(5)).await;
            let signalled = unix_now();
            gw.kill9();
            let seen_down = balancer.wait_state("gw2", false, Duration::from_secs(20)).await;
            sleep(Duration::from_secs(3)).await;
            let restarted = unix_now();
            gw.spawn().await;
            balancer.wait_state("gw2", true, Duration::from_secs(30)).await;
            outage = Some(Outage { server: "gw2".into(), signalled, seen_down, restarted });
            Instant::now()
        })
        .await
    };
    let mut r = settle(
        &top,
        &run,
        (
            "Scale-out: one gateway of three kill -9ed behind HAProxy",
            "Three gateways behind HAProxy, three brokers. 5 s into the load gateway 2 gets SIGKILL (its \
             in-flight requests get no answer: the balancer answers 502, or retries them on another gateway when \
             dedupe makes that safe); it is started again 3 s after the balancer saw it down.",
        ),
        &logs,
        healed,
        dups,
    )
    .await;
    let outage = outage.expect("the fault ran");
    let log: Vec<Routed> = top.balancer.access_log().into_iter().filter(|x| x.sent_at >= started).collect();
    let (before, after) = routed_during(&log, &outage);
    r.notes.push(format!(
        "gw2: seen down {:.2} s after the kill; requests the balancer sent there in between: {} ({} not answered \
         200: cut by the kill); after it saw it down until the restart: **{after}**.",
        outage.seen_down - outage.signalled,
        before.len(),
        before.iter().filter(|x| x.status != 200).count()
    ));
    r.write("71-scaleout-gateway-kill9");
    r.assert_no_loss();
    assert_dedupe(&r, top.features);
    assert_eq!(after, 0, "the balancer sent requests to a gateway it had taken out");
    top.stop().await;
}

#[actix_web::test]
#[ignore = "starts a three-broker cluster, three gateways and HAProxy; run by scripts/faults"]
async fn scaleout_broker_kill9_behind_the_balancer_loses_nothing() {
    let top = Topology::start("brokerkill", &[]).await;
    let run = run_id("sobroker");
    let url = top.balancer.url();
    let dups = duplicate_answers();
    let cluster = top.cluster.clone();
    let (logs, healed) = clients(&run, &url, Duration::from_secs(30), async {
        sleep(Duration::from_secs(5)).await;
        cluster.kill9(2).await;
        // KRaft fences a dead broker after broker.session.timeout.ms (9 s).
        sleep(Duration::from_secs(15)).await;
        cluster.start_node(2).await;
        Instant::now()
    })
    .await;
    let r = settle(
        &top,
        &run,
        (
            "Scale-out: one broker of three kill -9ed under three gateways",
            "Three gateways behind HAProxy, three brokers (RF 3, `min.insync.replicas=2`). 5 s into the load \
             broker node 2 gets SIGKILL; it is restarted 15 s later. Every gateway's producer loses the \
             partitions that node led until KRaft moves their leadership.",
        ),
        &logs,
        healed,
        dups,
    )
    .await;
    r.write("72-scaleout-broker-kill9");
    r.assert_no_loss();
    assert_dedupe(&r, top.features);
    top.stop().await;
}
