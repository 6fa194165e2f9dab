//! The spool's shared state: its segment files, the next sequence number,
//! what is on disk and how old it is, the fate of records whose first send
//! to Kafka is still in flight, and opening a directory left by a previous
//! process (recovery reads every segment and reports damage).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::SpoolError;
use super::format::Damage;
use super::reader;

/// The lock file: one process per spool directory.
pub const LOCK_FILE: &str = "spool.lock";
/// Everything with a lower sequence number is in Kafka (written after each replay round).
/// Where damaged segments go once what could be read of them is in Kafka.
pub const QUARANTINE_DIR: &str = "quarantine";

/// One segment file.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Its file.
    pub path: PathBuf,
    /// The sequence number of its first record (its file name).
    pub first_seq: u64,
    /// Bytes fsynced (the writer's committed length); the reader stops there.
    pub len: u64,
    /// No more appends: the writer moved on, or a previous process wrote it.
    pub sealed: bool,
    /// Damage was found and reported: once replayed, the file is moved to
    /// [`QUARANTINE_DIR`] for an operator instead of being deleted.
    pub damaged: bool,
}

/// What became of a record's first send to Kafka, which was still in
/// flight when the record was spooled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Not known yet: replay waits, so the record is not sent twice.
    Pending,
    /// Kafka acknowledged the first send: replay skips the record.
    Delivered,
    /// The first send failed: replay sends the record.
    Failed,
}

/// Mutable state behind one lock.
#[derive(Debug, Default)]
pub struct Index {
    /// Oldest first.
    pub segments: VecDeque<Segment>,
    /// The sequence number the next record gets.
    pub next_seq: u64,
    /// Every record below this is in Kafka (or was lost to damage and reported).
    pub replayed_through: u64,
    /// (last seq, appended at ms) per group commit, for the oldest record's age.
    pub groups: VecDeque<(u64, u64)>,
}

impl Index {
    /// Bytes of every segment file.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.len).sum()
    }

    /// Milliseconds since the epoch of the oldest record not yet in Kafka.
    pub fn oldest_ms(&self) -> Option<u64> {
        self.groups.iter().find(|(last, _)| *last >= self.replayed_through).map(|(_, at)| *at)
    }
}

/// Shared by the writer thread, the replayer and the request path.
#[derive(Debug)]
pub struct Shared {
    /// The spool directory.
    pub dir: PathBuf,
    /// Segments, sequence numbers, ages.
    index: Mutex<Index>,
    /// While true every new record goes to the spool, behind what it holds
    /// (per-key order); false once replay caught up with the writer.
    pub spooling: AtomicBool,
    /// First sends still in flight for spooled records, by sequence number.
    fates: Mutex<HashMap<u64, Fate>>,
    /// Records appended since start.
    pub appended_total: AtomicU64,
    /// Records acknowledged by Kafka through replay since start.
    pub replayed_total: AtomicU64,
    /// Damaged spans found (torn tails and checksum failures).
    pub damaged_total: AtomicU64,
    /// The slowest group commit (write + fsync) since start, in milliseconds.
    pub slowest_commit_ms: AtomicU64,
    /// Segment files in [`QUARANTINE_DIR`] (found at start, plus those moved since).
    pub quarantined: AtomicU64,
    /// True while the last append failed (disk full, I/O error) and no
    /// append or probe has succeeded since: the spool refuses records.
    pub write_failing: AtomicBool,
    /// When replay last went round its loop (ms since the epoch): a replay
    /// stuck in a loop of its own stops moving it (see [`Shared::can_drain`]).
    pub replay_beat_ms: AtomicU64,
    /// True while replay cannot read the spool (repeated disk errors).
    pub replay_blocked: AtomicBool,
    /// Until when (ms since the epoch) the spool hands over to direct
    /// produce: replay is about to catch up, so new requests wait for it
    /// (briefly) instead of appending. A deadline, not a flag, so a replay
    /// that stalls meanwhile cannot hold requests back.
    pub closing_until_ms: AtomicU64,
    /// Wakes the requests waiting out a handover.
    pub handover: tokio::sync::Notify,
    /// The sequence number after the last record a previous process left:
    /// those records' first send may have been in flight when it died.
    pub recovered_below: u64,
    /// Kept open for its lock; released when the process exits.
    _lock: File,
}

