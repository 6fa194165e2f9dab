//! SIGTERM drains the running binary in the order a load balancer needs:
//! `/readyz` answers `503 draining` at once while every other request is
//! still served for `server.drain_grace_secs`; then the listener closes,
//! in-flight requests finish, the producer is flushed and the process
//! exits 0. A second signal cuts the grace short.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{answer, client};
use serde_json::json;

struct Running {
    child: Child,
    url: String,
    port: u16,
    log: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill").args([&format!("-{name}"), &self.child.id().to_string()]).status();
        assert!(status.expect("kill runs").success(), "kill -{name}");
    }

    /// Waits for the process to end; the deadline only stops a hung test.
    async fn exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the gateway did not exit:\n{}", self.log_text());
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn wait_for_log(&self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.log_text().contains(line) {
            assert!(Instant::now() < deadline, "no log line `{line}`:\n{}", self.log_text());
            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn start(name: &str, grace_secs: u64) -> Running {
    let port = TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
    let dir = std::env::temp_dir().join(format!("eventgw-drain-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let log = dir.join("gateway.log");
    let dev = common::repo_root().join("gateway/config/dev.toml");
    let topics = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["topics", "--config"])
        .arg(&dev)
        .env("EVENTGW__KAFKA__BROKERS", common::brokers())
        .output()
        .expect("gateway topics runs");
    assert!(topics.status.success(), "topics: {}", String::from_utf8_lossy(&topics.stderr));
    let child = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["serve", "--config"])
        .arg(&dev)
        .env("EVENTGW__KAFKA__BROKERS", common::brokers())
        .env("EVENTGW__SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env("EVENTGW__SERVER__DRAIN_GRACE_SECS", grace_secs.to_string())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("gateway starts");
    let running = Running { child, url: format!("http://127.0.0.1:{port}"), port, log };
    let deadline = Instant::now() + Duration::from_secs(30);
    while client().get(format!("{}/healthz", running.url)).send().await.is_err() {
        assert!(Instant::now() < deadline, "gateway did not start: {}", running.log_text());
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
    running
}

fn batch(user: &str) -> serde_json::Value {
    json!({"batch": [{"type": "track", "event": "Link Clicked", "userId": user,
        "properties": {"href": "https://shop.example/"}}]})
}

/// A fresh connection each time (a new client), so "still served" means
/// new connections are still accepted, not only kept-alive ones.
async fn get(gw: &Running, path: &str) -> (u16, String) {
    let response = client().get(format!("{}{path}", gw.url)).send().await.expect("answered");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

async fn post_batch(gw: &Running, user: &str) -> (u16, serde_json::Value) {
    let request = client().post(format!("{}/v1/batch", gw.url)).basic_auth("demo-write-key", Some(""));
    let (status, _, body) = answer(request.json(&batch(user)).send().await.expect("answered")).await;
    (status, body)
}

#[actix_web::test]
async fn sigterm_turns_readiness_red_and_serves_through_the_grace() {
    if common::without_kafka() {
        return;
    }
    // A grace far longer than the test's own requests can take on a loaded
    // machine: what is served during it must not depend on how fast they
    // run (a second signal ends it; the grace running out by itself is the
    // next test's).
    common::snapshot_ends(&common::brokers(), &["web.tracking".to_owned()]);
    let mut gw = start("grace", 3600).await;
    assert_eq!(get(&gw, "/readyz").await.0, 200, "ready before the signal: {}", gw.log_text());
    assert!(get(&gw, "/metrics").await.1.contains("eventgw_ready 1"));

    gw.signal("TERM");
    gw.wait_for_log("Draining").await;
    let (status, body) = get(&gw, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).expect("JSON error body");
    assert_eq!(body["code"], "draining");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("shutting down")), "{body}");
    assert!(get(&gw, "/metrics").await.1.contains("eventgw_ready 0"), "the gauge drops with the drain");
    assert_eq!(get(&gw, "/healthz").await.0, 200, "still alive");
    let user = common::unique("drain");
    let (status, body) = post_batch(&gw, &user).await;
    assert_eq!(status, 200, "events are still taken during the grace: {body}");
    assert_eq!(body["events"][0]["status"], "accepted", "{body}");

    gw.signal("INT");
    let exit = gw.exit(Duration::from_secs(120)).await;
    assert!(exit.success(), "exit 0 after the drain: {exit:?}\n{}", gw.log_text());
    let log = gw.log_text();
    assert!(log.contains("Producer flushed"), "the producer was flushed: {log}");
    let stored =
        common::find(&common::brokers(), "web.tracking", body["events"][0]["messageId"].as_str().expect("an id"));
    assert_eq!(stored.len(), 1, "the event taken during the grace is in Kafka");
}

#[actix_web::test]
async fn the_grace_runs_out_by_itself_then_the_process_exits_cleanly() {
    if common::without_kafka() {
        return;
    }
    let mut gw = start("expires", 1).await;
    gw.signal("TERM");
    let exit = gw.exit(Duration::from_secs(60)).await;
    assert!(exit.success(), "exit 0 after the drain: {exit:?}\n{}", gw.log_text());
    let log = gw.log_text();
    assert!(log.contains("Draining"), "the drain began: {log}");
    assert!(log.contains("Producer flushed"), "the producer was flushed: {log}");
    assert!(!log.contains("Second signal"), "the grace ran out by itself: {log}");
}

#[actix_web::test]
async fn a_second_signal_cuts_the_grace_short() {
    if common::without_kafka() {
        return;
    }
    // A grace far longer than the test's patience: only the second signal ends it.
    let mut gw = start("second", 3600).await;
    gw.signal("TERM");
    gw.wait_for_log("Draining").await;
    assert_eq!(get(&gw, "/readyz").await.0, 503);
    gw.signal("INT");
    let exit = gw.exit(Duration::from_secs(120)).await;
    assert!(exit.success(), "exit 0: {exit:?}\n{}", gw.log_text());
    assert!(gw.log_text().contains("Second signal: drain grace cut short"), "{}", gw.log_text());
}

/// Reads one HTTP/1.1 answer framed by `Content-Length` off `stream`.
fn read_answer(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).expect("answer head");
        bytes.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse::<usize>().expect("length"));
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).expect("answer body");
    bytes.extend(body);
    String::from_utf8_lossy(&bytes).into_owned()
}

#[actix_web::test]
async fn a_request_in_flight_when_the_listener_closes_is_answered() {
    if common::without_kafka() {
        return;
    }
    let mut gw = start("inflight", 0).await;
    // A first answered request proves the connection belongs to a worker
    // before the signal; the second is half sent across the shutdown.
    let mut stream = TcpStream::connect(("127.0.0.1", gw.port)).expect("connect");
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").expect("first request");
    assert!(read_answer(&mut stream).starts_with("HTTP/1.1 200"));
    let body = batch(&common::unique("inflight")).to_string();
    let head = format!(
        "POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic ZGVtby13cml0ZS1rZXk6\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let (first, rest) = body.as_bytes().split_at(body.len() / 2);
    stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(first)).expect("half the request");
    gw.signal("TERM");
    gw.wait_for_log("Closing the listener").await;
    stream.write_all(rest).expect("the rest of the body");
    let answer = read_answer(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 200"), "the in-flight request finished: {answer}");
    assert!(answer.contains("\"accepted\""), "{answer}");
    let exit = gw.exit(Duration::from_secs(60)).await;
    assert!(exit.success(), "exit 0: {exit:?}\n{}", gw.log_text());
    assert!(gw.log_text().contains("Producer flushed"), "{}", gw.log_text());
}
