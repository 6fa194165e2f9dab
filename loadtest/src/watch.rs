//! `loadtest watch` (issue 30): live-view viewers for `scripts/bench-live`,
//! all in one process on one thread. Each opens `/live/stream` over its own
//! HTTP/1.1 connection with the operator token, reads until its time is up
//! and counts the `event: event` frames it received. The benchmark's
//! viewers stand for people's browsers on other machines: the less of the
//! two shared cores they take, the less they disturb the gateway whose CPU
//! is measured. Five `curl | grep` pipelines were ten processes and ten
//! pipe copies of every byte; here there is one process and no pipe.

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use crate::args::WatchArgs;

/// What starts each event's frame. A frame's `data:` is one line of JSON,
/// whose strings escape newlines, so this cannot occur inside one.
const FRAME: &[u8] = b"event: event\n";

/// Runs `args.viewers` viewers for `args.seconds`, then prints
/// `viewers=N received=TOTAL per_viewer=A,B,...`.
pub async fn watch(args: &WatchArgs) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
    let viewers: Vec<_> = (0..args.viewers)
        .map(|_| tokio::spawn(view(args.addr.clone(), args.path.clone(), args.token.clone(), deadline)))
        .collect();
    let mut counts = Vec::with_capacity(viewers.len());
    for viewer in viewers {
        counts.push(viewer.await.context("a viewer panicked")??);
    }
    let per_viewer: Vec<String> = counts.iter().map(u64::to_string).collect();
    println!("viewers={} received={} per_viewer={}", counts.len(), counts.iter().sum::<u64>(), per_viewer.join(","));
    Ok(())
}

/// One viewer: the events it received before `deadline`.
async fn view(addr: String, path: String, token: String, deadline: Instant) -> anyhow::Result<u64> {
    let mut socket = TcpStream::connect(&addr).await.with_context(|| format!("cannot connect to {addr}"))?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).await?;
    let mut buffer = vec![0_u8; 1 << 16];
    // The status line, however the first reads split it.
    let mut head = Vec::new();
    let line_end = loop {
        if let Some(end) = memchr::memmem::find(&head, b"\r\n") {
            break end;
        }
        let read = timeout_at(deadline, socket.read(&mut buffer)).await.context("no answer in time")??;
        if read == 0 || head.len() > buffer.len() {
            bail!("the stream ended or sent no status line: {}", String::from_utf8_lossy(&head));
        }
        head.extend_from_slice(&buffer[..read]);
    };
    if !head.starts_with(b"HTTP/1.1 200") {
        bail!("the stream answered {}", String::from_utf8_lossy(&head[..line_end]));
    }
    let mut counter = Counter::default();
    counter.feed(&head);
    loop {
        let read = match timeout_at(deadline, socket.read(&mut buffer)).await {
            Err(_) => break,
            Ok(read) => read?,
        };
        if read == 0 {
            break;
        }
        counter.feed(&buffer[..read]);
    }
    Ok(counter.frames)
}

/// Counts [`FRAME`]s in a byte stream fed in arbitrary pieces: it keeps the
/// last `FRAME.len() - 1` bytes it was fed, so a frame split between two
/// pieces is counted once, at the seam.
#[derive(Debug, Default)]
struct Counter {
    /// Frames seen.
    frames: u64,
    /// The last bytes fed, fewer than a frame's.
    tail: Vec<u8>,
}

impl Counter {
    /// Counts the frames that end in `piece`.
    fn feed(&mut self, piece: &[u8]) {
        let keep = FRAME.len() - 1;
        // A frame that starts in the tail ends in the piece's first bytes;
        // one wholly inside those bytes is too short to be whole there.
        let mut seam = std::mem::take(&mut self.tail);
        let kept = seam.len();
        seam.extend_from_slice(&piece[..piece.len().min(keep)]);
        let across = memchr::memmem::find_iter(&seam, FRAME).filter(|&at| at < kept).count();
        let within = memchr::memmem::find_iter(piece, FRAME).count();
        self.frames += (across + within) as u64;
        self.tail = match piece.len().checked_sub(keep) {
            Some(start) => piece[start..].to_vec(),
            // The whole piece is in the seam already.
            None => seam.split_off(seam.len().saturating_sub(keep)),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::Counter;

    /// Feeds `stream` to a counter in pieces of `piece` bytes, as reads.
    fn count_in_pieces(stream: &[u8], piece: usize) -> u64 {
        let mut counter = Counter::default();
        for chunk in stream.chunks(piece) {
            counter.feed(chunk);
        }
        counter.frames
    }

    #[test]
    fn frames_split_across_reads_are_counted_once() {
        let mut stream = b": connected\n\nevent: ready\ndata: {}\n\n".to_vec();
        for id in 0..37 {
            stream.extend_from_slice(format!("event: event\ndata: {{\"id\":{id}}}\n\n").as_bytes());
            if id % 10 == 0 {
                stream.extend_from_slice(b"event: skipped\ndata: {\"skipped\":3}\n\n");
            }
        }
        for piece in 1..=64 {
            assert_eq!(count_in_pieces(&stream, piece), 37, "pieces of {piece} bytes");
        }
    }
}
