//! Regression tests for the HTTP-edge defects of issue 13 (an adversarial
//! review of the running gateway). Each failed on the code before its fix;
//! they run against the real server with the in-memory sink.

mod edge_support;

use std::time::Duration;

use base64::Engine;
use edge_support::{MemGateway, answer, basic, dev_config, exchange, raw_json};
use serde_json::{Value, json};

const DEMO: &str = "Basic ZGVtby13cml0ZS1rZXk6";

fn one_event() -> Value {
    json!({"batch": [{"type": "track", "event": "Link Clicked", "userId": "u",
        "properties": {"href": "https://a.example/"}}]})
}

async fn post_with(gw: &MemGateway, authorization: &[&str], body: &Value) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(format!("{}/v1/batch", gw.url)).json(body);
    for value in authorization {
        request = request.header("authorization", *value);
    }
    let (status, _, body) = answer(request.send().await.expect("sent")).await;
    (status, body)
}

async fn slow_gateway() -> MemGateway {
    let mut config = dev_config();
    config.server.body_timeout_ms = 1000;
    MemGateway::start(config).await
}

/// Issue 13, item 2: a chunked body that stalls got its answer but kept
/// its connection (and file descriptor) for good.
#[actix_web::test]
async fn a_stalled_chunked_body_is_answered_and_its_connection_closed() {
    let gw = slow_gateway().await;
    let request = format!(
        "POST /v1/batch HTTP/1.1\r\nHost: gw\r\nAuthorization: {DEMO}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n9\r\n{{\"batch\":\r\n"
    );
    let (received, waited, closed) = exchange(&gw.addr, request.as_bytes(), Duration::from_secs(8)).await;
    assert!(closed, "the connection is closed after the answer (waited {waited:?}): {received}");
    assert!(waited < Duration::from_secs(5), "closed after {waited:?}");
    assert_eq!(raw_json(&received)["code"], "body_timeout", "{received}");
    assert!(gw.sink.records().is_empty());
    gw.stop().await;
}

/// The same stall with `Content-Length` framing was already closed; kept
/// here so both framings stay covered.
#[actix_web::test]
async fn a_stalled_content_length_body_is_answered_and_its_connection_closed() {
    let gw = slow_gateway().await;
    let request = format!(
        "POST /v1/batch HTTP/1.1\r\nHost: gw\r\nAuthorization: {DEMO}\r\nContent-Type: application/json\r\n\
         Content-Length: 1000\r\n\r\n{{\"batch\":"
    );
    let (received, waited, closed) = exchange(&gw.addr, request.as_bytes(), Duration::from_secs(8)).await;
    assert!(closed && waited < Duration::from_secs(5), "closed: {closed} after {waited:?}: {received}");
    assert_eq!(raw_json(&received)["code"], "body_timeout", "{received}");
    gw.stop().await;
}

/// Issue 13, item 6: Basic credentials with a password, or without the
/// colon, were taken as a write key.
#[actix_web::test]
async fn basic_credentials_must_be_the_write_key_and_an_empty_password() {
    let gw = MemGateway::start(dev_config()).await;
    for credentials in ["demo-write-key:secret", "demo-write-key"] {
        let (status, body) = post_with(&gw, &[&basic(credentials)], &one_event()).await;
        assert_eq!((status, body["code"].as_str()), (401, Some("malformed_credentials")), "{credentials}: {body}");
    }
    let (status, body) = post_with(&gw, &[&basic("demo-write-key:")], &one_event()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(gw.sink.records().len(), 1, "only the well-formed request produced");
    gw.stop().await;
}

/// Issue 13, item 6: a header key and a different body `writeKey` were not
/// refused; the header won silently.
#[actix_web::test]
async fn a_header_key_and_a_different_body_key_are_refused() {
    let gw = MemGateway::start(dev_config()).await;
    let mut body = one_event();
    body["writeKey"] = json!("billing-backend-key");
    let (status, answer) = post_with(&gw, &[DEMO], &body).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("conflicting_write_keys")), "{answer}");
    body["writeKey"] = json!("demo-write-key");
    let (status, answer) = post_with(&gw, &[DEMO], &body).await;
    assert_eq!(status, 200, "the same key in both places is fine: {answer}");
    assert_eq!(gw.sink.records().len(), 1);
    gw.stop().await;
}

