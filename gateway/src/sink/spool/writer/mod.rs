//! The one thread that appends to the spool. Group commit: it takes every
//! append waiting in its channel, writes them as one buffer and fsyncs
//! once, then answers them all; while it fsyncs, the next group gathers.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError};

use tokio::sync::oneshot;

use super::format;
use super::store::{Fate, Segment, Shared, now_ms, segment_path};
use super::{SpoolConfig, SpoolError};
use crate::storage::Appender;

mod repair;

use repair::PROBE_EVERY;

/// Most appends folded into one write and fsync.
const MAX_GROUP: usize = 4096;
/// A group commit slower than this is logged.
const SLOW_COMMIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Where an append's answer goes: its sequence numbers, or why nothing was appended.
pub type AppendReply = oneshot::Sender<Result<Range<u64>, SpoolError>>;

/// One request's records to append.
pub struct Append {
    /// From [`format::encode_body`].
    pub bodies: Vec<Vec<u8>>,
    /// True when the records' first send is still in flight (their fate is pending).
    pub in_flight: bool,
    /// Answered once the group is fsynced.
    pub reply: AppendReply,
}

/// A group framed into one buffer, ready to write.
struct Group {
    buf: Vec<u8>,
    /// Each accepted append's sequence numbers and reply.
    answers: Vec<(Range<u64>, AppendReply)>,
    /// Sequence numbers whose first send is in flight.
    pending: Vec<u64>,
    /// The sequence number after the group.
    next: u64,
}

/// What the writer thread is asked.
pub enum Command {
    /// Append records; answer once fsynced.
    Append(Append),
    /// Replay has everything below `through` in Kafka: if nothing newer was
    /// appended, delete the segments and let requests go to Kafka directly.
    Drain {
        /// Replay's position.
        through: u64,
        /// Whether the spool is now empty and direct.
        reply: oneshot::Sender<bool>,
    },
    /// Replay found the segment starting at `first_seq` damaged: no more
    /// appends to it; its length becomes what the file holds now, so replay
    /// reads what is there and then moves on.
    Damaged {
        /// The segment.
        first_seq: u64,
        /// Answered once the segment is sealed.
        reply: oneshot::Sender<()>,
    },
}

/// The writer thread's own state.
pub struct Writer {
    shared: Arc<Shared>,
    config: SpoolConfig,
    /// The segment being appended to.
    active: Option<Appender>,
    /// A segment holding bytes of a failed write past its committed length
    /// (the cut back failed): no append is taken until it is cut back, so
    /// a record answered 503 is never replayed after a restart.
    torn: Option<(std::path::PathBuf, u64)>,
}

impl Writer {
    /// A writer for `shared`; it opens a new segment at its first append
    /// (never appending to a segment a previous process may have torn).
    pub fn new(shared: Arc<Shared>, config: SpoolConfig) -> Self {
        Self { shared, config, active: None, torn: None }
    }

