//! The dead-letter records of a time range, read by partition assignment
//! (no consumer group, nothing committed), each parsed into its envelope
//! or named as unreadable. What `pipeline/record.rs` writes: `reason`,
//! `message`, `errors`, `source`, `receivedAt`, `messageId`, `event`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

use super::{RecoverError, TimeRange};
use crate::config::KafkaConfig;

/// Time each metadata, watermark or offset look-up may take.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// A read that gets nothing for this long while records remain fails.
const STALL_LIMIT: Duration = Duration::from_secs(30);

/// One record read from the dead-letter topic.
#[derive(Debug, Clone)]
pub struct Letter {
    /// Its partition.
    pub partition: i32,
    /// Its offset: with the partition, what `recovered-from` names.
    pub offset: i64,
    /// Its Kafka timestamp (ms): the recovered record keeps it.
    pub timestamp_ms: i64,
    /// Its headers (`event-id`, `source`, `received-at`, `auth`, `protocol`, ...).
    pub headers: Vec<(String, String)>,
    /// The envelope, or why it cannot be read.
    pub body: Result<Envelope, Unreadable>,
}

impl Letter {
    /// The value of header `name`, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// A dead-letter envelope as the gateway writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The stable code of why it was dead-lettered.
    pub reason: String,
    /// The source that sent it.
    pub source: String,
    /// When the gateway received it (RFC 3339).
    pub received_at: String,
    /// The event's id.
    pub message_id: String,
    /// The event as received (privacy actions applied).
    pub event: Value,
}

impl Envelope {
    /// The event's catalog name: `event` of a track, `Page Viewed` /
    /// `Screen Viewed`, else its `type`.
    pub fn event_name(&self) -> String {
        match self.event.get("type").and_then(Value::as_str) {
            Some("track") => self.event.get("event").and_then(Value::as_str).unwrap_or("(unnamed track)").to_owned(),
            Some("page") => "Page Viewed".into(),
            Some("screen") => "Screen Viewed".into(),
            Some(other) => other.to_owned(),
            None => "(no type)".into(),
        }
    }

    /// The schema version the event pins (`context.schemaVersion`), or `newest`.
    pub fn version(&self) -> String {
        self.event.pointer("/context/schemaVersion").map_or_else(|| "newest".into(), Value::to_string)
    }
}

/// Why a dead-letter record cannot be recovered as read: counted and named, never produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// The value is not JSON at all.
    NotJson,
    /// The value is JSON cut short.
    Truncated,
    /// JSON, but not a gateway envelope: the field it lacks.
    NotOurs(&'static str),
}

impl Unreadable {
    /// The stable code the summary names.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotJson => "not_json",
            Self::Truncated => "truncated",
            Self::NotOurs(_) => "not_a_gateway_envelope",
        }
    }
}

/// Parses one dead-letter record's value.
pub fn parse_letter(bytes: &[u8]) -> Result<Envelope, Unreadable> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| if e.is_eof() { Unreadable::Truncated } else { Unreadable::NotJson })?;
    let text = |field: &'static str| {
        value.get(field).and_then(Value::as_str).map(str::to_owned).ok_or(Unreadable::NotOurs(field))
    };
    let event = value.get("event").filter(|e| e.is_object()).cloned().ok_or(Unreadable::NotOurs("event"))?;
    Ok(Envelope {
        reason: text("reason")?,
        source: text("source")?,
        received_at: text("receivedAt")?,
        message_id: text("messageId")?,
        event,
    })
}

/// A consumer with the gateway's connection settings, no group, no commits.
pub fn consumer(kafka: &KafkaConfig) -> Result<BaseConsumer, RecoverError> {
    let mut config = ClientConfig::new();
    for (key, value) in crate::sink::producer_config(kafka).config_map() {
        if !crate::sink::spool::PRODUCER_ONLY.contains(&key) {
            config.set(key, value);
        }
    }
    config
        .set("group.id", "eventgw-dead-letter-recovery")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false");
    config.create().map_err(|e| RecoverError::Kafka(format!("consumer: {e}")))
}

/// Where to start and stop reading each partition of `topic` for the
/// records stamped within `range` (`to_ms: None`: up to the high
/// watermark as it is now). Partitions with nothing to read are left out.
pub fn spans(
    consumer: &BaseConsumer,
    topic: &str,
    from_ms: i64,
    to_ms: Option<i64>,
) -> Result<HashMap<i32, (i64, i64)>, RecoverError> {
    let kafka = |e: rdkafka::error::KafkaError| RecoverError::Kafka(format!("{topic}: {e}"));
    let metadata = consumer.fetch_metadata(Some(topic), CLIENT_TIMEOUT).map_err(kafka)?;
    if let Some(error) = metadata.topics().iter().find_map(|t| t.error()) {
        let error = rdkafka::types::RDKafkaErrorCode::from(error);
        return Err(RecoverError::Kafka(format!("{topic}: {error} (`gateway topics` creates the gateway's topics)")));
    }
    let partitions: Vec<i32> = metadata.topics().iter().flat_map(|t| t.partitions()).map(|p| p.id()).collect();
    let mut spans = HashMap::new();
    for partition in partitions {
        let (_, high) = consumer.fetch_watermarks(topic, partition, CLIENT_TIMEOUT).map_err(kafka)?;
        let start = offset_at(consumer, topic, partition, from_ms, high)?;
        let end = match to_ms {
            Some(to) => offset_at(consumer, topic, partition, to, high)?,
            None => high,
        };
        if start < end {
            spans.insert(partition, (start, end));
        }
    }
    Ok(spans)
}