/// Issue 13, item 6: with two `Authorization` headers the first was used.
#[actix_web::test]
async fn two_authorization_headers_are_refused() {
    let gw = MemGateway::start(dev_config()).await;
    let (status, body) = post_with(&gw, &[DEMO, &basic("billing-backend-key:")], &one_event()).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("malformed_credentials")), "{body}");
    let (status, body) = post_with(&gw, &[DEMO, DEMO], &one_event()).await;
    assert_eq!(status, 401, "even twice the same: {body}");
    assert!(gw.sink.records().is_empty());
    gw.stop().await;
}

/// Issue 13, item 6: a strict (server) source's secret key worked in the
/// pixel's URL, where it ends up in logs and referrers.
#[actix_web::test]
async fn a_server_sources_key_is_refused_in_the_pixel_url() {
    let gw = MemGateway::start(dev_config()).await;
    let event = json!({"event": "Payment Captured", "userId": "u",
        "properties": {"order_id": "o-1", "payment_id": "p-1", "amount": 1.5, "currency": "EUR"}});
    let data = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(event.to_string());
    let url = format!("{}/v1/pixel.gif?writeKey=billing-backend-key&data={data}", gw.url);
    let response = reqwest::get(url).await.expect("sent");
    let status = response.status().as_u16();
    let code = response.headers().get("x-eventgw-error").map(|v| v.to_str().expect("ascii").to_owned());
    assert_eq!((status, code.as_deref()), (403, Some("key_not_allowed_in_url")));
    assert!(gw.sink.records().is_empty());
    gw.stop().await;
}

/// Issue 13, item 6: integers beyond 64 bits were silently made floats
/// (`9…9` stored as `1e+40`). They are refused with a code instead.
#[actix_web::test]
async fn integers_beyond_64_bits_are_refused_not_rounded() {
    let gw = MemGateway::start(dev_config()).await;
    let big = "9".repeat(40);
    let body = format!(
        r#"{{"batch":[{{"type":"track","event":"Link Clicked","userId":"u","properties":{{"href":"https://a.example/","n":{big}}}}}]}}"#
    );
    let response = reqwest::Client::new()
        .post(format!("{}/v1/batch", gw.url))
        .header("authorization", DEMO)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("sent");
    let (status, _, answer) = answer(response).await;
    assert_eq!((status, answer["code"].as_str()), (400, Some("number_out_of_range")), "{answer}");
    assert!(gw.sink.records().is_empty(), "nothing rounded was stored");
    let body = r#"{"batch":[{"type":"track","event":"Link Clicked","userId":"u","properties":{"href":"https://a.example/","max":18446744073709551615,"min":-9223372036854775808}}]}"#;
    let response = reqwest::Client::new()
        .post(format!("{}/v1/batch", gw.url))
        .header("authorization", DEMO)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status().as_u16(), 200, "64-bit extremes are kept");
    let stored = &gw.values()[0]["properties"];
    assert_eq!(stored["max"].as_u64(), Some(u64::MAX));
    assert_eq!(stored["min"].as_i64(), Some(i64::MIN));
    gw.stop().await;
}

