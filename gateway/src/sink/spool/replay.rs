//! The background replay: reads spooled records in sequence order and
//! produces them with their original topic, key, headers and payload
//! through the gateway's own idempotent producer, one round at a time. A
//! record whose first send is still in flight is waited for, and skipped if
//! that send was acknowledged; a sealed segment is deleted once every one
//! of its records is in Kafka. When replay holds everything the writer
//! appended, the writer deletes the rest and requests go direct again.
//! A producer that stays wedged while the cluster answers is replaced, and
//! what it held is checked against Kafka before it is sent again (`wedge.rs`).

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::time::Duration;

use tokio::sync::oneshot;

use super::format::{self, SpooledRecord};
use super::reader;
use super::store::{Fate, Shared, write_checkpoint};
use super::wedge::{self, PROBE_EVERY, Watchdog};
use super::writer::Command;
use crate::sink::{KafkaSink, SinkError};

/// Pause when there is nothing to replay, or the next record's first send
/// is still in flight.
const IDLE: Duration = Duration::from_millis(50);
/// Pause after a round Kafka did not fully acknowledge.
const BACKOFF: Duration = Duration::from_secs(1);
/// A round still waiting for Kafka's acknowledgement is logged this often.
const STALL_LOG: Duration = Duration::from_secs(60);
/// After a wedged producer is replaced, wait this long before reading back
/// what Kafka holds, so a produce request the broker had already received
/// from the old producer is stored (and found) before the check.
const SETTLE_AFTER_REPLACE: Duration = Duration::from_secs(3);
/// How far before a record was spooled its first send may have been
/// timestamped: the request waited at most its deadline before the append
/// (`server.request_timeout_ms`, far below this), plus clock steps.
const READ_BACK_MARGIN_MS: u64 = 120_000;

/// The replay loop's state.
pub struct Replayer {
    shared: Arc<Shared>,
    kafka: KafkaSink,
    writer: Sender<Command>,
    batch: usize,
    /// Records read from disk and not yet in Kafka, in sequence order.
    queue: VecDeque<SpooledRecord>,
    /// Segment being read (its first seq) and the offset read up to.
    cursor: Option<(u64, u64)>,
    /// Sealed segments read to the end: (first seq, path, highest seq read
    /// by then, so every record of the segment is at or below it).
    finished: Vec<(u64, PathBuf, Option<u64>)>,
    /// The highest sequence number read from disk so far.
    max_read: Option<u64>,
    /// Notices a wedged producer.
    watchdog: Watchdog,
    /// Records below this sequence number may have been handed to a
    /// producer that was replaced as wedged: each is looked up in Kafka
    /// before it is sent again.
    check_below: Option<u64>,
    /// What the read-back found since the last replacement: the time it
    /// read from, the topics read and the `event-id`s there. Read once per
    /// topic: after the old producer was purged and the settle wait, nothing
    /// more of its records can arrive, so later rounds reuse it.
    stored: Option<(i64, BTreeSet<String>, HashSet<String>)>,
}

impl Replayer {
    /// A replayer over `shared`, producing through `kafka`.
    pub fn new(shared: Arc<Shared>, kafka: KafkaSink, writer: Sender<Command>, batch: usize) -> Self {
        Self {
            shared,
            kafka,
            writer,
            batch,
            queue: VecDeque::new(),
            cursor: None,
            finished: Vec::new(),
            max_read: None,
            watchdog: Watchdog::default(),
            check_below: None,
            stored: None,
        }
    }

    /// Replays forever (until the process exits).
    pub async fn run(mut self) {
        loop {
            match self.round().await {
                Ok(true) => {}
                Ok(false) => tokio::time::sleep(IDLE).await,
                Err(error) => {
                    tracing::warn!(%error, "Spool replay round failed; retrying");
                    tokio::time::sleep(BACKOFF).await;
                }
            }
        }
    }

    /// Replays until the spool is empty (for `gateway spool replay`);
    /// returns the records produced.
    pub async fn drain(mut self) -> Result<u64, String> {
        loop {
            match self.round().await {
                Ok(true) => {}
                Ok(false) if !self.shared.is_spooling() => {
                    return Ok(self.shared.replayed_total.load(Ordering::SeqCst));
                }
                Ok(false) => tokio::time::sleep(IDLE).await,
                Err(error) => return Err(error),
            }
        }
    }

