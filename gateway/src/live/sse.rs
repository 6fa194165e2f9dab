//! A viewer as a Server-Sent Events body: `event: event` with one
//! [`super::LiveEvent`] as JSON, `event: skipped` with `{"skipped": N}` when
//! the viewer fell behind, and a comment now and then so proxies keep an
//! idle stream open. The stream ends when the gateway shuts down.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use actix_web::web::Bytes;
use futures::{Stream, StreamExt};

use super::filter::Prepared;
use super::{Filter, Next, Published, Viewer};

/// Least time between two chunks of events to one viewer. A busy
/// source's requests are gathered into one socket write per viewer per
/// pace (50 a second at most), not one per request (600 a second at the
/// benchmark's load): what a viewer costs the gateway stops growing with
/// the request rate. An event after a quiet spell still goes out at once.
/// At 72,000 events a second a pace holds 1,440 events, within the
/// default ring (`live.buffer_events`, 4096).
pub const PACE: Duration = Duration::from_millis(20);

/// The first bytes of every stream: sent at once so the client knows it
/// is connected before any event.
pub const OPENING: &str = ": connected\n\nevent: ready\ndata: {}\n\n";

/// The SSE frame of one named event.
pub fn frame(name: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// `viewer`'s events passing `filter`, as SSE frames, with a keep-alive
/// comment after `heartbeat` of silence. Everything new when the viewer
/// wakes (a request's events, or several requests') goes out together:
/// the frames of one request that pass are one slice of the buffer they
/// were rendered into, nothing is copied per viewer, and the slices ready
/// at once are written by the HTTP server as one socket write. After
/// sending events the viewer waits [`PACE`] before it looks again, so
/// several requests' events share a write.
pub fn stream(
    viewer: Viewer,
    filter: Filter,
    heartbeat: Duration,
) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> {
    let opening = futures::stream::once(async { Ok(Bytes::from_static(OPENING.as_bytes())) });
    let state = Some(Open { viewer, filter: filter.prepared(), paced: false, ready: VecDeque::new() });
    let rest = futures::stream::unfold(state, move |open| async move {
        let mut open = open?;
        if let Some(next) = open.ready.pop_front() {
            return Some((Ok(next), Some(open)));
        }
        if open.paced {
            tokio::time::sleep(PACE).await;
        }
        // The keep-alive is due `heartbeat` after the last chunk, however
        // many events the filter dropped meanwhile.
        let due = tokio::time::Instant::now() + heartbeat;
        // Never an empty chunk: to a chunked HTTP/1.1 body that is the end.
        loop {
            // (A timeout polls what it waits for first: events always
            // ready would never let it expire.)
            let next = if tokio::time::Instant::now() < due {
                tokio::time::timeout_at(due, open.viewer.next()).await.ok()
            } else {
                None
            };
            let Some(next) = next else {
                open.paced = false;
                return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), Some(open)));
            };
            let chunk = match next {
                Next::Events(events) => {
                    open.ready = slices(&events, &open.filter);
                    let Some(first) = open.ready.pop_front() else {
                        // None passed the filter: wait out a pace all the
                        // same, so a viewer whose filter drops a busy
                        // source's events wakes once a pace, not once a
                        // request.
                        tokio::time::sleep(PACE).await;
                        continue;
                    };
                    open.paced = true;
                    first
                }
                Next::Skipped(n) => {
                    open.paced = false;
                    frame("skipped", &format!("{{\"skipped\":{n}}}"))
                }
                Next::Closed => return Some((Ok(frame("closed", "{}")), None)),
            };
            return Some((Ok(chunk), Some(open)));
        }
    });
    opening.chain(rest)
}

/// A viewer's stream between chunks.
struct Open {
    viewer: Viewer,
    filter: Prepared,
    /// Events were just sent: wait [`PACE`] before looking again.
    paced: bool,
    /// Slices ready to go before the viewer looks again.
    ready: VecDeque<Bytes>,
}

/// The frames of `requests`' events that pass `filter`, as few slices as
/// they make: frames next to each other in one request's buffer are one
/// slice of it (a viewer of every event sends each request's buffer whole,
/// looking at none of its events).
fn slices(requests: &[Arc<Published>], filter: &Prepared) -> VecDeque<Bytes> {
    let mut out = VecDeque::new();
    let everything = filter.admits_all();
    for request in requests {
        if everything {
            out.push_back(request.chunk().clone());
            continue;
        }
        let mut open: Option<std::ops::Range<usize>> = None;
        for (i, _) in request.events().iter().enumerate().filter(|(_, e)| filter.admits(e)) {
            let frame = request.frame_range(i);
            match &mut open {
                Some(run) if run.end == frame.start => run.end = frame.end,
                _ => {
                    if let Some(run) = open.replace(frame) {
                        out.push_back(request.chunk().slice(run));
                    }
                }
            }
        }
        if let Some(run) = open {
            out.push_back(request.chunk().slice(run));
        }
    }
    out
}
