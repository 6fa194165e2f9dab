//! A fatal idempotence error in the producer (librdkafka's mock cluster
//! answers the first produce request with a sequence desynchronisation):
//! the gateway must answer 503, never 200, for what that producer held,
//! replace its producer, and take traffic again; every event answered 200
//! must then be readable from the topic.

mod common;

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway::AppState;
use gateway::sink::{KafkaSink, OutRecord, Sink, SinkError, Text};
use rdkafka::mocking::MockCluster;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use serde_json::{Value, json};

fn record(topic: &str, id: &str) -> OutRecord {
    OutRecord {
        topic: Text::copied(topic),
        key: id.into(),
        payload: format!("{{\"messageId\":\"{id}\"}}").into_bytes().into(),
        headers: vec![("event-id", Text::copied(id))],
    }
}

#[actix_web::test]
async fn the_sink_fails_records_of_a_fatally_broken_producer_then_replaces_it() {
    let mock = MockCluster::new(1).expect("mock cluster");
    mock.create_topic("fatal.test", 1, 1).expect("topic");
    let mut cfg = common::config(&mock.bootstrap_servers());
    cfg.kafka.delivery_timeout_ms = 3000;
    let sink = KafkaSink::new(&cfg.kafka).expect("sink");
    mock.request_errors(RDKafkaApiKey::Produce, &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER]);

    let first = sink.send_all(vec![record("fatal.test", "a")]).await;
    assert!(matches!(first[0], Err(SinkError::Unavailable(_))), "a fatal producer never acknowledges: {first:?}");

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let outcome = sink.send_all(vec![record("fatal.test", "b")]).await;
        if outcome[0].is_ok() {
            break;
        }
        assert!(matches!(outcome[0], Err(SinkError::Unavailable(_))), "{outcome:?}");
        assert!(Instant::now() < deadline, "the sink never recovered from the fatal error");
        actix_web::rt::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(sink.producers_replaced(), 1, "exactly one replacement for one fatal error");
    assert!(sink.check_ready().await.is_ok(), "ready again with the new producer");
}

#[actix_web::test]
async fn over_http_a_fatal_error_is_503_and_retries_with_the_same_ids_land() {
    let mock = MockCluster::new(1).expect("mock cluster");
    let mut cfg = common::config(&mock.bootstrap_servers());
    cfg.kafka.delivery_timeout_ms = 3000;
    cfg.server.request_timeout_ms = 6000;
    let sink = KafkaSink::new(&cfg.kafka).expect("sink");
    let state = Arc::new(AppState::new(cfg, Arc::new(sink.clone())).expect("state"));
    for (topic, partitions) in gateway::topics::wanted(&state.catalog, &state.config.kafka) {
        mock.create_topic(&topic, partitions, 1).expect("topic");
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let server = gateway::serve(Arc::clone(&state), listener).expect("serve");
    let handle = server.handle();
    actix_web::rt::spawn(server);
    mock.request_errors(RDKafkaApiKey::Produce, &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER]);

    let ids: Vec<String> = (0..5).map(|i| common::unique(&format!("fatal-{i}"))).collect();
    let batch: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"type": "track", "event": "Form Submitted", "userId": id, "messageId": id,
            "properties": {"form_id": "signup"}})
        })
        .collect();
    let body = json!({"batch": batch});
    let post = || async {
        let response = common::client()
            .post(format!("{url}/v1/batch"))
            .basic_auth("demo-write-key", Some(""))
            .json(&body)
            .send()
            .await
            .expect("sent");
        common::answer(response).await
    };
    let (status, _, answer) = post().await;
    assert_eq!(status, 503, "the fatally broken producer's records are not acknowledged: {answer}");
    assert_eq!(answer["code"], "kafka_unavailable");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, _, answer) = post().await;
        if status == 200 {
            assert_eq!(answer["accepted"], 5, "{answer}");
            break;
        }
        assert_eq!(status, 503, "{answer}");
        assert!(Instant::now() < deadline, "never 200 again after the fatal error");
        actix_web::rt::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(sink.producers_replaced(), 1);
    let stored: BTreeSet<String> = common::read_topic(&mock.bootstrap_servers(), "web.tracking")
        .into_iter()
        .filter_map(|r| r.headers.get("event-id").cloned())
        .collect();
    for id in &ids {
        assert!(stored.contains(id), "{id} was answered 200 and must be in Kafka");
    }
    handle.stop(true).await;
}
