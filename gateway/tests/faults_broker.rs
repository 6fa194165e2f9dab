//! Broker faults under steady load, each on its own single-node broker:
//! `kill -9` then restart; `SIGSTOP` past the request deadline then
//! `SIGCONT`; a slow, black-holed and resetting network through a TCP
//! proxy. Every id answered 200 must be read back from Kafka; nothing sent
//! while Kafka could not acknowledge may be answered 200 before the fault
//! ended (the fault was really in place); and where a fault outlasts the
//! request deadline, some request must have been answered 503 in it.
//! Long-running: `cargo test -p eventgw --test faults_broker -- --ignored --test-threads=1`
//! (scripts/faults runs them and writes RELIABILITY.md).

mod common;
mod faults_harness;

use std::time::{Duration, Instant};

use faults_harness::cluster::Cluster;
use faults_harness::gateway_process::GatewayProcess;
use faults_harness::load::Load;
use faults_harness::proxy::{Mode, Proxy};
use faults_harness::reconcile::{read_back, reconcile};
use faults_harness::window::{self, Window, forces_503};
use faults_harness::{REQUEST_TIMEOUT_MS, drive, run_id, sleep};

/// How long the broker scenarios keep the only broker away: past the
/// request deadline by enough that a 503 is forced ([`forces_503`]).
fn outage() -> Duration {
    forces_503() + Duration::from_millis(1200)
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn broker_kill9_then_restart_loses_nothing_acknowledged() {
    let cluster = Cluster::new("broker-kill9", 1, 19300);
    cluster.start_fresh().await;
    let gw = GatewayProcess::start("broker-kill9", &cluster.brokers(), 1).await;
    let run = run_id("kill9");
    let down = outage();
    let load = Load { run_for: Duration::from_secs(30), ..Load::default() };
    let mut window = None;
    let (logs, healed) = drive(load, &run, &gw.url, async {
        sleep(Duration::from_secs(5)).await;
        cluster.kill9(1).await;
        let from = Instant::now();
        sleep(down).await;
        window = Some(Window { from, to: Instant::now() });
        cluster.start_node(1).await;
        Instant::now()
    })
    .await;
    let window = window.expect("the fault ran");
    let stored = read_back(&cluster.brokers(), &run).await;
    let mut r = reconcile(
        "Broker kill -9, then restart (single node)",
        &format!(
            "The only broker is killed with SIGKILL 5 s into the load, left down {:.0} s (longer than the 6 s request \
             deadline), then restarted (log recovery included).",
            down.as_secs_f64()
        ),
        &logs,
        &stored,
        Some(healed),
    );
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    r.explain_by_gateway_log(&gw.log_text());
    let seen = window.seen(&logs);
    r.notes.push(window::note("the broker was dead", &window, &seen));
    r.write("10-broker-kill9");
    r.assert_no_loss();
    window.assert_refused_with_503("broker killed", &logs);
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn broker_paused_past_the_request_deadline_loses_nothing_acknowledged() {
    let cluster = Cluster::new("broker-pause", 1, 19310);
    cluster.start_fresh().await;
    let gw = GatewayProcess::start("broker-pause", &cluster.brokers(), 1).await;
    let run = run_id("pause");
    let pause = outage();
    let load = Load { run_for: Duration::from_secs(24), ..Load::default() };
    let mut window = None;
    let (logs, healed) = drive(load, &run, &gw.url, async {
        sleep(Duration::from_secs(5)).await;
        cluster.pause(1).await;
        let from = Instant::now();
        sleep(pause).await;
        window = Some(Window { from, to: Instant::now() });
        cluster.resume(1).await;
        Instant::now()
    })
    .await;
    let window = window.expect("the fault ran");
    let stored = read_back(&cluster.brokers(), &run).await;
    let mut r = reconcile(
        "Broker paused (SIGSTOP) past the request deadline",
        &format!(
            "The only broker is frozen with SIGSTOP for {:.0} s, longer than the 6 s request deadline, then resumed \
             with SIGCONT (the kernel's `/proc` state of the process is checked: stopped, then running). Requests \
             not acknowledged by their deadline are answered 503; with dedupe on the producer keeps their records \
             (`dedupe.delivery_timeout_ms`, 10 min) and delivers them after the resume, and a client's retry of \
             such a batch is answered 503 while its records are in flight, then `duplicate`.",
            pause.as_secs_f64()
        ),
        &logs,
        &stored,
        Some(healed),
    );
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    r.explain_by_gateway_log(&gw.log_text());
    let seen = window.seen(&logs);
    r.notes.push(window::note("the broker was frozen", &window, &seen));
    r.write("20-broker-pause");
    r.assert_no_loss();
    window.assert_refused_with_503("broker frozen", &logs);
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn slow_black_holed_and_resetting_network_loses_nothing_acknowledged() {
    const PROXY: u16 = 19329;
    const BLACK_HOLE: Duration = Duration::from_millis(REQUEST_TIMEOUT_MS);
    let mut cluster = Cluster::new("proxy", 1, 19320);
    cluster.proxy_base = Some(PROXY);
    cluster.start_fresh().await;
    let proxy = Proxy::start(PROXY, cluster.external_port(1)).await;
    let gw = GatewayProcess::start("proxy", &format!("127.0.0.1:{PROXY}"), 1).await;
    let run = run_id("proxy");
    let load = Load { run_for: Duration::from_secs(30), ..Load::default() };
    let mut window = None;
    let (logs, healed) = drive(load, &run, &gw.url, async {
        sleep(Duration::from_secs(4)).await;
        proxy.set(Mode::Delay(Duration::from_millis(400)));
        sleep(Duration::from_secs(5)).await;
        proxy.set(Mode::Pass);
        sleep(Duration::from_secs(2)).await;
        proxy.set(Mode::BlackHole);
        let from = Instant::now();
        sleep(BLACK_HOLE).await;
        window = Some(Window { from, to: Instant::now() });
        proxy.set(Mode::Pass);
        sleep(Duration::from_secs(2)).await;
        for _ in 0..4 {
            proxy.reset_all();
            sleep(Duration::from_millis(800)).await;
        }
        Instant::now()
    })
    .await;
    let window = window.expect("the fault ran");
    let stored = read_back(&cluster.brokers(), &run).await;
    let mut r = reconcile(
        "Slow, black-holed and resetting network (TCP proxy)",
        &format!(
            "Every byte between gateway and broker goes through a proxy in the test (the broker advertises the \
             proxy's port). Injected in turn: 400 ms delay on every chunk for 5 s; a black hole (nothing passes \
             either way, held bytes delivered on heal) for {:.0} s, as long as the request deadline; then four \
             rounds of TCP RST on every open connection, 0.8 s apart.",
            BLACK_HOLE.as_secs_f64()
        ),
        &logs,
        &stored,
        Some(healed),
    );
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    r.explain_by_gateway_log(&gw.log_text());
    let seen = window.seen(&logs);
    r.notes.push(window::note("the network was black-holed", &window, &seen));
    r.write("30-network-proxy");
    r.assert_no_loss();
    // As long as the deadline, not longer: a 503 in it is possible, not forced.
    window.assert_nothing_acknowledged("network black-holed", &logs);
    cluster.stop().await;
}
