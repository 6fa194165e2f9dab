//! The SDK upload paths and configuration endpoints end to end: each
//! request shaped as the SDK's source builds it, each event read back from
//! the real Kafka on its domain topic, keyed by its user, exactly once.

mod common;

use std::io::Write;

use base64::Engine;
use common::{TestGateway, brokers, config, find, unique};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Value, json};

const DEMO: &str = "demo-write-key";

fn basic() -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{DEMO}:")))
}

fn click(user: &str, id: &str) -> Value {
    json!({"type": "track", "event": "Link Clicked", "userId": user, "messageId": id,
        "properties": {"href": "https://a.example/"}})
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(data).expect("write");
    encoder.finish().expect("finish")
}

/// The event `id` is on `web.tracking` once, keyed by `user`, not
/// dead-lettered.
fn landed(id: &str, user: &str, what: &str) {
    let found = find(&brokers(), "web.tracking", id);
    assert_eq!(found.len(), 1, "{what}: {id} lands once on web.tracking");
    assert_eq!(found[0].key.as_deref(), Some(user), "{what}");
    assert_eq!(found[0].value["event"], "Link Clicked", "{what}");
    assert!(find(&brokers(), "eventgw.dead-letter", id).is_empty(), "{what}: not dead-lettered");
}

async fn status_of(request: reqwest::RequestBuilder, what: &str) -> Value {
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("JSON answer");
    assert_eq!(status, 200, "{what}: {body}");
    body
}

#[actix_web::test]
async fn every_sdk_upload_path_lands_on_its_topic() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let client = reqwest::Client::new();
    let user = unique("edge-user");
    let ids: Vec<String> = (0..6).map(|_| uuid::Uuid::new_v4().to_string()).collect();

    // analytics-next standard dispatcher: `/v1/t`, text/plain, key in the body.
    let mut single = click(&user, &ids[0]);
    single["writeKey"] = json!(DEMO);
    let request = client.post(format!("{}/v1/t", gw.url)).header("content-type", "text/plain").body(single.to_string());
    status_of(request, "/v1/t").await;

    // analytics-next batching and Segment's mobile SDKs: `/v1/b`, key in the body.
    let body = json!({"writeKey": DEMO, "batch": [click(&user, &ids[1])], "sentAt": "2026-12-03T10:00:00.000Z"});
    let request = client.post(format!("{}/v1/b", gw.url)).header("content-type", "text/plain").body(body.to_string());
    status_of(request, "/v1/b").await;

    // Segment analytics-java: `/v1/import/` with Basic credentials.
    let body = json!({"batch": [click(&user, &ids[2])], "sentAt": "2026-12-03T10:00:00.000Z"});
    let request = client.post(format!("{}/v1/import/", gw.url)).header("authorization", basic()).json(&body);
    status_of(request, "/v1/import/").await;

    // RudderStack JS v3 beacon: `/beacon/v1/batch?writeKey=`, text/plain.
    let body = json!({"batch": [click(&user, &ids[3])]});
    let request = client
        .post(format!("{}/beacon/v1/batch?writeKey={DEMO}", gw.url))
        .header("content-type", "text/plain;charset=UTF-8")
        .body(body.to_string());
    status_of(request, "/beacon/v1/batch").await;

    // RudderStack Node: gzip labelled application/x-www-form-urlencoded.
    let body = json!({"batch": [click(&user, &ids[4])], "sentAt": "2026-12-03T10:00:00.000Z"});
    let request = client
        .post(format!("{}/v1/batch", gw.url))
        .header("authorization", basic())
        .header("content-type", "application/x-www-form-urlencoded")
        .header("content-encoding", "gzip")
        .body(gzip(body.to_string().as_bytes()));
    status_of(request, "gzip as a form").await;

    // A body of unknown length, chunked.
    let text = json!({"batch": [click(&user, &ids[5])]}).to_string();
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = text.as_bytes().chunks(16).map(|c| Ok(c.to_vec())).collect();
    let request = client
        .post(format!("{}/v1/batch", gw.url))
        .header("authorization", basic())
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)));
    status_of(request, "chunked").await;

    let what = ["/v1/t", "/v1/b", "/v1/import/", "/beacon/v1/batch", "gzip as a form", "chunked"];
    for (id, what) in ids.iter().zip(what) {
        landed(id, &user, what);
    }
    gw.stop().await;
}

/// As an SDK configured by host alone: fetch the configuration, then upload
/// where it says.
#[actix_web::test]
async fn sdks_configured_from_the_settings_endpoints_deliver() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let client = reqwest::Client::new();
    let user = unique("edge-settings");

    // Segment: `${protocol}://${apiHost}/b` from `integrations["Segment.io"]`.
    let settings: Value = client
        .get(format!("{}/v1/projects/{DEMO}/settings", gw.url))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("JSON");
    let io = &settings["integrations"]["Segment.io"];
    let upload =
        format!("{}://{}/b", io["protocol"].as_str().expect("protocol"), io["apiHost"].as_str().expect("host"));
    let segment_id = uuid::Uuid::new_v4().to_string();
    let body = json!({"writeKey": DEMO, "batch": [click(&user, &segment_id)], "sentAt": "2026-12-03T10:00:00.000Z"});
    status_of(client.post(&upload).header("content-type", "text/plain").body(body.to_string()), "settings apiHost")
        .await;

    // RudderStack: `${dataPlaneUrl}/v1/batch` once the source is enabled.
    let source: Value = client
        .get(format!("{}/sourceConfig?p=android&v=1.20.0", gw.url))
        .header("authorization", basic())
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("JSON");
    assert_eq!(source["source"]["enabled"], true);
    let plane = source["source"]["dataplanes"]["US"][0]["url"].as_str().expect("data plane").to_owned();
    let rudder_id = uuid::Uuid::new_v4().to_string();
    let body = json!({"batch": [click(&user, &rudder_id)], "sentAt": "2026-12-03T10:00:00.000Z"});
    status_of(client.post(format!("{plane}/v1/batch")).header("authorization", basic()).json(&body), "dataPlaneUrl")
        .await;

    landed(&segment_id, &user, "via Segment settings");
    landed(&rudder_id, &user, "via sourceConfig");
    gw.stop().await;
}
