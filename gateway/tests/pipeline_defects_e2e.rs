//! Regression tests for the event-pipeline defects of issue 13, over real
//! HTTP against a real Kafka: each test reads back what landed (or checks
//! that nothing did), and each failed on the code before its fix.

mod common;

use common::{TestGateway, answer, brokers, client, config, find, read_topic, unique};
use serde_json::{Value, json};

fn click(id: &str) -> Value {
    json!({"type": "track", "event": "Link Clicked", "userId": "defects", "messageId": id,
        "properties": {"href": "https://shop.example/"}})
}

async fn post_with(gw: &TestGateway, key: &str, body: &Value, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = client().post(format!("{}/v1/batch", gw.url)).basic_auth(key, Some("")).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (status, _, body) = answer(request.send().await.expect("sent")).await;
    (status, body)
}

/// Issue 13, item 1: a 64 KB `User-Agent` was copied whole into every event
/// of the request (a 128 KB request put 20 MB into Kafka).
#[actix_web::test]
async fn a_huge_user_agent_is_cut_to_512_bytes_in_every_record() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let ids: Vec<String> = (0..20).map(|_| unique("ua")).collect();
    // Below the 64 KiB request-head limit (server.max_header_bytes), far above the 512-byte bound.
    let agent = format!("Mozilla/5.0 {}", "A".repeat(60 * 1024));
    let batch = json!({"batch": ids.iter().map(|id| click(id)).collect::<Vec<_>>()});
    let (status, body) = post_with(&gw, "demo-write-key", &batch, &[("user-agent", &agent)]).await;
    assert_eq!(status, 200, "{body}");
    for id in &ids {
        let record = &find(&brokers(), "web.tracking", id)[0];
        let stored = record.value["context"]["userAgent"].as_str().expect("user agent");
        assert_eq!(
            stored.len(),
            gateway::enrichment::client::MAX_CLIENT_FIELD_BYTES,
            "bounded, not {} bytes",
            stored.len()
        );
        assert!(agent.starts_with(stored), "a prefix of the header");
    }
    gw.stop().await;
}

/// Issue 13, item 3: a source limited to `billing` could send identity
/// calls, and an identity call's 16,000-character `userId` became its key.
#[actix_web::test]
async fn identity_calls_need_the_identity_domain_and_keep_the_key_rules() {
    if common::without_kafka() {
        return;
    }
    let mut cfg = config(&brokers());
    let billing = cfg.sources.iter_mut().find(|s| s.id == "billing-backend").expect("billing source");
    billing.strict = false;
    let gw = TestGateway::start(cfg).await;
    let (alias, identify) = (unique("alias"), unique("identify"));
    let calls = json!({"batch": [
        {"type": "alias", "userId": unique("new"), "previousId": "victim", "messageId": alias},
        {"type": "identify", "userId": "someone", "messageId": identify, "traits": {"email": "x@example.com"}}]});
    let (status, body) = post_with(&gw, "billing-backend-key", &calls, &[]).await;
    assert_eq!(status, 200, "{body}");
    for event in body["events"].as_array().expect("events") {
        assert_eq!((event["status"].as_str(), event["code"].as_str()), (Some("rejected"), Some("domain_not_allowed")));
    }
    assert!(find(&brokers(), "crm.identities", &alias).is_empty(), "a billing key cannot merge identities");
    assert!(find(&brokers(), "crm.identities", &identify).is_empty());

    // The demo source is granted `identity`; its calls obey the key rules.
    let (long, empty, fine) = (unique("long-key"), unique("empty-key"), unique("fine-key"));
    let user = unique("u");
    let calls = json!({"batch": [
        {"type": "identify", "userId": "x".repeat(16_000), "messageId": long},
        {"type": "identify", "userId": "", "anonymousId": null, "messageId": empty},
        {"type": "identify", "userId": user, "anonymousId": null, "messageId": fine}]});
    let (status, body) = gw.post("/v1/batch", &calls).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["events"][0]["status"].as_str(), body["events"][0]["code"].as_str()),
        (Some("invalid"), Some("invalid_key"))
    );
    assert_eq!(
        (body["events"][1]["status"].as_str(), body["events"][1]["code"].as_str()),
        (Some("invalid"), Some("missing_key"))
    );
    assert_eq!(body["events"][2]["status"], "accepted", "{body}");
    assert!(find(&brokers(), "crm.identities", &long).is_empty(), "no 16 KB key");
    assert!(find(&brokers(), "crm.identities", &empty).is_empty(), "no empty key");
    let dead = find(&brokers(), "eventgw.dead-letter", &long);
    assert_eq!(dead.len(), 1, "kept on the dead-letter topic");
    assert_eq!(dead[0].headers["dead-letter-reason"], "invalid_key");
    let stored = find(&brokers(), "crm.identities", &fine);
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].key.as_deref(), Some(user.as_str()));
    gw.stop().await;
}

