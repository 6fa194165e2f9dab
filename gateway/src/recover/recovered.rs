//! What earlier runs already stored, so a rerun (after success, a failure
//! or `kill -9`) produces nothing twice. Before producing, replay reads
//! the destination topics from the start of the range up to each
//! partition's high watermark and collects every `recovered-from` header
//! (and every `source` + `event-id` pair, so an event a client's retry
//! already stored is not recovered beside it).
//!
//! A record a killed run produced may still be above a partition's high
//! watermark (on the leader, not yet on every in-sync replica): a
//! read-back cannot see it, and producing again would store it twice once
//! it is committed. With one in-sync replica the high watermark moves as
//! the leader appends, so nothing can hide; with more, replay first waits
//! `sink::watermark::SETTLE_MS`, past `replica.lag.time.max.ms` (30 s by default), after
//! which such a record is committed or gone. The CLI cannot know when (or
//! whether) an earlier run on any machine was killed, so it waits every
//! time a destination partition has more than one in-sync replica.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use rdkafka::message::{Headers, Message};

use super::letters;
use super::{RECOVERED_FROM, RecoverError};
use crate::config::KafkaConfig;
use crate::sink::watermark;

/// What the destination topics already hold.
#[derive(Debug, Default)]
pub struct AlreadyStored {
    /// Every `recovered-from` value found.
    pub positions: HashSet<String>,
    /// Every `(source, event-id)` pair found.
    pub events: HashSet<(String, String)>,
}

/// Waits `sink::watermark::SETTLE_MS` if any partition of `topics` has
/// more than one in-sync replica (the spool's rule); returns how long it waited.
pub fn settle(kafka: &KafkaConfig, topics: &BTreeSet<String>) -> Result<Duration, RecoverError> {
    let consumer = letters::consumer(kafka)?;
    let replicated = watermark::replicated(&consumer, topics).map_err(RecoverError::Kafka)?;
    if !replicated {
        return Ok(Duration::ZERO);
    }
    let wait = Duration::from_millis(watermark::SETTLE_MS);
    tracing::info!(secs = wait.as_secs(), "Waiting for records of an earlier run to settle below the high watermarks");
    std::thread::sleep(wait);
    Ok(wait)
}

/// Reads `topics` from `from_ms` to their high watermarks as they are now.
pub fn already_stored(
    kafka: &KafkaConfig,
    topics: &BTreeSet<String>,
    from_ms: i64,
) -> Result<AlreadyStored, RecoverError> {
    let consumer = letters::consumer(kafka)?;
    let mut found = AlreadyStored::default();
    for topic in topics {
        let spans = letters::spans(&consumer, topic, from_ms, None)?;
        letters::read(&consumer, topic, spans, |m| {
            let Some(headers) = m.headers() else { return };
            let (mut source, mut id) = (None, None);
            for header in headers.iter() {
                let value = header.value.and_then(|v| std::str::from_utf8(v).ok());
                match (header.key, value) {
                    (RECOVERED_FROM, Some(v)) => {
                        found.positions.insert(v.to_owned());
                    }
                    ("source", Some(v)) => source = Some(v.to_owned()),
                    ("event-id", Some(v)) => id = Some(v.to_owned()),
                    _ => {}
                }
            }
            if let (Some(source), Some(id)) = (source, id) {
                found.events.insert((source, id));
            }
        })?;
    }
    Ok(found)
}
