//! `inspect` and `replay`: read the range, filter, re-check, skip what is
//! already stored, produce the rest with an idempotent `acks=all` producer,
//! each with its dead-letter record's timestamp.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use super::letters::{Envelope, Letter, read_letters};
use super::recheck::{Checker, Recheck, position};
use super::recovered::{already_stored, settle};
use super::report::{Progress, Summary, Tally};
use super::{RecoverError, Selection, TimeRange};
use crate::config::Config;
use crate::sink::OutRecord;

/// How long one produce may wait for its acknowledgement.
const PRODUCE_TIMEOUT: Duration = Duration::from_secs(30);

/// A readable dead letter and its envelope.
type Picked<'a> = (&'a Letter, &'a Envelope);

/// The readable letters `selection` picks, and the summary so far.
fn select<'a>(
    checker: &Checker,
    selection: &Selection,
    letters: &'a [Letter],
    command: &'static str,
) -> (Vec<Picked<'a>>, Summary) {
    let mut summary = Summary { command, read: letters.len() as u64, ..Summary::default() };
    let mut picked = Vec::new();
    for letter in letters {
        let envelope = match &letter.body {
            Ok(envelope) => envelope,
            Err(why) => {
                summary.unreadable.push((position(checker.config(), letter), why.code()));
                continue;
            }
        };
        let wanted = selection.source.as_ref().is_none_or(|s| *s == envelope.source)
            && selection.event.as_ref().is_none_or(|e| *e == envelope.event_name())
            && selection.reason.as_ref().is_none_or(|r| *r == envelope.reason);
        if wanted {
            picked.push((letter, envelope));
        } else {
            summary.filtered_out += 1;
        }
    }
    (picked, summary)
}

/// The range of `selection`, and the state to check with: refuses a bad
/// range or an unknown `--source` before anything is read from Kafka.
fn prepare(config: Config, selection: &Selection) -> Result<(TimeRange, Checker), RecoverError> {
    let range = TimeRange::parse(&selection.from, &selection.to, chrono::Utc::now())?;
    let checker = Checker::new(config)?;
    if let Some(source) = &selection.source
        && checker.source(source).is_none()
    {
        return Err(RecoverError::UnknownSource(source.clone()));
    }
    Ok((range, checker))
}

/// `gateway dead-letter inspect`: counts by source, event, version and reason.
pub fn inspect(config: Config, selection: &Selection) -> Result<Option<Summary>, RecoverError> {
    let (range, checker) = prepare(config, selection)?;
    let letters = read_letters(&checker.config().kafka, range)?;
    let (picked, summary) = select(&checker, selection, &letters, "inspect");
    let (mut sources, mut events, mut versions, mut reasons) =
        (Tally::default(), Tally::default(), Tally::default(), Tally::default());
    for (_, envelope) in &picked {
        sources.add(envelope.source.clone());
        events.add(envelope.event_name());
        versions.add(format!("{} v{}", envelope.event_name(), envelope.version()));
        reasons.add(envelope.reason.clone());
    }
    sources.print("by source");
    events.print("by event");
    versions.print("by event and version");
    reasons.print("by reason");
    Ok(Some(summary))
}

