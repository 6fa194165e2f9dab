//! Gateway faults under steady load: the gateway process `kill -9`ed and
//! restarted, and the gateway shut down gracefully (SIGTERM: actix drains
//! in-flight requests, main flushes the producer) and restarted. Clients
//! retry what got no answer; every id answered 200 must be in Kafka.
//! Long-running: `cargo test -p eventgw --test faults_gateway -- --ignored --test-threads=1`.

mod common;
mod faults_harness;

use std::time::{Duration, Instant};

use faults_harness::cluster::Cluster;
use faults_harness::gateway_process::GatewayProcess;
use faults_harness::load::{Answer, BatchLog, Load};
use faults_harness::proxy::{Mode, Proxy};
use faults_harness::reconcile::{read_back, reconcile};
use faults_harness::{drive, run_id, sleep};

/// Requests that were in flight when the signal was sent: (answered, cut off).
fn in_flight_at(logs: &[BatchLog], at: Instant) -> (usize, usize) {
    let attempts = logs.iter().flat_map(|l| &l.attempts).filter(|a| a.started <= at && a.ended >= at);
    attempts.fold((0, 0), |(ok, cut), a| if a.answer == Answer::NoAnswer { (ok, cut + 1) } else { (ok + 1, cut) })
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults and scripts/test"]
async fn gateway_graceful_shutdown_mid_load_answers_nothing_200_it_did_not_deliver() {
    let cluster = Cluster::new("gateway-term", 1, 19340);
    cluster.start_fresh().await;
    let mut gw = GatewayProcess::start("gateway-term", &cluster.brokers(), 1).await;
    let run = run_id("term");
    let url = gw.url.clone();
    let load = Load { run_for: Duration::from_secs(16), ..Load::default() };
    let mut signalled = Instant::now();
    let mut exit = None;
    let (logs, healed) = drive(load, &run, &url, async {
        sleep(Duration::from_secs(5)).await;
        signalled = Instant::now();
        exit = Some(gw.terminate().await);
        sleep(Duration::from_secs(2)).await;
        gw.spawn().await;
        Instant::now()
    })
    .await;
    let exit = exit.expect("terminated");
    assert!(exit.success(), "the gateway exits cleanly after SIGTERM: {exit:?}\n{}", gw.log_text());
    assert!(gw.log_text().contains("Producer flushed"), "the producer was flushed before exit");
    let (answered, cut) = in_flight_at(&logs, signalled);
    let stored = read_back(&cluster.brokers(), &run).await;
    let mut r = reconcile(
        "Gateway graceful shutdown (SIGTERM) mid-load, then restart",
        "SIGTERM to the gateway process 5 s into the load: actix stops accepting, drains in-flight requests, \
         then main flushes the producer and exits; the gateway is started again 2 s later. Clients retry what \
         got no answer (connection refused while it was down).",
        &logs,
        &stored,
        Some(healed),
    );
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    r.explain_by_gateway_log(&gw.log_text());
    r.notes.push(format!(
        "Requests in flight at SIGTERM: {answered} answered, {cut} cut off; exit status {exit}. \
         Time from SIGTERM to exit is bounded by `server.shutdown_timeout_secs` (10 s here)."
    ));
    r.write("50-gateway-sigterm");
    r.assert_no_loss();
    cluster.stop().await;
}

/// The dedupe id log's directory for a scenario's gateway (fresh).
fn id_log(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("eventgw-faults-{name}-{}-ids", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.display().to_string()
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults"]
async fn gateway_kill9_mid_load_loses_nothing_acknowledged() {
    let cluster = Cluster::new("gateway-kill9", 1, 19350);
    cluster.start_fresh().await;
    let ids = id_log("gateway-kill9");
    let extra = [("EVENTGW__DEDUPE__PATH", ids.as_str())];
    let mut gw = GatewayProcess::start_with_env("gateway-kill9", &cluster.brokers(), 1, &extra).await;
    let run = run_id("gwkill9");
    let url = gw.url.clone();
    let load = Load { run_for: Duration::from_secs(16), ..Load::default() };
    let mut killed = Instant::now();
    let (logs, healed) = drive(load, &run, &url, async {
        sleep(Duration::from_secs(5)).await;
        killed = Instant::now();
        gw.kill9();
        sleep(Duration::from_secs(2)).await;
        gw.spawn().await;
        Instant::now()
    })
    .await;
    let (answered, cut) = in_flight_at(&logs, killed);
    let stored = read_back(&cluster.brokers(), &run).await;
    let mut r = reconcile(
        "Gateway kill -9 mid-load, then restart",
        "SIGKILL to the gateway process 5 s into the load (no drain, no flush: records in the producer's queue \
         may or may not have reached Kafka, and their requests get no answer); restarted 2 s later. Clients \
         retry every request that got no answer with the same messageIds. Dedupe on, the embedded store with \
         its id log (`[dedupe] path`).",
        &logs,
        &stored,
        Some(healed),
    );
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    r.explain_by_gateway_log(&gw.log_text());
    r.notes.push(format!("Requests in flight at the kill: {answered} answered, {cut} cut off (retried)."));
    r.notes.push(id_log_note(&gw.log_text()));
    r.write("60-gateway-kill9");
    r.assert_no_loss();
    assert_eq!(r.duplicates, 0, "with the id log, no retry after the kill is stored twice");
    cluster.stop().await;
}

/// What the restarted gateway's id log said (read back, in doubt, settled).
fn id_log_note(log: &str) -> String {
    let plain: String = strip_ansi(log);
    let field = |line: &str, name: &str| -> String {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .unwrap_or("?")
            .trim_matches('"')
            .to_owned()
    };
    let read = plain.lines().filter(|l| l.contains("Dedupe id log read back")).nth(1);
    let settled = plain.lines().find(|l| l.contains("Dedupe ids left in doubt by a crash settled"));
    match (read, settled) {
        (Some(read), settled) => format!(
            "After the restart the id log was read back in {} ms: {} ids stored, {} reserved and unsettled (in \
             doubt); {}",
            field(read, "millis"),
            field(read, "ids"),
            field(read, "in_doubt"),
            settled.map_or("none to look up in Kafka.".to_owned(), |l| format!(
                "looked up in Kafka in {} ms: {} were there (their retries answered `duplicate`), the others \
                 released (their retries produced).",
                field(l, "millis"),
                field(l, "in_kafka")
            ))
        ),
        (None, _) => "The restarted gateway did not log reading its id log back.".to_owned(),
    }
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Kills the gateway while Kafka's acknowledgements are held back (a proxy
/// passes the produce requests, holds the answers): every request in
/// flight then has its records in Kafka and no answer. With the id log the
/// restarted gateway finds them in doubt, looks them up in Kafka, and
/// answers their retries `duplicate`; without it (`with_id_log` false, the
/// control) the same retries are stored twice.
async fn kill9_with_acknowledgements_held(with_id_log: bool) {
    const PROXY: u16 = 19339;
    let name = if with_id_log { "gateway-held" } else { "gateway-held-control" };
    let mut cluster = Cluster::new("gateway-held", 1, 19330);
    cluster.proxy_base = Some(PROXY);
    cluster.start_fresh().await;
    let proxy = Proxy::start(PROXY, cluster.external_port(1)).await;
    let ids = id_log(name);
    let extra: Vec<(&str, &str)> = if with_id_log { vec![("EVENTGW__DEDUPE__PATH", ids.as_str())] } else { Vec::new() };
    let mut gw = GatewayProcess::start_with_env(name, &format!("127.0.0.1:{PROXY}"), 1, &extra).await;
    let run = run_id(if with_id_log { "held" } else { "heldctl" });
    let url = gw.url.clone();
    let load = Load { run_for: Duration::from_secs(14), ..Load::default() };
    let mut killed = Instant::now();
    let (logs, healed) = drive(load, &run, &url, async {
        sleep(Duration::from_secs(5)).await;
        proxy.set(Mode::HoldReplies);
        sleep(Duration::from_secs(1)).await;
        killed = Instant::now();
        gw.kill9();
        proxy.set(Mode::Pass);
        sleep(Duration::from_secs(1)).await;
        gw.spawn().await;
        Instant::now()
    })
    .await;
    let (answered, cut) = in_flight_at(&logs, killed);
    let stored = read_back(&cluster.brokers(), &run).await;
    let title = if with_id_log {
        "Gateway kill -9 while Kafka's acknowledgements are held (dedupe id log on)"
    } else {
        "Control: the same without the id log (dedupe in memory only)"
    };
    let mut r = reconcile(
        title,
        "A proxy between gateway and broker passes the produce requests and holds Kafka's answers for 1 s, \
         5 s into the load; then the gateway gets SIGKILL (every request in flight has its records in Kafka \
         and no answer) and is restarted 1 s later. Clients retry every request that got no answer.",
        &logs,
        &stored,
        Some(healed),
    );
    r.peak_rss = format!("gateway {:.0} MiB", gw.peak_mib());
    r.explain_by_gateway_log(&gw.log_text());
    r.notes.push(format!("Requests in flight at the kill: {answered} answered, {cut} cut off (retried)."));
    if with_id_log {
        r.notes.push(id_log_note(&gw.log_text()));
    } else {
        r.notes.push(
            "This control is expected to store ids twice: it proves the reconciliation sees what the id log \
             prevents above."
                .to_owned(),
        );
    }
    r.write(if with_id_log { "61-gateway-held" } else { "62-gateway-held-control" });
    r.assert_no_loss();
    assert!(cut > 0, "requests were cut off by the kill");
    if with_id_log {
        assert_eq!(r.duplicates, 0, "with the id log, no retry after the kill is stored twice");
        assert!(r.answered_duplicate > 0, "the retries of records that had landed were answered duplicate");
    } else {
        assert!(r.duplicates > 0, "without the id log the retries of records that had landed are stored twice");
    }
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults"]
async fn gateway_kill9_with_acknowledgements_held_stores_nothing_twice_with_the_id_log() {
    kill9_with_acknowledgements_held(true).await;
}

#[actix_web::test]
#[ignore = "starts its own broker; run by scripts/faults"]
async fn control_gateway_kill9_with_acknowledgements_held_stores_retries_twice_without_the_id_log() {
    kill9_with_acknowledgements_held(false).await;
}
