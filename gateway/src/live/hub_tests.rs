use std::sync::Arc;

use super::*;
use crate::outcome::EventStatus;

fn event(status: &'static str, name: &str) -> LiveEvent {
    LiveEvent {
        id: 0,
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
    let hub = Arc::new(LiveHub::new(4, 1 << 20));
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
    let hub = Arc::new(LiveHub::new(4, 1 << 20));
    let mut viewer = hub.watch(None);
    hub.publish("web", (0..10).map(|i| event("accepted", &format!("e{i}"))).collect());
    match viewer.next().await {
        Next::Skipped(n) => assert_eq!(n, 6),
        other => panic!("expected skipped, got {other:?}"),
    }
    match viewer.next().await {
        Next::Events(events) => {
            let names: Vec<_> = events.iter().map(|e| e.event.clone().unwrap_or_default()).collect();
            assert_eq!(names, ["e6", "e7", "e8", "e9"], "the kept events, in one read");
        }
        other => panic!("expected e6..e9, got {other:?}"),
    }
    assert_eq!(hub.skipped.get(), 6);
    assert!(viewer.try_next().is_none(), "nothing new");
    hub.publish("web", vec![event("accepted", "e10")]);
    assert!(matches!(viewer.next().await, Next::Events(e) if e.len() == 1 && e[0].event.as_deref() == Some("e10")));
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
        Next::Events(events) => events.iter().map(|e| e.event.clone().unwrap_or_default()).collect::<Vec<_>>(),
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
    let hub = Arc::new(LiveHub::new(64, 1 << 20));
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

#[actix_rt::test]
async fn a_viewer_gets_at_most_one_chunk_of_events_per_pace_and_the_requests_between_share_it() {
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
    let text = std::str::from_utf8(&next).expect("utf-8");
    assert!(text.contains("second"), "{text}");
    let rest = if text.contains("fourth") {
        String::new()
    } else {
        let more = stream.next().await.expect("a chunk").expect("bytes");
        String::from_utf8_lossy(&more).into_owned()
    };
    assert!(text.contains("fourth") || rest.contains("fourth"), "every event arrives: {text} {rest}");
    assert_eq!(
        text.matches("event: event\n").count() + rest.matches("event: event\n").count(),
        3,
        "each of the three once"
    );
}

#[test]
fn published_events_are_numbered_and_opened_while_the_view_holds_them() {
    let stored = |name: &str| LiveEvent { payload: Some(vec![b'x'; 1000].into()), ..event("accepted", name) };
    // Room for about three events of 1,256 bytes' weight.
    let hub = Arc::new(LiveHub::new(64, 4000));
    let _viewer = hub.watch(None);
    hub.publish("web", vec![stored("a"), stored("b")]);
    hub.publish("web", vec![stored("c"), event("accepted", "nothing stored")]);
    assert_eq!(hub.opened(1).map(|e| e.event.clone()), None, "the oldest gave way");
    let kept: Vec<_> = (2..=4).map(|id| hub.opened(id).map(|e| (e.id, e.event.clone().unwrap_or_default()))).collect();
    assert_eq!(
        kept,
        vec![Some((2, "b".into())), Some((3, "c".into())), Some((4, "nothing stored".into()))],
        "numbered in publishing order, without gaps"
    );
    assert!(hub.opened(5).is_none() && hub.opened(0).is_none() && hub.opened(u64::MAX).is_none());
    let frame = hub.opened(3).expect("kept").frame();
    assert!(std::str::from_utf8(&frame).expect("utf-8").contains("\"id\":3,"), "the frame names the id to open");

    // Unwatched, nothing is published, numbered or kept.
    let quiet = Arc::new(LiveHub::new(64, 4000));
    quiet.publish("web", vec![stored("z")]);
    assert!(quiet.opened(1).is_none());
}
