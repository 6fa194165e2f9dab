//! Personal data as the catalog declares it, suppression and consent, end
//! to end against a real Kafka broker. The test catalog (support/edge.rs)
//! marks `Form Submitted` as serving `marketing`, with `properties.email`
//! hashed, `properties.phone` redacted and `properties.full_name` encrypted.

mod common;
#[path = "support/edge.rs"]
mod edge;
#[path = "support/mmdb.rs"]
mod mmdb;

use common::{TestGateway, brokers, find, unique};
use gateway::privacy::crypto::{self, UserKeys};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

fn form(id: &str, user: &str, properties: Value) -> Value {
    let mut properties = properties;
    properties["form_id"] = json!("contact");
    json!({"type": "track", "event": "Form Submitted", "messageId": id, "userId": user,
           "context": {"consent": {"marketing": true}}, "properties": properties})
}

/// HMAC-SHA256 computed here, independently of the gateway's code.
fn hmac_hex(text: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(edge::HASH_KEY.as_bytes()).expect("key");
    mac.update(text.as_bytes());
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

fn landed(id: &str) -> Value {
    let found = find(&brokers(), "web.tracking", id);
    assert_eq!(found.len(), 1, "one record of {id}");
    found[0].value.clone()
}

#[actix_web::test]
async fn hashed_fields_join_and_redacted_fields_are_gone() {
    if common::without_kafka() {
        return;
    }
    let files = edge::files();
    let gw = TestGateway::start(edge::config(&brokers(), &files)).await;
    let (a, b, c) = (unique("pii"), unique("pii"), unique("pii"));
    let email = format!("{}@example.com", unique("ada"));
    // Two requests, two users, one address: the hashes must join.
    let (status, answer) = gw
        .post("/v1/batch", &json!({"batch": [form(&a, "u-1", json!({"email": email, "phone": "+49 30 1234"}))]}))
        .await;
    assert_eq!(status, 200, "{answer}");
    let batch = json!({"batch": [form(&b, "u-2", json!({"email": email})), form(&c, "u-3", json!({"email": "other@example.com"}))]});
    let (status, _) = gw.post("/v1/batch", &batch).await;
    assert_eq!(status, 200);
    let (first, second, third) = (landed(&a), landed(&b), landed(&c));
    assert_eq!(first["properties"]["email"], json!(hmac_hex(&email)), "keyed HMAC of the address");
    assert_eq!(first["properties"]["email"], second["properties"]["email"], "same input, same hash");
    assert_ne!(first["properties"]["email"], third["properties"]["email"]);
    assert!(first["properties"].get("phone").is_none(), "redacted: {first}");
    assert!(!first.to_string().contains(&email) && !first.to_string().contains("1234"));
    let page = reqwest::get(format!("{}/catalog/", gw.url)).await.expect("catalog").text().await.expect("html");
    assert!(page.contains("<code>properties.email</code>: hash"), "the catalog page shows personal fields");
    assert!(page.contains("<dt>Purpose</dt><dd>marketing</dd>"));
    gw.stop().await;
}

#[actix_web::test]
async fn an_encrypted_field_decrypts_with_the_users_key_until_the_key_is_deleted() {
    if common::without_kafka() {
        return;
    }
    let files = edge::files();
    let gw = TestGateway::start(edge::config(&brokers(), &files)).await;
    let (id, user) = (unique("pii"), unique("user"));
    let (status, answer) =
        gw.post("/v1/batch", &json!({"batch": [form(&id, &user, json!({"full_name": "Ada Lovelace"}))]})).await;
    assert_eq!(status, 200, "{answer}");
    let record = landed(&id);
    let sealed = record["properties"]["full_name"].as_str().expect("encrypted text").to_owned();
    assert!(sealed.starts_with(crypto::ENCRYPTED_V2_PREFIX) && !record.to_string().contains("Lovelace"));

    let keys = UserKeys::open(&files.keys).expect("key store");
    assert_eq!(keys.decrypt(&user, &sealed).expect("decrypts"), b"Ada Lovelace");

    assert!(keys.forget(&user).expect("erased"), "newly erased");
    // The store no longer opens it: the record in Kafka is unreadable.
    assert!(keys.decrypt(&user, &sealed).is_err(), "erased");
    assert!(crypto::decrypt(&[0u8; 32], &user, &sealed).is_err());
    gw.stop().await;
}

#[actix_web::test]
async fn a_suppressed_users_events_are_answered_suppressed_and_never_produced() {
    if common::without_kafka() {
        return;
    }
    let files = edge::files();
    let (erased, later, kept) = (unique("erased"), unique("later"), unique("kept"));
    std::fs::write(&files.suppression, format!("# erasure requests\n{erased}\n")).expect("list");
    let gw = TestGateway::start(edge::config(&brokers(), &files)).await;
    let ids = [unique("sup"), unique("sup"), unique("sup")];
    let batch = json!({"batch": [
        form(&ids[0], &erased, json!({})),
        {"type": "page", "messageId": ids[1], "userId": "someone", "anonymousId": erased,
         "properties": {"url": "https://shop.example/", "path": "/"}},
        form(&ids[2], &kept, json!({})),
    ]});
    let (status, answer) = gw.post("/v1/batch", &batch).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["suppressed"], 2, "{answer}");
    assert_eq!(answer["events"][0]["status"], "suppressed");
    assert_eq!(answer["events"][1]["status"], "suppressed", "by anonymousId too");
    assert_eq!(answer["events"][2]["status"], "accepted");
    assert_eq!(landed(&ids[2])["userId"], json!(kept));

    // A user added to the file is suppressed once the change is noticed.
    std::fs::write(&files.suppression, format!("{erased}\n{later}\n")).expect("list");
    let stamp = std::time::SystemTime::now() + std::time::Duration::from_secs(3);
    std::fs::File::options().write(true).open(&files.suppression).and_then(|f| f.set_modified(stamp)).expect("touch");
    gw.state.edge.reload_changed();
    let fourth = unique("sup");
    let (_, answer) = gw.post("/v1/batch", &json!({"batch": [form(&fourth, &later, json!({}))]})).await;
    assert_eq!(answer["events"][0]["status"], "suppressed", "{answer}");

    for id in ids[..2].iter().chain([&fourth]) {
        for topic in ["web.tracking", "eventgw.dead-letter"] {
            assert!(find(&brokers(), topic, id).is_empty(), "{id} was produced to {topic}");
        }
    }
    let metrics = reqwest::get(format!("{}/metrics", gw.url)).await.expect("metrics").text().await.expect("text");
    assert!(metrics.contains("outcome=\"suppressed\""), "{metrics}");
    gw.stop().await;
}

