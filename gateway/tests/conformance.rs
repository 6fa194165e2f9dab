//! The conformance suite (issue 12): other vendors' SDKs, unchanged, deliver
//! through the gateway into their domain topics.
//!
//! Each case runs one SDK against a real gateway and a real Kafka and proves
//! two things: the SDK itself reports success (callback, return value, flush
//! result, nothing left queued), and every event it sent is read back from
//! its domain topic with the right key, none dead-lettered. SDKs that run on
//! this machine (Node, Python, Go, JVM, browser) are driven by small programs
//! under `gateway/tests/conformance/`, installed at pinned versions by
//! `scripts/test-conformance`, which runs this target (its cases are
//! `#[ignore]`d so a plain `cargo test` without the SDKs stays green). SDKs
//! that cannot run here (iOS, Android, Flutter, React Native) are in
//! `conformance/mobile.rs`: their upload rebuilt exactly as their source
//! builds it, each citing the file it mirrors.

mod common;
#[path = "conformance/harness.rs"]
mod harness;
#[path = "conformance/mobile.rs"]
mod mobile;

use harness::{
    Driver, FORM_SUBMITTED, IDENTIFY, LINK_CLICKED, PAGE_VIEWED, SCREEN_VIEWED, WRITE_KEY, assert_delivered, deps_dir,
    driver_env, start_gateway, suite_dir, user,
};
use mobile::{
    Request, base64, basic, gzip, host_of, now_millis, rudder_events, rudder_source_config, segment_events,
    segment_settings,
};
use serde_json::json;

/// The three calls every server SDK driver makes: a track, a page and an identify.
const SERVER_CALLS: [harness::Expect; 3] = [LINK_CLICKED, PAGE_VIEWED, IDENTIFY];

fn node(script: &str) -> Driver {
    Driver::new("node", suite_dir().join("node")).arg(script)
}

fn python(sdk: &str) -> Driver {
    Driver::new(deps_dir().join("venv/bin/python"), suite_dir().join("python")).arg("driver.py").arg(sdk)
}

/// The built Go driver (`scripts/test-conformance` builds it from `conformance/go`).
fn go(sdk: &str) -> Driver {
    Driver::new(deps_dir().join("bin/conformance-go"), suite_dir().join("go")).arg(sdk)
}

/// The JVM driver, compiled by Maven into `conformance/jvm/target`, with the
/// classpath Maven resolved.
fn jvm(sdk: &str) -> Driver {
    jvm_with(&[], sdk)
}

/// As [`jvm`], with JVM options (e.g. a trust store).
fn jvm_with(options: &[String], sdk: &str) -> Driver {
    let dir = suite_dir().join("jvm");
    let deps = std::fs::read_to_string(dir.join("target/classpath.txt")).unwrap_or_default();
    let mut driver = Driver::new("java", &dir);
    for option in options {
        driver = driver.arg(option.clone());
    }
    driver.arg("-cp").arg(format!("target/classes:{}", deps.trim())).arg("conformance.Main").arg(sdk)
}

