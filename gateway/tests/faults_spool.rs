//! The spool under faults, with beacon-style clients that never retry
//! (what `navigator.sendBeacon` at page hide and a killed mobile app do):
//! every event answered 200 must be in Kafka afterwards, exactly once per
//! `messageId`, in per-key order. The only broker down (kill -9) for
//! `SPOOL_OUTAGE_SECS` (scripts/faults: 300; scripts/test: 20), paused
//! (SIGSTOP), black-holed by the TCP proxy; the gateway kill -9ed while
//! spooling; the disk limit reached; damaged segments; and the control:
//! the same beacons with the spool off lose events.
//! Long-running: `cargo test -p eventgw --test faults_spool -- --ignored --test-threads=1`.

mod common;
mod faults_harness;
mod spool_support;

use std::time::{Duration, Instant};

use faults_harness::cluster::Cluster;
use faults_harness::gateway_process::GatewayProcess;
use faults_harness::proxy::{Mode, Proxy};
use faults_harness::reconcile::{read_back, reconcile};
use faults_harness::{run_id, sleep};
use spool_support::{
    BeaconRun, Beacons, Healed, assert_every_request_200, beacons, borrowed, settle, spool_dir, spool_env,
};

fn outage() -> Duration {
    Duration::from_secs(std::env::var("SPOOL_OUTAGE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(20))
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn spool_broker_down_beacons_lose_nothing_answered() {
    let cluster = Cluster::new("spool-down", 1, 19400);
    cluster.start_fresh().await;
    let dir = spool_dir("down");
    let gw = GatewayProcess::start_with_env("spool-down", &cluster.brokers(), 1, &borrowed(&spool_env(&dir))).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spooldown");
    let down = outage();
    let healed = Healed::default();
    let load =
        Beacons { run_for: down, after_heal: Some((healed.clone(), Duration::from_secs(15))), ..Beacons::default() };
    let (answers, healed) = futures::join!(beacons(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(5)).await;
        cluster.kill9(1).await;
        sleep(down).await;
        cluster.start_node(1).await;
        healed.now()
    });
    let title = "Spool: the only broker down, beacon clients (no retries)";
    let injected = format!(
        "Spool on (`ack_timeout_ms = 1000`, request deadline 6 s). 16 beacon users each send a batch of 4 every \
         100 ms and never retry. The only broker is killed with SIGKILL 5 s in, left down {} s, then restarted; \
         the beacons keep sending until 15 s after it is back. Every request must be answered 200 (the spool is \
         far from full).",
        down.as_secs()
    );
    let r = settle(&cluster.brokers(), &run, title, &injected, answers, healed, &gw).await;
    r.write("70-spool-broker-down");
    r.assert_no_loss();
    assert_every_request_200(&r);
    assert!(gw.log_text().contains("Spooling started") && gw.log_text().contains("Spooling ended"));
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn spool_broker_paused_beacons_lose_nothing_answered() {
    let cluster = Cluster::new("spool-pause", 1, 19410);
    cluster.start_fresh().await;
    let dir = spool_dir("pause");
    let gw = GatewayProcess::start_with_env("spool-pause", &cluster.brokers(), 1, &borrowed(&spool_env(&dir))).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spoolpause");
    let pause = outage().min(Duration::from_secs(60));
    let healed = Healed::default();
    let load =
        Beacons { run_for: pause, after_heal: Some((healed.clone(), Duration::from_secs(12))), ..Beacons::default() };
    let (answers, healed) = futures::join!(beacons(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(5)).await;
        cluster.pause(1).await;
        sleep(pause).await;
        cluster.resume(1).await;
        healed.now()
    });
    let title = "Spool: the only broker paused (SIGSTOP), beacon clients";
    let injected = format!(
        "Spool on. The same beacon load; the broker is frozen with SIGSTOP 5 s in for {} s, then resumed. Records \
         in flight at the freeze are spooled and their first send kept: replay waits for its fate, so none is \
         stored twice.",
        pause.as_secs()
    );
    let r = settle(&cluster.brokers(), &run, title, &injected, answers, healed, &gw).await;
    r.write("71-spool-broker-pause");
    r.assert_no_loss();
    assert_every_request_200(&r);
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn spool_network_black_holed_beacons_lose_nothing_answered() {
    const PROXY: u16 = 19429;
    let mut cluster = Cluster::new("spool-proxy", 1, 19420);
    cluster.proxy_base = Some(PROXY);
    cluster.start_fresh().await;
    let proxy = Proxy::start(PROXY, cluster.external_port(1)).await;
    let dir = spool_dir("proxy");
    let brokers = format!("127.0.0.1:{PROXY}");
    let gw = GatewayProcess::start_with_env("spool-proxy", &brokers, 1, &borrowed(&spool_env(&dir))).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spoolproxy");
    let hole = outage().min(Duration::from_secs(60));
    let healed = Healed::default();
    let load =
        Beacons { run_for: hole, after_heal: Some((healed.clone(), Duration::from_secs(12))), ..Beacons::default() };
    let (answers, healed) = futures::join!(beacons(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(5)).await;
        proxy.set(Mode::BlackHole);
        sleep(hole).await;
        proxy.set(Mode::Pass);
        healed.now()
    });
    let title = "Spool: network to the broker black-holed (TCP proxy), beacon clients";
    let injected = format!(
        "Spool on. Every byte between gateway and broker goes through the harness's proxy; 5 s in it holds \
         everything for {} s, then delivers what it held and passes again.",
        hole.as_secs()
    );
    let r = settle(&cluster.brokers(), &run, title, &injected, answers, healed, &gw).await;
    r.write("72-spool-network-black-hole");
    r.assert_no_loss();
    assert_every_request_200(&r);
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn spool_gateway_kill9_while_spooling_loses_nothing_answered() {
    let cluster = Cluster::new("spool-gwkill", 1, 19430);
    cluster.start_fresh().await;
    let dir = spool_dir("gwkill");
    let mut gw =
        GatewayProcess::start_with_env("spool-gwkill", &cluster.brokers(), 1, &borrowed(&spool_env(&dir))).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spoolgwkill");
    let url = gw.url.clone();
    let load = Beacons { run_for: Duration::from_secs(28), ..Beacons::default() };
    let mut spooled_at_kill = serde_json::Value::Null;
    let (answers, healed) = futures::join!(beacons(load, run.clone(), url), async {
        sleep(Duration::from_secs(3)).await;
        cluster.kill9(1).await;
        sleep(Duration::from_secs(7)).await;
        spooled_at_kill = spool_support::spool_status(&gw.url).await.unwrap_or_default();
        gw.kill9();
        sleep(Duration::from_secs(2)).await;
        gw.spawn().await;
        sleep(Duration::from_secs(5)).await;
        cluster.start_node(1).await;
        Instant::now()
    });
    let title = "Spool: the gateway kill -9ed while spooling, then restarted";
    let injected = "Spool on, beacon clients. The broker is killed 3 s in; 7 s later, while the gateway spools, the \
                    gateway gets SIGKILL (requests in flight get no answer, and are not retried); it is restarted \
                    2 s later on the same spool, which it replays first; the broker returns 5 s after that.";
    let mut r = settle(&cluster.brokers(), &run, title, injected, answers, healed, &gw).await;
    r.notes.push(format!("Spool at the kill: {spooled_at_kill}."));
    r.write("73-spool-gateway-kill9");
    r.assert_no_loss();
    assert!(gw.log_text().contains("Spool left by a previous process"), "the restart replayed the old spool");
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn spool_full_answers_503_and_recovers_by_itself() {
    let cluster = Cluster::new("spool-full", 1, 19440);
    cluster.start_fresh().await;
    let dir = spool_dir("full");
    let mut env = spool_env(&dir);
    env.push(("EVENTGW__SPOOL__MAX_BYTES".into(), "262144".into()));
    env.push(("EVENTGW__SPOOL__SEGMENT_BYTES".into(), "65536".into()));
    let gw = GatewayProcess::start_with_env("spool-full", &cluster.brokers(), 1, &borrowed(&env)).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spoolfull");
    let load = Beacons { run_for: Duration::from_secs(40), ..Beacons::default() };
    let (answers, healed) = futures::join!(beacons(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(3)).await;
        cluster.kill9(1).await;
        sleep(Duration::from_secs(20)).await;
        cluster.start_node(1).await;
        Instant::now()
    });
    let title = "Spool: the disk limit reached";
    let injected = "Spool on with `max_bytes = 262144` (256 KiB, 64 KiB segments), beacon clients. The broker is \
                    down from 3 s to 23 s (then restarted): the spool fills within seconds, then requests are \
                    answered 503 (`kafka_unavailable`, the spool is full); when the broker is back the spool \
                    drains by itself. Then the same beacon load runs 5 s more, with no operator action.";
    let mut r = settle(&cluster.brokers(), &run, title, injected, answers, healed, &gw).await;
    let after_run = run_id("spoolfullafter");
    let after = Beacons { run_for: Duration::from_secs(5), ..Beacons::default() };
    let after = beacons(after, after_run.clone(), gw.url.clone()).await;
    let after_spooled = after.spooled;
    let after_stored = read_back(&cluster.brokers(), &after_run).await;
    let recovered = reconcile("after", "", &after.logs, &after_stored, None);
    r.notes.push(format!(
        "After the drain: {} of {} events answered 200 ({after_spooled} spooled), {} of them missing from Kafka.",
        recovered.acked,
        recovered.events_sent,
        recovered.lost.len()
    ));
    r.write("74-spool-disk-full");
    r.assert_no_loss();
    assert!(r.requests.get("503").copied().unwrap_or(0) > 0, "the full spool answered 503");
    recovered.assert_no_loss();
    assert_eq!(recovered.acked, recovered.events_sent, "every request is answered 200 again after the drain");
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn control_spool_off_beacons_lose_events() {
    let cluster = Cluster::new("spool-control", 1, 19460);
    cluster.start_fresh().await;
    // Dedupe off too, as a gateway with the defaults runs: with it on, the producer keeps a 503'd
    // request's records for `dedupe.delivery_timeout_ms` (10 min) and delivers them when the broker
    // returns, so the beacons' events would land and this control would show no loss.
    let defaults = [("EVENTGW__DEDUPE__ENABLED", "false")];
    let gw = GatewayProcess::start_with_env("spool-control", &cluster.brokers(), 1, &defaults).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spooloff");
    let down = Duration::from_secs(20);
    // Beacons keep coming well after the broker is back, as in real life:
    // reading back right after a broker restart can miss the newest records
    // until the partition's next write moves its high watermark.
    let load = Beacons { run_for: down + Duration::from_secs(45), ..Beacons::default() };
    let (BeaconRun { logs, spooled, .. }, healed) = futures::join!(beacons(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(5)).await;
        cluster.kill9(1).await;
        sleep(down).await;
        cluster.start_node(1).await;
        Instant::now()
    });
    let stored = read_back(&cluster.brokers(), &run).await;
    let mut r = reconcile(
        "Control: the same beacon clients with the spool off",
        &format!(
            "Spool and dedupe off (the defaults: the producer gives up on a record after \
             `kafka.delivery_timeout_ms`, 3 s). The same beacon load; the broker is down {} s. The gateway keeps its \
             promise (nothing answered 200 is lost) but answers 503, and a beacon never retries: those events are \
             gone. This is what the spool scenarios above would show if the spool did not work.",
            down.as_secs()
        ),
        &logs,
        &stored,
        Some(healed),
    );
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    r.notes.push(format!(
        "Events sent and never stored (a beacon's loss): **{}** of {}; answered `spooled`: {spooled}. Ids stored \
         twice without a client retry, if any, come from the producer path without the spool across the broker \
         restart (its 3 s message timeout; cause not investigated further); with the spool on, the long \
         `message.timeout.ms` and the fate tracking gave none in the scenarios above.",
        r.unacked_absent, r.events_sent
    ));
    r.write("79-spool-control-off");
    eprintln!("{}", r.markdown());
    assert!(r.lost.is_empty(), "the gateway's own promise holds without the spool: {:?}", r.lost);
    assert_eq!(r.foreign, 0);
    assert!(r.unacked_absent > 0, "without the spool, beacon events sent during the outage are lost");
    cluster.stop().await;
}