#[actix_web::test]
async fn consent_is_checked_against_the_events_purpose_per_rollout() {
    if common::without_kafka() {
        return;
    }
    let files = edge::files();
    let mut config = edge::config(&brokers(), &files);
    config.sources[0].privacy.consent = true;
    let gw = TestGateway::start(config).await;
    let ids: Vec<String> = (0..5).map(|_| unique("consent")).collect();
    let mut missing = form(&ids[0], "u-c", json!({}));
    missing["context"] = json!({});
    let granted = form(&ids[1], "u-c", json!({}));
    let mut segment_denied = form(&ids[2], "u-c", json!({}));
    segment_denied["context"] = json!({"consent": {"categoryPreferences": {"Marketing": false, "Analytics": true}}});
    let mut rudder_granted = form(&ids[3], "u-c", json!({}));
    rudder_granted["context"] = json!({"consentManagement": {"allowedConsentIds": ["marketing"]}});
    // `Link Clicked` serves analytics under rollout `warn`: accepted, tagged.
    let warned = json!({"type": "track", "event": "Link Clicked", "messageId": ids[4], "userId": "u-c",
                        "properties": {"href": "https://x.example/"}});
    let batch = json!({"batch": [missing, granted, segment_denied, rudder_granted, warned]});
    let (status, answer) = gw.post("/v1/batch", &batch).await;
    assert_eq!(status, 200, "{answer}");
    let events = &answer["events"];
    assert_eq!((events[0]["status"].as_str(), events[0]["code"].as_str()), (Some("invalid"), Some("consent_missing")));
    assert_eq!(events[1]["status"], "accepted");
    assert_eq!((events[2]["status"].as_str(), events[2]["code"].as_str()), (Some("invalid"), Some("consent_denied")));
    assert_eq!(events[3]["status"], "accepted");
    assert_eq!(events[4]["status"], "accepted", "{answer}");

    let dead = find(&brokers(), "eventgw.dead-letter", &ids[0]);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].headers["dead-letter-reason"], "consent_missing");
    assert_eq!(dead[0].value["reason"], "consent_missing");
    assert!(dead[0].value["message"].as_str().is_some_and(|m| m.contains("marketing")));
    assert!(find(&brokers(), "web.tracking", &ids[0]).is_empty(), "not on the domain topic");
    assert!(find(&brokers(), "web.tracking", &ids[4])[0].headers.contains_key("consent-warning"));
    let metrics = reqwest::get(format!("{}/metrics", gw.url)).await.expect("metrics").text().await.expect("text");
    assert!(
        metrics.contains("eventgw_consent_violations_total{purpose=\"marketing\",rollout=\"enforce\"} 2"),
        "{metrics}"
    );
    gw.stop().await;
}

