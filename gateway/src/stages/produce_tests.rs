//! Records go to the sink at once; a sink that cannot store them all fails
//! the whole request with the code clients retry on.

use super::*;
use crate::sink::{Delivered, MemorySink, Text};

fn accepted(topic: &str) -> Planned {
    let record =
        OutRecord { topic: Text::copied(topic), key: "k".into(), payload: b"{}".to_vec().into(), headers: Vec::new() };
    Planned { message_id: Some("m".into()), verdict: Verdict::Accept(record), violation: None, shown: None }
}

fn rejected() -> Planned {
    Planned {
        message_id: None,
        verdict: Verdict::Reject { code: crate::code::Code::InvalidType, message: "the event has no `type`".into() },
        violation: None,
        shown: None,
    }
}

const DEADLINE: Duration = Duration::from_secs(5);

#[actix_web::test]
async fn only_produced_events_reach_the_sink_and_payloads_move() {
    let sink = MemorySink::default();
    let produced = store(&sink, vec![accepted("web.tracking"), rejected(), accepted("crm.leads")], DEADLINE, 5, false)
        .await
        .expect("stored");
    let fates: Vec<&Fate> = produced.iter().map(|p| &p.fate).collect();
    let kafka = |offset| Fate::Stored(Stored::Kafka(Delivered { partition: 0, offset }));
    assert_eq!(fates, [&kafka(0), &Fate::NotProduced, &kafka(1)], "each event with its own fate, offsets kept");
    let topics: Vec<String> = sink.records().into_iter().map(|r| r.topic.to_string()).collect();
    assert_eq!(topics, ["web.tracking", "crm.leads"]);
    let Verdict::Accept(left) = &produced[0].planned.verdict else { panic!("accepted") };
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
    assert!(produced.iter().all(|p| p.fate == Fate::NotProduced) && sink.records().is_empty());
}

#[actix_web::test]
async fn a_record_too_large_fails_alone() {
    let sink = MemorySink::default();
    sink.fail_with(Some(SinkError::TooLarge));
    let produced = store(&sink, vec![rejected(), accepted("web.tracking")], DEADLINE, 5, true).await.expect("answered");
    assert_eq!(produced[0].fate, Fate::NotProduced);
    assert_eq!(produced[1].fate, Fate::Failed(SinkError::TooLarge), "the client's fault, not the request's");
}
