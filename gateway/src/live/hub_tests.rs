use std::sync::Arc;

use super::*;
use crate::outcome::EventStatus;

fn event(status: &'static str, name: &str) -> LiveEvent {
    LiveEvent {
        time: "2026-01-01T00:00:00.000Z".into(),
        source: "web".into(),
        r#type: Some("track".into()),
        event: Some(name.into()),
        message_id: None,
        user_id: Some("u1".into()),
        anonymous_id: None,
        status,
        topic: None,
        key: None,
        partition: None,
        offset: None,
        code: None,
        message: None,
        violations: Vec::new(),
        payload: None,
        frame: Default::default(),
    }
}

#[test]
fn unwatched_hub_captures_nothing() {
    let hub = Arc::new(LiveHub::new(4));
    assert!(!hub.is_watched());
    assert!(hub.capture("web", std::iter::empty()).is_none());
    let viewer = hub.watch(Some("other"));
    assert!(hub.capture("web", std::iter::empty()).is_none(), "a viewer of another source does not make web watched");
    assert!(hub.capture("other", std::iter::empty()).is_some());
    drop(viewer);
    assert!(!hub.is_watched());
    assert_eq!(hub.viewers_gauge.get(), 0);
}

#[actix_rt::test]
async fn a_slow_viewer_is_told_how_many_it_skipped() {
    let hub = Arc::new(LiveHub::new(4));
    let mut viewer = hub.watch(None);
    hub.publish("web", (0..10).map(|i| event("accepted", &format!("e{i}"))).collect());
    match viewer.next().await {
        Next::Skipped(n) => assert_eq!(n, 6),
        other => panic!("expected skipped, got {other:?}"),
    }
    match viewer.next().await {
        Next::Event(e) => assert_eq!(e.event.as_deref(), Some("e6")),
        other => panic!("expected e6, got {other:?}"),
    }
    assert_eq!(hub.skipped.get(), 6);
}

#[actix_rt::test]
async fn close_ends_every_stream() {
    let hub = Arc::new(LiveHub::new(4));
    let mut viewer = hub.watch(Some("web"));
    hub.close();
    assert!(matches!(viewer.next().await, Next::Closed));
}

#[test]
fn filters_match_status_name_and_user() {
    let filter = |q: &str| -> Filter { serde_json::from_str(q).expect("filter") };
    let e = event("invalid", "Order Completed");
    assert!(filter(r#"{}"#).admits(&e));
    assert!(filter(r#"{"status":"accepted,invalid"}"#).admits(&e));
    assert!(!filter(r#"{"status":"accepted"}"#).admits(&e));
    assert!(filter(r#"{"event":"Order Completed","user":"u1"}"#).admits(&e));
    assert!(!filter(r#"{"user":"u2"}"#).admits(&e));
    assert_eq!(EventStatus::Invalid.as_str(), e.status);
}

#[actix_rt::test]
async fn events_ready_together_go_out_as_one_chunk_and_filtered_ones_never_as_an_empty_one() {
    use futures::StreamExt;
    let hub = Arc::new(LiveHub::new(64));
    let filter: Filter = serde_json::from_str(r#"{"status":"invalid"}"#).expect("filter");
    let mut stream = Box::pin(sse::stream(hub.watch(None), filter, std::time::Duration::from_secs(30)));
    let opening = stream.next().await.expect("opening").expect("bytes");
    assert_eq!(opening, sse::OPENING.as_bytes());
    hub.publish("web", vec![event("accepted", "skip-me")]);
    hub.publish("web", (0..3).map(|i| event("invalid", &format!("e{i}"))).collect());
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
