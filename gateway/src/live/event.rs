//! One event as the live view shows it, and the [`Capture`] that builds
//! them: a copy of each record as it goes to the sink (so what is shown is
//! what is stored, privacy actions applied), completed once the sink and
//! the answer are done with the request.
//!
//! Per event the cost is paid once, whatever the number of viewers: the
//! fields the view shows were read by admission from the record as it was
//! built ([`Shown`]: the record's bytes are never scanned again), a record
//! Kafka acknowledged is not kept (`GET /live/events/{id}` reads it back
//! from its partition and offset; only a spooled one's bytes are kept),
//! and the request's SSE frames are rendered once into one buffer shared
//! by every viewer.

use std::sync::Arc;

use actix_web::web::Bytes;

use super::LiveHub;
use crate::compact;
use crate::outcome::EventOutcome;
pub use crate::pipeline::{Field, Shown};
use crate::sink::{OutRecord, Stored};

/// One event of the live view; its frame's `data:` is this as JSON
/// ([`LiveEvent::render`]). Per event it holds one allocation (its
/// [`Shown`] texts); the rest is shared with its request's other events,
/// and it lives in its request's [`Published`].
#[derive(Debug, Clone)]
pub struct LiveEvent {
    /// Its number in this gateway's live view (from 1, in publishing
    /// order): `GET /live/events/{id}` answers its stored record while the
    /// view still holds it. 0 until published.
    pub id: u64,
    /// When the gateway answered it (RFC 3339, milliseconds): its
    /// request's, shared.
    pub time: Arc<str>,
    /// The source that sent it (shared by its request's events).
    pub source: Arc<str>,
    /// `type`, `event`, `userId` and `anonymousId` as stored (absent when
    /// nothing was), the record's key and the `messageId`.
    pub fields: Shown,
    /// The answer's status word: accepted, invalid, rejected, ...
    pub status: &'static str,
    /// The topic it went to (its domain topic, or the dead-letter topic),
    /// shared by its request's events that went there.
    pub topic: Option<Arc<str>>,
    /// The partition, once Kafka acknowledged the record.
    pub partition: Option<i32>,
    /// The offset, once Kafka acknowledged the record.
    pub offset: Option<i64>,
    /// The answer's code, unless accepted.
    pub code: Option<&'static str>,
    /// The answer's reason in words, unless accepted.
    pub message: Option<String>,
    /// The schema violations, in the answer's words.
    pub violations: Vec<eventgw_schemas::SchemaViolation>,
    /// Whether a record was stored that a viewer can open
    /// (`GET /live/events/{id}`): a JSON object, read back from Kafka at
    /// `topic`/`partition`/`offset`, or from `payload` when Kafka does not
    /// hold it yet. The frame says `"stored":true`; it never carries the
    /// record (the stream carries what a row shows, not every record's
    /// bytes to every viewer).
    pub stored: bool,
    /// The record's value as stored, its JSON bytes unchanged, when Kafka
    /// does not hold it (spooled, to be replayed); `None` otherwise.
    pub payload: Option<Bytes>,
}

/// One request's events as published: their `event: event` SSE frames
/// rendered once into one buffer, and what viewers' filters read of each,
/// the whole shared (`Arc`) by every channel and viewer. Channels keep,
/// skip and hand out requests, not events: per watched event nothing is
/// counted, cloned or allocated but its frame's bytes and its [`Row`]
/// (the rest of its [`LiveEvent`] is dropped as soon as it is rendered).
#[derive(Debug)]
pub struct Published {
    /// What the filters read of the request's events, in order.
    events: Vec<Row>,
    /// Their frames, one after the other.
    chunk: Bytes,
    /// Where each event's frame ends in `chunk`.
    ends: Vec<usize>,
}

/// What a viewer's filter reads of a published event ([`super::Filter`]):
/// its status and the record's fields.
#[derive(Debug, Clone)]
pub struct Row {
    /// The answer's status word.
    pub status: &'static str,
    /// `type`, `event`, `userId`, `anonymousId`, key and `messageId`.
    pub fields: Shown,
}

impl From<LiveEvent> for Row {
    fn from(event: LiveEvent) -> Self {
        Self { status: event.status, fields: event.fields }
    }
}

