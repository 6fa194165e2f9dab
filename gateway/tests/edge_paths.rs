//! The upload paths, encodings, auth forms and configuration endpoints of
//! the Segment and RudderStack SDKs (issue 12), against the real server
//! with the in-memory sink. Each request is shaped as the SDK's source
//! builds it; `edge_sdk_e2e.rs` reads the same shapes back from Kafka.

mod edge_support;

use std::io::Write;

use edge_support::{MemGateway, answer, basic, dev_config};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Value, json};

const DEMO: &str = "demo-write-key";

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(data).expect("write");
    encoder.finish().expect("finish")
}

fn click(user: &str) -> Value {
    json!({"type": "track", "event": "Link Clicked", "userId": user, "properties": {"href": "https://a.example/"}})
}

/// One call of `type`, as a single-call body.
fn call(kind: &str, user: &str) -> Value {
    match kind {
        "track" => click(user),
        "page" => {
            json!({"userId": user, "name": "Docs", "properties": {"url": "https://a.example/docs", "path": "/docs"}})
        }
        "screen" => json!({"userId": user, "name": "Home"}),
        "identify" => json!({"userId": user, "traits": {"email": "a@example.com"}}),
        "group" => json!({"userId": user, "groupId": "g-1", "traits": {"name": "Initech"}}),
        _ => json!({"userId": user, "previousId": "anon-1"}),
    }
}