async fn server_case(case: &str, driver: Driver) {
    let gateway = start_gateway(&[]).await;
    let user = user(case);
    let report = driver_env(driver, &gateway.url, &user).run().await;
    eprintln!("{case}: {report}");
    assert_delivered(case, &user, &SERVER_CALLS, 0);
    gateway.stop().await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_node() {
    server_case("segment-node", node("segment-node.mjs")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_node() {
    server_case("rudder-node", node("rudder-node.mjs")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_python() {
    server_case("segment-python", python("segment")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_python() {
    server_case("rudder-python", python("rudder")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_go() {
    server_case("segment-go", go("segment")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_go() {
    server_case("rudder-go", go("rudder")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_java() {
    server_case("segment-java", jvm("segment-java")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_java() {
    server_case("rudder-java", jvm("rudder-java")).await;
}

/// PostHog's server SDKs against its capture routes: a custom event the
/// mapping (`schemas/mappings/posthog.toml`) names `Link Clicked`, a
/// `$pageview` and an identify (posthog-node's `$identify`, Python's
/// `set`), read back in catalog shape like the Segment cases'.
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn posthog_node() {
    server_case("posthog-node", node("posthog-node.mjs")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn posthog_python() {
    let python = Driver::new(deps_dir().join("venv/bin/python"), suite_dir().join("python")).arg("posthog_driver.py");
    server_case("posthog-python", python).await;
}

/// Snowplow's trackers against its collector path: a link click (a
/// self-describing event the mapping, `schemas/mappings/snowplow.toml`,
/// names `Link Clicked`), a page view and a structured `form`/`submit`
/// (`Form Submitted`), the source named by the app id, read back keyed by
/// the tracker's user id like the Segment cases'.
const SNOWPLOW_CALLS: [harness::Expect; 3] = [LINK_CLICKED, PAGE_VIEWED, FORM_SUBMITTED];

async fn snowplow_case(case: &str, driver: Driver) {
    let gateway = start_gateway(&[]).await;
    let user = user(case);
    let report = driver_env(driver, &gateway.url, &user).run().await;
    eprintln!("{case}: {report}");
    let records = assert_delivered(case, &user, &SNOWPLOW_CALLS, 0);
    for record in &records {
        assert_eq!(record.headers.get("protocol").map(String::as_str), Some("snowplow"), "{case}: {record:?}");
        assert_eq!(record.value["context"]["snowplow"]["aid"], harness::SNOWPLOW_APP_ID, "{case}: {}", record.value);
    }
    gateway.stop().await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn snowplow_node() {
    snowplow_case("snowplow-node", node("snowplow-node.mjs")).await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn snowplow_python() {
    let python = Driver::new(deps_dir().join("venv/bin/python"), suite_dir().join("python")).arg("snowplow_driver.py");
    snowplow_case("snowplow-python", python).await;
}

/// Snowplow's browser tracker in Chromium on a page of another origin: its
/// POSTs carry cookies, so each needs the credentialed CORS grant of the
/// page's origin (`Access-Control-Allow-Credentials: true`).
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn snowplow_browser() {
    browser_case_of("snowplow-browser", "snowplow", &SNOWPLOW_CALLS).await;
}

/// GA4's Measurement Protocol through the Python `ga4mp` client, pointed at
/// the gateway as docs/trackers.md says: a validation hit to
/// `/debug/mp/collect` (no messages) and the same three events for real, a
/// `page_view`, a `click` and a `form_submit` that the mapping
/// (`schemas/mappings/ga4.toml`) makes `Page Viewed`, `Link Clicked` and
/// `Form Submitted`, read back keyed by the user id, once each.
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn ga4_python() {
    const CALLS: [harness::Expect; 3] = [PAGE_VIEWED, LINK_CLICKED, FORM_SUBMITTED];
    let case = "ga4-python";
    let gateway = start_gateway(&[]).await;
    let user = user(case);
    let python = Driver::new(deps_dir().join("venv/bin/python"), suite_dir().join("python")).arg("ga4_driver.py");
    let report = driver_env(python, &gateway.url, &user).run().await;
    eprintln!("{case}: {report}");
    let records = assert_delivered(case, &user, &CALLS, 0);
    for record in &records {
        assert_eq!(record.headers.get("protocol").map(String::as_str), Some("ga4"), "{case}: {record:?}");
    }
    gateway.stop().await;
}

/// A free port for a browser case's page, so its origin (`http://localhost:PORT`)
/// can be allowed before the gateway starts.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// A browser SDK on a page of another origin: `http://localhost:PORT`
/// against a gateway on `http://127.0.0.1:...`.
async fn browser_case(case: &str, sdk: &str) {
    browser_case_of(case, sdk, &SERVER_CALLS).await;
}

/// As [`browser_case`], expecting `expected` from the page.
async fn browser_case_of(case: &str, sdk: &str, expected: &[harness::Expect]) {
    let port = free_port();
    let gateway = start_gateway(&[format!("http://localhost:{port}")]).await;
    let user = user(case);
    let driver = node("browser.mjs").arg(sdk).env("PAGE_PORT", port.to_string());
    let report = driver_env(driver, &gateway.url, &user).run().await;
    eprintln!("{case}: {report}");
    assert_delivered(case, &user, expected, 0);
    gateway.stop().await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_browser() {
    browser_case("segment-browser", "segment").await;
}

#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_browser() {
    browser_case("rudder-browser", "rudder").await;
}

/// posthog-js in Chromium on a page of another origin: its load-time calls
/// answered, then identify, a custom event and a page view delivered.
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn posthog_browser() {
    browser_case("posthog-browser", "posthog").await;
}

// ---- Rebuilt mobile uploads (see conformance/mobile.rs) ----

/// What every mobile case sends: a track, a screen and an identify.
const MOBILE_CALLS: [harness::Expect; 3] = [LINK_CLICKED, SCREEN_VIEWED, IDENTIFY];

/// Runs one rebuilt case against a fresh gateway: `send` makes the SDK's
/// requests and asserts the SDK's own success rule; then the events are
/// read back from their domain topics.
async fn mobile_case<F, Fut>(case: &str, send: F)
where
    F: FnOnce(String, String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let gateway = start_gateway(&[]).await;
    let user = user(case);
    send(gateway.url.clone(), user.clone()).await;
    assert_delivered(case, &user, &MOBILE_CALLS, 0);
    gateway.stop().await;
}

/// segmentio/analytics-swift 1.7: Sources/Segment/Utilities/Networking/HTTPClient.swift
/// (settingsFor: GET https://{cdnHost}/projects/{key}/settings, success when
/// the status is not above 300; startBatchUpload: POST https://{apiHost}/b,
/// success on 1..<300; configuredRequest: Content-Type, User-Agent,
/// Accept-Encoding and no Authorization) and
/// Sources/Segment/Utilities/Storage/Types/DirectoryStore.swift (the batch
/// file: `{ "batch": [` line, one event per line joined by a leading comma,
/// then `],"sentAt":"…","writeKey":"…"}`). The API host comes from the
/// settings' `integrations["Segment.io"].apiHost` (SegmentDestination).
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_swift_rebuilt() {
    mobile_case("segment-swift", |url, user| async move {
        let headers = |r: Request| {
            r.header("Content-Type", "application/json; charset=utf-8")
                .header("User-Agent", "analytics-ios/1.7.3")
                .header("Accept-Encoding", "gzip")
        };
        let cdn_host = format!("{}/v1", host_of(&url));
        let settings = headers(Request::get(format!("http://{cdn_host}/projects/{WRITE_KEY}/settings")));
        let api_host = segment_settings(settings, |s| s <= 300).await;
        assert_eq!(api_host, cdn_host, "the settings point the SDK back at the gateway");
        let events = segment_events(&user, "analytics-swift", "1.7.3", true);
        let mut file = String::from("{ \"batch\": [\n");
        for (i, e) in events.iter().enumerate() {
            file.push_str(if i == 0 { "" } else { "," });
            file.push_str(&e.to_string());
            file.push('\n');
        }
        file.push_str(&format!("],\"sentAt\":\"{}\",\"writeKey\":\"{WRITE_KEY}\"}}\n", now_millis()));
        let answer = headers(Request::post(format!("http://{api_host}/b"), file.into_bytes())).send().await;
        assert!(
            (1..300).contains(&answer.status),
            "analytics-swift treats {} as a failure: {}",
            answer.status,
            answer.body
        );
    })
    .await;
}

/// segmentio/analytics-ios 4.1: Segment/Classes/SEGHTTPClient.m (upload:
/// POST {SEGMENT_API_BASE}/batch, gzipped JSON, session headers
/// Accept-Encoding, Content-Encoding gzip, Content-Type, Authorization Basic,
/// User-Agent; success below 300; settingsForWriteKey: GET
/// {SEGMENT_CDN_BASE}/projects/{key}/settings, success up to 300) and
/// Segment/Classes/SEGSegmentIntegration.m (sendData: `sentAt`, `writeKey`
/// and `batch`). NSUUID ids are upper-case. The API base is the app's
/// requestFactory rewrite of https://api.segment.io/v1.
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_ios_classic_rebuilt() {
    mobile_case("segment-ios", |url, user| async move {
        let settings = Request::get(format!("{url}/v1/projects/{WRITE_KEY}/settings"))
            .header("Accept-Encoding", "gzip")
            .header("User-Agent", "analytics-ios/4.1.8");
        segment_settings(settings, |s| s <= 300).await;
        let events = segment_events(&user, "analytics-ios", "4.1.8", true);
        let payload = json!({"sentAt": now_millis(), "writeKey": WRITE_KEY, "batch": events});
        let answer = Request::post(format!("{url}/v1/batch"), gzip(payload.to_string().as_bytes()))
            .header("Accept-Encoding", "gzip")
            .header("Content-Encoding", "gzip")
            .header("Content-Type", "application/json")
            .header("Authorization", basic())
            .header("User-Agent", "analytics-ios/4.1.8")
            .send()
            .await;
        assert!(answer.status < 300, "analytics-ios treats {} as a failure: {}", answer.status, answer.body);
    })
    .await;
}

/// segmentio/analytics-android 4.11: analytics/src/main/java/com/segment/analytics/ConnectionFactory.java
/// (upload: POST https://api.segment.io/v1/import with Content-Type,
/// User-Agent, Authorization Basic, Content-Encoding gzip,
/// setChunkedStreamingMode(0); projectSettings: GET
/// https://cdn-settings.segment.com/v1/projects/{key}/settings) and
/// analytics/src/main/java/com/segment/analytics/Client.java (settings need
/// exactly 200; an upload fails at 300 and above). The batch is
/// `{"batch":[…],"sentAt":"…"}` (BatchPayloadWriter). The host is the app's
/// ConnectionFactory override.
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_android_classic_rebuilt() {
    mobile_case("segment-android", |url, user| async move {
        let agent = "analytics-android/4.11.3";
        let settings = Request::get(format!("{url}/v1/projects/{WRITE_KEY}/settings"))
            .header("Content-Type", "application/json")
            .header("User-Agent", agent);
        segment_settings(settings, |s| s == 200).await;
        let events = segment_events(&user, "analytics-android", "4.11.3", false);
        let payload = json!({"batch": events, "sentAt": now_millis()});
        let answer = Request::post(format!("{url}/v1/import"), gzip(payload.to_string().as_bytes()))
            .header("Content-Type", "application/json")
            .header("User-Agent", agent)
            .header("Authorization", basic())
            .header("Content-Encoding", "gzip")
            .chunked()
            .send()
            .await;
        assert!(answer.status < 300, "analytics-android treats {} as a failure: {}", answer.status, answer.body);
    })
    .await;
}

/// segmentio/analytics_flutter 1.1: packages/core/lib/utils/http_client.dart
/// (settingsFor: GET https://{cdnHost}/projects/{key}/settings, success up to
/// 300; startBatchUpload: POST https://{apiHost}/b, success below 300, body
/// `batch`, `sentAt` from `DateTime.now().toIso8601String()` (local time,
/// microseconds, no offset) and `writeKey`; headers Content-Type,
/// User-Agent, Accept-Encoding, no Authorization).
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_flutter_rebuilt() {
    mobile_case("segment-flutter", |url, user| async move {
        let headers = |r: Request| {
            r.header("Content-Type", "application/json; charset=utf-8")
                .header("User-Agent", "analytics-flutter/1.1.7")
                .header("Accept-Encoding", "gzip")
        };
        let cdn_host = format!("{}/v1", host_of(&url));
        let settings = headers(Request::get(format!("http://{cdn_host}/projects/{WRITE_KEY}/settings")));
        let api_host = segment_settings(settings, |s| s <= 300).await;
        let mut events = segment_events(&user, "analytics-flutter", "1.1.7", false);
        for e in &mut events {
            // Dart's DateTime.now().toUtc().toIso8601String(): microseconds.
            e["timestamp"] = json!(chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string());
        }
        let sent_at = chrono::Local::now().format("%Y-%m-%dT%H:%M:%S%.6f").to_string();
        let body = json!({"batch": events, "sentAt": sent_at, "writeKey": WRITE_KEY});
        let answer = headers(Request::post(format!("http://{api_host}/b"), body.to_string().into_bytes())).send().await;
        assert!(answer.status < 300, "analytics_flutter treats {} as a failure: {}", answer.status, answer.body);
    })
    .await;
}

/// segmentio/analytics-react-native 2.x: packages/core/src/analytics.ts
/// (fetchSettings: GET {cdnProxy}/projects/{key}/settings with
/// `Cache-Control: no-cache`, checkResponseForErrors: any non-ok status
/// fails) and packages/core/src/api.ts (uploadEvents: POST with
/// `Content-Type: text/plain`, body `batch`, `sentAt`, `writeKey`; no
/// Authorization). The upload goes to `{apiHost}/b` from the settings
/// (packages/core/src/plugins/SegmentDestination.ts).
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_react_native_rebuilt() {
    mobile_case("segment-react-native", |url, user| async move {
        let settings =
            Request::get(format!("{url}/v1/projects/{WRITE_KEY}/settings")).header("Cache-Control", "no-cache");
        let api_host = segment_settings(settings, |s| (200..300).contains(&s)).await;
        let events = segment_events(&user, "analytics-react-native", "2.20.3", false);
        let body = json!({"batch": events, "sentAt": now_millis(), "writeKey": WRITE_KEY});
        let answer = Request::post(format!("http://{api_host}/b"), body.to_string().into_bytes())
            .header("Content-Type", "text/plain")
            .send()
            .await;
        assert!((200..300).contains(&answer.status), "analytics-react-native treats {} as a failure", answer.status);
    })
    .await;
}

/// rudderlabs/rudder-sdk-android 1.x: core/src/main/java/com/rudderstack/android/sdk/core/RudderNetworkManager.java
/// (sendNetworkRequest: Authorization Basic on every request; a POST adds
/// Content-Type application/json and `AnonymousId` (base64 of the anonymous
/// id); success is exactly 200) and RudderServerConfigManager.java (GET
/// {controlPlaneUrl}/sourceConfig?p=android&v=…&bv=…; nothing is sent until
/// it answers 200 with `source.enabled`). The batch is
/// `{"sentAt":"…","batch":[…]}` posted to {dataPlaneUrl}/v1/batch.
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_android_v1_rebuilt() {
    mobile_case("rudder-android-v1", |url, user| async move {
        rudder_source_config(
            Request::get(format!("{url}/sourceConfig?p=android&v=1.27.1&bv=34")).header("Authorization", basic()),
        )
        .await;
        let (anonymous, events) = rudder_events(&user, "com.rudderstack.android.sdk.core", "1.27.1");
        let body = json!({"sentAt": now_millis(), "batch": events});
        let answer = Request::post(format!("{url}/v1/batch"), body.to_string().into_bytes())
            .header("Authorization", basic())
            .header("Content-Type", "application/json")
            .header("AnonymousId", base64(&anonymous))
            .send()
            .await;
        assert_eq!(answer.status, 200, "rudder-sdk-android needs exactly 200: {}", answer.body);
    })
    .await;
}

/// rudderlabs/rudder-sdk-ios 1.x: Sources/Classes/RSNetworkManager.m
/// (sendNetworkRequest: Authorization Basic; a POST adds `Content-Type:
/// Application/json` (capital A) and `AnonymousId`; success is exactly 200;
/// paths `v1/batch` on the data plane and `sourceConfig?p=ios&v=…` on the
/// control plane, both after a slash the SDK appends).
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_ios_v1_rebuilt() {
    mobile_case("rudder-ios-v1", |url, user| async move {
        rudder_source_config(
            Request::get(format!("{url}/sourceConfig?p=ios&v=1.31.0")).header("Authorization", basic()),
        )
        .await;
        let (anonymous, events) = rudder_events(&user, "rudder-ios-library", "1.31.0");
        let body = json!({"sentAt": now_millis(), "batch": events});
        let answer = Request::post(format!("{url}/v1/batch"), body.to_string().into_bytes())
            .header("Authorization", basic())
            .header("Content-Type", "Application/json")
            .header("AnonymousId", base64(&anonymous))
            .send()
            .await;
        assert_eq!(answer.status, 200, "rudder-sdk-ios needs exactly 200: {}", answer.body);
    })
    .await;
}

/// rudderlabs/rudder-sdk-kotlin 1.x: core/src/main/kotlin/com/rudderstack/sdk/kotlin/core/internals/network/HttpClientImpl.kt
/// (Authorization Basic on every request; sendData: setChunkedStreamingMode(0),
/// Content-Type application/json, `AnonymousId` (base64), Content-Encoding
/// gzip with the body gzipped; success on 200..=299) and its
/// SourceConfigManager (GET {controlPlaneUrl}/sourceConfig?p=android&v=…&bv=…).
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_kotlin_v2_rebuilt() {
    mobile_case("rudder-kotlin-v2", |url, user| async move {
        rudder_source_config(
            Request::get(format!("{url}/sourceConfig?p=android&v=1.1.0&bv=34")).header("Authorization", basic()),
        )
        .await;
        let (anonymous, events) = rudder_events(&user, "com.rudderstack.sdk.kotlin", "1.1.0");
        let body = json!({"batch": events, "sentAt": now_millis()});
        let answer = Request::post(format!("{url}/v1/batch"), gzip(body.to_string().as_bytes()))
            .header("Authorization", basic())
            .header("Content-Type", "application/json")
            .header("AnonymousId", base64(&anonymous))
            .header("Content-Encoding", "gzip")
            .chunked()
            .send()
            .await;
        assert!((200..=299).contains(&answer.status), "rudder-sdk-kotlin treats {} as a failure", answer.status);
    })
    .await;
}

/// rudderlabs/rudder-sdk-swift 1.x (v2): HttpClient.swift,
/// `HttpClientRequestType` (GET {controlPlaneUrl}/sourceConfig with the
/// platform query; POST {dataPlaneUrl}/v1/batch; headers Content-Type
/// application/json and Authorization Basic, plus on uploads `AnonymousId`
/// (the id itself, not base64) and Content-Encoding gzip with the body
/// gzipped, gzip being on by default).
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn rudder_swift_v2_rebuilt() {
    mobile_case("rudder-swift-v2", |url, user| async move {
        rudder_source_config(
            Request::get(format!("{url}/sourceConfig?p=ios&v=1.0.0"))
                .header("Content-Type", "application/json")
                .header("Authorization", basic()),
        )
        .await;
        let (anonymous, events) = rudder_events(&user, "com.rudderstack.ios.sdk", "1.0.0");
        let body = json!({"batch": events, "sentAt": now_millis()});
        let answer = Request::post(format!("{url}/v1/batch"), gzip(body.to_string().as_bytes()))
            .header("Content-Type", "application/json")
            .header("Authorization", basic())
            .header("AnonymousId", anonymous)
            .header("Content-Encoding", "gzip")
            .send()
            .await;
        assert!((200..300).contains(&answer.status), "rudder-sdk-swift treats {} as a failure", answer.status);
    })
    .await;
}

// ---- A genuinely invalid event in an SDK's batch ----

/// Segment's Node SDK sends a batch whose fourth event breaks its contract
/// (`Link Clicked` without the required `properties.href`): that event is
/// dead-lettered, the other three land, the SDK reports success for every
/// call, and it sent exactly one upload (no resend of the batch), counted
/// by the gateway itself.
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn invalid_event_is_dead_lettered_and_the_batch_is_not_resent() {
    let gateway = start_gateway(&[]).await;
    let user = user("invalid-in-batch");
    let before = harness::upload_requests(&gateway.url).await;
    let driver = node("segment-node.mjs").env("EVENTS", "invalid");
    let report = driver_env(driver, &gateway.url, &user).run().await;
    eprintln!("invalid-in-batch: {report}");
    assert_eq!(report["requests"].as_array().map(Vec::len), Some(1), "the SDK made one upload: {report}");
    // Give a retry, were there one, time to arrive before counting.
    actix_web::rt::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(harness::upload_requests(&gateway.url).await - before, 1, "the gateway saw exactly one upload");
    let dead = harness::dead_letters_of(&user);
    assert_eq!(dead.len(), 1, "one dead-lettered event: {dead:#?}");
    assert_eq!(dead[0].value["event"]["properties"]["text"], "no href", "the invalid one: {}", dead[0].value);
    assert_delivered("invalid-in-batch", &user, &SERVER_CALLS, 1);
    gateway.stop().await;
}

/// The same with RudderStack's Python SDK (gzip, its own retry loop).
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn invalid_event_from_python_is_dead_lettered_and_not_resent() {
    let gateway = start_gateway(&[]).await;
    let user = user("invalid-python");
    let before = harness::upload_requests(&gateway.url).await;
    let report = driver_env(python("rudder").env("EVENTS", "invalid"), &gateway.url, &user).run().await;
    eprintln!("invalid-python: {report}");
    actix_web::rt::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(harness::upload_requests(&gateway.url).await - before, 1, "the gateway saw exactly one upload");
    assert_delivered("invalid-python", &user, &SERVER_CALLS, 1);
    gateway.stop().await;
}

// ---- TLS: a real SDK over https:// ----

/// Segment's Node SDK configured with `https://` delivers through the
/// gateway's TLS listener (`[server.tls]`), trusting only a CA made here
/// (NODE_EXTRA_CA_CERTS); the same SDK without that CA must fail, so the
/// certificate is really verified.
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_node_over_tls() {
    let pki = harness::TestPki::new("conformance");
    let mut config = harness::suite_config(&[]);
    config.server.tls =
        Some(gateway::config::TlsConfig { cert_file: pki.cert_file.clone(), key_file: pki.key_file.clone() });
    let gateway = common::TestGateway::start(config).await;
    let https = gateway.url.replace("http://", "https://");
    let untrusted = user("segment-node-tls-untrusted");
    let user = user("segment-node-tls");
    let driver = node("segment-node.mjs").env("NODE_EXTRA_CA_CERTS", pki.ca_file.display().to_string());
    let report = driver_env(driver, &https, &user).run().await;
    eprintln!("segment-node-tls: {report}");
    assert!(report["requests"][0].as_str().is_some_and(|u| u.starts_with("https://")), "{report}");
    assert_delivered("segment-node-tls", &user, &SERVER_CALLS, 0);

    // Control: without the CA, the SDK reports the failure and nothing lands.
    let outcome = driver_env(node("segment-node.mjs").env("MAX_RETRIES", "0"), &https, &untrusted).try_run().await;
    assert!(outcome.is_err(), "the SDK must refuse a certificate it cannot verify: {outcome:?}");
    assert!(harness::keyed(harness::WEB, &untrusted, 1).is_empty(), "nothing landed without a verified connection");
    gateway.stop().await;
}

/// Segment's analytics-kotlin core (a plain JVM library) always speaks
/// `https://`: it fetches its settings from `https://{cdnHost}/projects/{key}/settings`,
/// takes the upload host from them and posts to `https://{apiHost}/b`. It
/// runs unchanged against the TLS listener, trusting the test CA through a
/// PKCS#12 trust store made with the JDK's keytool.
#[actix_web::test]
#[ignore = "needs the SDKs: run scripts/test-conformance"]
async fn segment_kotlin_over_tls() {
    let pki = harness::TestPki::new("kotlin");
    let store = pki.ca_file.with_file_name("trust.p12");
    let keytool = std::process::Command::new("keytool")
        .args([
            "-importcert",
            "-noprompt",
            "-alias",
            "eventgw-test-ca",
            "-storetype",
            "PKCS12",
            "-storepass",
            "changeit",
        ])
        .arg("-file")
        .arg(&pki.ca_file)
        .arg("-keystore")
        .arg(&store)
        .output()
        .expect("keytool (JDK) runs");
    assert!(keytool.status.success(), "keytool: {}", String::from_utf8_lossy(&keytool.stderr));
    let mut config = harness::suite_config(&[]);
    config.server.tls =
        Some(gateway::config::TlsConfig { cert_file: pki.cert_file.clone(), key_file: pki.key_file.clone() });
    let gateway = common::TestGateway::start(config).await;
    let https = gateway.url.replace("http://", "https://");
    let user = user("segment-kotlin");
    // The SDK keeps unsent batches in a fixed directory per write key on
    // the JVM; start from none, so an earlier failed run cannot add uploads.
    let _ = std::fs::remove_dir_all(format!("/tmp/analytics-kotlin/{}", harness::WRITE_KEY));
    let jvm = jvm_with(
        &[
            format!("-Djavax.net.ssl.trustStore={}", store.display()),
            "-Djavax.net.ssl.trustStorePassword=changeit".into(),
        ],
        "segment-kotlin",
    );
    let report = driver_env(jvm, &https, &user).run().await;
    eprintln!("segment-kotlin: {report}");
    assert_delivered("segment-kotlin", &user, &MOBILE_CALLS, 0);
    gateway.stop().await;
}