/// Issue 13, item 4: with `X-Forwarded-For` on two lines the client's own
/// first line won over the line the proxy (HAProxy) added.
#[actix_web::test]
async fn forwarded_for_on_several_lines_takes_the_proxys_hop() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let id = unique("xff");
    let request = client()
        .post(format!("{}/v1/batch", gw.url))
        .basic_auth("demo-write-key", Some(""))
        .header("x-forwarded-for", "6.6.6.6")
        .header("x-forwarded-for", "203.0.113.9")
        .json(&json!({"batch": [click(&id)]}));
    assert_eq!(answer(request.send().await.expect("sent")).await.0, 200);
    let record = &find(&brokers(), "web.tracking", &id)[0];
    assert_eq!(record.value["context"]["ip"], "203.0.113.9", "the hop the trusted proxy (127.0.0.1) saw");
    gw.stop().await;
}

/// Issue 13, item 5: `timestamp` 9999-12-31 with `sentAt` 0001-01-01 was
/// stored as `+12025-…`; a batch `sentAt` of `5` failed the whole batch
/// while `"yesterday"` was silently ignored.
#[actix_web::test]
async fn clock_skew_is_bounded_and_a_bad_sent_at_is_flagged_not_fatal() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let far = unique("far");
    let mut event = click(&far);
    event["timestamp"] = json!("9999-12-31T23:59:59Z");
    let (status, body) = gw.post("/v1/batch", &json!({"sentAt": "0001-01-01T00:00:00Z", "batch": [event]})).await;
    assert_eq!(status, 200, "{body}");
    let record = &find(&brokers(), "web.tracking", &far)[0];
    assert_eq!(record.value["timestamp"], "9999-12-31T23:59:59.000Z", "the device's time, RFC 3339");
    assert_eq!(record.headers["timestamp-correction"], "clock-skew-exceeded");

    for sent_at in [json!(5), json!("yesterday")] {
        let id = unique("sent-at");
        let mut event = click(&id);
        event["timestamp"] = json!("2026-06-01T12:00:00+02:00");
        let (status, body) = gw.post("/v1/batch", &json!({"sentAt": sent_at, "batch": [event]})).await;
        assert_eq!(status, 200, "sentAt {sent_at}: {body}");
        let record = &find(&brokers(), "web.tracking", &id)[0];
        assert_eq!(record.value["timestamp"], "2026-06-01T10:00:00.000Z", "uncorrected, in UTC");
        assert_eq!(record.value["originalTimestamp"], "2026-06-01T12:00:00+02:00");
        assert_eq!(record.headers["timestamp-correction"], "invalid-sent-at", "sentAt {sent_at}");
    }
    gw.stop().await;
}

fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

/// Issue 13, item 6: the events of a strict batch refused with 422 were
/// counted as `outcome="accepted",topic="none"`.
#[actix_web::test]
async fn a_refused_strict_batch_counts_as_rejected_not_accepted() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let batch = json!({"batch": [
        {"type": "track", "event": "Order Completed", "userId": "u", "properties": {"order_id": "o-m", "total": 1, "currency": "EUR"}},
        {"type": "track", "event": "Order Completed", "userId": "u", "properties": {"order_id": "o-m"}}]});
    let (status, body) = post_with(&gw, "billing-backend-key", &batch, &[]).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("batch_rejected")), "{body}");
    let text = client().get(format!("{}/metrics", gw.url)).send().await.expect("metrics").text().await.expect("text");
    let events = "eventgw_events_total";
    assert_eq!(metric(&text, events, &["outcome=\"accepted\""]), 0.0, "nothing was accepted:\n{text}");
    assert_eq!(metric(&text, events, &["outcome=\"rejected\"", "topic=\"none\""]), 2.0, "both refused:\n{text}");
    assert_eq!(metric(&text, "eventgw_dead_letters_total", &[]), 0.0, "nothing was dead-lettered");
    gw.stop().await;
}