/// Issue 13, item 6: the string limit counted escaped length, so a string
/// within the limit once decoded was refused.
#[actix_web::test]
async fn the_string_limit_counts_decoded_bytes() {
    let mut config = dev_config();
    config.limits.max_string_bytes = 64;
    let gw = MemGateway::start(config).await;
    let post = |href: String| {
        let body = format!(
            r#"{{"batch":[{{"type":"track","event":"Link Clicked","userId":"u","properties":{{"href":"{href}"}}}}]}}"#
        );
        reqwest::Client::new()
            .post(format!("{}/v1/batch", gw.url))
            .header("authorization", DEMO)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    // 64 bytes decoded ("https://a/" + 27 × "\u00e9" = 10 + 54), 172 as written.
    let at_limit = format!("https://a/{}", r"\u00e9".repeat(27));
    let (status, _, body) = answer(post(at_limit).await.expect("sent")).await;
    assert_eq!(status, 200, "64 decoded bytes are within the limit: {body}");
    let record = &gw.values()[0];
    let event = record.get("event").unwrap_or(record);
    let stored = event["properties"]["href"].as_str().expect("href").to_owned();
    assert_eq!(stored.len(), 64);
    let past = format!("https://a/{}x", r"\u00e9".repeat(27));
    let (status, _, body) = answer(post(past).await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (400, Some("string_too_long")), "65 decoded bytes: {body}");
    gw.stop().await;
}

/// Issue 13, item 6: CORS echoed an allowed origin in the client's letter
/// case instead of the configured origin.
#[actix_web::test]
async fn cors_echoes_the_configured_origin_not_the_clients_spelling() {
    let gw = MemGateway::start(dev_config()).await;
    let response = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, format!("{}/v1/batch", gw.url))
        .header("origin", "HTTP://LOCALHOST:3000")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .expect("sent");
    let (status, headers, _) = answer(response).await;
    assert_eq!(status, 204);
    assert_eq!(
        headers.get("access-control-allow-origin").map(|v| v.to_str().expect("ascii")),
        Some("http://localhost:3000")
    );
    let response = reqwest::Client::new()
        .post(format!("{}/v1/batch", gw.url))
        .header("authorization", DEMO)
        .header("origin", "http://LocalHost:3000")
        .json(&one_event())
        .send()
        .await
        .expect("sent");
    let (status, headers, _) = answer(response).await;
    assert_eq!(status, 200);
    assert_eq!(
        headers.get("access-control-allow-origin").map(|v| v.to_str().expect("ascii")),
        Some("http://localhost:3000")
    );
    gw.stop().await;
}

/// Issue 13, item 6: preflights were granted on paths that do not exist.
#[actix_web::test]
async fn a_preflight_on_an_unknown_path_is_404() {
    let gw = MemGateway::start(dev_config()).await;
    let response = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, format!("{}/v1/nothing-here", gw.url))
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .expect("sent");
    let (status, headers, body) = answer(response).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")), "{body}");
    assert!(headers.get("access-control-allow-methods").is_none(), "nothing granted");
    gw.stop().await;
}

/// Issue 13, item 6: a request head of about 128 KB reset the connection
/// with no answer. Heads over `server.max_header_bytes` get a JSON 431.
#[actix_web::test]
async fn a_request_head_over_the_limit_gets_a_json_431() {
    let gw = MemGateway::start(dev_config()).await;
    let request = format!(
        "POST /v1/batch HTTP/1.1\r\nHost: gw\r\nAuthorization: {DEMO}\r\nX-Padding: {}\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}",
        "a".repeat(100 * 1024)
    );
    let (received, _, _) = exchange(&gw.addr, request.as_bytes(), Duration::from_secs(5)).await;
    assert!(received.starts_with("HTTP/1.1 431"), "{}", &received[..received.len().min(200)]);
    assert_eq!(raw_json(&received)["code"], "headers_too_large", "{received}");
    gw.stop().await;
}

/// Issue 13, item 6: HTTP/2 with prior knowledge (h2c) got an empty reply.
/// It is served.
#[actix_web::test]
async fn http2_with_prior_knowledge_is_served() {
    let gw = MemGateway::start(dev_config()).await;
    let tcp = tokio::net::TcpStream::connect(&gw.addr).await.expect("connect");
    let (client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    actix_web::rt::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.expect("ready");
    let request = http::Request::post(format!("{}/v1/batch", gw.url))
        .header("authorization", DEMO)
        .header("content-type", "application/json")
        .body(())
        .expect("request");
    let (response, mut stream) = client.send_request(request, false).expect("send");
    stream.send_data(one_event().to_string().into(), true).expect("body");
    let response = response.await.expect("response");
    assert_eq!(response.status().as_u16(), 200);
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        bytes.extend_from_slice(&chunk.expect("chunk"));
    }
    let answer: Value = serde_json::from_slice(&bytes).expect("JSON answer");
    assert_eq!(answer["accepted"], 1, "{answer}");
    assert_eq!(gw.sink.records().len(), 1);
    gw.stop().await;
}
