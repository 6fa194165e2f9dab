//! A scriptable stand-in for the gateway's `/v1/batch`, on a real socket:
//! answers 200 with per-event outcomes by default, or whatever the script
//! says next (a status with `Retry-After`, a hang, a dropped connection).
//! It runs on the test's own runtime, so on a paused clock its hangs and the
//! client's timeouts and backoffs all run on virtual time.

use std::collections::{HashMap, VecDeque};
use std::io::Read as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// What to do with the next request.
#[derive(Debug, Clone)]
pub enum Action {
    /// 200, every event accepted.
    Accept,
    /// This status with `Retry-After` seconds (if any) and an error body.
    Fail(u16, Option<u64>, &'static str),
    /// Read the request, wait this long, then accept.
    Hang(Duration),
    /// Read the request and close the connection without an answer.
    Close,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub at: Instant,
    pub headers: HashMap<String, String>,
    pub ids: Vec<String>,
    pub body: Value,
    /// What the server did with it.
    pub action: String,
}

#[derive(Default)]
struct State {
    script: VecDeque<Action>,
    seen: Vec<Recorded>,
}

/// The running fake.
#[derive(Clone)]
pub struct FakeGateway {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl FakeGateway {
    /// Serves on 127.0.0.1:0 with `script` for the first requests.
    pub async fn start(script: Vec<Action>) -> Self {
        Self::serve(TcpListener::bind("127.0.0.1:0").await.expect("bind"), script)
    }

    /// Serves on `listener`.
    pub fn serve(listener: TcpListener, script: Vec<Action>) -> Self {
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State { script: script.into(), seen: Vec::new() }));
        let shared = Arc::clone(&state);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(connection(stream, Arc::clone(&shared)));
            }
        });
        Self { url, state }
    }

    pub fn seen(&self) -> Vec<Recorded> {
        self.state.lock().expect("lock").seen.clone()
    }

    pub fn push(&self, action: Action) {
        self.state.lock().expect("lock").script.push_back(action);
    }
}

async fn connection(mut stream: TcpStream, state: Arc<Mutex<State>>) {
    let Some((headers, body)) = read_request(&mut stream).await else { return };
    let action = state.lock().expect("lock").script.pop_front().unwrap_or(Action::Accept);
    let body = decode(&headers, &body);
    let events = body["batch"].as_array().cloned().unwrap_or_default();
    let ids = events.iter().map(|e| e["messageId"].as_str().unwrap_or_default().to_owned()).collect();
    let recorded = Recorded { at: Instant::now(), headers, ids, body, action: format!("{action:?}") };
    state.lock().expect("lock").seen.push(recorded);
    let (status, retry_after, answer) = match action {
        Action::Close => return,
        Action::Fail(status, retry_after, code) => (status, retry_after, json!({"code": code, "message": code})),
        Action::Hang(delay) => {
            tokio::time::sleep(delay).await;
            (200, None, accept_all(&events))
        }
        Action::Accept => (200, None, accept_all(&events)),
    };
    let body = answer.to_string();
    let retry = retry_after.map(|s| format!("Retry-After: {s}\r\n")).unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{retry}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn accept_all(events: &[Value]) -> Value {
    let outcomes: Vec<Value> = events
        .iter()
        .enumerate()
        .map(|(i, e)| json!({"index": i, "messageId": e["messageId"], "status": "accepted", "topic": "web.tracking"}))
        .collect();
    json!({"accepted": events.len(), "invalid": 0, "rejected": 0, "events": outcomes})
}

async fn read_request(stream: &mut TcpStream) -> Option<(HashMap<String, String>, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(pos) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let headers: HashMap<String, String> = head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((headers, body))
}

fn decode(headers: &HashMap<String, String>, body: &[u8]) -> Value {
    let mut text = String::new();
    if headers.get("content-encoding").map(String::as_str) == Some("gzip") {
        flate2::read::GzDecoder::new(body).read_to_string(&mut text).expect("gzip body");
    } else {
        text = String::from_utf8_lossy(body).into_owned();
    }
    serde_json::from_str(&text).unwrap_or(Value::Null)
}