/// Segment's analytics-next copies the source's write key into every event
/// it sends (`writeKey` beside `type` and `event`: its segmentio plugin,
/// `packages/browser/src/plugins/segmentio/normalize.ts`). A write key is a
/// secret: it must reach neither the domain topic nor the dead-letter one.
#[actix_web::test]
async fn an_in_event_write_key_reaches_no_record() {
    if common::without_kafka() {
        return;
    }
    let files = edge::files();
    let gw = TestGateway::start(edge::config(&brokers(), &files)).await;
    let (good, bad) = (unique("wk"), unique("wk"));
    let batch = json!({"batch": [
        {"type": "page", "messageId": good, "anonymousId": "a-1", "writeKey": "demo-write-key",
         "properties": {"url": "https://shop.example/", "path": "/"}, "_metadata": {"bundled": ["Segment.io"]}},
        {"type": "track", "event": "Payment Captured", "userId": "u1", "messageId": bad, "writeKey": "demo-write-key",
         "properties": {"order_id": "o-1", "payment_id": "p-1", "amount": "lots", "currency": "EUR"}},
    ], "writeKey": "demo-write-key"});
    let (status, answer) = gw.post("/v1/batch", &batch).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["events"][0]["status"].as_str(), answer["events"][1]["status"].as_str()),
        (Some("accepted"), Some("invalid"))
    );
    let domain = landed(&good);
    let dead = find(&brokers(), "eventgw.dead-letter", &bad);
    assert_eq!(dead.len(), 1, "the invalid event is dead-lettered");
    for record in [&domain, &dead[0].value] {
        assert!(!record.to_string().contains("demo-write-key"), "a write key reached Kafka: {record}");
    }
    gw.stop().await;
}

/// Produces one suppression record (`None`: a tombstone) and waits for its ack.
fn suppress(topic: &str, id: &str, value: Option<&str>) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer =
        rdkafka::ClientConfig::new().set("bootstrap.servers", brokers()).create().expect("producer");
    let mut record = BaseRecord::<str, str>::to(topic).key(id);
    if let Some(value) = value {
        record = record.payload(value);
    }
    producer.send(record).map_err(|(e, _)| e).expect("sent");
    producer.flush(std::time::Duration::from_secs(30)).expect("acknowledged");
}

/// The topic's `cleanup.policy`, as the broker describes it.
async fn cleanup_policy(topic: &str) -> String {
    use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", brokers()).create().expect("admin");
    let described = admin
        .describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new())
        .await
        .expect("described")
        .pop()
        .expect("one resource")
        .expect("the topic's config");
    described.get("cleanup.policy").and_then(|e| e.value.clone()).expect("cleanup.policy")
}