impl Shared {
    /// Opens (creating) `dir`, takes its lock, and reads what a previous
    /// process left: every segment is sealed and will be replayed first.
    pub fn open(dir: &Path) -> Result<Self, SpoolError> {
        std::fs::create_dir_all(dir).map_err(|e| SpoolError::io(dir, e))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = File::options().create(true).truncate(false).write(true).open(&lock_path);
        let lock = lock.map_err(|e| SpoolError::io(&lock_path, e))?;
        lock.try_lock().map_err(|_| SpoolError::Locked(dir.display().to_string()))?;
        let recovered = recover(dir)?;
        let spooling = !recovered.index.segments.is_empty();
        let recovered_below = recovered.index.next_seq;
        let quarantined = std::fs::read_dir(dir.join(QUARANTINE_DIR)).map_or(0, |d| d.count() as u64);
        Ok(Self {
            dir: dir.to_owned(),
            index: Mutex::new(recovered.index),
            spooling: AtomicBool::new(spooling),
            fates: Mutex::new(HashMap::new()),
            appended_total: AtomicU64::new(0),
            replayed_total: AtomicU64::new(0),
            damaged_total: AtomicU64::new(recovered.damage.len() as u64),
            slowest_commit_ms: AtomicU64::new(0),
            quarantined: AtomicU64::new(quarantined),
            write_failing: AtomicBool::new(false),
            replay_beat_ms: AtomicU64::new(now_ms()),
            replay_blocked: AtomicBool::new(false),
            closing_until_ms: AtomicU64::new(0),
            handover: tokio::sync::Notify::new(),
            recovered_below,
            _lock: lock,
        })
    }

    /// The index, even if a thread panicked holding it (its data stays consistent).
    pub fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The fate table.
    pub fn fates(&self) -> MutexGuard<'_, HashMap<u64, Fate>> {
        self.fates.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// True while new records must go behind spooled ones.
    pub fn is_spooling(&self) -> bool {
        self.spooling.load(Ordering::SeqCst)
    }

    /// False when replay cannot empty the spool for a reason of its own
    /// (not Kafka's): it has not gone round its loop for [`REPLAY_STUCK_MS`]
    /// or cannot read the disk. Kafka being away is not such a reason.
    pub fn can_drain(&self) -> bool {
        let beat = self.replay_beat_ms.load(Ordering::SeqCst);
        !self.replay_blocked.load(Ordering::SeqCst) && now_ms().saturating_sub(beat) < REPLAY_STUCK_MS
    }

    /// True while a handover to direct produce is under way.
    pub fn is_closing(&self) -> bool {
        now_ms() < self.closing_until_ms.load(Ordering::SeqCst)
    }

    /// Ends a handover (either way) and wakes the requests waiting on it.
    pub fn end_handover(&self) {
        self.closing_until_ms.store(0, Ordering::SeqCst);
        self.handover.notify_waiters();
    }

    /// Retires a segment whose records are all in Kafka: deleted, or moved
    /// to [`QUARANTINE_DIR`] when it was damaged (so an operator can look).
    pub fn retire(&self, segment: &Segment) {
        if !segment.damaged {
            if let Err(error) = std::fs::remove_file(&segment.path) {
                tracing::warn!(%error, segment = %segment.path.display(), "Cannot delete a replayed spool segment");
            }
            return;
        }
        let quarantine = self.dir.join(QUARANTINE_DIR);
        let name = segment.path.file_name().unwrap_or_default();
        let moved =
            std::fs::create_dir_all(&quarantine).and_then(|()| std::fs::rename(&segment.path, quarantine.join(name)));
        match moved {
            Ok(()) => {
                self.quarantined.fetch_add(1, Ordering::SeqCst);
                tracing::error!(
                    segment = %segment.path.display(),
                    quarantine = %quarantine.display(),
                    "Damaged spool segment quarantined: what could be read of it is in Kafka; the file is kept for an operator"
                );
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                self.quarantined.fetch_add(1, Ordering::SeqCst);
                tracing::error!(segment = %segment.path.display(), "Damaged spool segment is gone from the disk; nothing left to quarantine");
            }
            Err(error) => {
                tracing::error!(%error, segment = %segment.path.display(), "Cannot quarantine a damaged spool segment");
            }
        }
    }
}

/// Replay not going round its loop for this long means it is stuck: its
/// longest legitimate step (a read-back of up to 60 s, a producer
/// replacement with its settle wait) fits well inside.
pub const REPLAY_STUCK_MS: u64 = 120_000;

