use super::event::{Field, Shown};
use std::sync::Arc;

use super::*;
use crate::outcome::EventStatus;

/// The event names of what a viewer read, in order.
fn names(requests: &[Arc<Published>]) -> Vec<String> {
    requests
        .iter()
        .flat_map(|r| r.events())
        .map(|e| e.fields.get(Field::Event).unwrap_or_default().to_owned())
        .collect()
}

fn event(status: &'static str, name: &str) -> LiveEvent {
    LiveEvent::new(
        "2026-01-01T00:00:00.000Z".into(),
        "web".into(),
        Shown::new(Some("track"), Some(name), Some("u1"), None),
        status,
    )
}

#[test]
fn unwatched_hub_captures_nothing() {
    let hub = Arc::new(LiveHub::new(4, 1 << 20));
    assert!(!hub.is_watched());
    assert!(hub.capture("web", false, std::iter::empty()).is_none());
    let viewer = hub.watch(Some("other"));
    assert!(
        hub.capture("web", false, std::iter::empty()).is_none(),
        "a viewer of another source does not make web watched"
    );
    assert!(hub.capture("other", false, std::iter::empty()).is_some());
    drop(viewer);
    assert!(!hub.is_watched());
    assert_eq!(hub.viewers_gauge.get(), 0);
}

#[actix_rt::test]
async fn a_slow_viewer_is_told_how_many_it_skipped() {
    let hub = Arc::new(LiveHub::new(4, 1 << 20));
    let mut viewer = hub.watch(None);
    // Eight requests of one event, then one of two: the ring keeps four events.
    for i in 0..8 {
        hub.publish("web", vec![event("accepted", &format!("e{i}"))]);
    }
    hub.publish("web", vec![event("accepted", "e8"), event("accepted", "e9")]);
    match viewer.next().await {
        Next::Skipped(n) => assert_eq!(n, 6),
        other => panic!("expected skipped, got {other:?}"),
    }
    match viewer.next().await {
        Next::Events(requests) => {
            assert_eq!(names(&requests), ["e6", "e7", "e8", "e9"], "the kept events, in one read")
        }
        other => panic!("expected e6..e9, got {other:?}"),
    }
    assert_eq!(hub.skipped.get(), 6);
    assert!(viewer.try_next().is_none(), "nothing new");
    hub.publish("web", vec![event("accepted", "e10")]);
    assert!(matches!(viewer.next().await, Next::Events(r) if names(&r) == ["e10"]));
    // A request larger than the ring is kept whole: its events are skipped
    // or seen together, never half of them.
    let mut late = hub.watch(None);
    hub.publish("web", (11..17).map(|i| event("accepted", &format!("e{i}"))));
    assert!(matches!(late.next().await, Next::Events(r) if names(&r).len() == 6));
    match viewer.next().await {
        Next::Events(requests) => assert_eq!(names(&requests).len(), 6, "the ring dropped e10 for them"),
        other => panic!("expected the six, got {other:?}"),
    }
}

#[actix_rt::test]
async fn a_viewer_starts_at_the_next_event_and_two_viewers_each_see_every_one() {
    let hub = Arc::new(LiveHub::new(16, 1 << 20));
    let mut early = hub.watch(Some("web"));
    hub.publish("web", vec![event("accepted", "before")]);
    let mut late = hub.watch(None);
    hub.publish("web", vec![event("accepted", "a"), event("invalid", "b")]);
    hub.publish("other", vec![event("accepted", "elsewhere")]);
    let names = |next: Next| match next {
        Next::Events(requests) => names(&requests),
        other => panic!("expected events, got {other:?}"),
    };
    assert_eq!(names(early.next().await), ["before", "a", "b"], "two publishes, one read");
    assert_eq!(names(late.next().await), ["a", "b", "elsewhere"], "all sources, from when it came");
    assert!(early.try_next().is_none(), "another source's events are not web's");
    assert_eq!(hub.skipped.get(), 0);
}

#[actix_rt::test]
async fn close_ends_every_stream() {
    let hub = Arc::new(LiveHub::new(4, 1 << 20));
    let mut viewer = hub.watch(Some("web"));
    hub.close();
    assert!(matches!(viewer.next().await, Next::Closed));
}