    /// One round: read, choose what to send, send, account. `Ok(false)`
    /// when nothing could be done now.
    async fn round(&mut self) -> Result<bool, String> {
        self.fill()?;
        if self.queue.is_empty() {
            self.watchdog.progressed();
            if self.shared.is_spooling() && self.read_everything() {
                self.try_drain().await;
            }
            return Ok(false);
        }
        let (processed, send) = self.choose();
        if processed == 0 {
            // Waiting for a first send's fate: stalled if that never comes.
            self.check_wedged().await;
            return Ok(false);
        }
        let send = self.skip_stored(send)?;
        let results = if send.is_empty() { Vec::new() } else { self.acknowledged(&send).await };
        let mut failed = 0;
        {
            let mut fates = self.shared.fates();
            for (record, result) in send.iter().zip(results) {
                match result {
                    Ok(_) => {
                        fates.insert(record.seq, Fate::Delivered);
                        self.shared.replayed_total.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(SinkError::TooLarge) => {
                        tracing::error!(seq = record.seq, topic = %record.topic, "Kafka refuses a spooled record as too large; it cannot be replayed");
                        fates.insert(record.seq, Fate::Delivered);
                    }
                    Err(error) => {
                        failed += 1;
                        tracing::debug!(%error, seq = record.seq, "Spooled record not acknowledged; retrying");
                    }
                }
            }
        }
        if failed > 0 {
            tokio::time::sleep(BACKOFF).await;
            return Ok(true);
        }
        self.advance(processed);
        Ok(true)
    }

    /// The first records of the queue to handle now: stops at a record whose
    /// first send is still in flight. Returns how many are handled and which
    /// of them need sending (the others' first send was acknowledged).
    fn choose(&self) -> (usize, Vec<SpooledRecord>) {
        let fates = self.shared.fates();
        let mut send = Vec::new();
        let mut processed = 0;
        for record in &self.queue {
            if send.len() >= self.batch {
                break;
            }
            match fates.get(&record.seq) {
                Some(Fate::Pending) => break,
                Some(Fate::Delivered) => {}
                Some(Fate::Failed) | None => send.push(record.clone()),
            }
            processed += 1;
        }
        (processed, send)
    }

    /// Produces a round and waits for every acknowledgement, saying so every
    /// [`STALL_LOG`] while Kafka keeps it waiting (the records stay on disk),
    /// and replacing the producer if it is wedged meanwhile (its records
    /// then fail at once and the round is tried again).
    async fn acknowledged(&mut self, send: &[SpooledRecord]) -> Vec<Result<crate::sink::Delivered, SinkError>> {
        let mut sent = self.kafka.send_spooled(send);
        let started = std::time::Instant::now();
        let mut logged = started;
        loop {
            match tokio::time::timeout(PROBE_EVERY, &mut sent).await {
                Ok(results) => return results,
                Err(_) => {
                    if logged.elapsed() >= STALL_LOG {
                        logged = std::time::Instant::now();
                        tracing::warn!(
                            first_seq = send.first().map_or(0, |r| r.seq),
                            records = send.len(),
                            waited_secs = started.elapsed().as_secs(),
                            "Spool replay still waiting for Kafka to acknowledge a round; the records stay on disk"
                        );
                    }
                    self.check_wedged().await;
                }
            }
        }
    }

    /// Replaces the producer when the watchdog finds it wedged; everything
    /// appended so far may have been handed to it, so those records are
    /// looked up in Kafka before they are sent again.
    async fn check_wedged(&mut self) {
        if !self.watchdog.wedged(self.kafka.client_config()) {
            return;
        }
        let below = self.shared.index().next_seq;
        match self.kafka.replace_wedged() {
            Ok(()) => {
                tracing::warn!(
                    below,
                    "Spool replay: records before this sequence number are checked against Kafka before they are sent again"
                );
                self.check_below = Some(self.check_below.map_or(below, |b| b.max(below)));
                self.stored = None;
                self.watchdog.progressed();
                tokio::time::sleep(SETTLE_AFTER_REPLACE).await;
            }
            Err(error) => tracing::warn!(%error, "Cannot replace the wedged Kafka producer; retrying"),
        }
    }

    /// After a producer was replaced as wedged: drops from `send` (marking
    /// them delivered) the records Kafka already holds, found by their
    /// `event-id` header; an error leaves the round to be tried again, so
    /// nothing unchecked is sent.
    fn skip_stored(&mut self, send: Vec<SpooledRecord>) -> Result<Vec<SpooledRecord>, String> {
        let Some(below) = self.check_below else { return Ok(send) };
        if self.queue.front().is_none_or(|r| r.seq >= below) {
            self.check_below = None;
            self.stored = None;
            return Ok(send);
        }
        let at_risk: Vec<&SpooledRecord> = send.iter().filter(|r| r.seq < below).collect();
        let Some(oldest) = at_risk.iter().map(|r| r.appended_at_ms).min() else { return Ok(send) };
        let since = i64::try_from(oldest.saturating_sub(READ_BACK_MARGIN_MS)).unwrap_or(0);
        let mut topics: BTreeSet<String> = at_risk.iter().map(|r| r.topic.clone()).collect();
        match &mut self.stored {
            Some((from, read, ids)) if *from <= since => {
                topics.retain(|t| !read.contains(t));
                if !topics.is_empty() {
                    ids.extend(wedge::stored_event_ids(self.kafka.client_config(), &topics, *from)?);
                    read.extend(topics);
                }
            }
            _ => {
                let ids = wedge::stored_event_ids(self.kafka.client_config(), &topics, since)?;
                self.stored = Some((since, topics, ids));
            }
        }
        let stored = self.stored.as_ref().map(|(_, _, ids)| ids);
        let (skip, keep): (Vec<_>, Vec<_>) = send
            .into_iter()
            .partition(|r| r.seq < below && event_id(r).is_some_and(|id| stored.is_some_and(|ids| ids.contains(id))));
        if !skip.is_empty() {
            let mut fates = self.shared.fates();
            for record in &skip {
                fates.insert(record.seq, Fate::Delivered);
            }
            tracing::warn!(
                records = skip.len(),
                "Spool replay: records the replaced producer had stored are not sent again"
            );
        }
        Ok(keep)
    }

    /// Every one of the first `processed` records is in Kafka: drop them,
    /// move the checkpoint and delete segments that hold nothing else.
    fn advance(&mut self, processed: usize) {
        self.watchdog.progressed();
        let mut through = None;
        {
            let mut fates = self.shared.fates();
            for record in self.queue.drain(..processed) {
                fates.remove(&record.seq);
                through = Some(record.seq + 1);
            }
        }
        let Some(through) = through else { return };
        self.shared.index().replayed_through = through;
        if let Err(error) = write_checkpoint(&self.shared.dir, through) {
            tracing::warn!(%error, "Cannot write the spool replay checkpoint; a restart would replay more again");
        }
        self.delete_finished(through);
    }

    /// Deletes sealed, fully read segments whose every record is below `through`.
    fn delete_finished(&mut self, through: u64) {
        let (done, keep): (Vec<_>, Vec<_>) =
            self.finished.drain(..).partition(|(_, _, last)| last.is_none_or(|last| last < through));
        self.finished = keep;
        for (first_seq, path, _) in done {
            if let Err(error) = std::fs::remove_file(&path) {
                tracing::warn!(%error, segment = %path.display(), "Cannot delete a replayed spool segment");
            }
            self.shared.index().segments.retain(|s| s.first_seq != first_seq);
            tracing::info!(segment = %path.display(), "Spool segment replayed and deleted");
        }
    }

    /// True when every segment has been read to its committed end.
    fn read_everything(&self) -> bool {
        let index = self.shared.index();
        match (self.cursor, index.segments.back()) {
            (_, None) => true,
            (Some((seq, offset)), Some(last)) => seq == last.first_seq && offset >= last.len,
            (None, Some(_)) => false,
        }
    }

    /// Asks the writer to end spooling if nothing was appended meanwhile.
    async fn try_drain(&mut self) {
        let through = self.shared.index().replayed_through;
        let (reply, answer) = oneshot::channel();
        if self.writer.send(Command::Drain { through, reply }).is_err() {
            return;
        }
        if answer.await.unwrap_or(false) {
            self.cursor = None;
            self.finished.clear();
            if let Err(error) = write_checkpoint(&self.shared.dir, through) {
                tracing::warn!(%error, "Cannot write the spool replay checkpoint");
            }
        }
    }

    /// Reads more records from disk until the queue holds two rounds' worth
    /// or everything committed so far is read.
    fn fill(&mut self) -> Result<(), String> {
        while self.queue.len() < self.batch * 2 {
            let (segment, next) = {
                let index = self.shared.index();
                let at = match self.cursor {
                    Some((seq, _)) => index.segments.iter().position(|s| s.first_seq == seq),
                    None => (!index.segments.is_empty()).then_some(0),
                };
                let Some(at) = at else {
                    self.cursor = None;
                    return Ok(());
                };
                (index.segments[at].clone(), index.segments.get(at + 1).map(|s| s.first_seq))
            };
            let offset = match self.cursor {
                Some((seq, offset)) if seq == segment.first_seq => offset,
                _ => format::SEGMENT_HEADER.len() as u64,
            };
            if offset < segment.len {
                // A bounded step: at most one round's records, one chunk of the file.
                let mut reader = reader::SegmentReader::open(&segment.path, offset, segment.len)
                    .map_err(|e| format!("{}: {e}", segment.path.display()))?;
                let records = reader.next(self.batch).map_err(|e| format!("{}: {e}", segment.path.display()))?;
                let floor = self.shared.index().replayed_through;
                if let Some(last) = records.last() {
                    self.max_read = self.max_read.max(Some(last.seq));
                }
                self.queue.extend(records.into_iter().filter(|r| r.seq >= floor));
                self.cursor = Some((segment.first_seq, reader.offset()));
                if reader.offset() < segment.len {
                    continue;
                }
            } else {
                self.cursor = Some((segment.first_seq, offset));
            }
            if segment.sealed && !self.finished.iter().any(|(s, _, _)| *s == segment.first_seq) {
                self.finished.push((segment.first_seq, segment.path.clone(), self.max_read));
            }
            match next {
                Some(next) if segment.sealed => self.cursor = Some((next, format::SEGMENT_HEADER.len() as u64)),
                _ => return Ok(()),
            }
        }
        Ok(())
    }
}

/// A record's `messageId` as its `event-id` header says.
fn event_id(record: &SpooledRecord) -> Option<&str> {
    record.headers.iter().find(|(k, _)| k == "event-id").map(|(_, v)| v.as_str())
}