/// Issue 13, item 6: `messageId` `" "`, with a newline or a NUL was accepted.
#[actix_web::test]
async fn blank_and_control_character_message_ids_are_refused() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let tag = unique("bad-id");
    let ids = [" ".to_owned(), format!("{tag}\n"), format!("{tag}\0"), format!(" {tag}")];
    let batch = json!({"batch": ids.iter().map(|id| click(id)).collect::<Vec<_>>()});
    let (status, body) = gw.post("/v1/batch", &batch).await;
    assert_eq!(status, 200, "{body}");
    for (i, id) in ids.iter().enumerate() {
        let event = &body["events"][i];
        assert_eq!(
            (event["status"].as_str(), event["code"].as_str()),
            (Some("rejected"), Some("invalid_message_id")),
            "{id:?}"
        );
    }
    let landed = read_topic(&brokers(), "web.tracking");
    assert!(
        !landed.iter().any(|r| r.headers["event-id"].contains(&tag) || r.headers["event-id"] == " "),
        "none stored"
    );
    gw.stop().await;
}

/// Issue 13, item 6: a `null` context was stored as `null` without the
/// enrichment; a string context was stored as is.
#[actix_web::test]
async fn a_null_context_is_enriched_and_a_string_context_is_dead_lettered() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let (null, text) = (unique("ctx-null"), unique("ctx-text"));
    let mut with_null = click(&null);
    with_null["context"] = Value::Null;
    let mut with_text = click(&text);
    with_text["context"] = json!("not an object");
    let request = client()
        .post(format!("{}/v1/batch", gw.url))
        .basic_auth("demo-write-key", Some(""))
        .header("user-agent", "CtxAgent/1.0")
        .json(&json!({"batch": [with_null, with_text]}));
    let (status, _, body) = answer(request.send().await.expect("sent")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["events"][0]["status"], "accepted");
    assert_eq!(
        (body["events"][1]["status"].as_str(), body["events"][1]["code"].as_str()),
        (Some("invalid"), Some("invalid_context"))
    );
    let record = &find(&brokers(), "web.tracking", &null)[0];
    assert_eq!(record.value["context"]["userAgent"], "CtxAgent/1.0", "enriched: {}", record.value);
    assert!(find(&brokers(), "web.tracking", &text).is_empty());
    let dead = &find(&brokers(), "eventgw.dead-letter", &text)[0];
    assert_eq!(dead.value["event"]["context"], "not an object", "kept as sent");
    gw.stop().await;
}

/// Issue 13, item 6: a `messageId` repeated inside one batch was produced
/// twice.
#[actix_web::test]
async fn a_repeated_message_id_in_one_batch_is_stored_once_and_answered_duplicate() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(config(&brokers())).await;
    let id = unique("dup");
    let (status, body) =
        gw.post("/v1/batch", &json!({"batch": [click(&id), click(&id), click(&unique("other"))]})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["events"][0]["status"], "accepted");
    assert_eq!(body["events"][1]["status"], "duplicate", "{body}");
    assert_eq!(body["events"][1]["messageId"].as_str(), Some(id.as_str()));
    assert_eq!(body["events"][2]["status"], "accepted");
    assert_eq!((body["accepted"].as_u64(), body["duplicate"].as_u64()), (Some(2), Some(1)));
    assert_eq!(find(&brokers(), "web.tracking", &id).len(), 1, "stored once");
    let text = client().get(format!("{}/metrics", gw.url)).send().await.expect("metrics").text().await.expect("text");
    assert_eq!(metric(&text, "eventgw_events_total", &["outcome=\"duplicate\""]), 1.0, "counted:\n{text}");
    gw.stop().await;
}
