//! The open-loop generator over a fixed number of keep-alive connections:
//! all of them are opened first, then request `i` goes out on connection
//! `i mod N` at its intended time (queueing behind that connection's
//! previous request if it is still waiting, which the latency shows). This
//! is how the cost curves compare 10 busy connections with 10,000 mostly
//! idle ones; `generator::run` lets the HTTP client pool decide instead.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::generator::{Auth, RunConfig, RunResult};
use crate::workload::Workload;

/// Host, port and path of an `http://host:port/path` URL.
fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url.strip_prefix("http://").context("only http:// URLs")?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    Ok((authority.to_owned(), path))
}

/// Runs `config` over exactly `connections` keep-alive connections.
pub async fn run(config: &RunConfig, connections: usize, workload: Arc<Workload>) -> anyhow::Result<RunResult> {
    let (authority, path) = split_url(&config.url)?;
    let connections = connections.max(1);
    let authorization = match &config.auth {
        Auth::WriteKey(key) => format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{key}:"))),
        Auth::Bearer(token) => format!("Bearer {token}"),
    };
    let head = Arc::new(format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: {authorization}\r\n\
         Content-Type: application/json\r\n{}Connection: keep-alive\r\n",
        if workload.gzip { "Content-Encoding: gzip\r\n" } else { "" }
    ));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(u16, Duration)>();
    let mut senders = Vec::with_capacity(connections);
    for chunk_start in (0..connections).step_by(500) {
        let opened = futures::future::join_all(
            (chunk_start..connections.min(chunk_start + 500)).map(|_| TcpStream::connect(authority.as_str())),
        )
        .await;
        for stream in opened {
            let stream = stream.with_context(|| format!("cannot connect to {authority}"))?;
            let _ = stream.set_nodelay(true);
            let (tx, rx) = mpsc::unbounded_channel::<(Vec<u8>, Instant)>();
            tokio::spawn(connection(stream, authority.clone(), Arc::clone(&head), rx, done_tx.clone(), config.timeout));
            senders.push(tx);
        }
    }
    drop(done_tx);
    let total = (config.rate * config.duration.as_secs_f64()).round() as u64;
    let mut result = RunResult::new(total, workload.batch);
    let run_start = Instant::now();
    for seq in 0..total {
        let due = run_start + Duration::from_secs_f64(seq as f64 / config.rate);
        tokio::time::sleep_until(due.into()).await;
        let body = workload.body(seq, due.duration_since(run_start).as_nanos() as u64);
        if senders[(seq % connections as u64) as usize].send((body, due)).is_err() {
            result.record(false, 0, Duration::ZERO);
        }
        while let Ok((status, latency)) = done_rx.try_recv() {
            result.record(status == 200, status, latency);
        }
    }
    drop(senders);
    while let Some((status, latency)) = done_rx.recv().await {
        result.record(status == 200, status, latency);
    }
    result.elapsed = run_start.elapsed();
    Ok(result)
}

/// One connection: sends its requests in turn, reconnecting after an error.
async fn connection(
    stream: TcpStream,
    authority: String,
    head: Arc<String>,
    mut requests: mpsc::UnboundedReceiver<(Vec<u8>, Instant)>,
    done: mpsc::UnboundedSender<(u16, Duration)>,
    timeout: Duration,
) {
    let mut stream = Some(stream);
    let mut buffer = Vec::with_capacity(4096);
    while let Some((body, due)) = requests.recv().await {
        if stream.is_none() {
            stream = TcpStream::connect(authority.as_str()).await.ok();
        }
        let status = match stream.as_mut() {
            Some(s) => {
                tokio::time::timeout(timeout, exchange(s, &head, &body, &mut buffer)).await.ok().and_then(Result::ok)
            }
            None => None,
        };
        if status.is_none() {
            stream = None;
        }
        let _ = done.send((status.unwrap_or(0), due.elapsed()));
    }
}

/// Writes one request and reads its whole answer; returns the status.
async fn exchange(stream: &mut TcpStream, head: &str, body: &[u8], buffer: &mut Vec<u8>) -> anyhow::Result<u16> {
    let mut request = Vec::with_capacity(head.len() + 32 + body.len());
    request.extend_from_slice(head.as_bytes());
    request.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    request.extend_from_slice(body);
    stream.write_all(&request).await?;
    buffer.clear();
    let header_end = loop {
        if let Some(end) = find(buffer, b"\r\n\r\n") {
            break end + 4;
        }
        read_more(stream, buffer).await?;
    };
    let head_text = std::str::from_utf8(&buffer[..header_end])?;
    let status: u16 = head_text.split(' ').nth(1).context("no status line")?.parse()?;
    let header = |name: &str| {
        head_text.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_owned())
        })
    };
    if let Some(length) = header("content-length") {
        let length: usize = length.parse()?;
        while buffer.len() < header_end + length {
            read_more(stream, buffer).await?;
        }
    } else if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        while find(&buffer[header_end..], b"0\r\n\r\n").is_none() {
            read_more(stream, buffer).await?;
        }
    }
    Ok(status)
}

async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> anyhow::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    let n = stream.read(&mut chunk).await?;
    anyhow::ensure!(n > 0, "the server closed the connection");
    buffer.extend_from_slice(&chunk[..n]);
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