/// What recovery found in a spool directory.
pub struct Recovered {
    /// Segments (all sealed), next sequence number, checkpoint, ages.
    pub index: Index,
    /// Damage per segment file.
    pub damage: Vec<(PathBuf, Damage)>,
    /// Valid records per segment file.
    pub records: Vec<(PathBuf, usize)>,
}

/// Reads every segment of `dir` (oldest first) and the replay checkpoint,
/// logging each damaged span. Nothing is modified.
pub fn recover(dir: &Path) -> Result<Recovered, SpoolError> {
    let checkpoint = super::checkpoint::read(dir).replayed;
    let mut out = Recovered {
        index: Index { next_seq: checkpoint, replayed_through: checkpoint, ..Index::default() },
        damage: Vec::new(),
        records: Vec::new(),
    };
    for (first_seq, path) in segment_files(dir)? {
        let (mut first_live, mut last, mut live) = (None, None, 0);
        let (len, damage) = reader::read_segment(&path, |record| {
            if record.seq >= checkpoint {
                live += 1;
                first_live.get_or_insert(record.appended_at_ms);
            }
            last = Some(record.seq);
        })
        .map_err(|e| SpoolError::io(&path, e))?;
        for damage in &damage {
            report_damage(&path, damage);
            out.damage.push((path.clone(), *damage));
        }
        if let (Some(at), Some(last)) = (first_live, last) {
            out.index.groups.push_back((last, at));
        }
        if let Some(last) = last {
            out.index.next_seq = out.index.next_seq.max(last + 1);
        }
        out.records.push((path.clone(), live));
        let damaged = !damage.is_empty();
        out.index.segments.push_back(Segment { path, first_seq, len, sealed: true, damaged });
    }
    Ok(out)
}

/// Logs a damaged span: the records in it are not replayed.
pub fn report_damage(path: &Path, damage: &Damage) {
    let what = if damage.torn_tail { "torn tail" } else { "checksum failure" };
    tracing::error!(
        segment = %path.display(),
        offset = damage.offset,
        bytes = damage.len,
        "Spool segment damaged ({what}); the damaged bytes are skipped and the rest is replayed"
    );
}

/// `(first seq, path)` of every segment file, oldest first.
pub fn segment_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>, SpoolError> {
    crate::storage::list(dir, |name| name.strip_suffix(".seg")?.parse().ok()).map_err(|e| SpoolError::io(dir, e))
}

/// The file name of the segment whose first record is `seq`.
pub fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}.seg"))
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(name: &str) -> (Shared, PathBuf) {
        let dir = std::env::temp_dir().join(format!("eventgw-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        (Shared::open(&dir).expect("open"), dir)
    }

    #[test]
    fn a_replay_that_stopped_going_round_cannot_drain() {
        let (shared, dir) = open("stuck");
        assert!(shared.can_drain(), "a replay that just beat can drain");
        shared.replay_beat_ms.store(now_ms() - REPLAY_STUCK_MS - 1, Ordering::SeqCst);
        assert!(!shared.can_drain(), "no beat for REPLAY_STUCK_MS: stuck");
        shared.replay_beat_ms.store(now_ms(), Ordering::SeqCst);
        shared.replay_blocked.store(true, Ordering::SeqCst);
        assert!(!shared.can_drain(), "a replay that cannot read the disk cannot drain");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_damaged_segment_is_moved_to_quarantine_and_a_clean_one_deleted() {
        let (shared, dir) = open("retire");
        let make = |seq: u64, damaged: bool| {
            let path = segment_path(&dir, seq);
            std::fs::write(&path, b"EVGWSPL1").expect("write");
            Segment { path, first_seq: seq, len: 8, sealed: true, damaged }
        };
        let (clean, damaged) = (make(0, false), make(5, true));
        shared.retire(&clean);
        shared.retire(&damaged);
        assert!(!clean.path.exists() && !damaged.path.exists());
        assert!(dir.join(QUARANTINE_DIR).join(damaged.path.file_name().expect("name")).exists());
        assert_eq!(shared.quarantined.load(Ordering::SeqCst), 1);
        drop(shared);
        let (reopened, _) = (Shared::open(&dir).expect("reopen"), ());
        assert_eq!(reopened.quarantined.load(Ordering::SeqCst), 1, "counted again at start");
        let _ = std::fs::remove_dir_all(dir);
    }
}
