//! Answers read as they always did: statuses and outcomes by name.

use std::sync::Arc;

use super::*;

#[test]
fn each_status_is_answered_by_the_same_name_as_before() {
    for (status, name) in [
        (EventStatus::Accepted, "accepted"),
        (EventStatus::Invalid, "invalid"),
        (EventStatus::Rejected, "rejected"),
        (EventStatus::Duplicate, "duplicate"),
        (EventStatus::Spooled, "spooled"),
        (EventStatus::Suppressed, "suppressed"),
    ] {
        assert_eq!(serde_json::to_string(&status).expect("serialises"), format!("\"{name}\""));
        assert_eq!(status.as_str(), name);
    }
    let outcome = EventOutcome {
        index: 2,
        message_id: Some("m".into()),
        status: EventStatus::Invalid,
        topic: Some("t".into()),
        code: Some("schema_violation"),
        message: Some("why".into()),
        errors: Vec::new(),
    };
    assert_eq!(
        serde_json::to_string(&outcome).expect("serialises"),
        r#"{"index":2,"messageId":"m","status":"invalid","topic":"t","code":"schema_violation","message":"why"}"#
    );
}

fn accepted(message_id: &str, fate: Fate) -> ProducedEvent {
    let record = crate::sink::OutRecord {
        topic: "web.tracking".into(),
        key: String::new(),
        payload: Default::default(),
        headers: Vec::new(),
    };
    let planned =
        Planned { message_id: Some(message_id.into()), verdict: Verdict::Accept(record), violation: None, shown: None };
    ProducedEvent { planned, fate }
}

#[test]
fn each_event_is_answered_from_its_own_fate() {
    let kafka = Fate::Stored(Stored::Kafka(crate::sink::Delivered { partition: 1, offset: 7 }));
    let produced = vec![
        accepted("a", kafka),
        accepted("b", Fate::Stored(Stored::Spooled)),
        accepted("c", Fate::Stored(Stored::Duplicate)),
        accepted("d", Fate::Failed(crate::sink::SinkError::TooLarge)),
    ];
    let answer = render(produced.into_iter().map(|p| (p.planned, p.fate)));
    let statuses: Vec<_> = answer.events.iter().map(|e| (e.status, e.topic.as_deref(), e.code)).collect();
    assert_eq!(
        statuses,
        [
            (EventStatus::Accepted, Some("web.tracking"), None),
            (EventStatus::Spooled, Some("web.tracking"), None),
            (EventStatus::Duplicate, Some("web.tracking"), Some("duplicate_message_id")),
            (EventStatus::Rejected, None, Some("event_too_large")),
        ]
    );
    let counts = (answer.accepted, answer.spooled, answer.duplicate, answer.rejected, answer.invalid);
    assert_eq!(counts, (1, 1, 1, 1, 0));
}

#[test]
fn a_preview_says_what_would_happen_and_names_no_topic() {
    let answer = preview(vec![accepted("a", Fate::NotProduced).planned]);
    assert_eq!((answer.events[0].status, answer.events[0].topic.as_deref()), (EventStatus::Accepted, None));
}

#[test]
fn the_answer_written_by_hand_is_its_serde_text() {
    let outcome = |index, status, message_id: Option<&str>, topic: Option<&str>| EventOutcome {
        index,
        message_id: message_id.map(str::to_owned),
        status,
        topic: topic.map(Arc::from),
        code: None,
        message: None,
        errors: Vec::new(),
    };
    let mut invalid = outcome(1, EventStatus::Invalid, Some("m-\"2\"\n"), Some("eventgw.dead-letter"));
    invalid.code = Some("schema_violation");
    invalid.message = Some("`plan` must be one of \"free\", \"pro\"\t(é)".into());
    invalid.errors = vec![eventgw_schemas::SchemaViolation {
        path: "/properties/plan".into(),
        message: "\"x\" is not one of".into(),
    }];
    let mut rejected = outcome(2, EventStatus::Rejected, None, None);
    rejected.code = Some("invalid_type");
    rejected.message = Some("the event has no `type`".into());
    let answers = [
        BatchAnswer::default(),
        BatchAnswer {
            accepted: 1,
            invalid: 1,
            rejected: 1,
            events: vec![outcome(0, EventStatus::Accepted, Some("m-1"), Some("web.tracking")), invalid, rejected],
            ..BatchAnswer::default()
        },
        BatchAnswer {
            duplicate: 12,
            spooled: 3,
            suppressed: 1_000_000,
            events: vec![outcome(10, EventStatus::Spooled, Some("m"), Some("billing.payments"))],
            ..BatchAnswer::default()
        },
    ];
    for answer in answers {
        let by_serde = serde_json::to_string(&answer).expect("serialises");
        assert_eq!(String::from_utf8(answer.to_json()).expect("utf-8"), by_serde);
    }
}
