//! Each event gets its verdict from the request's context; a strict
//! source's batch is refused whole, and counted as rejected.

use actix_web::test::TestRequest;
use serde_json::json;

use super::*;
use crate::code::Code;
use crate::pipeline::Verdict;
use crate::stages::authenticate;
use crate::stages::testing::state;
use crate::wire::Undecodable;

fn order(id: &str) -> serde_json::Value {
    json!({"type": "track", "event": "Order Completed", "userId": "u-1",
        "properties": {"order_id": id, "total": 1, "currency": "EUR"}})
}

fn batch(events: Vec<serde_json::Value>) -> BatchRequest {
    BatchRequest { events, sent_at: None, write_key: None, undecodable: Vec::new(), protocol: crate::wire::SEGMENT }
}

#[actix_web::test]
async fn every_event_gets_its_verdict_in_order() {
    let (state, _) = state(|_| {});
    let req = TestRequest::default().to_http_request();
    let request = Request::new(&req, &state, "batch");
    let principal = authenticate::principal(&request, &req, Some("demo-write-key")).expect("principal");
    let events = vec![order("o-1"), json!({"type": "nonsense"}), json!([1])];
    let planned = events_of(&request, &principal, events);
    assert!(matches!(&planned[0].verdict, Verdict::Accept(record) if record.key == "o-1"), "{:?}", planned[0]);
    assert!(matches!(planned[1].verdict, Verdict::Reject { code: crate::code::Code::InvalidType, .. }));
    assert!(matches!(planned[2].verdict, Verdict::Reject { code: crate::code::Code::EventNotObject, .. }));
}

#[actix_web::test]
async fn an_undecodable_event_is_dead_lettered_as_sent_without_being_validated() {
    let (state, _) = state(|c| c.limits.max_event_bytes = 200);
    let req = TestRequest::default().to_http_request();
    let request = Request::new(&req, &state, "batch");
    let principal = authenticate::principal(&request, &req, Some("demo-write-key")).expect("principal");
    let at_limit = json!("x".repeat(198));
    let events = vec![order("o-5"), json!(5), at_limit.clone(), json!("x".repeat(199))];
    let undecodable = (1..=4).map(|index| Undecodable { index, reason: format!("`data[{index}].cx` is not base64") });
    let mut batch = batch(events);
    batch.undecodable = undecodable.collect();
    let planned = super::events(&request, &principal, batch).expect("admitted");
    assert!(matches!(planned[0].verdict, Verdict::Accept(_)), "{:?}", planned[0]);
    for (index, original) in [(1, json!(5)), (2, at_limit)] {
        let Verdict::DeadLetter { record, code, message, .. } = &planned[index].verdict else {
            panic!("{:?}", planned[index])
        };
        assert_eq!(
            (*code, message.as_str()),
            (Code::UndecodableEvent, format!("`data[{index}].cx` is not base64").as_str())
        );
        assert_eq!(record.topic, *state.config.kafka.dead_letter_topic);
        let letter: serde_json::Value = serde_json::from_slice(&record.payload).expect("JSON");
        assert_eq!(
            (&letter["reason"], &letter["event"]),
            (&json!("undecodable_event"), &original),
            "as sent, not EventNotObject"
        );
    }
    assert!(
        matches!(planned[3].verdict, Verdict::Reject { code: Code::EventTooLarge, .. }),
        "one byte past the event limit: {:?}",
        planned[3]
    );
    assert_eq!(planned.len(), 4, "an index past the batch is ignored");
}

fn events_of(request: &Request, principal: &Principal, events: Vec<serde_json::Value>) -> Vec<Planned> {
    super::events(request, principal, batch(events)).expect("admitted")
}

#[actix_web::test]
async fn a_strict_source_refuses_the_whole_batch_and_counts_it_rejected() {
    let (state, _) = state(|_| {});
    let req = TestRequest::default().to_http_request();
    let request = Request::new(&req, &state, "batch");
    let principal = authenticate::principal(&request, &req, Some("billing-backend-key")).expect("principal");
    assert!(principal.source.strict, "dev.toml's billing-backend is strict");
    let accepted = events_of(&request, &principal, vec![order("o-2")]);
    assert!(matches!(accepted[0].verdict, Verdict::Accept(_)));
    let refused =
        super::events(&request, &principal, batch(vec![order("o-3"), json!({"type": "track", "event": "Nope"})]))
            .expect_err("strict");
    let ApiError::BatchRejected(count, outcomes) = &refused else { panic!("{refused:?}") };
    assert_eq!((*count, outcomes.len()), (1, 2));
    assert_eq!(outcomes[1].code, Some("unknown_event"));
    let rejected = state.metrics.events.with_label_values(&["batch", "rejected", "none"]).get();
    assert_eq!(rejected, 2, "every event of a refused batch counts as rejected");
}

#[actix_web::test]
async fn broken_contracts_are_returned_by_the_pipeline_and_counted_here() {
    let (state, _) = state(|_| {});
    let req = TestRequest::default().to_http_request();
    let request = Request::new(&req, &state, "batch");
    let principal = authenticate::principal(&request, &req, Some("demo-write-key")).expect("principal");
    let broken = || {
        json!({"type": "track", "event": "Order Completed", "userId": "u-1",
            "properties": {"order_id": "o-9", "total": "lots", "currency": "EUR"}})
    };
    let planned = events_of(&request, &principal, vec![broken(), order("o-8"), broken()]);
    let expected = pipeline::ContractViolation {
        schema: "billing/order_completed".into(),
        rollout: eventgw_schemas::Rollout::Enforce,
    };
    assert_eq!(planned[0].violation.as_ref(), Some(&expected), "{:?}", planned[0]);
    assert!(matches!(planned[0].verdict, Verdict::DeadLetter { code: crate::code::Code::SchemaViolation, .. }));
    assert_eq!(planned[1].violation, None);
    let counted = state.metrics.contract_violations.with_label_values(&["billing/order_completed", "enforce"]).get();
    assert_eq!(counted, 2, "one per broken event, counted by the stage");
}
