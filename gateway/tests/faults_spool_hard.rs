//! The spool's defects from issue 28 ("Hard to break, round three"), each
//! against a real broker of its own and the real gateway binary: a segment
//! damaged under a running gateway, a full disk (a real small tmpfs mounted
//! by the scenario: run as root), spooled records whose first send landed
//! just before the gateway crashed, and spool mode ending while traffic
//! continues. Each reconciles by id: nothing answered 200 is missing
//! (except the records the damage destroyed, exactly those), nothing is
//! stored twice.
//! Long-running: `cargo test -p eventgw --test faults_spool_hard -- --ignored --test-threads=1`.

mod common;
mod faults_harness;
mod spool_support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use faults_harness::cluster::Cluster;
use faults_harness::gateway_process::GatewayProcess;
use faults_harness::load::{self, Load};
use faults_harness::proxy::{Mode, Proxy};
use faults_harness::reconcile::{read_back, reconcile};
use faults_harness::{run_id, sleep};
use spool_support::{
    Beacons, Healed, beacons, borrowed, ids, segments, settle, spool_dir, spool_env, spool_status, wait_drained,
};

async fn metrics(url: &str) -> String {
    reqwest::get(format!("{url}/metrics")).await.expect("metrics").text().await.expect("text")
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults"]
async fn spool_segment_damaged_while_running_is_quarantined_and_the_rest_delivered() {
    let cluster = Cluster::new("spool-live-damage", 1, 19480);
    cluster.start_fresh().await;
    let dir = spool_dir("live-damage");
    let mut env = spool_env(&dir);
    env.push(("EVENTGW__SPOOL__SEGMENT_BYTES".into(), "16384".into()));
    let gw = GatewayProcess::start_with_env("spool-live-damage", &cluster.brokers(), 1, &borrowed(&env)).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spoollivedamage");
    let healed = Healed::default();
    let load = Beacons {
        run_for: Duration::from_secs(10),
        after_heal: Some((healed.clone(), Duration::from_secs(10))),
        ..Beacons::default()
    };
    let mut cut = HashSet::new();
    let (answers, healed) = futures::join!(beacons(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(2)).await;
        cluster.kill9(1).await;
        sleep(Duration::from_secs(5)).await;
        // The last sealed segment: not replayed yet (the broker is down), and
        // past the first ones, whose records' first sends were in flight at
        // the kill and reach Kafka that way when it is back (seen: cutting
        // the second segment lost nothing).
        let files = segments(&dir);
        assert!(files.len() >= 3, "several segments were written: {files:?}");
        let victim = &files[files.len() - 2];
        let before = ids(victim);
        let len = std::fs::metadata(victim).expect("meta").len();
        std::fs::OpenOptions::new().write(true).open(victim).expect("open").set_len(len / 2).expect("truncate");
        cut = before.difference(&ids(victim)).cloned().collect();
        sleep(Duration::from_secs(3)).await;
        cluster.start_node(1).await;
        healed.now()
    });
    assert!(!cut.is_empty(), "the truncation destroyed records");
    let title = "Spool: a segment truncated under the running gateway";
    let injected = "Spool on with 16 KiB segments, beacon clients. The broker is killed 2 s in; 5 s later, while the \
                    gateway spools, its last sealed segment file is cut to half its length (as a failing disk or a \
                    stray process would); the broker returns 3 s later and the beacons go on 10 s more. Replay must \
                    detect the damage, report it (log, `eventgw_spool_damaged_total`, \
                    `eventgw_spool_quarantined_segments`), move the file to `quarantine/` and deliver everything \
                    else: exactly the records the cut destroyed are missing, none twice.";
    let r = settle(&cluster.brokers(), &run, title, injected, answers, healed, &gw).await;
    let lost: HashSet<String> = r.lost.iter().cloned().collect();
    let text = metrics(&gw.url).await;
    let quarantined = std::fs::read_dir(dir.join("quarantine")).map_or(0, |d| d.count());
    let mut r = r;
    r.notes.push(format!(
        "Records the cut destroyed: {}; missing from Kafka: {} (exactly those: {}). Segment files in \
         `quarantine/`: {quarantined}. Readiness after the drain: {:?}.",
        cut.len(),
        lost.len(),
        lost == cut,
        spool_status(&gw.url).await.map(|s| s["canDrain"].clone())
    ));
    r.write("74a-spool-live-damage");
    eprintln!("{}", r.markdown());
    assert_eq!(lost, cut, "exactly the destroyed records are missing");
    assert_eq!(quarantined, 1, "the damaged segment is quarantined");
    assert!(text.contains("eventgw_spool_quarantined_segments 1"), "{text}");
    assert!(gw.log_text().contains("Damaged spool segment quarantined"));
    cluster.stop().await;
}