/// `gateway dead-letter replay [--dry-run]`: counts into `summary` as it
/// goes, so a run that fails part-way leaves there what it did (for
/// `--metrics-file`).
pub fn replay(
    config: Config,
    selection: &Selection,
    dry_run: bool,
    throttle: Option<Duration>,
    summary: &mut Summary,
) -> Result<(), RecoverError> {
    let (range, checker) = prepare(config, selection)?;
    let kafka = checker.config().kafka.clone();
    let letters = read_letters(&kafka, range)?;
    let (picked, selected) = select(&checker, selection, &letters, summary.command);
    *summary = selected;
    let mut passing: Vec<(&Letter, &Envelope, OutRecord)> = Vec::new();
    for (letter, envelope) in picked {
        match checker.check(letter, envelope) {
            Recheck::Pass(record) => passing.push((letter, envelope, record)),
            Recheck::Fail { code, message } => {
                summary.still_failing += 1;
                println!(
                    "still failing {} messageId={} event={:?}: {code}: {message}",
                    position(checker.config(), letter),
                    envelope.message_id,
                    envelope.event_name()
                );
            }
        }
    }
    let topics: BTreeSet<String> = passing.iter().map(|(_, _, r)| r.topic.to_string()).collect();
    if !dry_run {
        settle(&kafka, &topics)?;
    }
    let stored = already_stored(&kafka, &topics, range.from_ms)?;
    let mut this_run: HashSet<(String, String)> = HashSet::new();
    let mut to_produce = Vec::new();
    for (letter, envelope, record) in passing {
        let at = position(checker.config(), letter);
        let event = (envelope.source.clone(), envelope.message_id.clone());
        if stored.positions.contains(&at) || stored.events.contains(&event) || !this_run.insert(event) {
            summary.already_recovered += 1;
            continue;
        }
        if dry_run {
            let version = record.headers.iter().find(|(k, _)| *k == "schema-version").map_or("?", |(_, v)| v.as_str());
            println!(
                "would recover {at} messageId={} event={:?} -> {} (was {}; now passes version {version})",
                envelope.message_id,
                envelope.event_name(),
                record.topic,
                envelope.reason
            );
            summary.recovered += 1;
        } else {
            let label = (envelope.source.clone(), envelope.event_name());
            to_produce.push((letter.timestamp_ms, record, label));
        }
    }
    if !dry_run {
        produce(&kafka, to_produce, throttle, summary)?;
        tracing::info!(
            recovered = summary.recovered,
            still_failing = summary.still_failing,
            already_recovered = summary.already_recovered,
            unreadable = summary.unreadable.len(),
            "Dead-letter replay finished"
        );
    }
    Ok(())
}

/// Produces `records` (each with its timestamp and its (source, event)
/// label), pipelined, or one at a time with a pause after each when
/// `throttle` is set; counts each one Kafka acknowledged in `summary`,
/// and stops at the end of the first round with a failure (a rerun skips
/// what was stored).
fn produce(
    kafka: &crate::config::KafkaConfig,
    records: Vec<(i64, OutRecord, (String, String))>,
    throttle: Option<Duration>,
    summary: &mut Summary,
) -> Result<(), RecoverError> {
    if records.is_empty() {
        return Ok(());
    }
    let producer: FutureProducer =
        crate::sink::producer_config(kafka).create().map_err(|e| RecoverError::Kafka(format!("producer: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let runtime = runtime.map_err(|e| RecoverError::Kafka(e.to_string()))?;
    let progress = Progress::new(records.len() as u64);
    let chunk = if throttle.is_some() { 1 } else { 500 };
    for batch in records.chunks(chunk) {
        let sends = batch.iter().map(|(timestamp, record, _)| {
            let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
            for (key, value) in &record.headers {
                headers = headers.insert(Header { key, value: Some(value.as_str()) });
            }
            let out = FutureRecord::to(record.topic.as_str())
                .key(&record.key)
                .payload(&record.payload[..])
                .headers(headers)
                .timestamp(*timestamp);
            producer.send(out, PRODUCE_TIMEOUT)
        });
        let results = runtime.block_on(futures::future::join_all(sends));
        let mut failure = None;
        for (result, (_, _, label)) in results.into_iter().zip(batch) {
            match result {
                Ok(_) => {
                    summary.recovered += 1;
                    *summary.recovered_by.entry(label.clone()).or_default() += 1;
                }
                Err((e, _)) => failure = failure.or(Some(RecoverError::Kafka(format!("produce: {e}")))),
            }
        }
        if let Some(failure) = failure {
            return Err(failure);
        }
        progress.at(summary.recovered);
        if let Some(pause) = throttle {
            std::thread::sleep(pause);
        }
    }
    progress.finish();
    producer.flush(PRODUCE_TIMEOUT).map_err(|e| RecoverError::Kafka(format!("flush: {e}")))?;
    Ok(())
}
