//! Issue 28, item 1: memory from a declared size, no credentials needed.
//! The body reader reserved the whole announced `Content-Length` at once
//! and kept it until the body timeout, so one h2c connection with 3,000
//! streams announcing 512 KiB and sending ten bytes took the gateway to
//! 1.6 GB. Now a body's buffer grows as its bytes arrive, all unfinished
//! bodies share `limits.max_unfinished_body_bytes` (past it `503
//! body_buffer_full`), and one HTTP/2 connection may have
//! `server.max_streams_per_connection` requests in flight (past it `503
//! too_many_streams`). The real server with the in-memory sink, a real h2c
//! client (the `h2` crate) and raw HTTP/1.1 sockets; each limit at exactly
//! its value and one past it, read from the `eventgw_unfinished_body_bytes`
//! gauge on `/metrics` and from the answers.

mod edge_support;

use std::time::Duration;

use actix_web::web::Bytes;
use edge_support::{MemGateway, dev_config, raw_json};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use gateway::wire::FIRST_BUFFER_BYTES;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const DEMO: &str = "Basic ZGVtby13cml0ZS1rZXk6";
/// What a stalled client sends of its body.
const OPENING: &[u8] = b"{\"batch\":[";

/// `eventgw_unfinished_body_bytes` as `/metrics` shows it (-1 when absent).
async fn unfinished(gw: &MemGateway) -> i64 {
    let text = reqwest::get(format!("{}/metrics", gw.url)).await.expect("scrape").text().await.expect("text");
    text.lines()
        .find_map(|line| line.strip_prefix("eventgw_unfinished_body_bytes "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(-1)
}

/// The gauge once it reads `want`, or what it read last: the bodies'
/// bytes reach the server when its workers get to them, so this polls (at
/// most 20 s) and the caller asserts on the value, never on the time.
async fn unfinished_settled(gw: &MemGateway, want: i64) -> i64 {
    for _ in 0..400 {
        let now = unfinished(gw).await;
        if now == want {
            return now;
        }
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
    unfinished(gw).await
}

/// A valid one-event batch, padded with spaces to exactly `len` bytes,
/// starting with [`OPENING`].
fn batch_of(len: usize) -> Vec<u8> {
    let event = json!({"type": "track", "event": "Link Clicked", "userId": "stall",
        "properties": {"href": "https://a.example/"}});
    let mut body = format!("{{\"batch\":[{event}]}}").into_bytes();
    assert!(body.starts_with(OPENING) && body.len() <= len);
    body.resize(len, b' ');
    body
}

/// Status and JSON body of an h2 answer.
async fn h2_answer(response: h2::client::ResponseFuture) -> (u16, Value) {
    let response = response.await.expect("answer");
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        // The gateway resets (NO_ERROR) a stream whose request body it did
        // not read, once its answer is sent: the answer is whole.
        let chunk = match chunk {
            Err(e) if e.reason() == Some(h2::Reason::NO_ERROR) => break,
            chunk => chunk.expect("chunk"),
        };
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Opens a POST stream announcing `declared` bytes and sends `first` of them.
async fn open_stream(
    client: h2::client::SendRequest<Bytes>,
    url: &str,
    declared: usize,
    first: &[u8],
    end: bool,
) -> (h2::client::SendRequest<Bytes>, h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let mut client = client.ready().await.expect("ready");
    let request = http::Request::post(format!("{url}/v1/batch"))
        .header("authorization", DEMO)
        .header("content-type", "application/json")
        .header("content-length", declared)
        .body(())
        .expect("request");
    let (response, mut stream) = client.send_request(request, false).expect("send");
    stream.send_data(Bytes::copy_from_slice(first), end).expect("data");
    (client, response, stream)
}

#[actix_web::test]
async fn h2c_streams_past_the_per_connection_cap_are_refused_and_stalled_ones_hold_only_what_arrived() {
    const CAP: usize = 20;
    const OPENED: usize = 30;
    let max = 512 * 1024;
    let mut config = dev_config();
    config.server.max_streams_per_connection = CAP;
    config.server.body_timeout_ms = 30_000;
    config.limits.max_body_bytes = max;
    let gw = MemGateway::start(config).await;
    let tcp = TcpStream::connect(&gw.addr).await.expect("connect");
    let (mut client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    let connection = actix_web::rt::spawn(async move {
        let _ = connection.await;
    });
    let mut pending = Vec::new();
    for _ in 0..OPENED {
        let (next, response, stream) = open_stream(client, &gw.url, max, OPENING, false).await;
        client = next;
        pending.push((response, stream));
    }
    let (responses, mut streams): (Vec<_>, Vec<_>) = pending.into_iter().unzip();
    let mut answers: FuturesUnordered<_> =
        responses.into_iter().enumerate().map(|(i, r)| async move { (i, h2_answer(r).await) }).collect();
    let mut refused = Vec::new();
    for _ in 0..OPENED - CAP {
        let (i, (status, body)) = answers.next().await.expect("an answer");
        assert_eq!((status, body["code"].as_str()), (503, Some("too_many_streams")), "stream {i}: {body}");
        refused.push(i);
    }
    // Exactly the cap is admitted: each holds a first buffer, not the announced 512 KiB.
    let held = i64::try_from(CAP * FIRST_BUFFER_BYTES).expect("fits");
    assert_eq!(unfinished_settled(&gw, held).await, held, "{CAP} stalled bodies of {} bytes each", OPENING.len());

    // A finished body gives back its slot and its buffer.
    let admitted = (0..OPENED).find(|i| !refused.contains(i)).expect("an admitted stream");
    let rest = Bytes::from(batch_of(max).split_off(OPENING.len()));
    streams[admitted].send_data(rest, true).expect("the rest");
    let (i, (status, body)) = answers.next().await.expect("its answer");
    assert_eq!((i, status, body["accepted"].as_u64()), (admitted, 200, Some(1)), "{body}");
    let held = held - i64::try_from(FIRST_BUFFER_BYTES).expect("fits");
    assert_eq!(unfinished_settled(&gw, held).await, held);
    let small = batch_of(200);
    let (_client, response, _stream) = open_stream(client, &gw.url, small.len(), &small, true).await;
    let (status, body) = h2_answer(response).await;
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(1)), "a slot is free again: {body}");

    // A connection that goes away gives everything back.
    drop((answers, streams));
    connection.abort();
    assert_eq!(unfinished_settled(&gw, 0).await, 0);
    gw.stop().await;
}

/// Sends `bytes` on a new connection and leaves it open.
async fn send_raw(addr: &str, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    stream
}

/// Everything the server sends until it closes the connection (at most 30 s).
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let read = actix_web::rt::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut received)).await;
    assert!(read.is_ok(), "the server neither answered nor closed: {}", String::from_utf8_lossy(&received));
    String::from_utf8_lossy(&received).into_owned()
}

