//! Issue 28, items 3 and 8, end to end against a real Kafka broker: a
//! personal field's clear value reaches no path once the catalog says hash
//! (not the dead-letter record's `errors`, not the `contract-warning`
//! header, not the answer, not the metrics), and no number of client-chosen
//! users makes the gateway store a key per user. The catalog is the test
//! catalog of `support/edge.rs`, plus: `Form Submitted`'s `email` must be an
//! e-mail address (rollout enforce: dead-lettered), and `Link Clicked`'s
//! `href` (rollout warn: accepted, tagged) is declared personal, hashed.

mod common;
#[path = "support/edge.rs"]
mod edge;
#[path = "support/mmdb.rs"]
mod mmdb;

use std::path::Path;

use common::{Consumed, TestGateway, brokers, find, read_topic, unique};
use gateway::privacy::crypto::UserKeys;
use serde_json::{Value, json};

/// The test catalog with the two declarations above.
fn files_with_checked_personal_fields() -> edge::EdgeFiles {
    let files = edge::files();
    let web = files.dir.join("catalog/web");
    let schema = web.join("form_submitted/1.json");
    let mut document: Value = serde_json::from_str(&std::fs::read_to_string(&schema).expect("schema")).expect("json");
    document["properties"]["properties"]["properties"]["email"] = json!({"type": "string", "format": "email"});
    std::fs::write(&schema, document.to_string()).expect("write schema");
    let catalog = web.join("catalog.toml");
    let mut table: toml::Table = std::fs::read_to_string(&catalog).expect("catalog").parse().expect("toml");
    let mut link = table["events"]["Link Clicked"].as_table().cloned().expect("Link Clicked");
    link.insert("personal".into(), toml::Value::Table(r#""properties.href" = "hash""#.parse().expect("personal")));
    table
        .get_mut("events")
        .and_then(toml::Value::as_table_mut)
        .expect("events")
        .insert("Link Clicked".into(), link.into());
    std::fs::write(&catalog, toml::to_string(&table).expect("toml")).expect("write catalog");
    files
}

/// Everything of a record that leaves the gateway: key, headers, value.
fn record_text(record: &Consumed) -> String {
    format!("{:?} {:?} {}", record.key, record.headers, record.value)
}

#[actix_web::test]
async fn a_personal_fields_clear_value_is_in_no_message_header_or_answer() {
    if common::without_kafka() {
        return;
    }
    let files = files_with_checked_personal_fields();
    let gw = TestGateway::start(edge::config(&brokers(), &files)).await;
    // Unique needles: each clear value exists nowhere but in this request.
    let (mail, link) = (format!("bob-{}", uuid::Uuid::new_v4()), format!("eve-{}", uuid::Uuid::new_v4()));
    let (bad_email, keyless, warned) = (unique("pii-dl"), unique("pii-root"), unique("pii-warn"));
    let batch = json!({"batch": [
        // Enforce: `email` is not an address; the validator quotes it.
        {"type": "track", "event": "Form Submitted", "messageId": bad_email, "userId": "u-3",
         "properties": {"form_id": "contact", "email": format!("{mail} at example.com")}},
        // Enforce: no user at all; the root `anyOf` quotes the whole event.
        {"type": "track", "event": "Form Submitted", "messageId": keyless,
         "properties": {"form_id": "contact", "email": format!("{mail}@example.com")}},
        // Warn: `href` is not a URI; accepted with a `contract-warning`.
        {"type": "track", "event": "Link Clicked", "messageId": warned, "userId": "u-3",
         "properties": {"href": format!("mailto {link}@example.com")}},
    ]});
    let (status, answer) = gw.post("/v1/batch", &batch).await;
    assert_eq!(status, 200, "{answer}");
    let statuses: Vec<&str> = (0..3).filter_map(|i| answer["events"][i]["status"].as_str()).collect();
    assert_eq!(statuses, ["invalid", "invalid", "accepted"], "{answer}");

    let mut records = Vec::new();
    for id in [&bad_email, &keyless] {
        let dead = find(&brokers(), "eventgw.dead-letter", id);
        assert_eq!(dead.len(), 1, "{id} dead-lettered once");
        assert_eq!(dead[0].value["reason"], "schema_violation");
        records.push(dead[0].clone());
    }
    let tagged = find(&brokers(), "web.tracking", &warned);
    assert_eq!(tagged.len(), 1);
    records.push(tagged[0].clone());

    let metrics = reqwest::get(format!("{}/metrics", gw.url)).await.expect("metrics").text().await.expect("text");
    for (place, text) in records
        .iter()
        .map(|r| (r.topic.as_str(), record_text(r)))
        .chain([("answer", answer.to_string()), ("metrics", metrics)])
    {
        for needle in [&mail, &link] {
            assert!(!text.contains(needle.as_str()), "{needle} in clear on {place}: {text}");
        }
    }
    // The messages still say where and what: the path, the rule, no value.
    let errors = records[0].value["errors"].to_string();
    assert!(errors.contains("/properties/email") && errors.contains(eventgw_schemas::WITHHELD), "{errors}");
    assert!(records[1].value["errors"].to_string().contains("anyOf"), "{}", records[1].value);
    let warning = &tagged[0].headers["contract-warning"];
    assert!(warning.starts_with("/properties/href:") && warning.contains(eventgw_schemas::WITHHELD), "{warning}");
    assert_eq!(tagged[0].value["properties"]["href"].as_str().map(str::len), Some(64), "hashed in the payload");
    gw.stop().await;
}

fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries.flatten().map(|e| if e.path().is_dir() { files_under(&e.path()) } else { 1 }).sum::<usize>()
        })
        .unwrap_or(0)
}