/// Polls `/readyz` until it answers 200 (the suppression topic read).
async fn wait_ready(gw: &TestGateway) -> Value {
    let mut last = Value::Null;
    for _ in 0..240 {
        let response = common::client().get(format!("{}/readyz", gw.url)).send().await.expect("readyz");
        let (status, _, body) = common::answer(response).await;
        if status == 200 {
            return body;
        }
        last = body;
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    panic!("never ready: {last}");
}

fn page(id: &str, user: &str) -> Value {
    json!({"type": "page", "messageId": id, "userId": user, "properties": {"url": "https://shop.example/", "path": "/"}})
}

async fn status_of(gw: &TestGateway, user: &str) -> (String, String) {
    let id = unique("topic-sup");
    let (status, answer) = gw.post("/v1/batch", &json!({"batch": [page(&id, user)]})).await;
    assert_eq!(status, 200, "{answer}");
    (answer["events"][0]["status"].as_str().unwrap_or_default().to_owned(), id)
}

#[actix_web::test]
async fn users_suppressed_through_the_compacted_topic_are_refused_until_a_tombstone_lifts_it() {
    if common::without_kafka() {
        return;
    }
    let files = edge::files();
    let topic = unique("privacy.suppressions");
    let mut config = edge::config(&brokers(), &files);
    config.privacy.suppression_topic = Some(topic.clone());
    // Before the topic exists the list cannot be complete: not ready, and
    // events are answered 503 (retried by SDKs) rather than let through.
    let gw = TestGateway::start(config.clone()).await;
    let response = common::client().get(format!("{}/readyz", gw.url)).send().await.expect("readyz");
    let (status, _, body) = common::answer(response).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.to_string().contains(&topic), "{body}");
    let (status, answer) = gw.post("/v1/batch", &json!({"batch": [page(&unique("early"), "u-early")]})).await;
    assert_eq!((status, answer["code"].as_str()), (503, Some("not_ready")), "{answer}");
    gw.stop().await;

    assert!(gateway::privacy::suppression_topic::ensure_topic(&config.kafka, &topic).await.expect("created"));
    assert_eq!(cleanup_policy(&topic).await, "compact", "created compacted");
    assert!(!gateway::privacy::suppression_topic::ensure_topic(&config.kafka, &topic).await.expect("exists"));
    let (erased, kept, later) = (unique("erased"), unique("kept"), unique("later"));
    suppress(&topic, &erased, Some(r#"{"reason":"erasure request"}"#));
    let gw = TestGateway::start(config.clone()).await;
    wait_ready(&gw).await;
    let (status, suppressed_id) = status_of(&gw, &erased).await;
    assert_eq!(status, "suppressed", "read from the topic at start-up");
    let (status, kept_id) = status_of(&gw, &kept).await;
    assert_eq!(status, "accepted");
    assert_eq!(landed(&kept_id)["userId"], json!(kept));

    // Followed afterwards: a new suppression, then a tombstone.
    suppress(&topic, &later, Some("1"));
    let mut attempts = 0;
    while status_of(&gw, &later).await.0 != "suppressed" {
        attempts += 1;
        assert!(attempts < 240, "the new suppression never arrived");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    suppress(&topic, &erased, None);
    let mut lifted = None;
    for _ in 0..240 {
        let (status, id) = status_of(&gw, &erased).await;
        if status == "accepted" {
            lifted = Some(id);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let lifted = lifted.expect("the tombstone lifted the suppression");
    assert_eq!(landed(&lifted)["userId"], json!(erased));
    gw.stop().await;

    // A restarted gateway rebuilds the list from the compacted topic.
    let gw = TestGateway::start(config).await;
    wait_ready(&gw).await;
    let (status, later_id) = status_of(&gw, &later).await;
    assert_eq!(status, "suppressed", "still suppressed after a restart");
    assert_eq!(status_of(&gw, &erased).await.0, "accepted", "the tombstone still holds after a restart");
    for id in [&suppressed_id, &later_id] {
        for topic in ["web.tracking", "eventgw.dead-letter"] {
            assert!(find(&brokers(), topic, id).is_empty(), "{id} was produced to {topic}");
        }
    }
    gw.stop().await;
}
