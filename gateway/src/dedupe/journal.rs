//! The embedded store's id log (`[dedupe] path`): what the memory store
//! decided, appended to local files, so a gateway restarted after a crash
//! (`kill -9`, OOM, panic) still knows the ids it stored within the window
//! and the ids whose produce was in flight when it died.
//!
//! Three kinds of record, each one `write(2)` of a whole request's ids:
//! *reserved* (before the produce, with the topic, so an id whose fate the
//! crash left unknown can be looked up in Kafka), *confirmed* (acknowledged
//! or spooled, before the `200` is answered) and *released* (the produce
//! failed). No fsync: a process crash keeps what reached the page cache; a
//! machine crash may forget the last seconds (their retries may then be
//! stored twice, never dropped).
//!
//! The files are [`crate::storage`] segments of the format [`ID_LOG`] (no
//! header; frame: magic byte `0xE7`, payload length (u32 LE), CRC-32 of the
//! payload (u32 LE), payload, as before the storage module existed, so a
//! log left by a previous version still reads). A torn or corrupt frame is
//! skipped by reading on from the next frame whose checksum holds; what was
//! skipped is counted and logged. This module holds the payload: the kind,
//! the time, the token and the ids.
//! Files are cut like the memory store's slices (by time and by ids) and
//! deleted once everything in them is older than the window, so the log
//! stays bounded; a restart always starts a new file.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use super::{EventId, Reservation, StoreError};
use crate::storage::{self, Appender, Format};

/// The id log's segment format. The longest payload a frame may claim: a
/// request of 10 000 ids of 4 KiB.
pub const ID_LOG: Format = Format { header: b"", magic: &[0xE7], min_payload: 0, max_payload: 64 << 20 };
const LOCK_FILE: &str = "LOCK";

/// What a record says of its ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Reserved before the produce.
    Reserved = b'R' as isize,
    /// Stored (acknowledged or spooled).
    Confirmed = b'C' as isize,
    /// The produce failed: forgotten.
    Released = b'X' as isize,
}

/// An id reserved before a crash and never confirmed nor released: its
/// record may or may not be in Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InDoubt {
    /// Which event.
    pub id: EventId,
    /// What it claimed to be.
    pub fingerprint: u32,
    /// The topic it was produced to.
    pub topic: String,
    /// When it was reserved (Unix ms); its record, if any, is not older.
    pub reserved_ms: u64,
}

/// What reading the log back found.
#[derive(Debug, Default)]
pub struct Replay {
    /// Frames read.
    pub records: u64,
    /// Bytes of torn or corrupt frames skipped.
    pub skipped_bytes: u64,
    /// Files read.
    pub files: usize,
    /// Ids reserved and never settled.
    pub in_doubt: Vec<InDoubt>,
}

/// The open log: one process per directory (a lock file enforces it).
pub struct Journal {
    dir: PathBuf,
    /// Held for the process's life: a second gateway on the same directory would interleave writes.
    _lock: File,
    /// The file appended to (no fsync), its number and when it was opened (Unix ms).
    file: Appender,
    seq: u64,
    opened_ms: u64,
    /// Ids confirmed into the current file (it is cut at `slice_ids`).
    confirmed: usize,
    /// Older files, oldest first, with the time the next one was opened
    /// (their newest record is not newer).
    sealed: VecDeque<(PathBuf, u64)>,
    window_ms: u64,
    slice_ms: u64,
    slice_ids: usize,
    /// Reused for encoding, so an append allocates nothing once warm.
    buf: Vec<u8>,
    /// Appends that failed (disk full, I/O error): their ids may be stored twice after a crash.
    pub write_errors: u64,
}

