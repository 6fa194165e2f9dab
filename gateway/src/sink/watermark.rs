//! When a read-back can see a record whose send's fate nobody knows.
//!
//! A consumer reads a partition only up to its high watermark: the offset
//! every in-sync replica holds. A record the leader appended while an
//! in-sync follower had just stopped fetching (killed, frozen, cut off)
//! stays above it until the follower leaves the ISR: when KRaft fences it
//! (`broker.session.timeout.ms`, 9 s) or the leader drops it for lag
//! (`replica.lag.time.max.ms`, 30 s, checked every half of that, so up to
//! 45 s). A read-back inside that window misses the record, and whatever
//! re-sends it then stores it twice once the watermark moves (issue 32's
//! nemesis found exactly that after a gateway crash).
//!
//! So a look-up of records sent before a crash waits until
//! [`SETTLE_MS`] after the last of them was sent, unless every partition
//! it reads has a single in-sync replica (then the watermark is the end of
//! the leader's log and nothing can hide above it).

use std::collections::BTreeSet;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};

/// How long after a send its record, if the leader appended it, is below
/// the high watermark: 1.5 × the brokers' default `replica.lag.time.max.ms`
/// (30 s) plus 5 s for a request still in the sockets when its sender died.
/// Brokers set to a longer lag need the gateway's read-backs to wait longer:
/// see docs/spool.md.
pub const SETTLE_MS: u64 = 50_000;
// Past the lag check's worst case with the brokers' defaults.
const _: () = assert!(SETTLE_MS >= 45_000);

const METADATA_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether any partition of `topics` has more than one in-sync replica
/// (a record there can wait above the high watermark for a follower).
pub fn replicated(consumer: &BaseConsumer, topics: &BTreeSet<String>) -> Result<bool, String> {
    for topic in topics {
        let metadata =
            consumer.fetch_metadata(Some(topic), METADATA_TIMEOUT).map_err(|e| format!("metadata of {topic}: {e}"))?;
        if metadata.topics().iter().flat_map(|t| t.partitions()).any(|p| p.isr().len() > 1) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether any partition of any topic of the cluster (Kafka's internal
/// ones aside) has more than one replica: where a record could wait above
/// a high watermark. Replicas, not the in-sync set, so a follower that is
/// down right now still counts.
pub fn any_replicated(consumer: &BaseConsumer) -> Result<bool, String> {
    let metadata = consumer.fetch_metadata(None, METADATA_TIMEOUT).map_err(|e| format!("metadata: {e}"))?;
    Ok(metadata
        .topics()
        .iter()
        .filter(|t| !t.name().starts_with("__"))
        .flat_map(|t| t.partitions())
        .any(|p| p.replicas().len() > 1))
}

/// From when (Unix ms) a read-back sees every record sent at or before
/// `last_sent_ms`: at once when nothing is replicated, else [`SETTLE_MS`] later.
pub fn visible_from(replicated: bool, last_sent_ms: u64) -> u64 {
    if replicated { last_sent_ms.saturating_add(SETTLE_MS) } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_back_waits_only_where_a_follower_can_hold_the_watermark() {
        assert_eq!(visible_from(false, 1_000_000), 0, "a single in-sync replica: the watermark is the log's end");
        assert_eq!(visible_from(true, 1_000_000), 1_000_000 + SETTLE_MS);
    }
}
