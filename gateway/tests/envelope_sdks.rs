//! The common envelope as each Segment and RudderStack SDK really builds it,
//! rebuilt from the SDK's own source (cited per case), through the real
//! gateway into Kafka: every correct event lands on its domain topic (never
//! the dead-letter topic) with its key, a corrected RFC 3339 `timestamp` and
//! the SDK's own fields kept; a genuinely invalid event in the same batch is
//! still dead-lettered while the rest lands.
//!
//! The device clocks here run an hour fast: each SDK's `sentAt` is now + 1 h
//! and its event happened 5 s before that, so the stored time must be about
//! now − 5 s whatever format and offset the SDK wrote.

mod common;

use chrono::{DateTime, FixedOffset, SecondsFormat, TimeDelta, Utc};
use common::{Consumed, TestGateway, brokers, config, find, unique};
use serde_json::{Value, json};

/// The device's clock: an hour fast.
fn device_now() -> DateTime<Utc> {
    Utc::now() + TimeDelta::hours(1)
}

fn event_time() -> DateTime<Utc> {
    device_now() - TimeDelta::seconds(5)
}

/// `2026-12-02T10:00:00.123Z` (JavaScript `toISOString`, Swift, Java `Date`).
fn millis_z(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Posts `body` with the demo key; every event's status as answered.
async fn deliver(gw: &TestGateway, body: &Value) -> Vec<String> {
    let (status, answer) = gw.post("/v1/batch", body).await;
    assert_eq!(status, 200, "{answer}");
    answer["events"].as_array().expect("events").iter().map(|e| e["status"].as_str().unwrap_or("").to_owned()).collect()
}

/// The one record of `id` on `topic`, checked for what every record needs:
/// its key, a corrected RFC 3339 timestamp, nothing on the dead-letter topic.
fn landed(topic: &str, id: &str, key: &str) -> Consumed {
    let found = find(&brokers(), topic, id);
    assert_eq!(found.len(), 1, "{id} on {topic}");
    assert!(find(&brokers(), "eventgw.dead-letter", id).is_empty(), "{id} was dead-lettered");
    let record = found.into_iter().next().expect("one");
    assert_eq!(record.key.as_deref(), Some(key), "{id}");
    let stored = record.value["timestamp"].as_str().expect("timestamp");
    assert!(stored.len() == 24 && stored.ends_with('Z'), "RFC 3339 with milliseconds and Z: {stored}");
    let stored = DateTime::parse_from_rfc3339(stored).expect("RFC 3339").to_utc();
    let expected = Utc::now() - TimeDelta::seconds(5);
    assert!((stored - expected).num_seconds().abs() < 30, "{id}: {stored} is corrected to about {expected}");
    assert!(!record.headers.contains_key("timestamp-correction"), "{id}: corrected, not flagged");
    record
}

/// Segment analytics-python, `segment/analytics/client.py` (`track`,
/// `identify`, `page`, `_enqueue`: every field present, `None` → `null`,
/// `timestamp.isoformat(timespec='milliseconds')` with `+00:00`,
/// `context.library`) and `segment/analytics/request.py` (`post`: batch
/// `sentAt` `isoformat()` with microseconds, `writeKey` in the body too).
#[actix_web::test]
async fn segment_python_nulls_and_offsets() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let python = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%M:%S%.3f+00:00").to_string();
    let library = json!({"library": {"name": "analytics-python", "version": "2.3.4"}});
    let (track, identify, page, bad) = (unique("py-track"), unique("py-identify"), unique("py-page"), unique("py-bad"));
    let user = unique("py-user");
    let body = json!({"batch": [
        {"integrations": {}, "anonymousId": null, "properties": {"href": "https://shop.example/a"},
         "timestamp": python(event_time()), "context": library, "userId": user, "type": "track",
         "event": "Link Clicked", "messageId": track},
        {"integrations": {}, "anonymousId": null, "timestamp": python(event_time()), "context": library,
         "type": "identify", "userId": user, "traits": {"plan": "pro"}, "messageId": identify},
        {"integrations": {}, "anonymousId": null, "properties": {"url": "https://shop.example/p", "path": "/p"},
         "timestamp": python(event_time()), "category": null, "context": library, "userId": user,
         "type": "page", "name": null, "messageId": page},
        // Genuinely invalid: `total` must be a number.
        {"integrations": {}, "anonymousId": null, "properties": {"order_id": "o-py", "total": "42", "currency": "EUR"},
         "timestamp": python(event_time()), "context": library, "userId": user, "type": "track",
         "event": "Order Completed", "messageId": bad}],
        "sentAt": device_now().format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string(), "writeKey": "demo-write-key"});
    assert_eq!(deliver(&gw, &body).await, ["accepted", "accepted", "accepted", "invalid"]);
    let record = landed("web.tracking", &track, &user);
    assert_eq!(record.value["context"]["library"]["name"], "analytics-python");
    assert!(record.value.get("anonymousId").is_none(), "null is absent");
    assert_eq!(record.value["integrations"], json!({}));
    landed("crm.identities", &identify, &user);
    landed("web.tracking", &page, &user);
    let dead = find(&brokers(), "eventgw.dead-letter", &bad);
    assert_eq!(dead.len(), 1, "the invalid event is kept on the dead-letter topic");
    assert_eq!(dead[0].headers["dead-letter-reason"], "schema_violation");
    assert!(find(&brokers(), "billing.payments", &bad).is_empty());
    gw.stop().await;
}