impl Published {
    /// Renders the frames of `events` (numbered already) into one buffer,
    /// keeping each event's [`Row`] only; `each` is called with every event
    /// before it is rendered (the hub notes where its record is).
    pub(super) fn new(events: impl IntoIterator<Item = LiveEvent>, mut each: impl FnMut(&mut LiveEvent)) -> Self {
        let events = events.into_iter();
        let count = events.size_hint().0;
        let (mut out, mut ends, mut rows) =
            (Vec::with_capacity(count * 384), Vec::with_capacity(count), Vec::with_capacity(count));
        let mut shared = Shared::default();
        for mut event in events {
            each(&mut event);
            event.render(&mut out, &mut shared);
            ends.push(out.len());
            rows.push(Row::from(event));
        }
        Self { events: rows, chunk: Bytes::from(out), ends }
    }

    /// What the filters read of the events, in request order.
    pub fn events(&self) -> &[Row] {
        &self.events
    }

    /// How many events.
    pub(super) fn len(&self) -> usize {
        self.events.len()
    }

    /// Event `i`'s frame: where it is in the buffer.
    pub fn frame_range(&self, i: usize) -> std::ops::Range<usize> {
        let start = i.checked_sub(1).map_or(0, |before| self.ends[before]);
        start..self.ends[i]
    }

    /// Every event's frame, one after the other, in one buffer (an event's
    /// is [`Self::frame_range`] of it).
    pub fn chunk(&self) -> &Bytes {
        &self.chunk
    }
}

impl LiveEvent {
    /// An event of `source` answered `status` at `time`, with `fields`,
    /// nothing stored and not yet published.
    pub fn new(time: Arc<str>, source: Arc<str>, fields: Shown, status: &'static str) -> Self {
        Self {
            id: 0,
            time,
            source,
            fields,
            status,
            topic: None,
            partition: None,
            offset: None,
            code: None,
            message: None,
            violations: Vec::new(),
            stored: false,
            payload: None,
        }
    }

    /// `track`, `page`, `identify`, ... (as stored).
    pub fn kind(&self) -> Option<&str> {
        self.fields.get(Field::Kind)
    }

    /// The event name of a `track` (as stored).
    pub fn event(&self) -> Option<&str> {
        self.fields.get(Field::Event)
    }

    /// `userId` as stored (hashed when the policy hashes it).
    pub fn user_id(&self) -> Option<&str> {
        self.fields.get(Field::UserId)
    }

    /// `anonymousId` as stored.
    pub fn anonymous_id(&self) -> Option<&str> {
        self.fields.get(Field::AnonymousId)
    }

    /// The record's key.
    pub fn key(&self) -> Option<&str> {
        self.fields.get(Field::Key)
    }

    /// Its `messageId`.
    pub fn message_id(&self) -> Option<&str> {
        self.fields.get(Field::MessageId)
    }

    /// This event's SSE frame (`event: event`, the event as JSON without
    /// its stored record), rendered on its own, for the tests (a published
    /// event's is in its [`Published`]).
    #[cfg(test)]
    pub fn frame(&self) -> Bytes {
        let mut out = Vec::with_capacity(384);
        self.render(&mut out, &mut Shared::default());
        Bytes::from(out)
    }

