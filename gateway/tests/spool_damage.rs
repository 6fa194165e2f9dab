//! Damaged spool segments, against the real broker and the real binary: the
//! gateway spools beacon events while the broker is down and is killed
//! (SIGKILL); then one segment gets a flipped byte and the last one a torn
//! tail (cut mid-record, as a crash mid-write leaves it). On restart both
//! are detected by checksum and reported (log, `gateway spool inspect`,
//! metric), and every other record is replayed: exactly the damaged
//! records are missing from Kafka, which also shows that the reconciliation
//! sees a loss when there is one.
//! Long-running: `cargo test -p eventgw --test spool_damage -- --ignored`.

mod common;
mod faults_harness;
mod spool_support;

use std::collections::HashSet;
use std::process::Command;
use std::time::{Duration, Instant};

use faults_harness::cluster::Cluster;
use faults_harness::gateway_process::GatewayProcess;
use faults_harness::reconcile::{read_back, reconcile};
use faults_harness::{run_id, sleep};
use spool_support::{Beacons, beacons, borrowed, ids, segments, spool_dir, spool_env, wait_drained};

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn torn_tail_and_flipped_byte_are_reported_and_the_rest_replayed() {
    let cluster = Cluster::new("spool-damage", 1, 19450);
    cluster.start_fresh().await;
    let dir = spool_dir("damage");
    let mut env = spool_env(&dir);
    env.push(("EVENTGW__SPOOL__SEGMENT_BYTES".into(), "16384".into()));
    let mut gw = GatewayProcess::start_with_env("spool-damage", &cluster.brokers(), 1, &borrowed(&env)).await;
    cluster.kill9(1).await;
    let run = run_id("spooldamage");
    let load = Beacons { users: 4, run_for: Duration::from_secs(6), ..Beacons::default() };
    let beacon_run = beacons(load, run.clone(), gw.url.clone()).await;
    let (logs, spooled) = (beacon_run.logs, beacon_run.spooled);
    gw.kill9();
    let files = segments(&dir);
    assert!(files.len() >= 3, "several segments were written: {files:?}");
    // A flipped byte in the middle of the second segment...
    let flipped = &files[1];
    let before = ids(flipped);
    let mut bytes = std::fs::read(flipped).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(flipped, &bytes).expect("flip");
    let mut damaged: HashSet<String> = before.difference(&ids(flipped)).cloned().collect();
    // ...and a torn tail on the last one (the last record cut in half).
    let torn = files.last().expect("a segment");
    let before = ids(torn);
    let len = std::fs::metadata(torn).expect("meta").len();
    std::fs::OpenOptions::new().write(true).open(torn).expect("open").set_len(len - 100).expect("tear");
    damaged.extend(before.difference(&ids(torn)).cloned());
    assert_eq!(damaged.len(), 2, "one record lost to each damage: {damaged:?}");
    let inspect = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["spool", "inspect", "--config"])
        .arg(gw.config_path())
        .envs(gw.env().iter().cloned())
        .output()
        .expect("gateway spool inspect");
    let inspect = String::from_utf8_lossy(&inspect.stdout).to_string();
    assert!(inspect.contains("checksum failure") && inspect.contains("torn tail"), "inspect reports: {inspect}");
    cluster.start_node(1).await;
    let healed = Instant::now();
    gw.spawn().await;
    wait_drained(&gw.url, Duration::from_secs(120)).await;
    sleep(Duration::from_millis(500)).await;
    let log = gw.log_text();
    assert!(log.contains("torn tail") && log.contains("checksum failure"), "the gateway reports both: {log}");
    let metrics = reqwest::get(format!("{}/metrics", gw.url)).await.expect("metrics").text().await.expect("text");
    assert!(metrics.contains("eventgw_spool_damaged_total 2"), "damage counted: {metrics}");
    let stored = read_back(&cluster.brokers(), &run).await;
    let mut r = reconcile(
        "Spool: a torn tail and a flipped byte",
        "Spool on with 16 KiB segments; the broker is down; 4 beacon users send for 6 s, all answered 200 \
         `spooled`; the gateway is killed (SIGKILL). One byte in the middle of the second segment is flipped, \
         and the last segment loses its last 100 bytes. Then the broker and the gateway are restarted on that \
         spool. This scenario is expected to miss exactly the two damaged records: it shows the damage is \
         detected and reported, everything else is replayed, and the reconciliation sees the loss.",
        &logs,
        &stored,
        Some(healed),
    );
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    let lost: HashSet<String> = r.lost.iter().cloned().collect();
    r.notes.push(format!(
        "Answered `spooled`: {spooled}. Missing from Kafka: {} (exactly the damaged records: {}). `gateway spool \
         inspect` before the restart:\n\n```\n{}```",
        lost.len(),
        lost == damaged,
        inspect.lines().filter(|l| l.contains("damaged")).collect::<Vec<_>>().join("\n") + "\n"
    ));
    r.write("78-spool-damaged-segments");
    eprintln!("{}", r.markdown());
    assert_eq!(lost, damaged, "exactly the damaged records are missing");
    assert_eq!(r.duplicates, 0);
    cluster.stop().await;
}
