//! `POST /v1/batch` end to end against a real Kafka broker: what the answer
//! says is checked against what a consumer reads back.

mod common;

use common::{TestGateway, brokers, config, find, unique};
use serde_json::{Value, json};

/// One example of every catalog event (every version), each with a unique
/// `messageId` and user, as one batch.
fn every_catalog_example(gw: &TestGateway) -> Vec<(Value, String, String, u32)> {
    let mut events = Vec::new();
    for event in gw.state.catalog.events() {
        for schema in event.versions() {
            let mut example = schema.examples[0].clone();
            example["messageId"] = json!(unique("every"));
            example["context"] = json!({"schemaVersion": schema.version});
            if example.get("userId").is_some() {
                example["userId"] = json!(unique("user"));
            }
            let key = event.key.extract(&example).expect("examples carry their key");
            events.push((example, event.topic.to_string(), key, schema.version));
        }
    }
    events
}

#[actix_web::test]
async fn every_catalog_event_lands_once_on_its_topic_with_key_headers_and_enrichment() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let events = every_catalog_example(&gw);
    assert!(events.len() >= 10, "the catalog has at least ten event versions");
    let batch: Vec<Value> = events.iter().map(|(e, ..)| e.clone()).collect();
    let (status, answer) = gw.post("/v1/batch", &json!({"batch": batch})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["accepted"], events.len(), "{answer}");
    for (i, (event, topic, key, version)) in events.iter().enumerate() {
        let id = event["messageId"].as_str().expect("id");
        assert_eq!(answer["events"][i]["status"], "accepted");
        assert_eq!(answer["events"][i]["topic"].as_str(), Some(topic.as_str()));
        let found = find(&brokers(), topic, id);
        assert_eq!(found.len(), 1, "exactly one record of {id} on {topic}");
        let record = &found[0];
        assert_eq!(record.key.as_deref(), Some(key.as_str()));
        assert_eq!(record.headers["source"], "demo");
        assert_eq!(record.headers["auth"], "write-key");
        assert_eq!(record.headers["protocol"], "segment");
        assert_eq!(record.headers["schema-version"], version.to_string());
        assert!(record.headers["schema"].contains('/'), "schema header is domain/name");
        assert!(record.headers.contains_key("received-at"));
        assert_eq!(record.value["messageId"], event["messageId"]);
        assert_eq!(record.value["properties"], event["properties"]);
        assert!(record.value["receivedAt"].is_string() && record.value["timestamp"].is_string());
    }
    gw.stop().await;
}

#[actix_web::test]
async fn two_events_of_one_user_land_on_one_partition_in_order() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let user = unique("same-user");
    let ids: Vec<String> = (0..4).map(|_| unique("order")).collect();
    for id in &ids {
        let event = json!({"type": "track", "event": "Link Clicked", "userId": user, "messageId": id,
            "properties": {"href": "https://shop.example/next"}});
        let (status, answer) = gw.post("/v1/batch", &json!({"batch": [event]})).await;
        assert_eq!(status, 200, "{answer}");
    }
    let records: Vec<_> = common::read_topic(&brokers(), "web.tracking")
        .into_iter()
        .filter(|r| r.key.as_deref() == Some(user.as_str()))
        .collect();
    assert_eq!(records.len(), ids.len());
    assert!(records.iter().all(|r| r.partition == records[0].partition), "one partition per key");
    let landed: Vec<&str> = records.iter().map(|r| r.headers["event-id"].as_str()).collect();
    assert_eq!(landed, ids.iter().map(String::as_str).collect::<Vec<_>>(), "in the order sent");
    gw.stop().await;
}

#[actix_web::test]
async fn invalid_event_is_dead_lettered_with_reasons_and_valid_ones_still_land() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let good = unique("good");
    let bad = unique("bad");
    let unknown = unique("unknown");
    let batch = json!({"batch": [
        {"type": "track", "event": "Payment Captured", "userId": "u1", "messageId": good,
         "properties": {"order_id": "o-1", "payment_id": "p-1", "amount": 12.5, "currency": "EUR"}},
        {"type": "track", "event": "Payment Captured", "userId": "u1", "messageId": bad,
         "properties": {"order_id": "o-1", "payment_id": "p-1", "amount": "lots", "currency": "EUR"}},
        {"type": "track", "event": "Something Nobody Declared", "userId": "u1", "messageId": unknown, "properties": {}},
        {"type": "launch", "userId": "u1"}
    ]});
    let (status, answer) = gw.post("/v1/batch", &batch).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["accepted"].as_u64(), answer["invalid"].as_u64(), answer["rejected"].as_u64()),
        (Some(1), Some(2), Some(1))
    );
    let events = &answer["events"];
    assert_eq!(events[1]["status"], "invalid");
    assert_eq!(events[1]["code"], "schema_violation");
    assert_eq!(events[1]["errors"][0]["path"], "/properties/amount");
    assert_eq!(events[2]["code"], "unknown_event");
    assert_eq!(events[3]["status"], "rejected");
    assert_eq!(events[3]["code"], "invalid_type");

    assert_eq!(find(&brokers(), "billing.payments", &good).len(), 1);
    assert!(find(&brokers(), "billing.payments", &bad).is_empty());
    let dead = find(&brokers(), "eventgw.dead-letter", &bad);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].headers["dead-letter-reason"], "schema_violation");
    assert_eq!(dead[0].value["reason"], "schema_violation");
    assert_eq!(dead[0].value["errors"][0]["path"], "/properties/amount");
    assert_eq!(dead[0].value["event"]["properties"]["amount"], "lots", "the original event is kept");
    let dead = find(&brokers(), "eventgw.dead-letter", &unknown);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].value["reason"], "unknown_event");
    gw.stop().await;
}

