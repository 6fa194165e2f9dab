//! Records go to the sink at once; a sink that cannot store them all fails
//! the whole request with the code clients retry on.

use super::*;
use crate::sink::MemorySink;

fn accepted(topic: &str) -> Planned {
    let record = OutRecord { topic: topic.into(), key: "k".into(), payload: b"{}".to_vec(), headers: Vec::new() };
    Planned { message_id: Some("m".into()), verdict: Verdict::Accept(record), violation: None }
}

fn rejected() -> Planned {
    Planned {
        message_id: None,
        verdict: Verdict::Reject { code: crate::code::Code::InvalidType, message: "the event has no `type`".into() },
        violation: None,
    }
}

const DEADLINE: Duration = Duration::from_secs(5);

#[actix_web::test]
async fn only_produced_events_reach_the_sink_and_payloads_move() {
    let sink = MemorySink::default();
    let produced = store(&sink, vec![accepted("web.tracking"), rejected(), accepted("crm.leads")], DEADLINE, 5, false)
        .await
        .expect("stored");
    assert_eq!(produced.results.len(), 2);
    let topics: Vec<String> = sink.records().into_iter().map(|r| r.topic).collect();
    assert_eq!(topics, ["web.tracking", "crm.leads"]);
    let Verdict::Accept(left) = &produced.planned[0].verdict else { panic!("accepted") };
    assert!(left.payload.is_empty() && left.topic == "web.tracking", "only the topic stays behind");
}

#[actix_web::test]
async fn a_sink_that_cannot_store_fails_the_whole_request() {
    for (error, want) in [
        (SinkError::Unavailable("down".into()), "kafka_unavailable"),
        (SinkError::QueueFull, "backpressure"),
        (SinkError::SpoolRefused("full".into()), "kafka_unavailable"),
    ] {
        let sink = MemorySink::default();
        sink.fail_with(Some(error));
        let failed = store(&sink, vec![accepted("web.tracking")], DEADLINE, 5, false).await.expect_err("refused");
        assert_eq!(failed.code(), want);
    }
}

#[actix_web::test]
async fn nothing_to_produce_asks_nothing_of_the_sink() {
    let sink = MemorySink::default();
    sink.fail_with(Some(SinkError::QueueFull));
    let produced = store(&sink, vec![rejected()], DEADLINE, 5, false).await.expect("nothing to store");
    assert!(produced.results.is_empty() && sink.records().is_empty());
}
