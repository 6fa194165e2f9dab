//! Whether the servers a test needs (Kafka, Redis, the Schema Registry)
//! are there, checked once per test process, so `cargo test --workspace`
//! on a machine without them passes and says what it skipped and how to
//! run it, while CI can never skip silently: with `CI` or
//! `EVENTGW_REQUIRE_SERVERS=1` set (`scripts/test` sets the latter), a
//! missing server fails the test instead. `EVENTGW_SKIP_SERVERS=1`
//! (`scripts/test quick`) skips them without looking.
//!
//! Standard library only (a TCP connection and the server's own protocol),
//! so other crates' tests include this file too (`#[path]`).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// How long one check waits to connect and for an answer.
const PATIENCE: Duration = Duration::from_secs(3);

/// True when the test must return at once: Kafka (`KAFKA_BROKERS`, default
/// 127.0.0.1:9092) does not answer a metadata request and skipping is
/// allowed (a line on stderr says so). Panics when servers are required.
/// Call first thing: `if common::without_kafka() { return; }`.
pub fn without_kafka() -> bool {
    static UP: OnceLock<Result<(), String>> = OnceLock::new();
    let brokers = std::env::var("KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into());
    let first = brokers.split(',').next().unwrap_or_default().trim().to_owned();
    missing(
        UP.get_or_init(|| unless_skipped(|| kafka_metadata(&first))),
        &format!("Kafka at {brokers}"),
        "scripts/kafka start",
    )
}

/// As [`without_kafka`], for the Redis that `scripts/test` starts for
/// dedupe's shared store (`REDIS_PORT`, default 6390): it must answer PING.
pub fn without_redis() -> bool {
    static UP: OnceLock<Result<(), String>> = OnceLock::new();
    let port = std::env::var("REDIS_PORT").unwrap_or_else(|_| "6390".into());
    let address = format!("127.0.0.1:{port}");
    let start = "REDIS_INSTANCE=test REDIS_PORT=6390 scripts/redis start";
    missing(UP.get_or_init(|| unless_skipped(|| redis_ping(&address))), &format!("Redis at {address}"), start)
}

/// As [`without_kafka`], for the Schema Registry (`REGISTRY_URL`, default
/// `scripts/registry`'s): `GET <url>/subjects` must answer 200.
pub fn without_registry() -> bool {
    static UP: OnceLock<Result<(), String>> = OnceLock::new();
    let url = std::env::var("REGISTRY_URL").unwrap_or_else(|_| "http://127.0.0.1:18481/apis/ccompat/v7".into());
    let check = UP.get_or_init(|| unless_skipped(|| http_ok(&format!("{}/subjects", url.trim_end_matches('/')))));
    missing(check, &format!("the Schema Registry at {url}"), "scripts/registry start")
}

/// Whether a missing server fails the test rather than skipping it.
pub fn servers_required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false" && v != "0")
        || std::env::var("EVENTGW_REQUIRE_SERVERS").is_ok_and(|v| v == "1")
}

/// Whether every server is to be treated as missing without looking
/// (`EVENTGW_SKIP_SERVERS=1`, `scripts/test quick`): the quick tier neither
/// starts nor uses servers, whatever happens to run on this machine.
pub fn servers_skipped() -> bool {
    std::env::var("EVENTGW_SKIP_SERVERS").is_ok_and(|v| v == "1")
}

fn missing(check: &Result<(), String>, what: &str, start: &str) -> bool {
    let Err(why) = check else { return false };
    assert!(
        servers_skipped() || !servers_required(),
        "needs {what}, which does not answer ({why}); CI or EVENTGW_REQUIRE_SERVERS=1 is set, so this fails \
         instead of skipping. Start it with `{start}`, or run scripts/test, which starts every server"
    );
    static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !said.iter().any(|w| w == what) {
        said.push(what.to_owned());
        // Straight to the stderr handle, not `eprintln!`: the test harness
        // captures the macro's output of passing tests and would hide it.
        let line = format!("skipped: {} needs {what} ({why}); run scripts/test, or start it with `{start}`\n", suite());
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
    true
}

/// The name of the test target this process runs (`api_e2e` from
/// `target/debug/deps/api_e2e-0123abcd`).
fn suite() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe.as_ref().and_then(|p| p.file_stem()).map(|s| s.to_string_lossy().into_owned());
    let stem = stem.unwrap_or_else(|| "this suite".into());
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_owned(),
        _ => stem,
    }
}

fn unless_skipped(check: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    if servers_skipped() { Err("EVENTGW_SKIP_SERVERS=1, as in scripts/test quick".into()) } else { check() }
}

fn connect(address: &str) -> Result<TcpStream, String> {
    let addr = address
        .to_socket_addrs()
        .map_err(|e| format!("{address}: {e}"))?
        .next()
        .ok_or_else(|| format!("{address}: no address"))?;
    let stream = TcpStream::connect_timeout(&addr, PATIENCE).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(PATIENCE)).map_err(|e| e.to_string())?;
    stream.set_write_timeout(Some(PATIENCE)).map_err(|e| e.to_string())?;
    Ok(stream)
}

/// A Metadata request (API key 3, version 4: every broker, no topic)
/// answered with the same correlation id and at least one broker: a Kafka
/// broker that serves, not only a port that accepts.
fn kafka_metadata(address: &str) -> Result<(), String> {
    const CORRELATION: i32 = 0x0e57_0001;
    let mut stream = connect(address)?;
    let client = b"eventgw-tests";
    let mut body = Vec::new();
    body.extend(3i16.to_be_bytes()); // Metadata
    body.extend(4i16.to_be_bytes()); // version 4
    body.extend(CORRELATION.to_be_bytes());
    body.extend((client.len() as i16).to_be_bytes());
    body.extend(client);
    body.extend(0i32.to_be_bytes()); // topics: none
    body.push(0); // allow_auto_topic_creation: false
    let mut request = (body.len() as i32).to_be_bytes().to_vec();
    request.extend(body);
    stream.write_all(&request).map_err(|e| format!("sending a metadata request: {e}"))?;
    let mut head = [0u8; 16]; // size, correlation id, throttle time, broker count
    stream.read_exact(&mut head).map_err(|e| format!("no metadata answer: {e}"))?;
    let field = |at: usize| i32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    if field(4) != CORRELATION {
        return Err(format!("not a Kafka answer (correlation id {:#x})", field(4)));
    }
    if field(12) < 1 {
        return Err("the metadata lists no broker".into());
    }
    Ok(())
}

/// `PING` answered `+PONG`.
fn redis_ping(address: &str) -> Result<(), String> {
    let mut stream = connect(address)?;
    stream.write_all(b"PING\r\n").map_err(|e| e.to_string())?;
    let mut answer = [0u8; 7];
    stream.read_exact(&mut answer).map_err(|e| format!("no answer to PING: {e}"))?;
    if &answer != b"+PONG\r\n" {
        return Err(format!("answered {:?} to PING", String::from_utf8_lossy(&answer)));
    }
    Ok(())
}

/// A plain-HTTP GET answered 200.
fn http_ok(url: &str) -> Result<(), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url}: only http:// is checked"))?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let mut stream = connect(authority)?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).map_err(|e| format!("no HTTP answer: {e}"))?;
    let status = String::from_utf8_lossy(&head[9..12]).into_owned();
    if status != "200" {
        return Err(format!("GET {path} answered {status}"));
    }
    Ok(())
}
