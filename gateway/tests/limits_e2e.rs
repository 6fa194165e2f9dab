//! Every limit at exactly its value and one past it, and hostile JSON, over
//! real HTTP against a gateway with small limits. Each refusal has its own
//! code, and a refused request produces nothing.

mod common;

use std::io::Write;

use common::{TestGateway, answer, brokers, client, config, find, unique};
use flate2::Compression;
use flate2::write::GzEncoder;
use gateway::config::Config;
use serde_json::{Value, json};

const BODY: usize = 4096;
const DECOMPRESSED: usize = 8192;
const EVENT: usize = 1024;
const BATCH: usize = 5;
const DEPTH: usize = 8;
const STRING: usize = 300;

fn small_limits() -> Config {
    let mut cfg = config(&brokers());
    cfg.limits.max_body_bytes = BODY;
    cfg.limits.max_decompressed_bytes = DECOMPRESSED;
    cfg.limits.max_event_bytes = EVENT;
    cfg.limits.max_batch_events = BATCH;
    cfg.limits.max_json_depth = DEPTH;
    cfg.limits.max_string_bytes = STRING;
    cfg
}

fn click(id: &str) -> Value {
    json!({"type": "track", "event": "Link Clicked", "userId": "limits", "messageId": id,
        "properties": {"href": "https://shop.example/"}})
}

/// A valid batch, padded with trailing whitespace to exactly `len` bytes.
fn padded_batch(id: &str, len: usize) -> Vec<u8> {
    let mut body = json!({"batch": [click(id)]}).to_string().into_bytes();
    assert!(body.len() <= len);
    body.resize(len, b' ');
    body
}

/// A click event whose compact JSON is exactly `len` bytes, padded in
/// properties short enough to pass the string limit.
fn event_of_size(id: &str, len: usize) -> Value {
    let mut event = click(id);
    let mut i = 0;
    loop {
        let size = serde_json::to_vec(&event).expect("json").len();
        if size == len {
            return event;
        }
        let key = format!("pad{i}");
        let overhead = serde_json::to_vec(&json!({&key: ""})).expect("json").len() - 1; // ,"padN":""
        let room = (len - size).saturating_sub(overhead).min(STRING);
        event["properties"][&key] = json!("x".repeat(room));
        i += 1;
    }
}

async fn post_bytes(gw: &TestGateway, body: Vec<u8>, gzip: bool) -> (u16, Value) {
    let mut request = client().post(format!("{}/v1/batch", gw.url)).basic_auth("demo-write-key", Some(""));
    request = request.header("content-type", "application/json");
    if gzip {
        request = request.header("content-encoding", "gzip");
    }
    let (status, _, body) = answer(request.body(body).send().await.expect("sent")).await;
    (status, body)
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::best());
    e.write_all(data).expect("write");
    e.finish().expect("finish")
}

#[actix_web::test]
async fn body_size_limit_is_exact_with_and_without_content_length() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(small_limits()).await;
    let (at, past) = (unique("body-at"), unique("body-past"));
    assert_eq!(post_bytes(&gw, padded_batch(&at, BODY), false).await.0, 200);
    let (status, body) = post_bytes(&gw, padded_batch(&past, BODY + 1), false).await;
    assert_eq!((status, body["code"].as_str()), (413, Some("body_too_large")));
    // Chunked, no Content-Length: cut off while streaming.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        padded_batch(&past, BODY + 1).chunks(1000).map(|c| Ok(c.to_vec())).collect();
    let request = client()
        .post(format!("{}/v1/batch", gw.url))
        .basic_auth("demo-write-key", Some(""))
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)));
    let (status, _, body) = answer(request.send().await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (413, Some("body_too_large")));
    assert_eq!(find(&brokers(), "web.tracking", &at).len(), 1);
    assert!(find(&brokers(), "web.tracking", &past).is_empty());
    gw.stop().await;
}

#[actix_web::test]
async fn decompressed_size_limit_is_exact() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(small_limits()).await;
    let (at, past) = (unique("gz-at"), unique("gz-past"));
    assert_eq!(post_bytes(&gw, gz(&padded_batch(&at, DECOMPRESSED)), true).await.0, 200);
    let (status, body) = post_bytes(&gw, gz(&padded_batch(&past, DECOMPRESSED + 1)), true).await;
    assert_eq!((status, body["code"].as_str()), (413, Some("decompressed_too_large")));
    assert!(find(&brokers(), "web.tracking", &past).is_empty());
    gw.stop().await;
}

