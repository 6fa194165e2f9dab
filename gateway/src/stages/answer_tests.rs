//! Answers read as they always did: statuses and outcomes by name.

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
