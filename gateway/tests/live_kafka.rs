//! The live view against real Kafka: a row opened (`GET /live/events/{id}`)
//! answers the record read back from Kafka at the row's topic, partition
//! and offset, byte for byte what a consumer of that topic reads there (the
//! view keeps no copy of a record Kafka acknowledged); an invalid event's
//! row opens the dead-letter envelope; an id the view never published is
//! `404 live_event_gone`.

mod common;

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

const TOKEN: &str = "an-operator-token-for-kafka-tests";

/// The `event: event` frames' data until every id of `wanted` was seen,
/// within ten seconds.
async fn rows(
    body: &mut (impl futures::Stream<Item = reqwest::Result<actix_web::web::Bytes>> + Unpin),
    wanted: &[String],
) -> Vec<Value> {
    let mut text = String::new();
    let mut found: Vec<Value> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !wanted.iter().all(|id| found.iter().any(|row| row["messageId"] == id.as_str())) {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .unwrap_or_else(|_| panic!("rows of {wanted:?} within 10 s; saw {found:?}"));
        text.push_str(&String::from_utf8_lossy(&chunk.expect("stream open").expect("bytes")));
        while let Some(end) = text.find("\n\n") {
            let frame: String = text.drain(..end + 2).collect();
            if frame.starts_with("event: event\n")
                && let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: "))
            {
                let row: Value = serde_json::from_str(data).expect("a frame's data is JSON");
                if wanted.iter().any(|id| row["messageId"] == id.as_str()) {
                    found.push(row);
                }
            }
        }
    }
    found
}

#[actix_web::test]
async fn an_opened_row_is_the_record_kafka_holds_at_its_partition_and_offset() {
    if common::without_kafka() {
        return;
    }
    let brokers = common::brokers();
    let mut config = common::config(&brokers);
    config.live.enabled = true;
    config.live.token = TOKEN.into();
    let gw = common::TestGateway::start(config).await;
    let client = common::client();
    let stream = client.get(format!("{}/live/stream", gw.url)).bearer_auth(TOKEN).send().await.expect("stream");
    assert_eq!(stream.status(), 200);
    let mut body = stream.bytes_stream();
    let first = body.next().await.expect("opening").expect("bytes");
    assert!(String::from_utf8_lossy(&first).contains("event: ready"));

    let ids = [common::unique("live-kafka-good"), common::unique("live-kafka-bad")];
    let batch = json!({"batch": [
        {"type": "track", "event": "Link Clicked", "userId": "u-live", "messageId": ids[0],
         "properties": {"href": "https://a.example/"}},
        {"type": "track", "event": "Link Clicked", "userId": "u-live", "messageId": ids[1],
         "properties": {"href": 5}},
    ]});
    let (status, answer) = gw.post("/v1/batch", &batch).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["events"][0]["status"].as_str(), answer["events"][1]["status"].as_str()),
        (Some("accepted"), Some("invalid")),
        "{answer}"
    );

    for row in rows(&mut body, &ids).await {
        assert_eq!(row["stored"], true, "{row}");
        let (topic, partition, offset) = (
            row["topic"].as_str().expect("topic"),
            row["partition"].as_i64().expect("partition"),
            row["offset"].as_i64().expect("offset"),
        );
        let id = row["id"].as_u64().expect("id");
        let opened = client.get(format!("{}/live/events/{id}", gw.url)).bearer_auth(TOKEN).send().await.expect("open");
        assert_eq!(opened.status(), 200, "{row}");
        let opened: Value = serde_json::from_slice(&opened.bytes().await.expect("body")).expect("the record is JSON");
        let message_id = row["messageId"].as_str().expect("messageId");
        let in_kafka = common::find(&brokers, topic, message_id);
        let at = in_kafka
            .iter()
            .find(|r| i64::from(r.partition) == partition && r.offset == offset)
            .unwrap_or_else(|| panic!("{message_id} is in {topic} at {partition}@{offset}: {row}"));
        assert_eq!(opened, at.value, "what the row opens is what Kafka holds there");
        assert_eq!(opened["messageId"], message_id, "{opened}");
        if row["status"] == "invalid" {
            assert_eq!(topic, "eventgw.dead-letter", "{row}");
            assert!(opened["reason"].is_string(), "the dead-letter envelope: {opened}");
        }
    }

    let never = client.get(format!("{}/live/events/{}", gw.url, u64::MAX)).bearer_auth(TOKEN).send().await;
    let (status, _, never) = common::answer(never.expect("answer")).await;
    assert_eq!((status, never["code"].as_str()), (404, Some("live_event_gone")), "{never}");
    gw.stop().await;
}