#[actix_web::test]
async fn event_size_limit_is_exact_and_only_the_large_event_is_refused() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(small_limits()).await;
    let (at, past) = (unique("event-at"), unique("event-past"));
    let batch = json!({"batch": [event_of_size(&at, EVENT), event_of_size(&past, EVENT + 1)]});
    let (status, answer) = gw.post("/v1/batch", &batch).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["events"][0]["status"], "accepted");
    assert_eq!(answer["events"][1]["status"], "rejected");
    assert_eq!(answer["events"][1]["code"], "event_too_large");
    assert_eq!(answer["events"][1]["messageId"].as_str(), Some(past.as_str()));
    assert_eq!(find(&brokers(), "web.tracking", &at).len(), 1);
    assert!(find(&brokers(), "web.tracking", &past).is_empty());
    gw.stop().await;
}

#[actix_web::test]
async fn batch_length_limit_is_exact() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(small_limits()).await;
    let batch = |n: usize| json!({"batch": (0..n).map(|_| click(&unique("n"))).collect::<Vec<_>>()});
    let (status, answer) = gw.post("/v1/batch", &batch(BATCH)).await;
    assert_eq!((status, answer["accepted"].as_u64()), (200, Some(BATCH as u64)));
    let (status, answer) = gw.post("/v1/batch", &batch(BATCH + 1)).await;
    assert_eq!((status, answer["code"].as_str()), (413, Some("batch_too_large")));
    gw.stop().await;
}

#[actix_web::test]
async fn nesting_depth_limit_is_exact() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(small_limits()).await;
    // body{ batch[ event{ properties{ nest{ a{ b{ c{ } } } } } } ] } is depth 8.
    let nested = |levels: usize| (0..levels).fold(json!({}), |inner, _| json!({"n": inner}));
    let mut event = click(&unique("deep"));
    event["properties"]["nest"] = nested(3);
    assert_eq!(gw.post("/v1/batch", &json!({"batch": [event.clone()]})).await.0, 200);
    event["properties"]["nest"] = nested(4);
    let (status, answer) = gw.post("/v1/batch", &json!({"batch": [event]})).await;
    assert_eq!((status, answer["code"].as_str()), (400, Some("json_too_deep")));
    let (status, answer) =
        post_bytes(&gw, format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(), false).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (413, Some("body_too_large")),
        "deep and large: size is checked first"
    );
    let (status, answer) = post_bytes(&gw, "[".repeat(BODY).into_bytes(), false).await;
    assert_eq!((status, answer["code"].as_str()), (400, Some("json_too_deep")));
    gw.stop().await;
}

#[actix_web::test]
async fn string_length_limit_is_exact() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(small_limits()).await;
    let mut event = click(&unique("string"));
    event["properties"]["text"] = json!("s".repeat(STRING));
    assert_eq!(gw.post("/v1/batch", &json!({"batch": [event.clone()]})).await.0, 200);
    // The limit counts decoded bytes: STRING newlines are 2 × STRING bytes
    // as written but STRING as stored.
    event["properties"]["text"] = json!("\n".repeat(STRING));
    assert_eq!(gw.post("/v1/batch", &json!({"batch": [event.clone()]})).await.0, 200);
    event["properties"]["text"] = json!("s".repeat(STRING + 1));
    let (status, answer) = gw.post("/v1/batch", &json!({"batch": [event]})).await;
    assert_eq!((status, answer["code"].as_str()), (400, Some("string_too_long")));
    gw.stop().await;
}

#[actix_web::test]
async fn hostile_json_gets_a_clear_400_code_each_and_produces_nothing() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(small_limits()).await;
    let id = unique("hostile");
    let prefix = format!(
        r#"{{"batch":[{{"type":"track","event":"Link Clicked","userId":"h","messageId":"{id}","properties":{{"href":"https://shop.example/","x":"#
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("invalid_utf8", [prefix.as_bytes(), b"\"\xc3\x28\"}}]}"].concat()),
        ("invalid_unicode_escape", format!(r#"{prefix}"\udead"}}}}]}}"#).into_bytes()),
        ("duplicate_key", format!(r#"{prefix}1,"x":2}}}}]}}"#).into_bytes()),
        ("number_out_of_range", format!(r#"{prefix}1e400}}}}]}}"#).into_bytes()),
        ("number_out_of_range", format!(r#"{prefix}{}}}}}]}}"#, "9".repeat(60)).into_bytes()),
        ("number_out_of_range", format!(r#"{prefix}18446744073709551616}}}}]}}"#).into_bytes()),
        ("malformed_json", format!(r#"{prefix}tru}}}}]}}"#).into_bytes()),
    ];
    for (code, body) in cases {
        let (status, answer) = post_bytes(&gw, body, false).await;
        assert_eq!((status, answer["code"].as_str()), (400, Some(code)), "{answer}");
        assert!(answer["message"].as_str().is_some_and(|m| m.len() > 10), "a human message: {answer}");
    }
    // The same body with a sane value is accepted, so the refusals were about the value.
    assert_eq!(post_bytes(&gw, format!(r#"{prefix}1}}}}]}}"#).into_bytes(), false).await.0, 200);
    assert_eq!(find(&brokers(), "web.tracking", &id).len(), 1, "only the sane request landed");
    gw.stop().await;
}