#[actix_web::test]
async fn many_client_chosen_users_store_no_keys_and_encryption_still_round_trips() {
    if common::without_kafka() {
        return;
    }
    let files = edge::files();
    let gw = TestGateway::start(edge::config(&brokers(), &files)).await;
    let stored_before = files_under(&files.keys);
    let run = unique("anon");
    // What one browser-key request can carry: 500 events, 500 new users.
    let events: Vec<Value> = (0..500)
        .map(|i| {
            json!({"type": "track", "event": "Form Submitted", "messageId": format!("{run}-{i}"),
                   "anonymousId": format!("{run}-user-{i}"), "context": {"consent": {"marketing": true}},
                   "properties": {"form_id": "contact", "full_name": format!("Visitor {i}")}})
        })
        .collect();
    let (status, answer) = gw.post("/v1/batch", &json!({"batch": events})).await;
    assert_eq!((status, answer["accepted"].as_u64()), (200, Some(500)), "{answer}");
    assert_eq!(files_under(&files.keys), stored_before, "500 new users stored nothing");
    assert!(stored_before <= 1, "at most the master key: {stored_before} files");

    let landed: Vec<Consumed> = read_topic(&brokers(), "web.tracking")
        .into_iter()
        .filter(|r| r.headers.get("event-id").is_some_and(|id| id.starts_with(&run)))
        .collect();
    assert_eq!(landed.len(), 500);
    // The documented tool (`UserKeys::decrypt`, `gateway keys decrypt`) opens each user's value.
    let keys = UserKeys::open(&files.keys).expect("key store");
    for record in landed.iter().step_by(50) {
        let user = record.value["anonymousId"].as_str().expect("anonymousId");
        let sealed = record.value["properties"]["full_name"].as_str().expect("sealed");
        let i = user.rsplit('-').next().expect("index");
        assert_eq!(keys.decrypt(user, sealed).expect("decrypts"), format!("Visitor {i}").into_bytes());
    }
    // Erasing one user is an operator's action: one file, and that user's values are gone.
    let erased = landed[0].value["anonymousId"].as_str().expect("user").to_owned();
    assert!(keys.forget(&erased).expect("erased"));
    assert!(keys.decrypt(&erased, landed[0].value["properties"]["full_name"].as_str().expect("sealed")).is_err());
    assert_eq!(files_under(&files.keys), stored_before + 1);
    gw.stop().await;
}
