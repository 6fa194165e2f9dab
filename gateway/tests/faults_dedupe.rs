//! Dedupe's shared store out of reach while a record is in flight: the
//! sequence nemesis seed 13 found (docs/nemesis.md). A batch reaches gw1,
//! whose path to the broker is black-holed (a TCP proxy), so its records
//! stay in gw1's producer past the request deadline (503). Redis is then
//! paused with `SIGSTOP` for longer than the old 12 s lease, so no gateway
//! can extend or read a reservation. When Redis answers again, the client
//! retries through gw2, which reaches the broker directly; then the path
//! heals and gw1's records land. Each event must be stored once: gw2 must
//! not treat a live gateway's reservation as one a dead gateway left.
//!
//! And a gateway killed while its record waits above the high watermark
//! (a frozen follower still in the ISR): a retry through the other gateway
//! must not look the id up in Kafka before the record can be seen there.
//!
//! Long-running: `cargo test -p eventgw --test faults_dedupe -- --ignored`
//! (scripts/faults runs them; the quick set in scripts/test runs the first).

mod common;
mod faults_harness;

use std::process::Command;
use std::time::{Duration, Instant};

use faults_harness::cluster::Cluster;
use faults_harness::gateway_process::GatewayProcess;
use faults_harness::proxy::{Mode, Proxy};
use faults_harness::reconcile::read_back;
use faults_harness::{REQUEST_TIMEOUT_MS, blocking, run_id, sleep};
use serde_json::{Value, json};

const CLUSTER_PORT: u16 = 19650;
const PROXY: u16 = 19659;
const REDIS_PORT: u16 = 29270;
const REDIS_INSTANCE: &str = "faults-dedupe";
/// Longer than the lease before the fix (twice the 6 s request deadline),
/// shorter than `dedupe.lease_secs` (30 s) less one extension period.
const REDIS_PAUSE: Duration = Duration::from_secs(14);

fn redis(action: &str) -> bool {
    Command::new(common::repo_root().join("scripts/redis"))
        .arg(action)
        .env("REDIS_INSTANCE", REDIS_INSTANCE)
        .env("REDIS_PORT", REDIS_PORT.to_string())
        .status()
        .is_ok_and(|s| s.success())
}

/// Stops this scenario's Redis (resumed first if paused) even when it fails.
struct RedisGuard;

impl Drop for RedisGuard {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(state_dir().join(format!("redis/{REDIS_INSTANCE}/redis.pid"))) {
            let _ = Command::new("kill").args(["-CONT", pid.trim()]).status();
        }
        redis("stop");
    }
}

fn state_dir() -> std::path::PathBuf {
    std::env::var_os("EVENTGW_STATE").map_or_else(|| common::repo_root().join(".cache"), std::path::PathBuf::from)
}

fn redis_pid() -> String {
    let pid = std::fs::read_to_string(state_dir().join(format!("redis/{REDIS_INSTANCE}/redis.pid")));
    pid.expect("scripts/redis wrote a pid file").trim().to_owned()
}

fn signal(sig: &str, pid: &str) {
    let ok = Command::new("kill").args([sig, pid]).status().is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid} (Redis) failed");
}

fn batch(ids: &[String]) -> Value {
    let events: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"type": "track", "event": "Link Clicked", "userId": "lease-user", "messageId": id,
                "properties": {"href": "https://shop.example/next"}})
        })
        .collect();
    json!({ "batch": events })
}

/// The answer's status and its events' statuses, or `timeout`.
async fn post(client: &reqwest::Client, url: &str, body: &Value) -> (u16, String) {
    match client.post(format!("{url}/v1/batch")).basic_auth("demo-write-key", Some("")).json(body).send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            let answer: Value = r.json().await.unwrap_or(Value::Null);
            let events: Vec<&str> = answer["events"]
                .as_array()
                .map(|a| a.iter().map(|e| e["status"].as_str().unwrap_or("?")).collect())
                .unwrap_or_default();
            let code = answer["code"].as_str().or_else(|| answer["error"]["code"].as_str()).unwrap_or("");
            (status, format!("{code}{}{}", if code.is_empty() { "" } else { " " }, events.join(",")))
        }
        Err(e) => (0, format!("no answer: {e}")),
    }
}