/// Segment analytics-go v3, `track.go` (`Timestamp time.Time`, JSON as
/// RFC 3339 with nanoseconds and the machine's local offset; empty ids
/// omitted) and `analytics.go` (the batch carries its own `messageId`,
/// `sentAt` and a shared `context.library`).
#[actix_web::test]
async fn segment_go_nanoseconds_and_local_offsets() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let berlin = FixedOffset::east_opt(3600).expect("offset");
    let go = |t: DateTime<Utc>| t.with_timezone(&berlin).to_rfc3339_opts(SecondsFormat::Nanos, false);
    let (id, anonymous) = (unique("go"), unique("go-anon"));
    let body = json!({"messageId": unique("go-batch"), "sentAt": go(device_now()),
        "batch": [{"type": "track", "messageId": id, "anonymousId": anonymous, "event": "Link Clicked",
                   "timestamp": go(event_time()), "properties": {"href": "https://shop.example/go"}}],
        "context": {"library": {"name": "analytics-go", "version": "3.3.0"}}});
    assert_eq!(deliver(&gw, &body).await, ["accepted"]);
    let record = landed("web.tracking", &id, &anonymous);
    assert_eq!(record.value["context"]["library"]["name"], "analytics-go", "the batch context is merged in");
    assert_eq!(record.value["originalTimestamp"], body["batch"][0]["timestamp"], "the device's time as sent");
    gw.stop().await;
}

/// Segment analytics-java, `messages/Message.java` (`UUID messageId`,
/// nullable ids left out by Gson), `gson/ISO8601InstantAdapter.java`
/// (`Instant.toString()`: up to nine fraction digits) and
/// `messages/Batch.java` (a batch `sentAt` and `context`).
#[actix_web::test]
async fn segment_java_instants() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let instant = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Nanos, true);
    let (id, user) = (uuid::Uuid::new_v4().to_string(), unique("java-user"));
    let body = json!({"batch": [{"type": "track", "messageId": id, "timestamp": instant(event_time()),
            "userId": user, "event": "Link Clicked", "properties": {"href": "https://shop.example/j"},
            "context": {"library": {"name": "analytics-java", "version": "3.5.1"}}}],
        "sentAt": millis_z(device_now()), "context": {"library": {"name": "analytics-java", "version": "3.5.1"}}});
    assert_eq!(deliver(&gw, &body).await, ["accepted"]);
    landed("web.tracking", &id, &user);
    gw.stop().await;
}

/// Segment analytics-swift, `Sources/Segment/Types.swift` (`RawEvent`:
/// `messageId` and `anonymousId` from `UUID().uuidString`, upper case;
/// `timestamp` ISO 8601 with milliseconds; `integrations`, `metrics`,
/// `_metadata` with `bundled`/`unbundled`/`bundledIds`) and Segment
/// analytics-kotlin, `core/.../Events.kt` (`userId` defaults to `""`,
/// `_metadata`); both upload `{"batch": [...], "sentAt": ...}`.
#[actix_web::test]
async fn segment_mobile_upper_case_ids_empty_user_ids_and_metadata() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let metadata = json!({"bundled": ["Segment.io"], "unbundled": [], "bundledIds": []});
    let (swift, swift_anon) =
        (uuid::Uuid::new_v4().to_string().to_uppercase(), uuid::Uuid::new_v4().to_string().to_uppercase());
    let (kotlin, kotlin_anon) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    let body = json!({"sentAt": millis_z(device_now()), "batch": [
        {"type": "screen", "name": "Checkout", "properties": {"variation": "b"}, "messageId": swift,
         "anonymousId": swift_anon, "timestamp": millis_z(event_time()), "integrations": {}, "metrics": [],
         "_metadata": metadata, "context": {"library": {"name": "analytics-swift", "version": "1.7.2"}}},
        {"type": "track", "event": "Link Clicked", "properties": {"href": "https://shop.example/k"},
         "messageId": kotlin, "anonymousId": kotlin_anon, "userId": "", "timestamp": millis_z(event_time()),
         "integrations": {}, "_metadata": metadata,
         "context": {"library": {"name": "analytics-kotlin", "version": "1.19.1"}}}]});
    assert_eq!(deliver(&gw, &body).await, ["accepted", "accepted"]);
    let record = landed("app.tracking", &swift, &swift_anon);
    assert_eq!(record.value["messageId"], swift.as_str(), "upper-case ids are kept as sent (retries repeat them)");
    assert_eq!(record.value["_metadata"], metadata);
    let record = landed("web.tracking", &kotlin, &kotlin_anon);
    assert!(record.value.get("userId").is_none(), "\"\" is no user: keyed by anonymousId");
    gw.stop().await;
}

