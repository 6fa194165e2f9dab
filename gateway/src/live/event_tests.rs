use serde_json::Value;

use super::*;

fn outcome(status: EventStatus) -> EventOutcome {
    EventOutcome { index: 0, message_id: None, status, topic: None, code: None, message: None, errors: Vec::new() }
}

fn copied(payload: &str) -> Copied {
    Copied { record: Some(("k".into(), payload.as_bytes().to_vec())) }
}

#[test]
fn the_stored_bytes_are_shown_as_they_are_with_their_fields() {
    let stored = r#"{"type":"track","event":"Form Submitted","userId":"u-\"1\"","properties":{"z":1,"a":2}}"#;
    let row = row("web", "t", copied(stored), &outcome(EventStatus::Accepted), None);
    assert_eq!(row.payload.as_deref(), Some(stored.as_bytes()), "bytes and key order kept");
    assert_eq!((row.r#type.as_deref(), row.event.as_deref()), (Some("track"), Some("Form Submitted")));
    assert_eq!(row.user_id.as_deref(), Some("u-\"1\""), "escapes read");
    let frame = row.frame();
    assert!(frame.starts_with(b"event: event\ndata: {\"id\":0,\"time\":\"t\""), "{frame:?}");
    assert!(frame.ends_with(b",\"stored\":true}\n\n"), "the record is opened by id, not sent: {frame:?}");
    assert!(!frame.windows(9).any(|w| w == b"\"payload\""), "{frame:?}");
    assert_eq!(row.frame().as_ptr(), frame.as_ptr(), "rendered once, shared");
}

#[test]
fn a_dead_letter_shows_its_events_fields_and_odd_values_are_absent() {
    let envelope =
        r#"{"reason":"schema_violation","event":{"type":"track","event":"Order","userId":7,"anonymousId":"a"}}"#;
    let dead = row("web", "t", copied(envelope), &outcome(EventStatus::Invalid), None);
    assert_eq!(dead.event.as_deref(), Some("Order"));
    assert_eq!((dead.user_id.as_deref(), dead.anonymous_id.as_deref()), (None, Some("a")), "a number is no user id");
    let text = "{\n  \"type\": \"page\"\n}";
    let pretty = row("web", "t", copied(text), &outcome(EventStatus::Accepted), None);
    assert_eq!(pretty.payload.as_deref(), Some(text.as_bytes()), "kept as stored, line breaks and all");
    assert_eq!(pretty.frame().iter().filter(|b| **b == b'\n').count(), 3, "one data: line");
    let junk = row("web", "t", copied("not json"), &outcome(EventStatus::Accepted), None);
    assert!(junk.payload.is_none(), "bytes that are not JSON are not offered");
    let frame = junk.frame();
    let json = std::str::from_utf8(&frame[b"event: event\ndata: ".len()..frame.len() - 2]).expect("utf-8");
    serde_json::from_str::<Value>(json).expect("the frame's data is JSON");
}