impl Journal {
    /// Opens the log in `dir` (created if missing), reads every file back,
    /// calling `confirmed(unix_ms, ids)` for each confirmed record within
    /// the window, in the order written, and starts a new file.
    pub fn open(
        dir: &Path,
        window_ms: u64,
        slice_ms: u64,
        slice_ids: usize,
        now_ms: u64,
        mut confirmed: impl FnMut(u64, &[(EventId, u32)]),
    ) -> Result<(Self, Replay), StoreError> {
        let err = |what: &str, e: std::io::Error| StoreError(format!("{what} {}: {e}", dir.display()));
        std::fs::create_dir_all(dir).map_err(|e| err("cannot create the id log directory", e))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))
            .map_err(|e| err("cannot open the lock of", e))?;
        lock.try_lock()
            .map_err(|_| StoreError(format!("the id log {} is locked by another gateway process", dir.display())))?;
        let files = list(dir).map_err(|e| err("cannot list", e))?;
        let mut replay = Replay { files: files.len(), ..Replay::default() };
        let mut pending: HashMap<EventId, (u64, InDoubt)> = HashMap::new();
        let oldest = now_ms.saturating_sub(window_ms);
        for (_, _, path) in &files {
            let (_, damage) = storage::read_segment(ID_LOG, path, decode, |record| {
                replay.records += 1;
                apply(record, oldest, &mut pending, &mut confirmed);
            })
            .map_err(|e| err("cannot read a file of", e))?;
            let skipped: u64 = damage.iter().map(|d| d.len).sum();
            replay.skipped_bytes += skipped;
            if skipped > 0 {
                tracing::warn!(
                    file = %path.display(),
                    skipped_bytes = skipped,
                    "Dedupe id log: torn or corrupt frames skipped; their ids may be stored twice"
                );
            }
        }
        replay.in_doubt = pending.into_values().map(|(_, d)| d).collect();
        replay.in_doubt.sort_by(|a, b| (a.reserved_ms, &a.id.message_id).cmp(&(b.reserved_ms, &b.id.message_id)));
        let seq = files.last().map_or(1, |(seq, _, _)| seq + 1);
        let mut sealed: VecDeque<(PathBuf, u64)> = VecDeque::new();
        for (i, (_, _, path)) in files.iter().enumerate() {
            let next_opened = files.get(i + 1).map_or(now_ms, |(_, opened, _)| *opened);
            sealed.push_back((path.clone(), next_opened));
        }
        let file = create(dir, seq, now_ms).map_err(|e| err("cannot create a file in", e))?;
        let mut journal = Self {
            dir: dir.to_owned(),
            _lock: lock,
            file,
            seq,
            opened_ms: now_ms,
            confirmed: 0,
            sealed,
            window_ms,
            slice_ms: slice_ms.max(1),
            slice_ids: slice_ids.max(1),
            buf: Vec::new(),
            write_errors: 0,
        };
        journal.drop_expired(now_ms);
        Ok((journal, replay))
    }

    /// Appends one record of `ids` (one `write(2)`); a failure is logged
    /// and counted, never returned: the id log only ever prevents duplicates.
    /// What part of a failed write reached the file is cut off again.
    pub fn append(&mut self, kind: Kind, now_ms: u64, ids: &[Reservation]) {
        if ids.is_empty() {
            return;
        }
        if kind == Kind::Confirmed {
            if now_ms >= self.opened_ms + self.slice_ms || self.confirmed >= self.slice_ids {
                self.cut(now_ms);
            }
            self.confirmed += ids.len();
        }
        encode(&mut self.buf, kind, now_ms, ids);
        if let Err(e) = self.file.append(&self.buf) {
            self.write_errors += 1;
            tracing::warn!(error = %e.error, dir = %self.dir.display(), "Dedupe id log not written; after a crash these ids may be stored twice");
        }
    }

    /// Starts a new file and deletes those wholly older than the window.
    fn cut(&mut self, now_ms: u64) {
        match create(&self.dir, self.seq + 1, now_ms) {
            Ok(file) => {
                let old = std::mem::replace(&mut self.file, file);
                drop(old);
                self.sealed.push_back((segment_path(&self.dir, self.seq, self.opened_ms), now_ms));
                self.seq += 1;
                self.opened_ms = now_ms;
                self.confirmed = 0;
            }
            Err(e) => {
                self.write_errors += 1;
                tracing::warn!(error = %e, dir = %self.dir.display(), "Dedupe id log: cannot start a new file; appending to the old one");
            }
        }
        self.drop_expired(now_ms);
    }

    fn drop_expired(&mut self, now_ms: u64) {
        while let Some((path, newest)) = self.sealed.front() {
            if newest + self.window_ms > now_ms {
                break;
            }
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!(error = %e, file = %path.display(), "Dedupe id log: cannot delete an expired file");
            }
            self.sealed.pop_front();
        }
    }

    /// Files the log holds now (the current one included).
    pub fn files(&self) -> usize {
        self.sealed.len() + 1
    }
}

/// One decoded record.
struct Record {
    kind: u8,
    unix_ms: u64,
    token: u64,
    ids: Vec<(EventId, u32, String)>,
}

