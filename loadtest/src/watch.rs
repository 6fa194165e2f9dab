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
    let mut counter = Counter::default();
    let mut buffer = vec![0_u8; 1 << 16];
    let mut status_checked = false;
    loop {
        let read = match timeout_at(deadline, socket.read(&mut buffer[counter.carried..])).await {
            Err(_) => break,
            Ok(read) => read?,
        };
        if read == 0 {
            break;
        }
        if !status_checked {
            let head = &buffer[..counter.carried + read];
            if !head.starts_with(b"HTTP/1.1 200") {
                let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
                bail!("the stream answered {}", String::from_utf8_lossy(line));
            }
            status_checked = true;
        }
        counter.feed(&mut buffer, read);
    }
    Ok(counter.frames)
}

/// Counts [`FRAME`]s in a byte stream read in arbitrary pieces: the last
/// `FRAME.len() - 1` bytes of each piece are carried to the start of the
/// buffer, so a frame split between two reads is counted once.
#[derive(Debug, Default)]
struct Counter {
    /// Frames seen.
    frames: u64,
    /// Bytes carried at the start of the buffer from the last read.
    carried: usize,
}

impl Counter {
    /// Counts the frames in the buffer's first `carried + read` bytes and
    /// carries the tail.
    fn feed(&mut self, buffer: &mut [u8], read: usize) {
        let filled = self.carried + read;
        self.frames += memchr::memmem::find_iter(&buffer[..filled], FRAME).count() as u64;
        let keep = (FRAME.len() - 1).min(filled);
        buffer.copy_within(filled - keep..filled, 0);
        self.carried = keep;
    }
}

#[cfg(test)]
mod tests {
    use super::{Counter, FRAME};

    /// Feeds `stream` to a counter in pieces of `piece` bytes, as reads.
    fn count_in_pieces(stream: &[u8], piece: usize) -> u64 {
        let mut counter = Counter::default();
        let mut buffer = vec![0_u8; piece + FRAME.len()];
        for chunk in stream.chunks(piece) {
            buffer[counter.carried..counter.carried + chunk.len()].copy_from_slice(chunk);
            counter.feed(&mut buffer, chunk.len());
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