    /// Serves commands until every sender is gone.
    pub fn run(mut self, commands: Receiver<Command>) {
        loop {
            let first = if self.shared.write_failing.load(Ordering::SeqCst) {
                match commands.recv_timeout(PROBE_EVERY) {
                    Ok(command) => command,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        self.probe();
                        continue;
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                }
            } else {
                match commands.recv() {
                    Ok(command) => command,
                    Err(_) => return,
                }
            };
            let mut group = vec![first];
            while group.len() < MAX_GROUP {
                match commands.try_recv() {
                    Ok(command) => group.push(command),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            let mut appends = Vec::new();
            for command in group {
                match command {
                    Command::Append(append) => appends.push(append),
                    Command::Drain { through, reply } => {
                        self.commit(std::mem::take(&mut appends));
                        let _ = reply.send(self.drain(through));
                    }
                    Command::Damaged { first_seq, reply } => {
                        self.commit(std::mem::take(&mut appends));
                        self.seal_damaged(first_seq);
                        let _ = reply.send(());
                    }
                }
            }
            self.commit(appends);
        }
    }

    /// Appends a group with one write and one fsync, then answers each.
    fn commit(&mut self, appends: Vec<Append>) {
        if appends.is_empty() {
            return;
        }
        if let Err(error) = self.cut_back_torn() {
            for append in appends {
                let _ = append.reply.send(Err(error.clone()));
            }
            return;
        }
        let now = now_ms();
        let group = self.frame(appends, now);
        let Some(first) = group.answers.first().map(|(range, _)| range.start) else { return };
        let started = std::time::Instant::now();
        let written = self.write(&group.buf, first);
        self.shared.write_failing.store(written.is_err(), Ordering::SeqCst);
        self.timed(started.elapsed(), group.answers.len());
        if written.is_ok() && !group.pending.is_empty() {
            let mut fates = self.shared.fates();
            fates.extend(group.pending.iter().map(|seq| (*seq, Fate::Pending)));
        }
        self.publish(group.next, now, &group.buf, written.is_ok());
        for (range, reply) in group.answers {
            let _ = reply.send(written.clone().map(|()| range));
        }
    }

    /// Keeps the slowest write + fsync for status, and says when one is slow
    /// enough to push requests toward their deadline.
    fn timed(&self, took: std::time::Duration, requests: usize) {
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        self.shared.slowest_commit_ms.fetch_max(ms, Ordering::SeqCst);
        if took >= SLOW_COMMIT {
            tracing::warn!(ms, requests, "Spool write and fsync slow; the requests waiting on it near their deadline");
        }
    }

    /// Numbers and frames every append the bounds allow; refuses the others.
    fn frame(&self, appends: Vec<Append>, now: u64) -> Group {
        let (next, base_bytes, oldest) = {
            let index = self.shared.index();
            (index.next_seq, index.bytes(), index.oldest_ms())
        };
        let too_old = oldest.is_some_and(|at| now.saturating_sub(at) > self.config.max_age_secs * 1000);
        let mut group =
            Group { buf: Vec::new(), answers: Vec::with_capacity(appends.len()), pending: Vec::new(), next };
        for Append { bodies, in_flight, reply } in appends {
            let size: u64 = bodies.iter().map(|b| b.len() as u64 + 28).sum();
            if too_old {
                let _ = reply.send(Err(SpoolError::TooOld(self.config.max_age_secs)));
                continue;
            }
            if base_bytes + group.buf.len() as u64 + size > self.config.max_bytes {
                let _ = reply.send(Err(SpoolError::Full(self.config.max_bytes)));
                continue;
            }
            let first = group.next;
            for body in &bodies {
                format::frame_flagged(group.next, now, in_flight, body, &mut group.buf);
                group.next += 1;
            }
            if in_flight {
                group.pending.extend(first..group.next);
            }
            group.answers.push((first..group.next, reply));
        }
        group
    }

    /// Makes the group visible to replay and metrics. A failed write was
    /// cut back (or blocks appends until it is): its sequence numbers are
    /// not used, and the segment stays the one appended to.
    fn publish(&mut self, next: u64, now: u64, buf: &[u8], written: bool) {
        let mut index = self.shared.index();
        if written {
            index.next_seq = next;
            if let Some(active) = index.segments.back_mut().filter(|s| !s.sealed) {
                active.len += buf.len() as u64;
            }
            index.groups.push_back((next - 1, now));
            drop(index);
            let started = !self.shared.spooling.swap(true, Ordering::SeqCst);
            if started {
                tracing::warn!(dir = %self.shared.dir.display(), "Spooling started: new records go to the local spool until replay catches up");
            }
        }
    }

    /// Writes and fsyncs `buf` to the active segment, starting one when needed.
    fn write(&mut self, buf: &[u8], first_seq: u64) -> Result<(), SpoolError> {
        let roll = {
            let index = self.shared.index();
            index.segments.back().is_none_or(|s| s.sealed || s.len >= self.config.segment_bytes)
        };
        if roll || self.active.is_none() {
            self.start_segment(first_seq)?;
        }
        let no_segment = || SpoolError::io(&self.shared.dir, std::io::Error::other("no segment"));
        let active = self.active.as_mut().ok_or_else(no_segment)?;
        // All or nothing: what part of the group reached the disk is cut
        // off again, so none of these records (answered 503) is replayed.
        let Err(failed) = active.append(buf) else { return Ok(()) };
        let path = active.path().to_owned();
        tracing::error!(error = %failed.error, cut_back = failed.cut_back, "Spool write failed; those requests get 503 and none of their records is kept");
        if !failed.cut_back {
            self.torn = Some((path.clone(), active.committed()));
            self.active = None;
        }
        Err(SpoolError::io(&path, failed.error))
    }

    /// Seals the active segment and creates the next (fsyncing the
    /// directory so the new file's name survives a crash).
    fn start_segment(&mut self, first_seq: u64) -> Result<(), SpoolError> {
        let path = segment_path(&self.shared.dir, first_seq);
        let fsync = !self.config.unsafe_skip_fsync;
        // On failure no empty segment is left behind per attempt.
        let appender = Appender::create(&format::SPOOL, &path, fsync).map_err(|e| SpoolError::io(&path, e))?;
        let mut index = self.shared.index();
        if let Some(last) = index.segments.back_mut() {
            last.sealed = true;
        }
        let len = appender.committed();
        index.segments.push_back(Segment { path, first_seq, len, sealed: false, damaged: false });
        self.active = Some(appender);
        Ok(())
    }

    /// Deletes every segment when replay holds everything appended.
    fn drain(&mut self, through: u64) -> bool {
        let mut index = self.shared.index();
        if index.next_seq != through || !self.shared.is_spooling() {
            return !self.shared.is_spooling();
        }
        self.active = None;
        for segment in index.segments.drain(..) {
            self.shared.retire(&segment);
        }
        index.groups.clear();
        index.replayed_through = through;
        self.shared.spooling.store(false, Ordering::SeqCst);
        self.shared.end_handover();
        tracing::info!(through, "Spooling ended: every spooled record is in Kafka; producing directly again");
        true
    }
}
