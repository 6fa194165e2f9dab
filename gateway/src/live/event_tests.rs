use std::sync::Arc;

use serde_json::Value;

use super::*;
use crate::outcome::EventStatus;

fn outcome(status: EventStatus) -> EventOutcome {
    EventOutcome { index: 0, message_id: None, status, topic: None, code: None, message: None, errors: Vec::new() }
}

/// The copy of a record of `payload` with key `k`, its bytes held when
/// `keep` says they may be kept.
fn copied_as(payload: &str, shown: Option<Shown>, keep: bool) -> Copied {
    let record = OutRecord {
        topic: "web.tracking".into(),
        key: "k".into(),
        payload: payload.as_bytes().to_vec().into(),
        headers: Vec::new(),
    };
    Copied::of(Some(&record), shown, keep)
}

/// As [`copied_as`], where a spool or dedupe may store it.
fn copied(payload: &str, shown: Option<Shown>) -> Copied {
    copied_as(payload, shown, true)
}

fn shown(kind: &str, event: &str, user_id: &str) -> Shown {
    Shown::new(Some(kind), Some(event), Some(user_id), None)
}

fn row(source: &str, time: &str, copied: Copied, outcome: &EventOutcome, stored: Option<Stored>) -> LiveEvent {
    super::row(&Arc::from(time), &Arc::from(source), copied, outcome, stored)
}

#[test]
fn the_stored_bytes_are_kept_as_they_are_and_the_fields_are_admissions() {
    let stored = r#"{"type":"track","event":"Form Submitted","userId":"u-\"1\"","properties":{"z":1,"a":2}}"#;
    let fields = shown("track", "Form Submitted", "u-\"1\"");
    let row = row("web", "t", copied(stored, Some(fields)), &outcome(EventStatus::Spooled), Some(Stored::Spooled));
    assert_eq!(row.payload.as_deref(), Some(stored.as_bytes()), "bytes and key order kept");
    assert_eq!((row.kind(), row.event()), (Some("track"), Some("Form Submitted")));
    assert_eq!((row.user_id(), row.key()), (Some("u-\"1\""), Some("k")));
    let frame = row.frame();
    assert!(frame.starts_with(b"event: event\ndata: {\"id\":0,\"time\":\"t\""), "{frame:?}");
    assert!(frame.ends_with(b",\"stored\":true}\n\n"), "the record is opened by id, not sent: {frame:?}");
    assert!(!frame.windows(9).any(|w| w == b"\"payload\""), "{frame:?}");
    let data = std::str::from_utf8(&frame[b"event: event\ndata: ".len()..frame.len() - 2]).expect("utf-8");
    let data: Value = serde_json::from_str(data).expect("the frame's data is JSON, quotes escaped");
    assert_eq!(data["userId"], "u-\"1\"");
    let published = super::Published::new(vec![row.clone(), row.clone()], |_| {});
    assert_eq!(published.chunk(), &[frame.clone(), frame.clone()].concat(), "a request's frames, one after the other");
    let second = published.frame_range(1);
    assert_eq!(published.chunk().slice(second.clone()), frame, "each event's is its range of the buffer");
    let slice = published.chunk().slice(second);
    assert_eq!(slice.as_ptr(), published.chunk()[frame.len()..].as_ptr(), "shared, not copied");
}

#[test]
fn a_row_without_fields_or_json_bytes_still_frames_as_json() {
    let text = "{\n  \"type\": \"page\"\n}";
    let pretty = row("web", "t", copied(text, None), &outcome(EventStatus::Spooled), Some(Stored::Spooled));
    assert_eq!(pretty.payload.as_deref(), Some(text.as_bytes()), "kept as stored, line breaks and all");
    assert_eq!(pretty.kind(), None, "no fields but admission's");
    assert_eq!(pretty.frame().iter().filter(|b| **b == b'\n').count(), 3, "one data: line");
    // A framed domain's record: the registry's five bytes, then JSON.
    let framed = row(
        "web",
        "t",
        copied("\0\0\0\0\u{1}{}", Some(shown("track", "E", "u"))),
        &outcome(EventStatus::Spooled),
        Some(Stored::Spooled),
    );
    assert!(framed.payload.is_none(), "bytes that are not a JSON object are not offered to open");
    assert_eq!(framed.event(), Some("E"), "the row is shown all the same");
    let frame = framed.frame();
    let json = std::str::from_utf8(&frame[b"event: event\ndata: ".len()..frame.len() - 2]).expect("utf-8");
    let data: Value = serde_json::from_str(json).expect("the frame's data is JSON");
    assert!(data.get("stored").is_none(), "{data}");
    assert_eq!(framed.record(), super::super::Record::Nothing, "nothing to open");
}

