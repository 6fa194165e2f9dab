//! How producer failures become answers, with the in-memory sink standing in
//! for Kafka (the real broker's outage is in kafka_outage.rs).

use std::sync::Arc;

use actix_web::{App, test, web};
use gateway::AppState;
use gateway::sink::{MemorySink, SinkError};
use serde_json::{Value, json};

async fn post(sink: Arc<MemorySink>, body: Value) -> (u16, Option<String>, Value) {
    let config =
        gateway::config::Config::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/dev.toml"))
            .expect("dev config");
    let state = web::Data::new(AppState::new(config, sink).expect("state"));
    let app =
        test::init_service(App::new().app_data(state).route("/v1/batch", web::post().to(gateway::api::batch::batch)))
            .await;
    let request = test::TestRequest::post()
        .uri("/v1/batch")
        .insert_header(("authorization", "Basic ZGVtby13cml0ZS1rZXk6"))
        .set_json(body)
        .to_request();
    let response = test::call_service(&app, request).await;
    let status = response.status().as_u16();
    let retry = response.headers().get("retry-after").map(|v| v.to_str().expect("ascii").to_owned());
    (status, retry, test::read_body_json(response).await)
}

fn one_event() -> Value {
    json!({"batch": [{"type": "track", "event": "Link Clicked", "userId": "u",
        "properties": {"href": "https://a.example/"}}]})
}

#[actix_web::test]
async fn a_full_producer_queue_is_backpressure_503_with_retry_after() {
    let sink = Arc::new(MemorySink::default());
    sink.fail_with(Some(SinkError::QueueFull));
    let (status, retry, body) = post(sink, one_event()).await;
    assert_eq!((status, retry.as_deref()), (503, Some("5")));
    assert_eq!(body["code"], "backpressure");
}

#[actix_web::test]
async fn an_unacknowledged_record_is_503_kafka_unavailable() {
    let sink = Arc::new(MemorySink::default());
    sink.fail_with(Some(SinkError::Unavailable("Message timed out".into())));
    let (status, retry, body) = post(sink, one_event()).await;
    assert_eq!((status, retry.as_deref()), (503, Some("5")));
    assert_eq!(body["code"], "kafka_unavailable");
    assert!(body["message"].as_str().expect("message").contains("Message timed out"));
}

#[actix_web::test]
async fn a_record_too_large_for_kafka_is_rejected_not_retried() {
    let sink = Arc::new(MemorySink::default());
    sink.fail_with(Some(SinkError::TooLarge));
    let (status, _, body) = post(sink, one_event()).await;
    assert_eq!(status, 200);
    assert_eq!(body["events"][0]["status"], "rejected");
    assert_eq!(body["events"][0]["code"], "event_too_large");
}

#[actix_web::test]
async fn rejected_events_produce_nothing_and_accepted_ones_are_recorded() {
    let sink = Arc::new(MemorySink::default());
    let body = json!({"batch": [
        {"type": "track", "event": "Link Clicked", "userId": "u", "properties": {"href": "https://a.example/"}},
        "not an object",
        {"type": "track", "event": "Link Clicked", "userId": "u", "messageId": "", "properties": {}}
    ]});
    let (status, _, answer) = post(Arc::clone(&sink), body).await;
    assert_eq!(status, 200);
    assert_eq!(answer["events"][1]["code"], "event_not_object");
    assert_eq!(answer["events"][2]["code"], "invalid_message_id");
    let records = sink.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].topic, "web.tracking");
    assert_eq!(records[0].key, "u");
}

#[actix_web::test]
async fn a_producer_queue_above_its_high_water_mark_is_refused_before_producing() {
    let sink = Arc::new(MemorySink::default());
    // The dev config holds 100000 records; 80% is the high-water mark.
    sink.set_queue_depth(79_999);
    assert_eq!(post(Arc::clone(&sink), one_event()).await.0, 200, "one below the mark");
    sink.set_queue_depth(80_000);
    let (status, retry, body) = post(Arc::clone(&sink), one_event()).await;
    assert_eq!((status, retry.as_deref(), body["code"].as_str()), (503, Some("5"), Some("backpressure")));
    assert_eq!(sink.records().len(), 1, "only the first request produced");
}