fn head(declared: usize) -> String {
    format!(
        "POST /v1/batch HTTP/1.1\r\nHost: gw\r\nAuthorization: {DEMO}\r\nContent-Type: application/json\r\n\
         Connection: close\r\nContent-Length: {declared}\r\n\r\n"
    )
}

#[actix_web::test]
async fn unfinished_bodies_fill_the_budget_to_exactly_its_limit_and_one_byte_more_is_refused() {
    let max = 64 * 1024;
    let mut config = dev_config();
    config.server.body_timeout_ms = 30_000;
    config.limits.max_body_bytes = max;
    config.limits.max_unfinished_body_bytes = 3 * FIRST_BUFFER_BYTES;
    let gw = MemGateway::start(config).await;
    let stall = |declared: usize| [head(declared).into_bytes(), OPENING.to_vec()].concat();
    // Two announce the body limit, one exactly a first buffer: 3 x 16 KiB, the budget.
    let _first = send_raw(&gw.addr, &stall(max)).await;
    let _second = send_raw(&gw.addr, &stall(max)).await;
    let mut third = send_raw(&gw.addr, &stall(FIRST_BUFFER_BYTES)).await;
    let limit = i64::try_from(3 * FIRST_BUFFER_BYTES).expect("fits");
    assert_eq!(unfinished_settled(&gw, limit).await, limit, "exactly the limit is held, nothing refused");

    // One byte more: refused before it is buffered, and the connection closed.
    let mut one_more = send_raw(&gw.addr, &[head(1).into_bytes(), b"{".to_vec()].concat()).await;
    let answer = read_to_close(&mut one_more).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("retry-after: 5"), "{answer}");
    assert_eq!(raw_json(&answer)["code"], "body_buffer_full", "{answer}");
    assert_eq!(unfinished(&gw).await, limit, "the refused body holds nothing");

    // A body that finishes (the third: its buffer already has its whole
    // length, so it needs no more room) gives its buffer back, and the next
    // one is taken. The first two could not grow now: growing needs room too.
    third.write_all(&batch_of(FIRST_BUFFER_BYTES)[OPENING.len()..]).await.expect("the rest");
    let answer = read_to_close(&mut third).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let held = limit - i64::try_from(FIRST_BUFFER_BYTES).expect("fits");
    assert_eq!(unfinished_settled(&gw, held).await, held);
    let mut next = send_raw(&gw.addr, &[head(200).into_bytes(), batch_of(200)].concat()).await;
    let answer = read_to_close(&mut next).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    gw.stop().await;
}
