//! Slow clients (slow-loris) are cut off by the header and body deadlines
//! while other clients are served.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{TestGateway, brokers, config};
use serde_json::json;

async fn gateway() -> TestGateway {
    let mut cfg = config(&brokers());
    cfg.server.header_timeout_ms = 1000;
    cfg.server.body_timeout_ms = 1000;
    TestGateway::start(cfg).await
}

/// Everything the server sends until it closes the connection, and whether
/// it did close it (EOF or reset) rather than our own read time-out firing.
/// The promise is that the server cuts a slow client off; how soon after
/// its (1 s) deadline depends on the machine's load and is not asserted:
/// the 30 s read time-out only keeps a broken server from hanging the test.
fn read_until_closed(stream: &mut TcpStream) -> (String, bool) {
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut received = Vec::new();
    let closed = match stream.read_to_end(&mut received) {
        Ok(_) => true,
        Err(e) => matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted),
    };
    (String::from_utf8_lossy(&received).into_owned(), closed)
}

fn one_event() -> serde_json::Value {
    json!({"batch": [{"type": "track", "event": "Link Clicked", "userId": "s", "properties": {"href": "https://a.example/"}}]})
}

#[actix_web::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off_while_others_are_served() {
    if common::without_kafka() {
        return;
    }
    let gw = gateway().await;
    let address = gw.url.trim_start_matches("http://").to_owned();
    let mut slow = TcpStream::connect(&address).expect("connect");
    slow.write_all(b"POST /v1/batch HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n").expect("write");
    let (status, answer) = gw.post("/v1/batch", &one_event()).await;
    assert_eq!(status, 200, "served while a slow client holds a connection: {answer}");
    let (received, closed) = read_until_closed(&mut slow);
    assert!(closed, "the server cut the slow client off: {received}");
    assert!(received.is_empty() || received.starts_with("HTTP/1.1 408"), "{received}");
    gw.stop().await;
}

#[actix_web::test]
async fn a_client_that_trickles_its_body_gets_503_body_timeout_and_is_closed() {
    if common::without_kafka() {
        return;
    }
    let gw = gateway().await;
    let address = gw.url.trim_start_matches("http://").to_owned();
    let mut slow = TcpStream::connect(&address).expect("connect");
    let head = "POST /v1/batch HTTP/1.1\r\nHost: gateway\r\nAuthorization: Basic ZGVtby13cml0ZS1rZXk6\r\n\
                Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"batch\":";
    slow.write_all(head.as_bytes()).expect("write");
    let (status, _) = gw.post("/v1/batch", &one_event()).await;
    assert_eq!(status, 200);
    let (received, closed) = read_until_closed(&mut slow);
    assert!(closed, "the server cut the slow client off: {received}");
    // 503, not 408: SDKs retry a 5xx but drop a batch on most 4xx.
    assert!(received.starts_with("HTTP/1.1 503"), "{received}");
    assert!(received.to_ascii_lowercase().contains("retry-after: 5"), "{received}");
    assert!(received.contains("\"code\":\"body_timeout\""), "{received}");
    gw.stop().await;
}