fn report(file: &str, text: &str) {
    let dir = std::env::var("FAULTS_REPORT_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| common::repo_root().join("target/faults-report"));
    std::fs::create_dir_all(&dir).expect("report dir");
    std::fs::write(dir.join(format!("{file}.md")), text).expect("report");
    eprintln!("{text}");
}

/// Retries `body` through `url` every second until answered 200 or `limit` passed.
async fn retry_until_200(client: &reqwest::Client, url: &str, body: &Value, limit: Duration) -> ((u16, String), usize) {
    let started = Instant::now();
    let mut attempts = 1;
    let mut last = post(client, url, body).await;
    while last.0 != 200 && started.elapsed() < limit {
        sleep(Duration::from_secs(1)).await;
        last = post(client, url, body).await;
        attempts += 1;
    }
    (last, attempts)
}

/// `text` without its terminal colour codes (the gateway's log has them).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| c.is_ascii_alphabetic());
        } else {
            out.push(c);
        }
    }
    out
}

fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

async fn metrics(gw: &GatewayProcess) -> String {
    match reqwest::get(format!("{}/metrics", gw.url)).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Two gateway processes sharing this scenario's Redis (started fresh),
/// each warmed up with one event, and the batch of 4 the scenario sends.
struct Pair {
    gw1: GatewayProcess,
    gw2: GatewayProcess,
    client: reqwest::Client,
    run: String,
    ids: Vec<String>,
    body: Value,
    redis: RedisGuard,
}

impl Pair {
    /// `brokers`: gw1's and gw2's; `lease`: `dedupe.lease_secs`, if set.
    async fn start(name: &str, brokers: [&str; 2], replication: u16, lease: Option<&str>) -> Self {
        assert!(blocking(|| redis("reset") && redis("start")).await, "scripts/redis start ({REDIS_INSTANCE})");
        let redis = RedisGuard;
        let url = format!("redis://127.0.0.1:{REDIS_PORT}/");
        let mut env = vec![
            ("EVENTGW__DEDUPE__STORE", "redis"),
            ("EVENTGW__DEDUPE__REDIS_URL", url.as_str()),
            ("EVENTGW__DEDUPE__ON_STORE_ERROR", "unavailable"),
        ];
        env.extend(lease.map(|l| ("EVENTGW__DEDUPE__LEASE_SECS", l)));
        let gw1 = GatewayProcess::start_with_env(&format!("{name}-1"), brokers[0], replication, &env).await;
        let gw2 = GatewayProcess::start_with_env(&format!("{name}-2"), brokers[1], replication, &env).await;
        let client = reqwest::Client::builder().timeout(Duration::from_secs(40)).build().expect("client");
        let run = run_id(name);
        // Both gateways reach the broker and Redis.
        for (gw, n) in [(&gw1, 0), (&gw2, 1)] {
            let warm = batch(&[format!("{run}-warm{n}")]);
            assert_eq!(post(&client, &gw.url, &warm).await, (200, "accepted".into()), "{} warms up", gw.url);
        }
        let ids: Vec<String> = (0..4).map(|i| format!("{run}-e{i}")).collect();
        let body = batch(&ids);
        Self { gw1, gw2, client, run, ids, body, redis }
    }

    /// The batch sent to gw1 in a task of its own; its answer.
    fn send_to_gw1(&self) -> actix_web::rt::task::JoinHandle<(u16, String)> {
        let (client, url, body) = (self.client.clone(), self.gw1.url.clone(), self.body.clone());
        actix_web::rt::spawn(async move { post(&client, &url, &body).await })
    }

    /// Stops both gateways and Redis.
    async fn stop(self) {
        let Self { gw1, gw2, redis, .. } = self;
        drop((gw1, gw2));
        blocking(move || drop(redis)).await;
    }
}

#[actix_web::test]
#[ignore = "starts its own broker and Redis; run by scripts/faults and scripts/test"]
async fn redis_paused_past_the_old_lease_while_a_record_is_in_flight_stores_it_once() {
    let mut cluster = Cluster::new("dedupe-lease", 1, CLUSTER_PORT);
    cluster.proxy_base = Some(PROXY);
    cluster.start_fresh().await;
    let proxy = Proxy::start(PROXY, cluster.external_port(1)).await;
    let pair = Pair::start("dedupe-lease", [&format!("127.0.0.1:{PROXY}"), &cluster.brokers()], 1, None).await;
    let Pair { gw1, gw2, client, run, ids, body, .. } = &pair;
    proxy.set(Mode::BlackHole);
    let first = pair.send_to_gw1();
    sleep(Duration::from_secs(1)).await;
    let pid = redis_pid();
    signal("-STOP", &pid);
    let paused = Instant::now();
    sleep(REDIS_PAUSE).await;
    signal("-CONT", &pid);
    let first = first.await.expect("first request");
    assert_eq!(first.0, 503, "gw1 cannot reach the broker: answered 503 at the deadline ({first:?})");

    // The retry through gw2, at once: gw1's records are still in flight.
    let retried = post(client, &gw2.url, body).await;
    sleep(Duration::from_secs(1)).await;
    proxy.set(Mode::Pass);
    let healed = Instant::now();
    // Retries until answered 200, as an SDK does.
    let mut last = retried.clone();
    let mut attempts = 1;
    while last.0 != 200 && healed.elapsed() < Duration::from_secs(60) {
        sleep(Duration::from_millis(500)).await;
        last = post(client, &gw2.url, body).await;
        attempts += 1;
    }
    let stored = read_back(&cluster.brokers(), run).await;
    let copies: Vec<usize> = ids.iter().map(|id| stored.ids.get(id).copied().unwrap_or(0)).collect();
    let lost = counter(&metrics(gw1).await, "eventgw_dedupe_leases_lost_total");
    let extend_errors = metrics(gw1)
        .await
        .lines()
        .filter(|l| l.starts_with("eventgw_dedupe_store_errors_total") && l.contains("extend"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();

    let text = format!(
        "### Dedupe store paused past the old lease while a record is in flight\n\n\
         The sequence nemesis seed 13 found (docs/nemesis.md). Two gateways share Redis (`on_store_error = \
         \"unavailable\"`); gw1 reaches the only broker through a TCP proxy that black-holes every byte from just \
         before a batch of 4 is sent to it, so the records stay in gw1's producer past the {} s deadline. 1 s \
         later Redis is paused with `SIGSTOP` for {} s (longer than the 12 s lease of before the fix), then \
         resumed; the client retries through gw2 (direct to the broker) at once, the proxy heals 1 s later, and \
         the client retries every 0.5 s until answered 200.\n\n\
         | measure | value |\n| --- | --- |\n\
         | first request (gw1) | {} {} |\n\
         | retry through gw2 right after the pause | {} {} |\n\
         | last answer, after {} attempts through gw2 | {} {} |\n\
         | copies of each event in Kafka | {:?} |\n\
         | gw1's failed extensions during the pause / reservations lost | {} / {} |\n",
        REQUEST_TIMEOUT_MS / 1000,
        REDIS_PAUSE.as_secs(),
        first.0,
        first.1,
        retried.0,
        retried.1,
        attempts,
        last.0,
        last.1,
        copies,
        extend_errors,
        lost,
    );
    report("76-dedupe-lease", &text);

    assert!(paused.elapsed() > REDIS_PAUSE, "the pause ran");
    assert_ne!(retried.0, 200, "a retry while gw1's records were in flight was accepted by gw2: {retried:?}");
    assert_eq!(last.0, 200, "the retry was answered 200 once gw1's records landed: {last:?}");
    assert_eq!(copies, vec![1; 4], "each event stored once ({text})");
    assert_eq!(lost, 0, "gw1 kept its reservations");
    assert!(extend_errors > 0.0, "gw1's extensions failed during the pause (the fault was in place)");

    proxy.set(Mode::Pass);
    pair.stop().await;
    cluster.stop().await;
}

#[actix_web::test]
#[ignore = "starts a three-broker cluster and Redis; run by scripts/faults"]
async fn a_dead_gateways_record_above_the_high_watermark_is_found_before_a_retry_is_produced() {
    let mut cluster = Cluster::new("dedupe-hw", 3, 19660);
    // Node 3, frozen, stays in the ISR until the leaders' lag check drops
    // it (30-45 s), not KRaft's fencing (9 s by default).
    cluster.extra_props = "broker.session.timeout.ms=60000".into();
    cluster.start_fresh().await;
    cluster.followers_only("web.tracking", 3).await;
    // The shortest lease (twice the request deadline), so the retry comes
    // while the record is still above the watermark.
    let brokers = cluster.brokers();
    let mut pair = Pair::start("dedupe-hw", [&brokers, &brokers], 3, Some("12")).await;
    cluster.pause(3).await;
    let frozen = Instant::now();
    sleep(Duration::from_secs(1)).await;
    let first = pair.send_to_gw1();
    sleep(Duration::from_secs(3)).await;
    pair.gw1.kill9();
    let Pair { gw2, client, run, ids, body, .. } = &pair;
    let first = first.await.expect("first request");
    // Past the killed gateway's lease (12 s from its last extension).
    sleep(Duration::from_secs(13)).await;
    let retried = post(client, &gw2.url, body).await;
    let retried_at = frozen.elapsed();
    let resume = Duration::from_secs(40).saturating_sub(frozen.elapsed());
    sleep(resume).await;
    cluster.resume(3).await;
    let (last, attempts) = retry_until_200(client, &gw2.url, body, Duration::from_secs(90)).await;
    let answered_at = frozen.elapsed();
    let stored = read_back(&cluster.brokers(), run).await;
    let copies: Vec<usize> = ids.iter().map(|id| stored.ids.get(id).copied().unwrap_or(0)).collect();
    let looked_up =
        plain(&gw2.log_text()).lines().filter(|l| l.contains("looked up in Kafka") && l.contains("in_kafka=4")).count();

    let text = format!(
        "### Dedupe: a gateway killed while its record waits above the high watermark\n\n\
         Two gateways share Redis; three brokers, `web.tracking` with node 3 a follower of every partition \
         (`broker.session.timeout.ms=60000`, so a frozen node 3 stays in the ISR until the leaders' lag check \
         drops it, 30-45 s). Node 3 is frozen with SIGSTOP; 1 s later a batch of 4 goes to gw1 (its records \
         are appended by the leaders but wait above the high watermark, unacknowledged); 3 s later gw1 gets \
         SIGKILL. 13 s later, past gw1's 12 s lease, the client retries through gw2; node 3 is resumed 40 s \
         after it was frozen; the client retries every second until answered 200.\n\n\
         | measure | value |\n| --- | --- |\n\
         | first request (gw1, killed) | {} {} |\n\
         | retry through gw2 at {:.0} s | {} {} |\n\
         | last answer, {:.0} s after the freeze, after {} attempts | {} {} |\n\
         | gw2's look-ups that found all 4 in Kafka | {} |\n\
         | copies of each event in Kafka | {:?} |\n",
        first.0,
        first.1,
        retried_at.as_secs_f64(),
        retried.0,
        retried.1,
        answered_at.as_secs_f64(),
        attempts,
        last.0,
        last.1,
        looked_up,
        copies,
    );
    report("76b-dedupe-high-watermark", &text);

    assert_ne!(first.0, 200, "gw1 was killed before Kafka acknowledged: {first:?}");
    assert_ne!(retried.0, 200, "the retry was answered while the record was above the watermark: {retried:?}");
    assert_eq!(last, (200, "duplicate,duplicate,duplicate,duplicate".into()), "found in Kafka once visible");
    assert_eq!(copies, vec![1; 4], "each event stored once ({text})");
    assert_eq!(looked_up, 1, "gw2 took the ids over once and found them in Kafka");

    pair.stop().await;
    cluster.stop().await;
}