fn apply(
    record: Record,
    oldest: u64,
    pending: &mut HashMap<EventId, (u64, InDoubt)>,
    confirmed: &mut impl FnMut(u64, &[(EventId, u32)]),
) {
    match record.kind {
        b'R' if record.unix_ms >= oldest => {
            for (id, fingerprint, topic) in record.ids {
                let doubt = InDoubt { id: id.clone(), fingerprint, topic, reserved_ms: record.unix_ms };
                pending.insert(id, (record.token, doubt));
            }
        }
        b'C' => {
            let ids: Vec<(EventId, u32)> = record
                .ids
                .into_iter()
                .map(|(id, fingerprint, _)| {
                    pending.remove(&id);
                    (id, fingerprint)
                })
                .collect();
            if record.unix_ms >= oldest {
                confirmed(record.unix_ms, &ids);
            }
        }
        b'R' => {}
        _ => {
            // Token 0: an id in doubt settled as missing after a crash.
            for (id, _, _) in record.ids {
                if pending.get(&id).is_some_and(|(token, _)| *token == record.token || record.token == 0) {
                    pending.remove(&id);
                }
            }
        }
    }
}

fn encode(buf: &mut Vec<u8>, kind: Kind, unix_ms: u64, ids: &[Reservation]) {
    buf.clear();
    ID_LOG.frame(buf, |buf| {
        buf.push(kind as u8);
        buf.extend_from_slice(&unix_ms.to_le_bytes());
        buf.extend_from_slice(&ids.first().map_or(0, |r| r.token).to_le_bytes());
        buf.extend_from_slice(&u32::try_from(ids.len()).unwrap_or(u32::MAX).to_le_bytes());
        for r in ids {
            buf.extend_from_slice(&r.fingerprint.to_le_bytes());
            let topic = if kind == Kind::Reserved { r.topic.as_str() } else { "" };
            for text in [r.id.source.as_str(), r.id.message_id.as_str(), topic] {
                let len = u16::try_from(text.len()).unwrap_or(u16::MAX);
                buf.extend_from_slice(&len.to_le_bytes());
                buf.extend_from_slice(&text.as_bytes()[..usize::from(len)]);
            }
        }
    });
}

/// The record in a frame's payload (its checksum held).
fn decode(payload: &[u8]) -> Option<Record> {
    let mut cursor = Cursor(payload);
    let kind = cursor.take(1)?[0];
    let unix_ms = u64::from_le_bytes(cursor.take(8)?.try_into().ok()?);
    let token = u64::from_le_bytes(cursor.take(8)?.try_into().ok()?);
    let count = u32::from_le_bytes(cursor.take(4)?.try_into().ok()?);
    let mut ids = Vec::with_capacity(usize::try_from(count).ok()?.min(payload.len() / 10));
    for _ in 0..count {
        let fingerprint = u32::from_le_bytes(cursor.take(4)?.try_into().ok()?);
        let source = cursor.text()?;
        let message_id = cursor.text()?;
        let topic = cursor.text()?;
        let id = EventId { source: source.to_owned(), message_id: message_id.to_owned() };
        ids.push((id, fingerprint, topic.to_owned()));
    }
    (cursor.0.is_empty() && matches!(kind, b'R' | b'C' | b'X')).then_some(Record { kind, unix_ms, token, ids })
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn text(&mut self) -> Option<&'a str> {
        let len = u16::from_le_bytes(self.take(2)?.try_into().ok()?);
        std::str::from_utf8(self.take(usize::from(len))?).ok()
    }
}

fn segment_path(dir: &Path, seq: u64, opened_ms: u64) -> PathBuf {
    dir.join(format!("ids-{seq:012}-{opened_ms}.log"))
}

fn create(dir: &Path, seq: u64, opened_ms: u64) -> std::io::Result<Appender> {
    Appender::create(&ID_LOG, &segment_path(dir, seq, opened_ms), false)
}

/// The log's files, oldest first: (number, opened at, path).
fn list(dir: &Path) -> std::io::Result<Vec<(u64, u64, PathBuf)>> {
    let files = storage::list(dir, |name| {
        let (seq, opened) = name.strip_prefix("ids-")?.strip_suffix(".log")?.split_once('-')?;
        Some((seq.parse::<u64>().ok()?, opened.parse::<u64>().ok()?))
    })?;
    Ok(files.into_iter().map(|((seq, opened), path)| (seq, opened, path)).collect())
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