/// A tmpfs of `size` mounted on `dir` (unmounted on drop): a real disk that fills.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Self {
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount runs");
        assert!(status.success(), "mounting a tmpfs on {} needs root", dir.display());
        Self(dir.to_owned())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// The spool's record count as `/metrics` gives it (`eventgw_spool_records`).
/// `eventgw_spool_replayed_total`: records replay has had acknowledged.
async fn replayed(url: &str) -> u64 {
    let text = metrics(url).await;
    let line = text.lines().find(|l| l.starts_with("eventgw_spool_replayed_total"));
    line.and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok()).map_or(0, |v| v as u64)
}

async fn spool_records(url: &str) -> u64 {
    let text = metrics(url).await;
    let line = text.lines().find(|l| l.starts_with("eventgw_spool_records ")).expect("eventgw_spool_records");
    line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).expect("a number") as u64
}

/// Samples `/readyz` `n` times over about 2 s; returns how many were 503.
async fn not_ready_samples(url: &str, n: usize) -> usize {
    let mut red = 0;
    for _ in 0..n {
        if reqwest::get(format!("{url}/readyz")).await.is_ok_and(|r| r.status().as_u16() == 503) {
            red += 1;
        }
        sleep(Duration::from_millis(250)).await;
    }
    red
}