    /// Appends this event's frame to `out`, written by hand (the JSON
    /// serde writes for the fields in this order, absent ones left out,
    /// plus `"stored":true` when there is a stored record): it is rendered
    /// for every watched event, and serde's escaping of each string byte
    /// by byte was most of its cost. What it shares with the event rendered
    /// before it into `out` (a request's time and source, a destination's
    /// status and topic) is copied from that event's frame, not escaped
    /// again.
    fn render(&self, out: &mut Vec<u8>, shared: &mut Shared) {
        out.extend_from_slice(b"event: event\ndata: {\"id\":");
        compact::write_uint(out, self.id);
        match &shared.origin {
            Some(Rendered { from: (time, source), at })
                if Arc::ptr_eq(time, &self.time) && Arc::ptr_eq(source, &self.source) =>
            {
                out.extend_from_within(at.clone());
            }
            _ => {
                let start = out.len();
                text_field(out, b",\"time\":", Some(&self.time));
                text_field(out, b",\"source\":", Some(&self.source));
                let from = (Arc::clone(&self.time), Arc::clone(&self.source));
                shared.origin = Some(Rendered { from, at: start..out.len() });
            }
        }
        // The record's texts: checked for escapes once, all together.
        let field = if self.fields.is_plain() { plain_field } else { text_field };
        field(out, b",\"type\":", self.kind());
        field(out, b",\"event\":", self.event());
        field(out, b",\"messageId\":", self.message_id());
        field(out, b",\"userId\":", self.user_id());
        field(out, b",\"anonymousId\":", self.anonymous_id());
        let same_route = shared.route.as_ref().is_some_and(|Rendered { from: (status, topic), .. }| {
            std::ptr::eq(*status, self.status)
                && match (topic, &self.topic) {
                    (None, None) => true,
                    (Some(before), Some(this)) => Arc::ptr_eq(before, this),
                    _ => false,
                }
        });
        match &shared.route {
            Some(Rendered { at, .. }) if same_route => out.extend_from_within(at.clone()),
            _ => {
                let start = out.len();
                text_field(out, b",\"status\":", Some(self.status));
                text_field(out, b",\"topic\":", self.topic.as_deref());
                shared.route = Some(Rendered { from: (self.status, self.topic.clone()), at: start..out.len() });
            }
        }
        field(out, b",\"key\":", self.key());
        if let Some(partition) = self.partition {
            out.extend_from_slice(b",\"partition\":");
            push_number(out, partition);
        }
        if let Some(offset) = self.offset {
            out.extend_from_slice(b",\"offset\":");
            push_number(out, offset);
        }
        text_field(out, b",\"code\":", self.code);
        text_field(out, b",\"message\":", self.message.as_deref());
        if !self.violations.is_empty() {
            out.extend_from_slice(b",\"violations\":");
            // Rare (invalid events only); serde's output, or none at all.
            let before = out.len();
            if serde_json::to_writer(&mut *out, &self.violations).is_err() {
                out.truncate(before);
                out.extend_from_slice(b"[]");
            }
        }
        if self.stored {
            out.extend_from_slice(b",\"stored\":true");
        }
        out.extend_from_slice(b"}\n\n");
    }

    /// Where its stored record is, for a viewer opening it.
    pub fn record(&self) -> super::Record {
        match (&self.payload, self.stored, &self.topic, self.partition, self.offset) {
            (Some(bytes), ..) => super::Record::Kept(bytes.clone()),
            (None, true, Some(topic), Some(partition), Some(offset)) => {
                super::Record::Kafka { topic: Arc::clone(topic), partition, offset }
            }
            _ => super::Record::Nothing,
        }
    }
}

/// What the live view copies of one event before its record goes to the
/// sink.
struct Copied {
    /// The record's value (shared with the sink's record, not copied) when
    /// it may have to be kept: only when a spool or dedupe could store it
    /// without Kafka acknowledging it. `None` when none is produced, or
    /// when Kafka is the only place it can be stored (then nothing is
    /// cloned per event: `Bytes` from a `Vec` allocates its shared count
    /// on the first clone).
    payload: Option<Bytes>,
    /// Whether a record is produced and is a JSON object (the only kind a
    /// viewer can open: `/live/events/{id}` answers it as JSON; every
    /// record the gateway builds is one, except a framed domain's, whose
    /// registry wire format puts five bytes before it).
    object: bool,
    /// The fields shown, as admission read them from the record it built,
    /// with the record's key.
    fields: Shown,
}

impl Copied {
    /// The copy of `record` (`None` when none is produced) with the fields
    /// admission read (`shown`); its bytes only when they may be `keep`t.
    fn of(record: Option<&OutRecord>, shown: Option<Shown>, keep: bool) -> Self {
        let mut fields = shown.unwrap_or_default();
        if let Some(record) = record {
            fields.set(Field::Key, &record.key);
        }
        let object = record.is_some_and(|r| r.payload.first() == Some(&b'{'));
        let payload = record.filter(|_| keep && object).map(|r| r.payload.clone());
        Self { payload, object, fields }
    }
}

/// The copies of one request's records, taken only when someone watches.
pub struct Capture {
    /// The source, for the channel and the rows.
    source: String,
    /// One per event, in request order.
    copies: Vec<Copied>,
}

impl LiveHub {
    /// Copies the records of `source`'s events (each `None` when it is not
    /// produced) with what admission read of them ([`Shown`]) when anyone
    /// watches that source; `None`, having built nothing, when nobody does.
    /// `keep`: whether a record may be stored without Kafka acknowledging
    /// it (spooled, or found a duplicate), so that its bytes may have to be
    /// kept for a viewer to open; otherwise no record's bytes are held.
    pub fn capture<'r>(
        &self,
        source: &str,
        keep: bool,
        events: impl Iterator<Item = (Option<&'r OutRecord>, Option<Shown>)>,
    ) -> Option<Capture> {
        if !self.watches(source) {
            return None;
        }
        let copies = events.map(|(record, shown)| Copied::of(record, shown, keep)).collect();
        Some(Capture { source: source.to_owned(), copies })
    }
}

