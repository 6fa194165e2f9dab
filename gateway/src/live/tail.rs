//! `gateway tail`: the live stream of a running gateway, read over HTTP
//! (Server-Sent Events) and printed one line per event, in colour when
//! stdout is a terminal. The token travels in the `Authorization` header,
//! never in the URL.

use std::io::{IsTerminal, Write};

use futures::StreamExt;

use super::Filter;

/// Where and what to tail.
#[derive(Debug, Clone)]
pub struct TailRequest {
    /// The gateway's base URL, e.g. `http://127.0.0.1:8080`.
    pub url: String,
    /// The operator token (`live.token`).
    pub token: String,
    /// Source, status, event name and user filters.
    pub filter: Filter,
}

/// Why tailing stopped.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    /// The gateway could not be reached or the stream broke.
    #[error("live stream: {0}")]
    Http(#[from] reqwest::Error),
    /// The gateway refused (wrong token, live view off).
    #[error("the gateway answered {status}: {body}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// Its JSON error body.
        body: String,
    },
    /// Standard output is gone.
    #[error("writing: {0}")]
    Io(#[from] std::io::Error),
}

/// Prints the stream until the gateway closes it.
pub async fn run(request: TailRequest) -> Result<(), TailError> {
    let url = format!("{}/live/stream", request.url.trim_end_matches('/'));
    let f = &request.filter;
    let query: Vec<String> = [("source", &f.source), ("status", &f.status), ("event", &f.event), ("user", &f.user)]
        .into_iter()
        .filter_map(|(k, v)| v.as_deref().map(|v| format!("{k}={}", encode(v))))
        .collect();
    let url = if query.is_empty() { url } else { format!("{url}?{}", query.join("&")) };
    let answer = reqwest::Client::new().get(url).bearer_auth(&request.token).send().await?;
    if !answer.status().is_success() {
        let status = answer.status().as_u16();
        return Err(TailError::Refused { status, body: answer.text().await.unwrap_or_default() });
    }
    let colour = std::io::stdout().is_terminal();
    let mut body = answer.bytes_stream();
    let mut pending: Vec<u8> = Vec::new();
    let mut name = String::new();
    while let Some(chunk) = body.next().await {
        pending.extend_from_slice(&chunk?);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if let Some(n) = line.strip_prefix("event: ") {
                name = n.to_owned();
            } else if let Some(text) = line.strip_prefix("data: ").and_then(|data| render(&name, data, colour)) {
                writeln!(std::io::stdout(), "{text}")?;
            }
        }
    }
    Ok(())
}

/// `text` as a query value: unreserved bytes as they are, the rest `%XX`.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b',' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One line for an SSE event named `name` with JSON `data`.
pub fn render(name: &str, data: &str, colour: bool) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(data).ok()?;
    let text = |k: &str| value.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
    match name {
        "skipped" => Some(format!("… skipped {} events (this viewer fell behind)", value.get("skipped")?)),
        "closed" => Some("… the gateway closed the stream".into()),
        "event" => {
            let status = text("status");
            let paint = match (colour, status) {
                (false, _) => "",
                (true, "accepted") => "\x1b[32m",
                (true, "invalid" | "rejected") => "\x1b[31m",
                (true, _) => "\x1b[33m",
            };
            let reset = if colour { "\x1b[0m" } else { "" };
            let name = if text("event").is_empty() { text("type") } else { text("event") };
            let mut line =
                format!("{} {} {paint}{status:<9}{reset} {name} → {}", text("time"), text("source"), text("topic"));
            if let (Some(p), Some(o)) = (value.get("partition"), value.get("offset")) {
                line.push_str(&format!(" [{p}@{o}]"));
            }
            if !text("key").is_empty() {
                line.push_str(&format!(" key={}", text("key")));
            }
            if !text("message").is_empty() {
                line.push_str(&format!(" — {}", text("message")));
            }
            for v in value.get("violations").and_then(serde_json::Value::as_array).into_iter().flatten() {
                let field = |k: &str| v.get(k).and_then(serde_json::Value::as_str).unwrap_or("").to_owned();
                line.push_str(&format!("\n    {}: {}", field("path"), field("message")));
            }
            Some(line)
        }
        _ => None,
    }
}