fn types(gw: &MemGateway) -> Vec<String> {
    gw.values()
        .iter()
        .map(|v| v.get("event").filter(|e| e.is_object()).unwrap_or(v)["type"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// analytics-next's standard dispatcher: `fetch(`${remote}/${type[0]}`)`
/// with `Content-Type: text/plain` and the write key in the body
/// (`plugins/segmentio/index.ts`, `fetch-dispatcher.ts`, `normalize.ts`).
#[actix_web::test]
async fn analytics_next_short_paths_take_each_call_type() {
    let gw = MemGateway::start(dev_config()).await;
    let kinds = ["track", "page", "identify", "group", "alias", "screen"];
    for kind in kinds {
        let mut body = call(kind, "next-user");
        body["type"] = json!(kind);
        body["writeKey"] = json!(DEMO);
        let url = format!("{}/v1/{}", gw.url, &kind[..1]);
        let response = reqwest::Client::new()
            .post(url)
            .header("content-type", "text/plain")
            .body(body.to_string())
            .send()
            .await
            .expect("sent");
        let (status, headers, body) = answer(response).await;
        assert_eq!(status, 200, "/v1/{}: {body}", &kind[..1]);
        assert!(headers["content-type"].to_str().expect("ascii").starts_with("application/json"));
    }
    assert_eq!(types(&gw), kinds);
    gw.stop().await;
}

/// Every path of a single call the router lists (long and short names,
/// with and without a trailing slash; each a plain path of its own since
/// issue 33) stores one event of that call's type; a name that is not a
/// call is not served.
#[actix_web::test]
async fn every_single_call_path_is_served_with_its_type() {
    let gw = MemGateway::start(dev_config()).await;
    let mut expected = Vec::new();
    for path in gateway::api::routes::SINGLE {
        let kind = gateway::api::routes::single_call(path).expect("a listed path names a call");
        let mut body = call(kind, "path-user");
        body["writeKey"] = json!(DEMO);
        let response = reqwest::Client::new().post(format!("{}{path}", gw.url)).json(&body).send().await.expect("sent");
        let (status, _, body) = answer(response).await;
        assert_eq!(status, 200, "{path}: {body}");
        expected.push(kind.to_owned());
    }
    assert_eq!(types(&gw), expected);
    for path in ["/v1/x", "/v1/tracks", "/v1/track//"] {
        let response = reqwest::Client::new().post(format!("{}{path}", gw.url)).json(&click("u")).send().await;
        let (status, _, body) = answer(response.expect("sent")).await;
        assert_eq!((status, body["code"].as_str()), (404, Some("not_found")), "{path}: {body}");
    }
    gw.stop().await;
}

/// Every spelling of the batch call: analytics-next batching and the
/// Segment mobile SDKs (`/v1/b`), classic Android, Java (with a trailing
/// slash) and Ruby (`/v1/import`), RudderStack JS v3's beacon
/// (`/beacon/v1/batch?writeKey=`, text/plain).
#[actix_web::test]
async fn every_batch_spelling_is_served_directly() {
    let gw = MemGateway::start(dev_config()).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let body = json!({"batch": [click("b")], "sentAt": "2026-12-03T10:00:00Z"});
    for path in ["/v1/batch", "/v1/batch/", "/v1/b", "/v1/import", "/v1/import/"] {
        let response = client
            .post(format!("{}{path}", gw.url))
            .header("authorization", basic("demo-write-key:"))
            .json(&body)
            .send()
            .await
            .expect("sent");
        let (status, _, answer) = answer(response).await;
        assert_eq!(status, 200, "{path}: {answer}");
    }
    let beacon = client
        .post(format!("{}/beacon/v1/batch?writeKey={DEMO}", gw.url))
        .header("content-type", "text/plain;charset=UTF-8")
        .body(body.to_string())
        .send()
        .await
        .expect("sent");
    assert_eq!(beacon.status().as_u16(), 200);
    assert_eq!(gw.sink.records().len(), 6);
    gw.stop().await;
}

/// RudderStack's Node SDK gzips its batch but labels it
/// `application/x-www-form-urlencoded`; gzip is recognised whatever the
/// type says. The same type without gzip is still not JSON: 415.
#[actix_web::test]
async fn gzip_is_taken_whatever_the_content_type_says() {
    let gw = MemGateway::start(dev_config()).await;
    let body = json!({"batch": [click("gz")]}).to_string();
    let post = |bytes: Vec<u8>, encoding: Option<&'static str>| {
        let mut request = reqwest::Client::new()
            .post(format!("{}/v1/batch", gw.url))
            .header("authorization", basic("demo-write-key:"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(bytes);
        if let Some(encoding) = encoding {
            request = request.header("content-encoding", encoding);
        }
        request.send()
    };
    let (status, _, answer1) = answer(post(gzip(body.as_bytes()), Some("gzip")).await.expect("sent")).await;
    assert_eq!(status, 200, "announced gzip: {answer1}");
    let (status, _, answer2) = answer(post(gzip(body.as_bytes()), None).await.expect("sent")).await;
    assert_eq!(status, 200, "unannounced gzip: {answer2}");
    let (status, _, answer3) = answer(post(body.into_bytes(), None).await.expect("sent")).await;
    assert_eq!((status, answer3["code"].as_str()), (415, Some("unsupported_media_type")));
    assert_eq!(gw.sink.records().len(), 2);
    gw.stop().await;
}

/// A body streamed without `Content-Length` (chunked), as HTTP clients
/// send a body whose length they do not know in advance.
#[actix_web::test]
async fn a_chunked_body_without_content_length_is_read() {
    let gw = MemGateway::start(dev_config()).await;
    let text = json!({"batch": [click("c1"), click("c2")]}).to_string();
    let (head, tail) = text.split_at(text.len() / 2);
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(head.as_bytes().to_vec()), Ok(tail.as_bytes().to_vec())];
    let response = reqwest::Client::new()
        .post(format!("{}/v1/batch", gw.url))
        .header("authorization", basic("demo-write-key:"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .expect("sent");
    let (status, _, body) = answer(response).await;
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(2)), "{body}");
    gw.stop().await;
}

/// Segment's settings document points uploads back at the gateway: the
/// request's own host, or `server.public_host` when configured.
#[actix_web::test]
async fn segment_settings_point_back_at_the_gateway() {
    let gw = MemGateway::start(dev_config()).await;
    let get = |key: &str| reqwest::get(format!("{}/v1/projects/{key}/settings", gw.url));
    let (status, _, doc) = answer(get(DEMO).await.expect("sent")).await;
    assert_eq!(status, 200, "{doc}");
    let io = &doc["integrations"]["Segment.io"];
    assert_eq!(io["apiHost"], format!("{}/v1", gw.addr));
    assert_eq!(io["protocol"], "http");
    assert_eq!(io["apiKey"], DEMO);
    let (status, _, body) = answer(get("no-such-key-123").await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("invalid_write_key")));
    let (status, _, body) = answer(get("billing-backend-key").await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("key_not_allowed_in_url")), "a server key in a URL");
    gw.stop().await;

    let mut config = dev_config();
    config.server.public_host = Some("https://events.example:8443".into());
    let gw = MemGateway::start(config).await;
    let (_, _, doc) =
        answer(reqwest::get(format!("{}/v1/projects/{DEMO}/settings", gw.url)).await.expect("sent")).await;
    assert_eq!(doc["integrations"]["Segment.io"]["apiHost"], "events.example:8443/v1");
    assert_eq!(doc["integrations"]["Segment.io"]["protocol"], "https");
    gw.stop().await;
}

/// RudderStack's `sourceConfig`: the key as the Basic user (mobile and JS
/// v3) or in the query (older JS), the source enabled, the gateway as data
/// plane. An unknown key's message says "Invalid write key", the words
/// RudderStack's v1 SDKs look for to stop (`RSNetworkManager.m`).
#[actix_web::test]
async fn rudderstack_source_config_enables_the_source_here() {
    let gw = MemGateway::start(dev_config()).await;
    let client = reqwest::Client::new();
    let url = format!("{}/sourceConfig?p=android&v=1.20.0", gw.url);
    let header = client.get(&url).header("authorization", basic("demo-write-key:")).send();
    let (status, _, doc) = answer(header.await.expect("sent")).await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(doc["source"]["enabled"], true);
    assert_eq!(doc["source"]["id"], "demo");
    assert_eq!(doc["dataPlaneUrl"], gw.url);
    assert_eq!(doc["source"]["dataplanes"]["US"][0]["url"], gw.url);
    let query = client.get(format!("{}/sourceConfig/?p=web&v=3.0.0&writeKey={DEMO}", gw.url)).send();
    assert_eq!(query.await.expect("sent").status().as_u16(), 200);
    let unknown = client.get(&url).header("authorization", basic("nobody-key-1:")).send();
    let (status, _, body) = answer(unknown.await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("invalid_write_key")));
    assert!(body["message"].as_str().expect("message").to_lowercase().contains("invalid write key"), "{body}");
    let (status, _, body) = answer(client.get(&url).send().await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("missing_credentials")));
    gw.stop().await;
}

