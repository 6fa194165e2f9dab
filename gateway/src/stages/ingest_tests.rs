//! One path for every protocol: a batch ingested over the memory sink is
//! answered exactly as the handlers answered it when each repeated the
//! stages, and what the sink did with each record (Kafka, spool, already
//! stored) is rendered per event.

use std::sync::{Arc, Mutex};

use actix_web::test::TestRequest;
use futures::future::{BoxFuture, FutureExt};
use serde_json::{Value, json};

use super::*;
use crate::sink::{Delivered, OutRecord, Sink, SinkError, Stored};
use crate::stages::testing::state;

fn order(message_id: &str, id: &str, total: Value) -> Value {
    json!({"type": "track", "event": "Order Completed", "userId": "u-1", "messageId": message_id,
        "properties": {"order_id": id, "total": total, "currency": "EUR"}})
}

/// Accepted, invalid (dead-lettered), a duplicate within the request and
/// rejected, in that order.
fn mixed() -> BatchRequest {
    let events = vec![
        order("m-1", "o-1", json!(1)),
        order("m-2", "o-2", json!("lots")),
        order("m-1", "o-1", json!(1)),
        json!({"type": "nonsense", "messageId": "m-4"}),
    ];
    BatchRequest { events, sent_at: None, write_key: None, undecodable: Vec::new(), protocol: crate::wire::SEGMENT }
}

/// The answer the handlers gave for [`mixed`] before this path existed,
/// recorded from them.
const MIXED_ANSWER: &str = r#"{"accepted":1,"invalid":1,"rejected":1,"duplicate":1,"events":[{"index":0,"messageId":"m-1","status":"accepted","topic":"billing.payments"},{"index":1,"messageId":"m-2","status":"invalid","topic":"eventgw.dead-letter","code":"schema_violation","message":"`Order Completed` does not match its schema","errors":[{"path":"/properties/total","message":"\"lots\" is not of type \"number\""}]},{"index":2,"messageId":"m-1","status":"duplicate","code":"duplicate_message_id","message":"the same `messageId` as event 0 of this request: stored once"},{"index":3,"messageId":"m-4","status":"rejected","code":"invalid_type","message":"`type` `nonsense` is not one of track, page, screen, identify, group, alias"}]}"#;

#[actix_web::test]
async fn a_mixed_batch_is_answered_as_before() {
    let (state, sink) = state(|_| {});
    let req = TestRequest::default().to_http_request();
    let request = arrive(&req, &state, "batch").await.expect("arrives");
    let principal = authenticate::principal(&request, &req, Some("demo-write-key")).expect("principal");
    let answer = ingest(&request, &principal, mixed()).await.expect("ingested");
    assert_eq!(serde_json::to_string(&answer).expect("serialises"), MIXED_ANSWER);
    let topics: Vec<String> = sink.records().into_iter().map(|r| r.topic.to_string()).collect();
    assert_eq!(topics, ["billing.payments", "eventgw.dead-letter"], "the duplicate and the rejected are not produced");
    let counted = |status, topic| state.metrics.events.with_label_values(&["batch", status, topic]).get();
    assert_eq!(counted("accepted", "billing.payments"), 1);
    assert_eq!(counted("invalid", "eventgw.dead-letter"), 1);
    assert_eq!((counted("duplicate", "none"), counted("rejected", "none")), (1, 1));
}

#[actix_web::test]
async fn arrival_refuses_before_the_body_when_the_producer_is_full() {
    let (state, sink) = state(|_| {});
    sink.set_queue_depth(i64::try_from(state.config.kafka.backpressure_threshold()).expect("fits"));
    let req = TestRequest::default().to_http_request();
    let refused = arrive(&req, &state, "batch").await.err().expect("refused");
    assert_eq!(refused.code(), "backpressure");
}

/// A sink with a spool and dedupe in front of Kafka, answering each record
/// with the next of its script.
struct ScriptedSink(Mutex<Vec<Result<Stored, SinkError>>>);

impl Sink for ScriptedSink {
    fn send_all(&self, _: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        unreachable!("a source that may spool stores through store_all")
    }

    fn store_all(
        &self,
        records: Vec<OutRecord>,
        _: std::time::Duration,
    ) -> BoxFuture<'static, Vec<Result<Stored, SinkError>>> {
        let mut script = self.0.lock().expect("not poisoned");
        let answers: Vec<_> = script.drain(..records.len()).collect();
        async move { answers }.boxed()
    }

    fn check_ready(&self) -> BoxFuture<'static, Result<(), String>> {
        async { Ok(()) }.boxed()
    }

    fn queue_depth(&self) -> i64 {
        0
    }

    fn flush(&self, _: std::time::Duration) -> Result<(), String> {
        Ok(())
    }
}

#[actix_web::test]
async fn spooled_and_already_stored_records_are_answered_per_event() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/dev.toml");
    let config = crate::config::Config::load_with_env(&path, std::iter::empty()).expect("dev config");
    let script = vec![
        Ok(Stored::Spooled),
        Ok(Stored::Duplicate),
        Ok(Stored::Spooled),
        Ok(Stored::Kafka(Delivered { partition: 2, offset: 40 })),
    ];
    let state = AppState::new(config, Arc::new(ScriptedSink(Mutex::new(script)))).expect("state");
    let req = TestRequest::default().to_http_request();
    let request = arrive(&req, &state, "batch").await.expect("arrives");
    let principal = authenticate::principal(&request, &req, Some("demo-write-key")).expect("principal");
    assert!(principal.source.spool, "dev.toml's demo source may spool");
    let events = vec![
        order("m-1", "o-1", json!(1)),
        json!({"type": "nonsense", "messageId": "m-2"}),
        order("m-3", "o-3", json!(1)),
        order("m-4", "o-4", json!("lots")),
        order("m-5", "o-5", json!(1)),
    ];
    let batch = BatchRequest {
        events,
        sent_at: None,
        write_key: None,
        undecodable: Vec::new(),
        protocol: crate::wire::SEGMENT,
    };
    let answer = ingest(&request, &principal, batch).await.expect("ingested");
    let answer = serde_json::to_value(&answer).expect("serialises");
    let statuses: Vec<&str> =
        answer["events"].as_array().expect("events").iter().map(|e| e["status"].as_str().expect("status")).collect();
    assert_eq!(statuses, ["spooled", "rejected", "duplicate", "invalid", "accepted"]);
    let keys: Vec<&String> = answer.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        ["accepted", "invalid", "rejected", "duplicate", "spooled", "events"],
        "counts only, no index lists"
    );
    let counts: Vec<u64> = keys[..5].iter().map(|k| answer[k.as_str()].as_u64().expect("count")).collect();
    assert_eq!(counts, [1, 1, 1, 1, 1]);
    assert_eq!(answer["events"][0]["topic"], "billing.payments", "where replay will put it");
    assert_eq!(answer["events"][2]["code"], "duplicate_message_id");
    assert_eq!(
        answer["events"][2]["message"],
        "an event with this `messageId` from this source was already stored: not stored again"
    );
    assert_eq!(answer["events"][3]["code"], "schema_violation", "a spooled dead letter keeps its reason");
}