#[actix_web::test]
#[ignore = "starts its own broker and mounts a tmpfs (root); run by scripts/faults"]
async fn spool_disk_full_is_all_or_nothing_per_request() {
    let cluster = Cluster::new("spool-disk-full", 1, 19490);
    cluster.start_fresh().await;
    let dir = spool_dir("disk-full");
    let _disk = SmallDisk::mount(&dir, "384k");
    let env = spool_env(&dir);
    let mut gw = GatewayProcess::start_with_env("spool-disk-full", &cluster.brokers(), 1, &borrowed(&env)).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spooldiskfull");
    let load = Load { run_for: Duration::from_secs(16), retry_for: Duration::from_secs(90), ..Load::default() };
    let before = load::duplicate_answers();
    let mut seen = (0, 0, 0, String::new(), (0, 0, 0));
    let (logs, healed) = futures::join!(load::run(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(3)).await;
        cluster.kill9(1).await;
        sleep(Duration::from_secs(6)).await;
        // The disk is full: look at the spool, readiness and a refusal.
        // From /metrics: /readyz is 503 here and its body then carries no spool section.
        let first = spool_records(&gw.url).await;
        let on_disk: usize = segments(&dir).iter().map(|p| ids(p).len()).sum();
        let then = spool_records(&gw.url).await;
        let empty = segments(&dir).iter().filter(|p| std::fs::metadata(p).map_or(0, |m| m.len()) <= 8).count();
        let red = not_ready_samples(&gw.url, 8).await;
        let refusal = reqwest::Client::new()
            .post(format!("{}/v1/track", gw.url))
            .basic_auth("demo-write-key", Some(""))
            .json(&serde_json::json!({"type": "track", "event": "Link Clicked", "userId": "probe",
                "messageId": format!("probe-{run}"), "properties": {"href": "https://a.example/"}}))
            .send()
            .await
            .expect("answer");
        let refusal = format!("{} {}", refusal.status().as_u16(), refusal.text().await.unwrap_or_default());
        seen = (empty, red, segments(&dir).len(), refusal, (first, on_disk as u64, then));
        // A restart on that spool (an operator's, or the orchestrator's).
        gw.terminate().await;
        gw.spawn().await;
        sleep(Duration::from_secs(3)).await;
        cluster.start_node(1).await;
        Instant::now()
    });
    wait_drained(&gw.url, Duration::from_secs(120)).await;
    let stored = read_back(&cluster.brokers(), &run).await;
    let title = "Spool: the spool's disk full (a 384 KiB tmpfs)";
    let injected = "Spool on, on a real 384 KiB tmpfs (`spool.max_bytes` far above it, so the disk fills first); SDK \
                    clients that retry a batch not answered 200 with the same ids; dedupe on. The broker is killed \
                    3 s in: the spool fills the disk within seconds and every write fails. 6 s later the gateway is \
                    restarted (SIGTERM) on that spool, and the broker returns 3 s after that. A request answered \
                    503 must leave nothing on disk that replay could send, so its retry is the only copy.";
    let mut r = reconcile(title, injected, &logs, &stored, Some(healed));
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    let (empty, red, files, refusal, (first, on_disk, then)) = seen;
    r.notes.push(format!(
        "With the disk full: {files} segment file(s), {empty} of them empty; `/readyz` answered 503 in {red} of 8 \
         samples; the spool's record count {first}..{then} against {on_disk} records in its files; a request was \
         answered `{}`. Retries answered `duplicate`: {}.",
        refusal.chars().take(200).collect::<String>(),
        load::duplicate_answers() - before
    ));
    r.write("74b-spool-disk-full-tmpfs");
    eprintln!("{}", r.markdown());
    r.assert_no_loss();
    assert_eq!(r.duplicates, 0, "all or nothing per request: no record of a 503 is replayed");
    assert!(r.requests.get("503").copied().unwrap_or(0) > 0, "the full disk answered 503");
    assert!(empty <= 1, "no empty segment per failed write: {empty} of {files}");
    assert!(red >= 6, "readiness is red while the disk refuses writes and Kafka is away: {red} of 8");
    // The probe is refused while the disk is full, or (once a failed write
    // was cut back and left room for one small record) spooled whole; a
    // refusal never shows the spool's path.
    assert!(refusal.starts_with("503") || refusal.contains("\"spooled\":1"), "{refusal}");
    assert!(!refusal.contains(&*dir.display().to_string()), "{refusal}");
    assert!(first <= on_disk && on_disk <= then, "record count {first}..{then}, on disk {on_disk}");
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults"]
async fn spool_records_stored_before_a_crash_are_not_replayed_twice() {
    const PROXY: u16 = 19619;
    let mut cluster = Cluster::new("spool-inflight", 1, 19610);
    cluster.proxy_base = Some(PROXY);
    cluster.start_fresh().await;
    let proxy = Proxy::start(PROXY, cluster.external_port(1)).await;
    let dir = spool_dir("inflight");
    let brokers = format!("127.0.0.1:{PROXY}");
    let mut gw = GatewayProcess::start_with_env("spool-inflight", &brokers, 1, &borrowed(&spool_env(&dir))).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spoolinflight");
    let healed = Healed::default();
    let load = Beacons {
        run_for: Duration::from_secs(8),
        after_heal: Some((healed.clone(), Duration::from_secs(10))),
        ..Beacons::default()
    };
    let (answers, healed) = futures::join!(beacons(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(3)).await;
        proxy.set(Mode::HoldReplies);
        sleep(Duration::from_secs(3)).await;
        gw.kill9();
        proxy.set(Mode::Pass);
        sleep(Duration::from_secs(1)).await;
        gw.spawn().await;
        healed.now()
    });
    let title = "Spool: records stored by Kafka, unacknowledged, then the gateway killed";
    let injected = "Spool on, beacon clients, the broker behind the harness's proxy. 3 s in the proxy holds the \
                    broker's answers (requests still pass, so records land unacknowledged); after 1 s they are \
                    spooled with their first send in flight. 3 s in, the gateway gets SIGKILL, the proxy passes \
                    again and the gateway restarts on that spool: replay must find the records Kafka already \
                    holds (read back by `event-id`) and not send them again.";
    let mut r = settle(&brokers, &run, title, injected, answers, healed, &gw).await;
    let skipped = gw.log_text().matches("are not sent again").count();
    r.notes.push(format!("Replay rounds that skipped records already in Kafka: {skipped}."));
    r.write("74c-spool-inflight-crash");
    r.assert_no_loss();
    assert!(skipped > 0, "the restarted gateway found records already in Kafka");
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults"]
async fn spool_records_a_replay_round_had_sent_at_a_crash_are_not_replayed_twice() {
    // Issue 32's 30-minute nemesis found this: replay produced a round, Kafka
    // stored it, and the process died (or could not write its checkpoint on
    // a full disk) before the checkpoint moved past it; the next process
    // replayed those records blindly.
    const PROXY: u16 = 19649;
    let mut cluster = Cluster::new("spool-replay-crash", 1, 19640);
    cluster.proxy_base = Some(PROXY);
    cluster.start_fresh().await;
    let proxy = Proxy::start(PROXY, cluster.external_port(1)).await;
    let dir = spool_dir("replay-crash");
    let brokers = format!("127.0.0.1:{PROXY}");
    let mut gw = GatewayProcess::start_with_env("spool-replay-crash", &brokers, 1, &borrowed(&spool_env(&dir))).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spoolreplaycrash");
    let healed = Healed::default();
    let load = Beacons {
        run_for: Duration::from_secs(9),
        after_heal: Some((healed.clone(), Duration::from_secs(10))),
        ..Beacons::default()
    };
    let (answers, healed) = futures::join!(beacons(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(3)).await;
        // First sends wait for answers: spooled in flight, then every new
        // request is spooled behind them.
        proxy.set(Mode::HoldReplies);
        sleep(Duration::from_secs(3)).await;
        // The held answers arrive, so replay gets going on the backlog...
        proxy.set(Mode::Pass);
        let deadline = Instant::now() + Duration::from_secs(5);
        while replayed(&gw.url).await == 0 && Instant::now() < deadline {
            sleep(Duration::from_millis(10)).await;
        }
        // ...and the round it is sending now lands unacknowledged.
        proxy.set(Mode::HoldReplies);
        sleep(Duration::from_secs(2)).await;
        gw.kill9();
        proxy.set(Mode::Pass);
        sleep(Duration::from_secs(1)).await;
        gw.spawn().await;
        healed.now()
    });
    let title = "Spool: a replay round stored by Kafka, unacknowledged, then the gateway killed";
    let injected = "Spool on, beacon clients, the broker behind the harness's proxy. 3 s in the proxy holds the \
                    broker's answers, so requests are spooled; 3 s later it lets them through until replay has had \
                    a round acknowledged, then holds them again: replay's round in flight lands \
                    unacknowledged. 2 s later the gateway gets SIGKILL, the proxy passes again and the gateway \
                    restarts on that spool: the records the dead process's replay had sent must be looked up \
                    in Kafka, not sent again.";
    let mut r = settle(&brokers, &run, title, injected, answers, healed, &gw).await;
    let log = gw.log_text();
    let checked = log.matches("records a previous process's replay may have sent").count();
    let skipped = log.matches("are not sent again").count();
    r.notes.push(format!(
        "Restarts that looked up what the previous replay had sent: {checked}. Replay rounds that skipped records already in Kafka: {skipped}."
    ));
    r.write("74f-spool-replay-round-crash");
    r.assert_no_loss();
    assert!(checked > 0, "the killed gateway's replay had a round in flight");
    assert!(skipped > 0, "the restarted gateway found that round in Kafka");
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts a three-broker cluster; run by scripts/faults"]
async fn spool_records_above_the_high_watermark_at_a_crash_are_not_replayed_twice() {
    // Issue 32's nemesis found this: a leader appends a record while a
    // follower in its ISR has just stopped, so the high watermark stays
    // below it; the gateway spools it as in flight and dies; the next
    // process's read-back cannot see it yet, replays it, and once the
    // follower leaves the ISR both copies are committed.
    let mut cluster = Cluster::new("spool-hw", 3, 19630);
    // The window is KRaft's fencing of the frozen node (or the leader's lag
    // check, 30 s): 30 s here instead of 9, so a restart on a busy machine
    // is inside it.
    cluster.extra_props = "broker.session.timeout.ms=30000".into();
    cluster.start_fresh().await;
    // Node 3 is a follower of every partition the beacons write and leads
    // none: frozen, it holds their high watermark, while the read-back
    // (which needs each partition's leader) is not blocked by it.
    cluster.followers_only("web.tracking", 3).await;
    let dir = spool_dir("hw");
    let mut gw = GatewayProcess::start_with_env("spool-hw", &cluster.brokers(), 3, &borrowed(&spool_env(&dir))).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spoolhw");
    let healed = Healed::default();
    let load = Beacons {
        run_for: Duration::from_secs(8),
        after_heal: Some((healed.clone(), Duration::from_secs(10))),
        ..Beacons::default()
    };
    let (answers, healed) = futures::join!(beacons(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(3)).await;
        cluster.pause(3).await;
        sleep(Duration::from_secs(3)).await;
        gw.kill9();
        gw.spawn().await;
        sleep(Duration::from_secs(15)).await;
        cluster.resume(3).await;
        healed.now()
    });
    let title = "Spool: records above the high watermark when the gateway is killed (three brokers)";
    let injected = "Spool on, beacon clients, three brokers (RF 3, `min.insync.replicas=2`, \
                    `broker.session.timeout.ms=30000`); `web.tracking` created with node 3 a follower of every \
                    partition. 3 s in node 3 is frozen with SIGSTOP: records the leaders append wait above the \
                    high watermark for it (until KRaft fences it, 30 s), so they are spooled with their first \
                    send in flight. 3 s later \
                    the gateway gets SIGKILL and restarts at once on that spool, inside the window; node 3 is \
                    resumed 15 s later. Replay must not read back (and re-send) those records before the \
                    watermark can have moved past them.";
    let mut r = settle(&cluster.brokers(), &run, title, injected, answers, healed, &gw).await;
    let log = gw.log_text();
    let waited = log.matches("once no follower can hold them above the high watermark").count();
    let skipped = log.matches("are not sent again").count();
    r.notes.push(format!(
        "Replay waits for the high watermark: {waited}. Replay rounds that skipped records already in Kafka: {skipped}."
    ));
    r.write("74e-spool-inflight-above-high-watermark");
    r.assert_no_loss();
    assert!(waited > 0, "the restarted gateway found records left in flight on a replicated topic and waited");
    assert!(skipped > 0, "the restarted gateway found the records the old one had sent, once they were visible");
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults"]
async fn spool_mode_ends_while_traffic_continues() {
    let cluster = Cluster::new("spool-handover", 1, 19620);
    cluster.start_fresh().await;
    let dir = spool_dir("handover");
    let gw = GatewayProcess::start_with_env("spool-handover", &cluster.brokers(), 1, &borrowed(&spool_env(&dir))).await;
    spool_support::warm_up(&gw.url, Beacons::default().users).await;
    let run = run_id("spoolhandover");
    let healed = Healed::default();
    let tail = Duration::from_secs(25);
    let load =
        Beacons { run_for: Duration::from_secs(11), after_heal: Some((healed.clone(), tail)), ..Beacons::default() };
    let mut ended = None;
    let (answers, healed) = futures::join!(beacons(load, run.clone(), gw.url.clone()), async {
        sleep(Duration::from_secs(3)).await;
        cluster.kill9(1).await;
        sleep(Duration::from_secs(8)).await;
        cluster.start_node(1).await;
        let at = healed.now();
        while at.elapsed() < tail - Duration::from_secs(3) {
            if spool_status(&gw.url).await.is_some_and(|s| s["spooling"] == false) {
                ended = Some(at.elapsed());
                break;
            }
            sleep(Duration::from_millis(250)).await;
        }
        at
    });
    let title = "Spool: spool mode ends while beacons keep coming";
    let injected = "Spool on, beacon clients that keep sending throughout. The broker is killed 3 s in and \
                    restarted 8 s later; the beacons go on 25 s after it is back. Once replay has caught up, the \
                    gateway must hand over to direct produce under that load (new requests wait for replay's last \
                    round, at most `ack_timeout_ms`), not only when the clients stop.";
    let mut r = settle(&cluster.brokers(), &run, title, injected, answers, healed, &gw).await;
    r.notes.push(format!(
        "Spool mode ended under load {} after the broker was back.",
        ended.map_or("never".into(), |d| format!("{:.1} s", d.as_secs_f64()))
    ));
    r.write("74d-spool-handover-under-load");
    r.assert_no_loss();
    spool_support::assert_every_request_200(&r);
    assert!(ended.is_some(), "spool mode ended while traffic continued");
    cluster.stop().await;
}
