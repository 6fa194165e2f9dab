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

use super::checkpoint::{self, Checkpoint};
use super::format::SpooledRecord;
use super::store::{Fate, Shared};
use super::wedge::{PROBE_EVERY, Watchdog};
use super::writer::Command;
use crate::sink::{KafkaSink, SinkError};

mod check;
mod disk;

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
/// A handover to direct produce that has not completed within this long is
/// called off (requests spool again) and tried later: Kafka is too slow for
/// replay to catch up while requests wait.
const HANDOVER_LIMIT: Duration = Duration::from_secs(2);
/// Rounds failing to read the disk in a row before replay says it cannot drain.
const BLOCKED_AFTER: u32 = 3;

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
    /// A segment found damaged while reading it: sealed by the writer at the
    /// length its file has now before replay reads on.
    damaged: Option<u64>,
    /// Since when new requests wait for replay to catch up (a handover).
    closing_since: Option<std::time::Instant>,
    /// When Kafka last acknowledged a round: a handover is only begun
    /// while it does (else requests would wait on a replay that cannot send).
    acked_at: Option<std::time::Instant>,
    /// Rounds in a row that could not read the disk.
    read_failures: u32,
    /// Records whose first send was never answered are read back only
    /// from this time (Unix ms), computed for those sent up to the first
    /// value (`check::settling`).
    settle: Option<(u64, u64)>,
    /// When the producer was last replaced as wedged, or this process
    /// began on records a previous one's replay may have sent (Unix ms).
    replaced_at_ms: u64,
    /// What is in Kafka, and what replay may have handed to it.
    checkpoint: Checkpoint,
}

impl Replayer {
    /// A replayer over `shared`, producing through `kafka`.
    pub fn new(shared: Arc<Shared>, kafka: KafkaSink, writer: Sender<Command>, batch: usize) -> Self {
        let checkpoint = Checkpoint::open(&shared.dir, checkpoint::read(&shared.dir), shared.recovered_below);
        let marks = checkpoint.marks();
        // A previous process's replay handed these to Kafka and died (or
        // could not move the checkpoint) before it knew their fate: each is
        // looked up in Kafka before it is sent again, as after a wedge.
        let unconfirmed = marks.sent > marks.replayed;
        if unconfirmed {
            tracing::warn!(
                from = marks.replayed,
                below = marks.sent,
                "Spool replay: records a previous process's replay may have sent are looked up in Kafka before they are sent again"
            );
        }
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
            check_below: unconfirmed.then_some(marks.sent),
            stored: None,
            damaged: None,
            closing_since: None,
            acked_at: None,
            read_failures: 0,
            settle: None,
            replaced_at_ms: if unconfirmed { super::store::now_ms() } else { 0 },
            checkpoint,
        }
    }

    /// Replays forever (until the process exits).
    pub async fn run(mut self) {
        loop {
            self.beat();
            match self.round().await {
                Ok(true) => {}
                Ok(false) => tokio::time::sleep(IDLE).await,
                Err(error) => {
                    self.shared.end_handover();
                    self.closing_since = None;
                    tracing::warn!(%error, "Spool replay round failed; retrying");
                    tokio::time::sleep(BACKOFF).await;
                }
            }
        }
    }

    /// Says replay is going round (see `Shared::can_drain`).
    fn beat(&self) {
        self.shared.replay_beat_ms.store(super::store::now_ms(), Ordering::SeqCst);
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
        let filled = self.fill();
        self.read_failures = if filled.is_ok() { 0 } else { self.read_failures.saturating_add(1) };
        self.shared.replay_blocked.store(self.read_failures >= BLOCKED_AFTER, Ordering::SeqCst);
        filled?;
        if let Some(first_seq) = self.damaged.take() {
            self.seal_damaged(first_seq).await;
            return Ok(true);
        }
        self.handover();
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
        if self.settling(&send)? {
            return Ok(false);
        }
        let send = self.skip_stored(send)?;
        if let Some(last) = send.last() {
            // Said before the records leave: a crash from here on leaves
            // them to be looked up in Kafka, not sent blindly again.
            self.checkpoint
                .sending(last.seq + 1)
                .map_err(|e| format!("cannot write the spool replay checkpoint: {e}"))?;
        }
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
            self.shared.end_handover();
            self.closing_since = None;
            tokio::time::sleep(BACKOFF).await;
            return Ok(true);
        }
        if !send.is_empty() {
            self.acked_at = Some(std::time::Instant::now());
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
                    self.beat();
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

    /// Starts a handover to direct produce when replay holds everything
    /// appended but one round (new requests then wait for it instead of
    /// appending behind it), and calls off one that takes too long.
    fn handover(&mut self) {
        if let Some(since) = self.closing_since {
            if since.elapsed() >= HANDOVER_LIMIT || !self.shared.is_spooling() {
                self.closing_since = None;
                self.shared.end_handover();
            }
            return;
        }
        let acking = self.acked_at.is_some_and(|at| at.elapsed() < HANDOVER_LIMIT);
        if acking && self.shared.is_spooling() && self.queue.len() <= self.batch && self.read_everything() {
            self.closing_since = Some(std::time::Instant::now());
            let until = super::store::now_ms() + HANDOVER_LIMIT.as_millis() as u64;
            self.shared.closing_until_ms.store(until, Ordering::SeqCst);
        }
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
        if let Err(error) = self.checkpoint.replayed(through) {
            tracing::warn!(%error, "Cannot write the spool replay checkpoint; a restart looks up more records in Kafka");
        }
        self.delete_finished(through);
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
            if let Err(error) = self.checkpoint.replayed(through) {
                tracing::warn!(%error, "Cannot write the spool replay checkpoint");
            }
        }
    }
}
