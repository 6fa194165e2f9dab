//! A viewer as a Server-Sent Events body: `event: event` with one
//! [`super::LiveEvent`] as JSON, `event: skipped` with `{"skipped": N}` when
//! the viewer fell behind, and a comment now and then so proxies keep an
//! idle stream open. The stream ends when the gateway shuts down.

use std::time::Duration;

use actix_web::web::Bytes;
use futures::{Stream, StreamExt};

use super::{Filter, Next, Viewer};

/// The first bytes of every stream: sent at once so the client knows it
/// is connected before any event.
pub const OPENING: &str = ": connected\n\nevent: ready\ndata: {}\n\n";

/// The SSE frame of one named event.
pub fn frame(name: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// A chunk gathers the frames ready at once up to about this many bytes:
/// a request's batch of events is one socket write per viewer, not one per
/// event.
const CHUNK_BYTES: usize = 64 * 1024;

/// `viewer`'s events passing `filter`, as SSE frames, with a keep-alive
/// comment after `heartbeat` of silence. Frames already waiting are sent
/// together in one chunk.
pub fn stream(
    viewer: Viewer,
    filter: Filter,
    heartbeat: Duration,
) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> {
    let opening = futures::stream::once(async { Ok(Bytes::from_static(OPENING.as_bytes())) });
    let rest = futures::stream::unfold(Some((viewer, filter)), move |open| async move {
        let (mut viewer, mut filter) = open?;
        // Never an empty chunk: to a chunked HTTP/1.1 body that is the end.
        loop {
            let first = match tokio::time::timeout(heartbeat, viewer.next()).await {
                Err(_) => return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), Some((viewer, filter)))),
                Ok(next) => next,
            };
            let (mut chunk, mut size, mut open) = (Vec::<Bytes>::new(), 0, true);
            let mut next = Some(first);
            while let Some(this) = next.take() {
                let bytes = match this {
                    Next::Event(event) if filter.admits(&event) => event.frame(),
                    Next::Event(_) => Bytes::new(),
                    Next::Skipped(n) => frame("skipped", &format!("{{\"skipped\":{n}}}")),
                    Next::Closed => {
                        open = false;
                        frame("closed", "{}")
                    }
                };
                size += bytes.len();
                if !bytes.is_empty() {
                    chunk.push(bytes);
                }
                if open && size < CHUNK_BYTES {
                    next = viewer.try_next();
                }
            }
            let state = open.then_some((viewer, filter));
            match chunk.len() {
                0 => match state {
                    Some(again) => (viewer, filter) = again,
                    None => return None,
                },
                1 => return Some((Ok(chunk.swap_remove(0)), state)),
                _ => return Some((Ok(Bytes::from(chunk.concat())), state)),
            }
        }
    });
    opening.chain(rest)
}
