//! A viewer as a Server-Sent Events body: `event: event` with one
//! [`super::LiveEvent`] as JSON, `event: skipped` with `{"skipped": N}` when
//! the viewer fell behind, and a comment now and then so proxies keep an
//! idle stream open. The stream ends when the gateway shuts down.

use std::time::Duration;

use actix_web::web::Bytes;
use futures::{Stream, StreamExt};

use super::{Filter, Next, Viewer};

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
/// wakes (a request's events, or several requests') goes out as one chunk:
/// one socket write per viewer, not one per event; after a chunk of events
/// the viewer waits [`PACE`] before it looks again, so several requests'
/// events share a chunk.
pub fn stream(
    viewer: Viewer,
    filter: Filter,
    heartbeat: Duration,
) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> {
    let opening = futures::stream::once(async { Ok(Bytes::from_static(OPENING.as_bytes())) });
    let rest = futures::stream::unfold(Some((viewer, filter, false)), move |open| async move {
        let (mut viewer, filter, paced) = open?;
        if paced {
            tokio::time::sleep(PACE).await;
        }
        // Never an empty chunk: to a chunked HTTP/1.1 body that is the end.
        loop {
            let next = match tokio::time::timeout(heartbeat, viewer.next()).await {
                Err(_) => return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), Some((viewer, filter, false)))),
                Ok(next) => next,
            };
            let (chunk, paced) = match next {
                Next::Events(events) => {
                    let frames: Vec<Bytes> = events.iter().filter(|e| filter.admits(e)).map(|e| e.frame()).collect();
                    let chunk = match frames.len() {
                        0 => continue,
                        1 => frames.into_iter().next().unwrap_or_default(),
                        _ => Bytes::from(frames.concat()),
                    };
                    (chunk, true)
                }
                Next::Skipped(n) => (frame("skipped", &format!("{{\"skipped\":{n}}}")), false),
                Next::Closed => return Some((Ok(frame("closed", "{}")), None)),
            };
            return Some((Ok(chunk), Some((viewer, filter, paced))));
        }
    });
    opening.chain(rest)
}