#[test]
fn filters_match_status_name_and_user() {
    let filter = |q: &str| -> Filter { serde_json::from_str(q).expect("filter") };
    let e = Row::from(event("invalid", "Order Completed"));
    assert!(filter(r#"{}"#).admits(&e));
    assert!(filter(r#"{"status":"accepted,invalid"}"#).admits(&e));
    assert!(!filter(r#"{"status":"accepted"}"#).admits(&e));
    assert!(filter(r#"{"event":"Order Completed","user":"u1"}"#).admits(&e));
    assert!(!filter(r#"{"user":"u2"}"#).admits(&e));
    assert_eq!(EventStatus::Invalid.as_str(), e.status);
    // Spaces around the texts and empty list items are ignored; a list of
    // nothing but separators wants no status at all.
    assert!(filter(r#"{"status":" accepted , invalid ","event":" Order Completed "}"#).admits(&e));
    assert!(!filter(r#"{"status":" accepted ,, "}"#).admits(&e));
    assert!(!filter(r#"{"status":","}"#).admits(&e));
    assert!(filter(r#"{"status":"  ","user":" "}"#).prepared().admits_all(), "blank texts filter nothing");
    assert!(!filter(r#"{"status":"invalid"}"#).prepared().admits_all());
}

#[actix_rt::test]
async fn events_ready_together_go_out_as_one_chunk_and_filtered_ones_never_as_an_empty_one() {
    use futures::StreamExt;
    let hub = Arc::new(LiveHub::new(64, 1 << 20));
    let filter: Filter = serde_json::from_str(r#"{"status":"invalid"}"#).expect("filter");
    let mut stream = Box::pin(sse::stream(hub.watch(None), filter, std::time::Duration::from_secs(30)));
    let opening = stream.next().await.expect("opening").expect("bytes");
    assert_eq!(opening, sse::OPENING.as_bytes());
    hub.publish("web", vec![event("accepted", "skip-me")]);
    hub.publish("web", (0..3).map(|i| event("invalid", &format!("e{i}"))));
    let chunk = stream.next().await.expect("a chunk").expect("bytes");
    let text = std::str::from_utf8(&chunk).expect("utf-8");
    assert!(!chunk.is_empty());
    assert_eq!(text.matches("event: event\n").count(), 3, "{text}");
    assert!(text.contains("e0") && text.contains("e2") && !text.contains("skip-me"), "{text}");
    hub.publish("web", vec![event("accepted", "skip-me-too")]);
    hub.close();
    let last = stream.next().await.expect("closed frame").expect("bytes");
    assert_eq!(last, sse::frame("closed", "{}"));
    assert!(stream.next().await.is_none(), "the stream ends after `closed`");
}

#[actix_rt::test]
async fn a_viewer_whose_filter_drops_every_event_still_hears_the_keep_alive() {
    use futures::StreamExt;
    let hub = Arc::new(LiveHub::new(64, 1 << 20));
    let only: Filter = serde_json::from_str(r#"{"status":"invalid"}"#).expect("filter");
    let heartbeat = std::time::Duration::from_millis(100);
    let mut stream = Box::pin(sse::stream(hub.watch(None), only, heartbeat));
    stream.next().await.expect("opening").expect("bytes");
    // A busy source whose every event the filter drops, for two seconds.
    let busy = Arc::clone(&hub);
    let publisher = actix_rt::spawn(async move {
        for _ in 0..200 {
            busy.publish("web", vec![event("accepted", "dropped")]);
            actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    });
    let chunk = stream.next().await.expect("a chunk").expect("bytes");
    assert_eq!(chunk, &b": keep-alive\n\n"[..], "only the keep-alive goes out");
    assert!(!publisher.is_finished(), "it came while events were still being dropped, not after they stopped");
    publisher.abort();
}

#[actix_rt::test]
async fn a_viewer_waits_out_its_pace_then_gets_what_was_published_meanwhile_at_once() {
    use futures::StreamExt;
    let hub = Arc::new(LiveHub::new(64, 1 << 20));
    let mut stream = Box::pin(sse::stream(hub.watch(None), Filter::default(), std::time::Duration::from_secs(30)));
    stream.next().await.expect("opening").expect("bytes");
    hub.publish("web", vec![event("accepted", "first")]);
    let first = stream.next().await.expect("a chunk").expect("bytes");
    let sent = std::time::Instant::now();
    assert!(std::str::from_utf8(&first).expect("utf-8").contains("first"));
    // Three requests answered while the viewer waits out its pace.
    let later = Arc::clone(&hub);
    let publisher = actix_rt::spawn(async move {
        for name in ["second", "third", "fourth"] {
            later.publish("web", vec![event("accepted", name)]);
            actix_rt::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    });
    let next = stream.next().await.expect("a chunk").expect("bytes");
    publisher.await.expect("publisher");
    assert!(sent.elapsed() >= sse::PACE, "the next chunk waited out the pace");
    let mut text = String::from_utf8_lossy(&next).into_owned();
    // What was published during the pace is ready at once, in order: the
    // HTTP server writes what is ready together.
    while !text.contains("fourth") {
        use futures::FutureExt;
        let more = stream.next().now_or_never().expect("ready without waiting").expect("a chunk").expect("bytes");
        text.push_str(&String::from_utf8_lossy(&more));
    }
    assert_eq!(text.matches("event: event\n").count(), 3, "each of the three once: {text}");
    let order: Vec<usize> = ["second", "third", "fourth"].iter().filter_map(|n| text.find(n)).collect();
    assert!(order.len() == 3 && order.is_sorted(), "{text}");
}

#[actix_rt::test]
async fn a_request_s_frames_are_one_slice_of_one_buffer_for_every_viewer() {
    use futures::StreamExt;
    let hub = Arc::new(LiveHub::new(64, 1 << 20));
    let mut all = Box::pin(sse::stream(hub.watch(None), Filter::default(), std::time::Duration::from_secs(30)));
    let only: Filter = serde_json::from_str(r#"{"status":"invalid"}"#).expect("filter");
    let mut invalid = Box::pin(sse::stream(hub.watch(None), only, std::time::Duration::from_secs(30)));
    all.next().await.expect("opening").expect("bytes");
    invalid.next().await.expect("opening").expect("bytes");
    let names = ["a0", "a1", "i2", "i3", "a4"];
    hub.publish("web", names.iter().map(|n| event(if n.starts_with('i') { "invalid" } else { "accepted" }, n)));
    let whole = all.next().await.expect("a chunk").expect("bytes");
    assert_eq!(whole.matches_count(), 5);
    let part = invalid.next().await.expect("a chunk").expect("bytes");
    let text = std::str::from_utf8(&part).expect("utf-8");
    assert!(text.contains("i2") && text.contains("i3") && !text.contains("a4"), "{text}");
    // The same bytes, not copies: the filtered viewer's slice lies inside the
    // unfiltered viewer's.
    let inside = whole.as_ptr() as usize..whole.as_ptr() as usize + whole.len();
    assert!(inside.contains(&(part.as_ptr() as usize)), "one buffer for both viewers");
}

trait Frames {
    fn matches_count(&self) -> usize;
}

impl Frames for actix_web::web::Bytes {
    fn matches_count(&self) -> usize {
        std::str::from_utf8(self).expect("utf-8").matches("event: event\n").count()
    }
}

#[test]
fn a_frame_is_the_json_serde_writes_for_the_event() {
    let strange = "quote \" backslash \\ newline \n tab \t nul \u{0} bell \u{7} unit \u{1f} del \u{7f} é 🦀 </script>";
    let mut fields = Shown::new(Some("track"), Some(strange), Some("u1"), Some("anon"));
    fields.set(Field::Key, "user-1");
    fields.set(Field::MessageId, strange);
    let full = LiveEvent {
        id: 42,
        topic: Some("web.tracking".into()),
        partition: Some(-1),
        offset: Some(i64::MAX),
        code: Some("schema_violation"),
        message: Some(strange.into()),
        violations: vec![eventgw_schemas::SchemaViolation { path: "/properties/x".into(), message: strange.into() }],
        stored: true,
        ..LiveEvent::new("2026-01-01T00:00:00.000Z".into(), "web".into(), fields, "invalid")
    };
    let bare = LiveEvent::new("t".into(), "web".into(), Shown::default(), "rejected");
    let mut plain = event("accepted", "Order Completed");
    plain.fields.set(Field::Key, "user-1");
    plain.fields.set(Field::MessageId, "0b9f3c1e-5d2a-4c7b-9e61-2f0a8d4c3b71");
    plain.topic = Some("web.tracking".into());
    assert!(plain.fields.is_plain() && !full.fields.is_plain(), "both ways of writing the record's texts");
    for e in [full, bare, event("accepted", "plain"), plain] {
        let frame = e.frame();
        let text = std::str::from_utf8(&frame).expect("utf-8");
        let data = text.strip_prefix("event: event\ndata: ").and_then(|t| t.strip_suffix("\n\n")).expect("framed");
        assert!(!data.contains('\n'), "one data: line: {data}");
        // The fields in the frame's order, absent ones left out, as serde
        // writes them.
        let mut expected = serde_json::Map::new();
        let mut put = |name: &str, value: Option<serde_json::Value>| {
            if let Some(value) = value {
                expected.insert(name.to_owned(), value);
            }
        };
        let text = |t: Option<&str>| t.map(serde_json::Value::from);
        put("id", Some(e.id.into()));
        put("time", text(Some(&e.time)));
        put("source", text(Some(&e.source)));
        put("type", text(e.kind()));
        put("event", text(e.event()));
        put("messageId", text(e.message_id()));
        put("userId", text(e.user_id()));
        put("anonymousId", text(e.anonymous_id()));
        put("status", text(Some(e.status)));
        put("topic", text(e.topic.as_deref()));
        put("key", text(e.key()));
        put("partition", e.partition.map(Into::into));
        put("offset", e.offset.map(Into::into));
        put("code", text(e.code));
        put("message", text(e.message.as_deref()));
        put("violations", (!e.violations.is_empty()).then(|| serde_json::to_value(&e.violations).expect("serde")));
        put("stored", e.stored.then_some(serde_json::Value::Bool(true)));
        assert_eq!(data, serde_json::to_string(&expected).expect("text"), "byte for byte what serde writes");
    }
}

#[test]
fn published_events_are_numbered_and_opened_while_the_view_holds_them() {
    let record = |name: &str| actix_web::web::Bytes::from(format!("{{\"event\":\"{name}\"}}"));
    let kept = |name: &str| LiveEvent { payload: Some(record(name)), stored: true, ..event("accepted", name) };
    let in_kafka = |offset| LiveEvent {
        stored: true,
        topic: Some("web.tracking".into()),
        partition: Some(2),
        offset: Some(offset),
        ..event("accepted", "in Kafka")
    };
    // Room for about three kept records (each weighs its 1 KiB buffer and its slot).
    let hub = Arc::new(LiveHub::new(64, 3000));
    let _viewer = hub.watch(None);
    hub.publish("web", vec![kept("a"), kept("b")]);
    hub.publish("web", vec![kept("c"), event("rejected", "nothing stored"), in_kafka(41)]);
    assert_eq!(hub.opened(1), None, "the oldest gave way");
    let opened: Vec<_> = (2..=5).map(|id| hub.opened(id)).collect();
    assert_eq!(
        opened,
        vec![
            Some(Record::Kept(record("b"))),
            Some(Record::Kept(record("c"))),
            Some(Record::Nothing),
            Some(Record::Kafka { topic: "web.tracking".into(), partition: 2, offset: 41 }),
        ],
        "numbered in publishing order, without gaps"
    );
    assert!(hub.opened(6).is_none() && hub.opened(0).is_none() && hub.opened(u64::MAX).is_none());
    // A row of a record Kafka holds weighs its slot only (tens of bytes):
    // fifty of them push out the two kept records, not the rows after them.
    hub.publish("web", (0..50).map(in_kafka).collect::<Vec<_>>());
    assert_eq!(hub.opened(55), Some(Record::Kafka { topic: "web.tracking".into(), partition: 2, offset: 49 }));
    assert!(hub.opened(2).is_none() && hub.opened(3).is_none(), "the kept records gave way");
    assert_eq!(hub.opened(4), Some(Record::Nothing), "the rows after them stay");

    // Unwatched, nothing is published, numbered or kept.
    let quiet = Arc::new(LiveHub::new(64, 4000));
    quiet.publish("web", vec![kept("z")]);
    assert!(quiet.opened(1).is_none());
}

#[test]
fn at_most_read_backs_records_are_read_back_at_once() {
    let hub = LiveHub::new(4, 1 << 20);
    let held: Vec<_> = (0..READ_BACKS).map(|_| hub.reading().expect("a permit")).collect();
    assert!(hub.reading().is_none(), "one more is refused, not queued");
    drop(held);
    assert!(hub.reading().is_some(), "free again once the reads ended");
}
