//! Replay's side of the disk: reading segments a bounded step at a time,
//! noticing a segment damaged under the running gateway (shorter than what
//! was committed, or a checksum failure), and retiring segments once every
//! record of theirs is in Kafka (deleted, or quarantined when damaged).

use std::sync::atomic::Ordering;

use tokio::sync::oneshot;

use super::Replayer;
use crate::sink::spool::format;
use crate::sink::spool::reader;
use crate::sink::spool::store::{Segment, report_damage};
use crate::sink::spool::writer::Command;

impl Replayer {
    /// Reads more records from disk until the queue holds two rounds' worth
    /// or everything committed so far is read.
    pub(super) fn fill(&mut self) -> Result<(), String> {
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
                let mut reader = match reader::SegmentReader::open(&segment.path, offset, segment.len) {
                    Ok(reader) => reader,
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                        self.found_damaged(&segment, &[], "the file is gone");
                        return Ok(());
                    }
                    Err(error) => return Err(format!("{}: {error}", segment.path.display())),
                };
                let records = reader.next(self.batch).map_err(|e| format!("{}: {e}", segment.path.display()))?;
                let cut = reader.short();
                if cut || (!segment.damaged && !reader.damage().is_empty()) {
                    // Queue what was read, then have the segment sealed where it ends now.
                    let floor = self.shared.index().replayed_through;
                    self.max_read = self.max_read.max(records.last().map(|r| r.seq));
                    self.queue.extend(records.into_iter().filter(|r| r.seq >= floor));
                    self.cursor = Some((segment.first_seq, reader.offset()));
                    let why = if cut { "shorter than what was written to it" } else { "checksum failure" };
                    let damage = reader.damage().to_vec();
                    self.found_damaged(&segment, &damage, why);
                    return Ok(());
                }
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

    /// Reports a segment damaged under the running gateway (log and
    /// metric); [`Self::round`] then has it sealed, and it is quarantined
    /// once the rest of it is in Kafka.
    pub(super) fn found_damaged(&mut self, segment: &Segment, damage: &[format::Damage], why: &str) {
        if !segment.damaged {
            self.shared.damaged_total.fetch_add(damage.len().max(1) as u64, Ordering::SeqCst);
            for span in damage {
                report_damage(&segment.path, span);
            }
            tracing::error!(
                segment = %segment.path.display(),
                committed_bytes = segment.len,
                "Spool segment damaged while the gateway runs ({why}); the rest of it and of the spool is replayed, \
                 and the file is quarantined"
            );
        }
        self.damaged = Some(segment.first_seq);
    }

    /// Reports a segment found damaged while it was read, and has the
    /// writer seal it where its file ends now; replay reads on from there.
    pub(super) async fn seal_damaged(&mut self, first_seq: u64) {
        let (reply, sealed) = oneshot::channel();
        if self.writer.send(Command::Damaged { first_seq, reply }).is_ok() {
            let _ = sealed.await;
        }
    }

    /// Deletes sealed, fully read segments whose every record is below `through`.
    pub(super) fn delete_finished(&mut self, through: u64) {
        let (done, keep): (Vec<_>, Vec<_>) =
            self.finished.drain(..).partition(|(_, _, last)| last.is_none_or(|last| last < through));
        self.finished = keep;
        for (first_seq, path, _) in done {
            let segment = {
                let mut index = self.shared.index();
                let at = index.segments.iter().position(|s| s.first_seq == first_seq);
                at.and_then(|at| index.segments.remove(at))
            };
            if let Some(segment) = segment {
                self.shared.retire(&segment);
            }
            tracing::info!(segment = %path.display(), "Spool segment replayed and retired");
        }
    }

    /// True when every segment has been read to its committed end.
    pub(super) fn read_everything(&self) -> bool {
        let index = self.shared.index();
        match (self.cursor, index.segments.back()) {
            (_, None) => true,
            (Some((seq, offset)), Some(last)) => seq == last.first_seq && offset >= last.len,
            (None, Some(_)) => false,
        }
    }
}
