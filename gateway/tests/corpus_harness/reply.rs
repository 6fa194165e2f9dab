//! Sends one corpus request over its own TCP connection and reads what
//! came back: a complete HTTP answer, a close without one, or nothing
//! within the bound (a hang).

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::request::{BuiltRequest, CorpusEntry, Stall};

/// The pixel's answer, whatever the outcome: a 1x1 transparent GIF.
pub const GIF_LEN: usize = 43;

#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub took: Duration,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The stable machine code of an error answer: the JSON body's `code`,
    /// or for the pixel the `X-Eventgw-Error` header.
    pub fn code(&self) -> Option<String> {
        if let Some(code) = self.json().as_ref().and_then(|v| v.get("code")).and_then(Value::as_str) {
            return Some(code.to_owned());
        }
        self.header("x-eventgw-error").map(str::to_owned)
    }
}

#[derive(Debug, Clone)]
pub enum Outcome {
    Answered(Answer),
    /// The connection closed (or was reset) before a complete answer.
    Closed(Duration),
    /// Neither an answer nor a close within the bound.
    Hang,
}

/// Sends `request` to `addr` and waits at most `bound` for the answer.
pub fn send(addr: &str, request: &BuiltRequest, bound: Duration) -> Outcome {
    let started = Instant::now();
    let Ok(mut stream) = TcpStream::connect(addr) else { return Outcome::Closed(started.elapsed()) };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let _ = stream.set_write_timeout(Some(bound));
    let written = stream.write_all(&request.head).and_then(|()| stream.write_all(&request.body));
    if written.is_err() {
        // The server may answer and close before reading a body it refused.
        return read_answer(&mut stream, started, bound);
    }
    let outcome = read_answer(&mut stream, started, bound);
    let _ = stream.shutdown(Shutdown::Both);
    outcome
}

/// As [`send`], but the client stops where `stall` says and holds the
/// connection open.
pub fn send_stalled(addr: &str, request: &BuiltRequest, stall: Stall, bound: Duration) -> Outcome {
    let started = Instant::now();
    let Ok(mut stream) = TcpStream::connect(addr) else { return Outcome::Closed(started.elapsed()) };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let (head, body) = match stall {
        Stall::InHead => (&request.head[..request.head.len() - 2], &[][..]),
        Stall::AfterBodyBytes(n) => (&request.head[..], &request.body[..n.min(request.body.len())]),
    };
    if stream.write_all(head).and_then(|()| stream.write_all(body)).is_err() {
        return read_answer(&mut stream, started, bound);
    }
    read_answer(&mut stream, started, bound)
}

fn read_answer(stream: &mut TcpStream, started: Instant, bound: Duration) -> Outcome {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(answer) = parse(&buf, started) {
            return Outcome::Answered(answer);
        }
        if started.elapsed() > bound {
            return Outcome::Hang;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return parse_to_close(&buf, started),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return parse_to_close(&buf, started),
        }
    }
}

/// At a close, an answer without a length ends there.
fn parse_to_close(buf: &[u8], started: Instant) -> Outcome {
    match head(buf) {
        Some((status, headers, body_at)) if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-length")) => {
            Outcome::Answered(Answer { status, headers, body: buf[body_at..].to_vec(), took: started.elapsed() })
        }
        _ => Outcome::Closed(started.elapsed()),
    }
}

/// A complete answer in `buf`, if there is one yet.
fn parse(buf: &[u8], started: Instant) -> Option<Answer> {
    let (status, headers, body_at) = head(buf)?;
    let value = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
    let rest = &buf[body_at..];
    let body = if let Some(len) = value("content-length") {
        let len: usize = len.trim().parse().ok()?;
        rest.get(..len)?.to_vec()
    } else if value("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(rest)?
    } else if status == 204 || status == 304 || (100..200).contains(&status) {
        Vec::new()
    } else {
        return None;
    };
    Some(Answer { status, headers, body, took: started.elapsed() })
}

/// Status, headers and where the body starts.
type Head = (u16, Vec<(String, String)>, usize);

fn head(buf: &[u8]) -> Option<Head> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let text = String::from_utf8_lossy(&buf[..end]);
    let mut lines = text.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())).collect();
    Some((status, headers, end + 4))
}

fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..line_end]).trim(), 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

impl Outcome {
    /// The records this outcome promised, by (messageId, topic): each event
    /// of a 200 answer listed `accepted` or `invalid`; for the pixel (whose
    /// answer lists nothing) a 200 promises one record with the request's id.
    pub fn promises(&self, entry: &CorpusEntry, request: &BuiltRequest) -> Vec<(String, String)> {
        let Outcome::Answered(a) = self else { return Vec::new() };
        if a.status != 200 {
            return Vec::new();
        }
        if entry.expect_gif {
            return request.ids.iter().take(1).map(|id| (id.clone(), "*".to_owned())).collect();
        }
        let Some(json) = a.json() else { return Vec::new() };
        let events = json.get("events").and_then(Value::as_array).cloned().unwrap_or_default();
        events
            .iter()
            .filter(|e| matches!(e.get("status").and_then(Value::as_str), Some("accepted" | "invalid")))
            .filter_map(|e| {
                let id = e.get("messageId").and_then(Value::as_str)?;
                let topic = e.get("topic").and_then(Value::as_str)?;
                Some((id.to_owned(), topic.to_owned()))
            })
            .collect()
    }
}
