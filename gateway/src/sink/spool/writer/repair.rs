//! The writer's repairs: a failed write's bytes cut off again (all or
//! nothing per group), a check whether a refusing disk takes writes again,
//! and sealing a segment replay found damaged.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::Ordering;

use super::Writer;
use crate::sink::spool::SpoolError;
use crate::storage;

/// While appends fail, the writer checks this often whether the disk takes
/// writes again (so readiness recovers without traffic).
pub(super) const PROBE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// What the probe writes and fsyncs: about one group of beacon events.
const PROBE_BYTES: usize = 64 * 1024;

impl Writer {
    /// Cuts a segment a failed write left torn back to its committed length.
    pub(super) fn cut_back_torn(&mut self) -> Result<(), SpoolError> {
        let Some((path, committed)) = self.torn.take() else { return Ok(()) };
        storage::cut_back(&path, committed, true).map_err(|error| {
            self.torn = Some((path.clone(), committed));
            SpoolError::io(&path, error)
        })
    }

    /// While appends fail: does the disk take a write and an fsync again?
    pub(super) fn probe(&mut self) {
        let path = self.shared.dir.join("probe.tmp");
        let wrote = self.cut_back_torn().is_ok()
            && File::create(&path)
                .and_then(|mut f| f.write_all(&[0; PROBE_BYTES]).and_then(|()| f.sync_data()))
                .is_ok();
        let _ = std::fs::remove_file(&path);
        if wrote {
            self.shared.write_failing.store(false, Ordering::SeqCst);
            tracing::info!("The spool's disk takes writes again");
        }
    }

    /// Seals a segment replay found damaged, at the length its file has now.
    pub(super) fn seal_damaged(&mut self, first_seq: u64) {
        let mut index = self.shared.index();
        let last = index.segments.back().map(|s| s.first_seq);
        let Some(segment) = index.segments.iter_mut().find(|s| s.first_seq == first_seq) else { return };
        if !segment.sealed && last == Some(first_seq) {
            self.active = None;
        }
        segment.sealed = true;
        segment.damaged = true;
        segment.len = std::fs::metadata(&segment.path).map_or(0, |m| m.len());
    }
}
