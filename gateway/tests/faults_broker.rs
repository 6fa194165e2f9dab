//! Broker faults under steady load, each on its own single-node broker:
//! `kill -9` then restart; `SIGSTOP` past the producer's message timeout
//! then `SIGCONT`; a slow, black-holed and resetting network through a TCP
//! proxy. Every id answered 200 must be read back from Kafka.
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
use faults_harness::{DELIVERY_TIMEOUT_MS, drive, run_id, sleep};

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn broker_kill9_then_restart_loses_nothing_acknowledged() {
    let cluster = Cluster::new("broker-kill9", 1, 19300);
    cluster.start_fresh().await;
    let gw = GatewayProcess::start("broker-kill9", &cluster.brokers(), 1).await;
    let run = run_id("kill9");
    let load = Load { run_for: Duration::from_secs(30), ..Load::default() };
    let (logs, healed) = drive(load, &run, &gw.url, async {
        sleep(Duration::from_secs(5)).await;
        cluster.kill9(1).await;
        sleep(Duration::from_secs(5)).await;
        cluster.start_node(1).await;
        Instant::now()
    })
    .await;
    let stored = read_back(&cluster.brokers(), &run).await;
    let mut r = reconcile(
        "Broker kill -9, then restart (single node)",
        "The only broker is killed with SIGKILL 5 s into the load, left down 5 s, then restarted (log recovery included).",
        &logs,
        &stored,
        Some(healed),
    );
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    r.explain_by_gateway_log(&gw.log_text());
    r.write("10-broker-kill9");
    r.assert_no_loss();
    assert!(r.requests.get("503").copied().unwrap_or(0) > 0, "the outage was visible as 503s");
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn broker_paused_past_the_message_timeout_loses_nothing_acknowledged() {
    let cluster = Cluster::new("broker-pause", 1, 19310);
    cluster.start_fresh().await;
    let gw = GatewayProcess::start("broker-pause", &cluster.brokers(), 1).await;
    let run = run_id("pause");
    let pause = Duration::from_millis(DELIVERY_TIMEOUT_MS + 3000);
    let load = Load { run_for: Duration::from_secs(22), ..Load::default() };
    let (logs, healed) = drive(load, &run, &gw.url, async {
        sleep(Duration::from_secs(5)).await;
        cluster.pause(1).await;
        sleep(pause).await;
        cluster.resume(1).await;
        Instant::now()
    })
    .await;
    let stored = read_back(&cluster.brokers(), &run).await;
    let mut r = reconcile(
        "Broker paused (SIGSTOP) past the message timeout",
        &format!(
            "The only broker is frozen with SIGSTOP for {:.0} s (the producer's message timeout is {:.0} s), then \
             resumed with SIGCONT. Requests it had already received complete after the resume, so some ids answered \
             503 are in Kafka: the client's retry then stores them twice, which is the documented at-least-once.",
            pause.as_secs_f64(),
            DELIVERY_TIMEOUT_MS as f64 / 1000.0
        ),
        &logs,
        &stored,
        Some(healed),
    );
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    r.explain_by_gateway_log(&gw.log_text());
    r.write("20-broker-pause");
    r.assert_no_loss();
    assert!(r.requests.get("503").copied().unwrap_or(0) > 0, "the freeze was visible as 503s");
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn slow_black_holed_and_resetting_network_loses_nothing_acknowledged() {
    const PROXY: u16 = 19329;
    let mut cluster = Cluster::new("proxy", 1, 19320);
    cluster.proxy_base = Some(PROXY);
    cluster.start_fresh().await;
    let proxy = Proxy::start(PROXY, cluster.external_port(1)).await;
    let gw = GatewayProcess::start("proxy", &format!("127.0.0.1:{PROXY}"), 1).await;
    let run = run_id("proxy");
    let load = Load { run_for: Duration::from_secs(30), ..Load::default() };
    let (logs, healed) = drive(load, &run, &gw.url, async {
        sleep(Duration::from_secs(4)).await;
        proxy.set(Mode::Delay(Duration::from_millis(400)));
        sleep(Duration::from_secs(5)).await;
        proxy.set(Mode::Pass);
        sleep(Duration::from_secs(2)).await;
        proxy.set(Mode::BlackHole);
        sleep(Duration::from_millis(DELIVERY_TIMEOUT_MS + 3000)).await;
        proxy.set(Mode::Pass);
        sleep(Duration::from_secs(2)).await;
        for _ in 0..4 {
            proxy.reset_all();
            sleep(Duration::from_millis(800)).await;
        }
        Instant::now()
    })
    .await;
    let stored = read_back(&cluster.brokers(), &run).await;
    let mut r = reconcile(
        "Slow, black-holed and resetting network (TCP proxy)",
        &format!(
            "Every byte between gateway and broker goes through a proxy in the test (the broker advertises the \
             proxy's port). Injected in turn: 400 ms delay on every chunk for 5 s; a black hole (nothing passes \
             either way, held bytes delivered on heal) for {:.0} s, past the message timeout; then four rounds \
             of TCP RST on every open connection, 0.8 s apart.",
            (DELIVERY_TIMEOUT_MS + 3000) as f64 / 1000.0
        ),
        &logs,
        &stored,
        Some(healed),
    );
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    r.explain_by_gateway_log(&gw.log_text());
    r.write("30-network-proxy");
    r.assert_no_loss();
    cluster.stop().await;
}