/// Segment analytics-next, `packages/browser/src/plugins/segmentio/normalize.ts`
/// (`userId` is `user.id()`, `null` when unknown; a per-event `sentAt` and
/// `writeKey`; `_metadata.bundled`; `context.library` `analytics.js`).
#[actix_web::test]
async fn segment_browser_per_event_sent_at_and_null_user() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let (id, anonymous) = (format!("ajs-next-{}", uuid::Uuid::new_v4()), uuid::Uuid::new_v4().to_string());
    let body = json!({"batch": [{"type": "page", "properties": {"path": "/pricing", "referrer": "", "search": "",
            "title": "Pricing", "url": "https://shop.example/pricing"}, "name": null, "category": null,
        "messageId": id, "timestamp": millis_z(event_time()), "sentAt": millis_z(device_now()),
        "userId": null, "anonymousId": anonymous, "writeKey": "demo-write-key", "integrations": {},
        "_metadata": {"bundled": ["Segment.io"], "unbundled": [], "bundledIds": []},
        "context": {"library": {"name": "analytics.js", "version": "npm:next-1.70.0"}, "locale": "en-US",
                    "page": {"path": "/pricing", "url": "https://shop.example/pricing"}, "userAgent": "Mozilla/5.0"}}]});
    assert_eq!(deliver(&gw, &body).await, ["accepted"]);
    let record = landed("web.tracking", &id, &anonymous);
    assert!(record.value.get("writeKey").is_none(), "the key never travels into Kafka");
    assert_eq!(record.value["context"]["userAgent"], "Mozilla/5.0", "the browser's own user agent is kept");
    gw.stop().await;
}

/// RudderStack: Android v1, `core/.../RudderMessage.java` (`originalTimestamp`
/// instead of `timestamp`, `channel: "mobile"`, `messageId` `"<millis>-<uuid>"`,
/// a screen's name in `event`); Kotlin v2, `core/.../models/Event.kt` and
/// `ScreenEvent.kt` (`userId` defaults to `""`, a per-event `sentAt`, the screen
/// name serialised as `event`); JS v3, `packages/analytics-js/src/components/
/// eventManager/utilities.ts` (`getEnrichedEvent`: `channel: "web"`,
/// `integrations: {All: true}`, `originalTimestamp`, `userId` from the session).
#[actix_web::test]
async fn rudderstack_original_timestamps_channels_and_screen_names_in_event() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let millis = Utc::now().timestamp_millis();
    let (android, kotlin, js) = (
        format!("{millis}-{}", uuid::Uuid::new_v4()),
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
    );
    let (device, kotlin_anon, js_anon) = (unique("rs-device"), unique("rs-kotlin"), unique("rs-js"));
    let all = json!({"All": true});
    let body = json!({"sentAt": millis_z(device_now()), "batch": [
        {"messageId": android, "channel": "mobile", "type": "screen", "event": "Main", "properties": {"name": "Main"},
         "originalTimestamp": millis_z(event_time()), "anonymousId": device, "integrations": all,
         "context": {"library": {"name": "com.rudderstack.android.sdk.core", "version": "1.25.0"}}},
        {"type": "track", "event": "Link Clicked", "properties": {"href": "https://shop.example/r"},
         "messageId": kotlin, "originalTimestamp": millis_z(event_time()), "sentAt": millis_z(device_now()),
         "userId": "", "anonymousId": kotlin_anon, "channel": "mobile", "integrations": all,
         "context": {"library": {"name": "com.rudderstack.sdk.kotlin", "version": "1.0.0"}}},
        {"type": "track", "event": "Link Clicked", "properties": {"href": "https://shop.example/js"},
         "messageId": js, "originalTimestamp": millis_z(event_time()), "sentAt": millis_z(device_now()),
         "userId": null, "anonymousId": js_anon, "channel": "web", "integrations": all,
         "context": {"library": {"name": "RudderLabs JavaScript SDK", "version": "3.11.0"}, "sessionId": millis}}]});
    assert_eq!(deliver(&gw, &body).await, ["accepted", "accepted", "accepted"]);
    let record = landed("app.tracking", &android, &device);
    assert_eq!(record.value["name"], "Main", "the screen name is where the schema expects it");
    assert_eq!(record.value["event"], "Main", "and still where the SDK put it");
    assert_eq!(record.value["channel"], "mobile");
    assert_eq!(record.value["originalTimestamp"], body["batch"][0]["originalTimestamp"]);
    let record = landed("web.tracking", &kotlin, &kotlin_anon);
    assert_eq!(record.value["integrations"], all);
    let record = landed("web.tracking", &js, &js_anon);
    assert_eq!(record.value["channel"], "web");
    gw.stop().await;
}