#[test]
fn a_record_kafka_acknowledged_is_not_kept_but_still_offered_to_open() {
    let stored = r#"{"type":"track","event":"E"}"#;
    let at = crate::sink::Delivered { partition: 2, offset: 41 };
    let kafka = row("web", "t", copied(stored, None), &outcome(EventStatus::Accepted), Some(Stored::Kafka(at)));
    assert_eq!((kafka.payload.is_none(), kafka.stored), (true, true), "read back from Kafka when opened");
    assert_eq!((kafka.partition, kafka.offset), (Some(2), Some(41)));
    assert!(kafka.frame().ends_with(b",\"partition\":2,\"offset\":41,\"stored\":true}\n\n"));
    let spooled = row("web", "t", copied(stored, None), &outcome(EventStatus::Spooled), Some(Stored::Spooled));
    assert_eq!(spooled.payload.as_deref(), Some(stored.as_bytes()), "Kafka does not hold it yet: kept");
    assert!(spooled.stored && spooled.offset.is_none());
    assert_eq!(spooled.record(), super::super::Record::Kept(stored.as_bytes().to_vec().into()), "opened from memory");
    let topic: std::sync::Arc<str> = "web.tracking".into();
    let kafka = LiveEvent { topic: Some(topic.clone()), ..kafka };
    assert_eq!(kafka.record(), super::super::Record::Kafka { topic, partition: 2, offset: 41 }, "opened from Kafka");
}

#[test]
fn without_a_spool_or_dedupe_no_bytes_are_held_and_only_what_was_stored_is_offered() {
    let stored = r#"{"type":"track","event":"E"}"#;
    let copy = copied_as(stored, None, false);
    assert!(copy.payload.is_none() && copy.object, "nothing cloned, still a JSON object");
    let at = crate::sink::Delivered { partition: 0, offset: 7 };
    let kafka = row("web", "t", copy, &outcome(EventStatus::Accepted), Some(Stored::Kafka(at)));
    assert!(kafka.stored && kafka.payload.is_none(), "read back from Kafka when opened");
    // Refused by Kafka for itself alone: nothing was stored, nothing to open.
    let refused = row("web", "t", copied(stored, None), &outcome(EventStatus::Rejected), None);
    assert!(!refused.stored && refused.payload.is_none(), "{refused:?}");
    assert_eq!(refused.record(), super::super::Record::Nothing);
    assert!(!refused.frame().windows(8).any(|w| w == b"\"stored\""), "no stored flag in the frame");
    // Kafka acknowledged a framed record: shown, not offered.
    let framed = row(
        "web",
        "t",
        copied_as("\0\0\0\0\u{1}{}", None, false),
        &outcome(EventStatus::Accepted),
        Some(Stored::Kafka(at)),
    );
    assert!(!framed.stored);
}

#[test]
fn what_a_request_s_frames_share_is_copied_only_where_it_is_the_same() {
    let (time, source) = (Arc::<str>::from("2026-12-07T10:00:00.000Z"), Arc::<str>::from("web"));
    let (tracking, dead) = (Arc::<str>::from("web.tracking"), Arc::<str>::from("eventgw.dead-letter"));
    let other_time = Arc::<str>::from("2026-12-07T10:00:01.000Z");
    let at = |status: &'static str, topic: Option<&Arc<str>>, time: &Arc<str>| {
        let mut event = LiveEvent::new(Arc::clone(time), Arc::clone(&source), shown("track", "E \"q\"", "u"), status);
        event.topic = topic.cloned();
        event
    };
    let events = vec![
        at("accepted", Some(&tracking), &time),
        at("invalid", Some(&dead), &time),
        at("invalid", Some(&dead), &time),
        at("accepted", Some(&tracking), &time),
        at("rejected", None, &time),
        at("rejected", None, &other_time),
        at("accepted", Some(&tracking), &other_time),
    ];
    let alone: Vec<u8> = events.iter().flat_map(|e| e.frame().to_vec()).collect();
    let published = super::Published::new(events, |_| {});
    let statuses: Vec<_> = published.events().iter().map(|row| row.status).collect();
    assert_eq!(
        statuses,
        ["accepted", "invalid", "invalid", "accepted", "rejected", "rejected", "accepted"],
        "a row each"
    );
    assert_eq!(
        String::from_utf8_lossy(published.chunk()),
        String::from_utf8_lossy(&alone),
        "each frame as it is rendered on its own"
    );
}