#[actix_web::test]
async fn bad_credentials_and_malformed_json_are_refused_and_produce_nothing() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let id = unique("refused");
    let event = json!({"type": "track", "event": "Link Clicked", "userId": "u1", "messageId": id,
        "properties": {"href": "https://shop.example/"}});
    let client = reqwest::Client::new();
    let url = format!("{}/v1/batch", gw.url);

    let wrong_key = client
        .post(&url)
        .basic_auth("not-a-key", Some(""))
        .json(&json!({"batch": [event]}))
        .send()
        .await
        .expect("sent");
    assert_eq!(wrong_key.status().as_u16(), 401);
    let body: Value = wrong_key.json().await.expect("json");
    assert_eq!(body["code"], "invalid_write_key");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));

    let body_key =
        client.post(&url).json(&json!({"writeKey": "also-wrong", "batch": [event]})).send().await.expect("sent");
    assert_eq!(body_key.status().as_u16(), 401);

    let no_key = client.post(&url).json(&json!({"batch": [event]})).send().await.expect("sent");
    assert_eq!(no_key.status().as_u16(), 401);
    assert_eq!(no_key.json::<Value>().await.expect("json")["code"], "missing_credentials");

    let truncated = format!("{{\"batch\": [{{\"type\": \"track\", \"messageId\": \"{id}\"");
    let malformed =
        client.post(&url).basic_auth("demo-write-key", Some("")).body(truncated).send().await.expect("sent");
    assert_eq!(malformed.status().as_u16(), 400);
    let body: Value = malformed.json().await.expect("json");
    assert_eq!(body["code"], "malformed_json");
    assert!(body["message"].as_str().expect("message").contains("line 1"), "{body}");

    for topic in common::all_topics(&gw.state) {
        assert!(find(&brokers(), &topic, &id).is_empty(), "nothing of a refused request lands on {topic}");
    }
    gw.stop().await;
}

#[actix_web::test]
async fn write_key_in_body_works_and_missing_message_id_gets_a_uuid_v7() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let user = unique("body-key");
    // The device's clock is an hour slow (within the 24 h correction bound).
    let sent_at = chrono::Utc::now() - chrono::TimeDelta::hours(1);
    let happened = (sent_at - chrono::TimeDelta::seconds(10)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let body = json!({"writeKey": "demo-write-key", "sentAt": sent_at.to_rfc3339(), "batch": [
        {"type": "page", "userId": user, "timestamp": happened,
         "properties": {"url": "https://shop.example/", "path": "/"}}
    ]});
    let response = reqwest::Client::new().post(format!("{}/v1/batch", gw.url)).json(&body).send().await.expect("sent");
    assert_eq!(response.status().as_u16(), 200);
    let answer: Value = response.json().await.expect("json");
    let id = answer["events"][0]["messageId"].as_str().expect("generated id").to_owned();
    let parsed = uuid::Uuid::parse_str(&id).expect("a UUID");
    assert_eq!(parsed.get_version_num(), 7);
    let found = find(&brokers(), "web.tracking", &id);
    assert_eq!(found.len(), 1);
    let value = &found[0].value;
    assert_eq!(value["originalTimestamp"], happened.as_str());
    // The device clock said it sent 10 s after the event; the event happened
    // 10 s before the gateway received it, by the gateway's clock.
    let received =
        chrono::DateTime::parse_from_rfc3339(value["receivedAt"].as_str().expect("receivedAt")).expect("time");
    let corrected =
        chrono::DateTime::parse_from_rfc3339(value["timestamp"].as_str().expect("timestamp")).expect("time");
    assert_eq!((received - corrected).num_seconds(), 10);
    assert!(value.get("writeKey").is_none(), "the write key is not copied onto records");
    gw.stop().await;
}