/// The first offset of `partition` stamped at or after `at_ms`; `high` when none is.
fn offset_at(consumer: &BaseConsumer, topic: &str, partition: i32, at_ms: i64, high: i64) -> Result<i64, RecoverError> {
    let mut wanted = TopicPartitionList::new();
    wanted
        .add_partition_offset(topic, partition, Offset::Offset(at_ms))
        .map_err(|e| RecoverError::Kafka(e.to_string()))?;
    let found =
        consumer.offsets_for_times(wanted, CLIENT_TIMEOUT).map_err(|e| RecoverError::Kafka(format!("{topic}: {e}")))?;
    Ok(found
        .elements()
        .first()
        .and_then(|e| if let Offset::Offset(o) = e.offset() { Some(o) } else { None })
        .unwrap_or(high)
        .min(high))
}

/// Reads `spans` of `topic`, calling `each` with every record in order of
/// arrival. Fails when nothing arrives for [`STALL_LIMIT`].
pub fn read(
    consumer: &BaseConsumer,
    topic: &str,
    mut spans: HashMap<i32, (i64, i64)>,
    mut each: impl FnMut(&rdkafka::message::BorrowedMessage<'_>),
) -> Result<(), RecoverError> {
    if spans.is_empty() {
        return Ok(());
    }
    let mut assign = TopicPartitionList::new();
    for (partition, (start, _)) in &spans {
        assign
            .add_partition_offset(topic, *partition, Offset::Offset(*start))
            .map_err(|e| RecoverError::Kafka(e.to_string()))?;
    }
    consumer.assign(&assign).map_err(|e| RecoverError::Kafka(format!("{topic}: {e}")))?;
    let mut moved = Instant::now();
    while !spans.is_empty() {
        if moved.elapsed() > STALL_LIMIT {
            let left: Vec<String> = spans.keys().map(|p| format!("{topic}/{p}")).collect();
            return Err(RecoverError::Kafka(format!(
                "nothing read for {STALL_LIMIT:?}; still waiting for {}",
                left.join(", ")
            )));
        }
        let Some(message) = consumer.poll(Duration::from_millis(500)) else { continue };
        let message = message.map_err(|e| RecoverError::Kafka(format!("{topic}: {e}")))?;
        moved = Instant::now();
        let Some((_, end)) = spans.get(&message.partition()).copied() else { continue };
        if message.offset() < end {
            each(&message);
        }
        if message.offset() + 1 >= end {
            spans.remove(&message.partition());
        }
    }
    consumer.unassign().map_err(|e| RecoverError::Kafka(e.to_string()))?;
    Ok(())
}

/// Every dead-letter record of `range`, parsed.
pub fn read_letters(kafka: &KafkaConfig, range: TimeRange) -> Result<Vec<Letter>, RecoverError> {
    let consumer = consumer(kafka)?;
    let topic = &kafka.dead_letter_topic;
    let spans = spans(&consumer, topic, range.from_ms, Some(range.to_ms))?;
    let mut letters = Vec::new();
    read(&consumer, topic, spans, |m| {
        let timestamp_ms = m.timestamp().to_millis().unwrap_or_default();
        // Exactly once relies on it: a recovered record keeps this
        // timestamp, and the read-back starts at the range's start.
        if !range.contains(timestamp_ms) {
            return;
        }
        let headers = m.headers().map(|hs| {
            hs.iter()
                .map(|h| (h.key.to_owned(), String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned()))
                .collect()
        });
        letters.push(Letter {
            partition: m.partition(),
            offset: m.offset(),
            timestamp_ms,
            headers: headers.unwrap_or_default(),
            body: parse_letter(m.payload().unwrap_or_default()),
        });
    })?;
    letters.sort_by_key(|l| (l.timestamp_ms, l.partition, l.offset));
    Ok(letters)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_parses_and_anything_else_is_named() {
        let good = br#"{"reason":"schema_violation","message":"m","errors":[],"source":"demo","receivedAt":"2026-12-05T14:00:00.000Z","messageId":"m-1","event":{"type":"page"}}"#;
        let envelope = parse_letter(good).expect("envelope");
        assert_eq!((envelope.reason.as_str(), envelope.event_name().as_str()), ("schema_violation", "Page Viewed"));
        assert_eq!(envelope.version(), "newest");
        assert_eq!(parse_letter(b"not json"), Err(Unreadable::NotJson));
        assert_eq!(parse_letter(&good[..good.len() / 2]), Err(Unreadable::Truncated));
        assert_eq!(parse_letter(b"{}"), Err(Unreadable::NotOurs("event")));
        assert_eq!(parse_letter(br#"{"event":{}}"#), Err(Unreadable::NotOurs("reason")));
        assert_eq!(parse_letter(br#"{"event":"x","reason":"r"}"#), Err(Unreadable::NotOurs("event")));
        assert_eq!(parse_letter(b"[1,2]").map_err(|e| e.code()), Err("not_a_gateway_envelope"));
        assert_eq!(parse_letter(b"").map_err(|e| e.code()), Err("truncated"));
    }
}
