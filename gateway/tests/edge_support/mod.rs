//! Helpers for the HTTP edge tests: the real server on port 0 with the
//! in-memory sink (no Kafka needed), and raw sockets for what an HTTP
//! client library would hide (framing, stalls, connection closes).
#![allow(dead_code, missing_docs)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::dev::ServerHandle;
use gateway::AppState;
use gateway::config::Config;
use gateway::sink::MemorySink;
use serde_json::Value;

/// The checked-in dev configuration; its brokers are never contacted.
pub fn dev_config() -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/dev.toml");
    let env = vec![("EVENTGW__KAFKA__BROKERS".to_owned(), "127.0.0.1:1".to_owned())];
    Config::load_with_env(&path, env.into_iter()).expect("dev config loads")
}

/// The real server with every record kept in memory.
pub struct MemGateway {
    pub url: String,
    pub addr: String,
    pub sink: Arc<MemorySink>,
    pub state: Arc<AppState>,
    handle: ServerHandle,
}

impl MemGateway {
    /// Serves `config` on 127.0.0.1:0. Call within an actix runtime.
    pub async fn start(config: Config) -> Self {
        let sink = Arc::new(MemorySink::default());
        let state = Arc::new(AppState::new(config, Arc::clone(&sink) as _).expect("state builds"));
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
        let addr = listener.local_addr().expect("local addr").to_string();
        let server = gateway::serve(Arc::clone(&state), listener).expect("server starts");
        let handle = server.handle();
        actix_web::rt::spawn(server);
        Self { url: format!("http://{addr}"), addr, sink, state, handle }
    }

    pub async fn stop(self) {
        self.handle.stop(false).await;
    }

    /// The `value` of every record produced so far, as JSON.
    pub fn values(&self) -> Vec<Value> {
        self.sink.records().iter().map(|r| serde_json::from_slice(&r.payload).expect("JSON record")).collect()
    }
}

/// Status, headers and JSON body (`Null` when not JSON) of an answer.
pub async fn answer(response: reqwest::Response) -> (u16, reqwest::header::HeaderMap, Value) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("body");
    (status, headers, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// `Basic base64(user:password)` spelled by hand, so tests control every byte.
pub fn basic(credentials: &str) -> String {
    use base64::Engine;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(credentials))
}

/// Writes `bytes` on a fresh connection, then reads until the server
/// closes it or `wait` passes: what arrived, how long it took, and whether
/// the server closed the connection.
/// The blocking socket work runs off the test's thread, which the server's
/// own tasks share.
pub async fn exchange(addr: &str, bytes: &[u8], wait: Duration) -> (String, Duration, bool) {
    let (addr, bytes) = (addr.to_owned(), bytes.to_vec());
    actix_web::rt::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).expect("connect");
        // The server may answer and close before taking everything.
        let _ = stream.write_all(&bytes);
        read_until_closed(&mut stream, wait)
    })
    .await
    .expect("socket task")
}

/// Reads until the peer closes or `wait` passes.
pub fn read_until_closed(stream: &mut TcpStream, wait: Duration) -> (String, Duration, bool) {
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    let closed = loop {
        let left = wait.saturating_sub(started.elapsed());
        if left.is_zero() {
            break false;
        }
        stream.set_read_timeout(Some(left)).expect("timeout");
        match stream.read(&mut buffer) {
            Ok(0) => break true,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                break false;
            }
            Err(_) => break true,
        }
    };
    (String::from_utf8_lossy(&received).into_owned(), started.elapsed(), closed)
}

/// The JSON body of a raw HTTP/1.1 answer (after the blank line).
pub fn raw_json(answer: &str) -> Value {
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or(Value::Null)
}