impl Capture {
    /// The rows of the request once answered: each event's `outcome` and
    /// where its record was stored (`stored`, in request order), at `time`,
    /// built one at a time as they are published. The time, the source and
    /// each topic are one allocation for the request, shared by its rows.
    pub fn finish<'o>(
        self,
        time: &str,
        outcomes: &'o [EventOutcome],
        stored: &'o [Option<Stored>],
    ) -> impl ExactSizeIterator<Item = LiveEvent> + 'o {
        let Self { source, copies } = self;
        let (time, source): (Arc<str>, Arc<str>) = (Arc::from(time), Arc::from(source));
        let mut topics: Vec<Arc<str>> = Vec::new();
        copies.into_iter().zip(outcomes).enumerate().map(move |(i, (copied, outcome))| {
            let topic = outcome.topic.as_deref().map(|name| match topics.iter().find(|t| &***t == name) {
                Some(topic) => Arc::clone(topic),
                None => {
                    let topic: Arc<str> = Arc::from(name);
                    topics.push(Arc::clone(&topic));
                    topic
                }
            });
            let mut event = row(&time, &source, copied, outcome, stored.get(i).copied().flatten());
            event.topic = topic;
            event
        })
    }
}

/// The row of one event (its topic left for the caller to share). A
/// viewer can open what was stored, and only that: a record Kafka
/// acknowledged is read back from its partition and offset when a viewer
/// opens it, so watching never holds every record in memory; the bytes of
/// one Kafka does not hold (spooled, or the duplicate of one stored
/// earlier) are kept. A record that was not stored (refused by Kafka for
/// itself alone) is not offered.
fn row(
    time: &Arc<str>,
    source: &Arc<str>,
    copied: Copied,
    outcome: &EventOutcome,
    stored: Option<Stored>,
) -> LiveEvent {
    let Copied { payload, object, mut fields } = copied;
    if let Some(id) = &outcome.message_id {
        fields.set(Field::MessageId, id);
    }
    let mut event = LiveEvent::new(Arc::clone(time), Arc::clone(source), fields, outcome.status.as_str());
    match stored {
        Some(Stored::Kafka(at)) => {
            (event.partition, event.offset) = (Some(at.partition), Some(at.offset));
            event.stored = object;
        }
        Some(Stored::Spooled | Stored::Duplicate) => {
            event.stored = payload.is_some();
            event.payload = payload;
        }
        None => {}
    }
    event.code = outcome.code;
    event.message.clone_from(&outcome.message);
    event.violations.clone_from(&outcome.errors);
    event
}

/// `,"name":"value"` when there is a value; `name` is `,"name":`.
fn text_field(out: &mut Vec<u8>, name: &[u8], value: Option<&str>) {
    if let Some(value) = value {
        out.extend_from_slice(name);
        compact::write_str(out, value);
    }
}

/// As [`text_field`], for a `value` known to need no escaping.
fn plain_field(out: &mut Vec<u8>, name: &[u8], value: Option<&str>) {
    if let Some(value) = value {
        out.reserve(name.len() + value.len() + 2);
        out.extend_from_slice(name);
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
    }
}

/// What the frames of a request's events share, as the last event that
/// wrote it rendered it: what it was rendered from (compared by pointer:
/// a request's rows share one time, one source and one topic per
/// destination; held here once per part rendered, not per event) and
/// where it is in the buffer.
#[derive(Default)]
struct Shared {
    /// `,"time":…,"source":…`.
    origin: Option<Rendered<(Arc<str>, Arc<str>)>>,
    /// `,"status":…,"topic":…` (no topic when the event has none).
    route: Option<Rendered<Route>>,
}

/// An event's status word and topic (none for an event sent nowhere).
type Route = (&'static str, Option<Arc<str>>);

/// A part of a frame: what it was rendered from, and where it is.
struct Rendered<F> {
    /// What it was rendered from.
    from: F,
    /// Where it is in the buffer.
    at: std::ops::Range<usize>,
}

/// `n` in decimal (ids, partitions and offsets: three per watched event,
/// without the formatting machinery).
fn push_number(out: &mut Vec<u8>, n: impl Into<i64>) {
    let n: i64 = n.into();
    if n < 0 {
        out.push(b'-');
    }
    compact::write_uint(out, n.unsigned_abs());
}

#[cfg(test)]
#[path = "event_tests.rs"]
mod tests;
