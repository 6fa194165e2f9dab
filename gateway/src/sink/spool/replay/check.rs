//! Records that may already be in Kafka though replay never had them
//! acknowledged: handed to a producer replaced as wedged (`wedge.rs`), or
//! spooled by a previous process while their first send was in flight. They
//! are looked up in Kafka by `event-id` before they are sent.

use std::collections::BTreeSet;

use super::{READ_BACK_MARGIN_MS, Replayer, SETTLE_AFTER_REPLACE};
use crate::sink::spool::format::SpooledRecord;
use crate::sink::spool::store::{Fate, now_ms};
use crate::sink::spool::wedge;
use crate::sink::watermark;

impl Replayer {
    /// Replaces the producer when the watchdog finds it wedged; everything
    /// appended so far may have been handed to it, so those records are
    /// looked up in Kafka before they are sent again.
    pub(super) async fn check_wedged(&mut self) {
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
                self.replaced_at_ms = now_ms();
                self.stored = None;
                self.watchdog.progressed();
                tokio::time::sleep(SETTLE_AFTER_REPLACE).await;
            }
            Err(error) => tracing::warn!(%error, "Cannot replace the wedged Kafka producer; retrying"),
        }
    }

    /// Whether `send` holds records whose first send nobody saw answered
    /// (left in flight by a previous process, or handed to a producer
    /// replaced as wedged) that a read-back cannot see yet: their leader may
    /// have appended them while a follower had just died, and they stay
    /// above the high watermark until it leaves the ISR (`sink::watermark`).
    /// Replay waits (requests keep spooling behind, so order holds) rather
    /// than re-send what Kafka is about to show.
    pub(super) fn settling(&mut self, send: &[SpooledRecord]) -> Result<bool, String> {
        let risky: Vec<&SpooledRecord> = send.iter().filter(|r| self.at_risk(r)).collect();
        // A record's first send began before it was spooled (a previous
        // process's) or before its producer was replaced.
        let sent_by = |r: &SpooledRecord| {
            if self.check_below.is_some_and(|below| r.seq < below) { self.replaced_at_ms } else { r.appended_at_ms }
        };
        let Some(last) = risky.iter().map(|r| sent_by(r)).max() else { return Ok(false) };
        let until = match self.settle {
            Some((covered, until)) if covered >= last => until,
            _ => {
                let topics: BTreeSet<String> = risky.iter().map(|r| r.topic.clone()).collect();
                let until = watermark::visible_from(wedge::replicated(self.kafka.client_config(), &topics)?, last);
                let wait_ms = until.saturating_sub(now_ms());
                if wait_ms > 0 {
                    tracing::info!(
                        wait_ms,
                        "Spool replay: records whose first send was never answered are read back from Kafka once no follower can hold them above the high watermark; requests keep spooling meanwhile"
                    );
                }
                self.settle = Some((last, until));
                until
            }
        };
        Ok(now_ms() < until)
    }

    /// After a producer was replaced as wedged: drops from `send` (marking
    /// them delivered) the records Kafka already holds, found by their
    /// `event-id` header; an error leaves the round to be tried again, so
    /// nothing unchecked is sent.
    pub(super) fn skip_stored(&mut self, send: Vec<SpooledRecord>) -> Result<Vec<SpooledRecord>, String> {
        if let Some(below) = self.check_below
            && self.queue.front().is_none_or(|r| r.seq >= below)
        {
            self.check_below = None;
            self.stored = None;
        }
        let risky: Vec<bool> = send.iter().map(|r| self.at_risk(r)).collect();
        let at_risk: Vec<&SpooledRecord> =
            send.iter().zip(&risky).filter(|(_, risky)| **risky).map(|(r, _)| r).collect();
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
            .zip(risky)
            .partition(|(r, risky)| *risky && event_id(r).is_some_and(|id| stored.is_some_and(|ids| ids.contains(id))));
        let (skip, keep): (Vec<_>, Vec<_>) =
            (skip.into_iter().map(|(r, _)| r).collect(), keep.into_iter().map(|(r, _)| r).collect());
        if !skip.is_empty() {
            let mut fates = self.shared.fates();
            for record in &skip {
                fates.insert(record.seq, Fate::Delivered);
            }
            tracing::warn!(
                records = skip.len(),
                "Spool replay: records already in Kafka (sent by a replaced producer, or by a process that died before Kafka answered) are not sent again"
            );
        }
        Ok(keep)
    }

    /// Whether a record may already be in Kafka though replay never sent it:
    /// handed to a producer replaced as wedged, or spooled by a previous
    /// process while its first send was in flight (that process died
    /// before the send's fate was known).
    pub(super) fn at_risk(&self, record: &SpooledRecord) -> bool {
        self.check_below.is_some_and(|below| record.seq < below)
            || (record.in_flight && record.seq < self.shared.recovered_below)
    }
}

/// A record's `messageId` as its `event-id` header says.
fn event_id(record: &SpooledRecord) -> Option<&str> {
    record.headers.iter().find(|(k, _)| k == "event-id").map(|(_, v)| v.as_str())
}