/// RudderStack JS v3 preflights `AnonymousId` and its retry headers; a
/// preflight grants them (and what else the page asks for), never
/// credentials.
#[actix_web::test]
async fn preflights_grant_the_headers_browser_sdks_send() {
    let gw = MemGateway::start(dev_config()).await;
    for path in
        ["/v1/batch", "/v1/t", "/v1/track", "/v1/b", "/beacon/v1/batch", "/sourceConfig", "/v1/projects/k/settings"]
    {
        let response = reqwest::Client::new()
            .request(reqwest::Method::OPTIONS, format!("{}{path}", gw.url))
            .header("origin", "http://localhost:3000")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "anonymousid,content-type,rsa-retry-attempt,sentat,x-page-own")
            .send()
            .await
            .expect("sent");
        let (status, headers, _) = answer(response).await;
        assert_eq!(status, 204, "{path}");
        let granted = headers["access-control-allow-headers"].to_str().expect("ascii").to_ascii_lowercase();
        for wanted in ["anonymousid", "content-type", "rsa-retry-attempt", "sentat", "x-page-own", "authorization"] {
            assert!(granted.contains(wanted), "{path}: {wanted} in {granted}");
        }
        assert_eq!(headers["access-control-allow-origin"], "http://localhost:3000");
        assert!(headers.get("access-control-allow-credentials").is_none());
    }
    gw.stop().await;
}

/// Endpoint labels stay a fixed set whatever spelling or invented path a
/// client uses.
#[actix_web::test]
async fn metric_labels_stay_a_fixed_set() {
    let gw = MemGateway::start(dev_config()).await;
    let client = reqwest::Client::new();
    for path in ["/v1/t", "/v1/import/", "/v1/whatever-123", "/v1/projects/x/settings"] {
        let _ = client
            .post(format!("{}{path}", gw.url))
            .header("authorization", basic("demo-write-key:"))
            .json(&click("m"))
            .send()
            .await;
    }
    let text = reqwest::get(format!("{}/metrics", gw.url)).await.expect("sent").text().await.expect("text");
    let requests: Vec<&str> = text.lines().filter(|l| l.starts_with("eventgw_http_requests_total{")).collect();
    let joined = requests.join("\n");
    for label in ["endpoint=\"/v1/track\"", "endpoint=\"/v1/batch\"", "endpoint=\"other\""] {
        assert!(joined.contains(label), "{label} in {joined}");
    }
    for absent in ["/v1/t\"", "/v1/import", "whatever", "/v1/projects/x"] {
        assert!(!joined.contains(absent), "{absent} must not be a label: {joined}");
    }
    gw.stop().await;
}

/// A wrong method is a JSON error with its own code, not an empty answer.
#[actix_web::test]
async fn a_wrong_method_gets_a_json_405() {
    let gw = MemGateway::start(dev_config()).await;
    let (status, headers, body) = answer(reqwest::get(format!("{}/v1/import/", gw.url)).await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (405, Some("method_not_allowed")), "{body}");
    assert_eq!(headers["allow"], "POST, OPTIONS");
    let response = reqwest::Client::new().post(format!("{}/sourceConfig", gw.url)).send().await.expect("sent");
    let (status, headers, body) = answer(response).await;
    assert_eq!((status, body["code"].as_str()), (405, Some("method_not_allowed")), "{body}");
    assert_eq!(headers["allow"], "GET, OPTIONS");
    // PostHog's capture takes GET as well as POST, and its 405 says so.
    let response = reqwest::Client::new().put(format!("{}/e/", gw.url)).send().await.expect("sent");
    let (status, headers, body) = answer(response).await;
    assert_eq!((status, body["code"].as_str()), (405, Some("method_not_allowed")), "{body}");
    assert_eq!(headers["allow"], "POST, GET, OPTIONS");
    assert_eq!(body["message"], "this endpoint takes POST, GET (and OPTIONS for CORS)", "{body}");
    gw.stop().await;
}
