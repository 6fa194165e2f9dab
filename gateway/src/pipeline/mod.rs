//! One event's way through the gateway after the request is authenticated
//! and charged, one file per step: validate (`validate.rs`: an object,
//! size, `messageId`, suppression) → normalise the envelope
//! (`envelope.rs`) → route and check against the contract (`route.rs`) →
//! its time (`clock.rs`) → enrich (`enrichment.rs`) → its record
//! (`record.rs`). The result is a [`Verdict`] per event; nothing here
//! touches the network. [`Admission`] is built once per request by
//! `crate::stages::admit`.

mod clock;
mod enrichment;
mod envelope;
mod record;
mod route;
mod validate;

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use eventgw_schemas::{Catalog, Rollout, SchemaViolation};
use serde_json::{Map, Value};

pub use self::clock::{
    CORRECTION_HEADER, EventTime, INVALID_SENT_AT, MAX_CLOCK_SKEW_SECS, SKEW_EXCEEDED, format_time, parse_time,
};
pub use self::enrichment::MAX_ENRICHMENT_BYTES;
pub use self::envelope::{MAX_KEY_BYTES, MAX_MESSAGE_ID_LEN, check_message_id};
use self::record::warning_text;
pub use self::route::IDENTITY_DOMAIN;
use crate::auth::{AuthMethod, Source};
use crate::code::Code;
use crate::compact;
use crate::config::KafkaConfig;
use crate::enrichment::client::{Client, ClientResolver};
use crate::enrichment::request::EdgeRequest;
use crate::registry::SchemaIds;
use crate::sink::{OutRecord, Text};
use crate::wire::Undecodable;

/// What happens to one event.
#[derive(Debug)]
pub enum Verdict {
    /// Valid: produce `record` to its domain topic.
    Accept(OutRecord),
    /// Broke its contract: produce `record` (an envelope with the reasons)
    /// to the dead-letter topic, and tell the client.
    DeadLetter {
        /// The dead-letter record.
        record: OutRecord,
        /// Stable machine code of the reason (its [`Code::as_str`] is
        /// written into the record).
        code: Code,
        /// The reason in words.
        message: String,
        /// Schema violations, when the reason is the schema.
        errors: Vec<SchemaViolation>,
    },
    /// Not produced anywhere; the client is told why.
    Reject {
        /// Stable machine code of the reason.
        code: Code,
        /// The reason in words.
        message: String,
    },
    /// The same `messageId` as an earlier event of the batch that is
    /// produced: stored once, answered `duplicate`.
    Duplicate {
        /// Index of that earlier event in the request.
        first: usize,
    },
}

impl Verdict {
    /// The record it produces, if any (its domain's or the dead letter's).
    pub fn record(&self) -> Option<&OutRecord> {
        match self {
            Self::Accept(record) | Self::DeadLetter { record, .. } => Some(record),
            Self::Reject { .. } | Self::Duplicate { .. } => None,
        }
    }

    /// Whether the event is produced to Kafka (its topic or the dead-letter
    /// topic).
    pub fn is_produced(&self) -> bool {
        matches!(self, Self::Accept(_) | Self::DeadLetter { .. })
    }

    /// Whether a strict source refuses the batch for this event: anything
    /// but accepted, except a duplicate of an accepted event.
    pub fn refuses_strict_batch(&self) -> bool {
        // A suppressed event is the user's wish honoured, not a refusal.
        !matches!(self, Self::Accept(_) | Self::Duplicate { .. } | Self::Reject { code: Code::Suppressed, .. })
    }
}

/// One event's verdict and its id.
#[derive(Debug)]
pub struct Planned {
    /// The event's `messageId` (the client's or the one given here).
    pub message_id: Option<String>,
    /// What happens to it.
    pub verdict: Verdict,
    /// The schema it broke, if it broke one (dead-lettered under `enforce`,
    /// waived under `warn` and `observe`): the stage counts it in
    /// `eventgw_contract_violations_total`.
    pub violation: Option<ContractViolation>,
    /// What the live view shows of its record, when the live view watched
    /// the source as the request was admitted ([`Admission::shown`]).
    pub shown: Option<Shown>,
}

/// The fields the live view shows and filters on, read from an event's
/// record while it is built (after every privacy action: a hashed `userId`
/// is the hash), so the view never scans the record's bytes again. A field
/// that is not a string is absent. The live view adds the record's key and
/// the event's `messageId` when it shows the event.
///
/// All of them are one allocation (the texts one after the other, each
/// field a span of them): the view builds one of these for every watched
/// event, and an allocation per field was most of what watching cost.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Shown {
    /// The fields' texts, one after the other.
    text: String,
    /// Where each [`Field`] is in `text`; `None` when absent.
    spans: [Option<(u32, u32)>; FIELDS],
}

/// A field of [`Shown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `type`: `track`, `page`, `identify`, ...
    Kind,
    /// A `track`'s event name.
    Event,
    /// `userId` as stored.
    UserId,
    /// `anonymousId` as stored.
    AnonymousId,
    /// The record's key (added by the live view).
    Key,
    /// The event's `messageId` (added by the live view).
    MessageId,
}

/// How many [`Field`]s there are.
const FIELDS: usize = 6;

/// Room left in a [`Shown`]'s text for the key and `messageId` the live
/// view adds (a UUID each, usually), so adding them does not move it.
const ROOM_FOR_ADDED: usize = 80;

impl Shown {
    /// The four fields read from a record (`type`, `event`, `userId`,
    /// `anonymousId`).
    pub fn new(kind: Option<&str>, event: Option<&str>, user_id: Option<&str>, anonymous_id: Option<&str>) -> Self {
        let read = [kind, event, user_id, anonymous_id];
        let mut shown = Self {
            text: String::with_capacity(read.iter().flatten().map(|t| t.len()).sum::<usize>() + ROOM_FOR_ADDED),
            spans: [None; FIELDS],
        };
        for (field, value) in [Field::Kind, Field::Event, Field::UserId, Field::AnonymousId].into_iter().zip(read) {
            if let Some(value) = value {
                shown.set(field, value);
            }
        }
        shown
    }

    /// The four fields of a record, in one pass over its keys (cheaper than
    /// four hashed lookups for the dozen keys of an event).
    fn of(event: &Map<String, Value>) -> Self {
        let mut read: [Option<&str>; 4] = [None; 4];
        for (key, value) in event {
            let slot = match key.as_str() {
                "type" => 0,
                "event" => 1,
                "userId" => 2,
                "anonymousId" => 3,
                _ => continue,
            };
            read[slot] = value.as_str();
        }
        let [kind, name, user_id, anonymous_id] = read;
        Self::new(kind, name, user_id, anonymous_id)
    }

    /// Sets `field` to `value` (its earlier value, if any, is no longer
    /// shown but still held).
    pub fn set(&mut self, field: Field, value: &str) {
        // A record's text is far below 4 GiB (the event size limit); a
        // field that would not fit is left absent rather than wrapped.
        let (Ok(start), Ok(end)) = (u32::try_from(self.text.len()), u32::try_from(self.text.len() + value.len()))
        else {
            return;
        };
        self.text.push_str(value);
        self.spans[field as usize] = Some((start, end));
    }

    /// Whether no text of it needs escaping in a JSON string (true of
    /// nearly every event's names and ids): one scan for all its fields.
    pub fn is_plain(&self) -> bool {
        crate::compact::plain_until(self.text.as_bytes(), 0) == self.text.len()
    }

    /// The text of `field`, when present.
    pub fn get(&self, field: Field) -> Option<&str> {
        let (start, end) = self.spans[field as usize]?;
        self.text.get(start as usize..end as usize)
    }
}

/// Where the record being built leaves its [`Shown`] fields for
/// [`Planned::shown`]: present in an [`Admission`] only while the live view
/// watches the request's source.
#[derive(Default)]
pub struct ShownSlot(Cell<Option<Shown>>);

/// An event that broke its catalog schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractViolation {
    /// `domain/schema`.
    pub schema: String,
    /// The schema's rollout: whether the violation was enforced.
    pub rollout: Rollout,
}

/// Everything an event's verdict depends on besides the event: the
/// pipeline's view of the request's one context (`stages::Request`), its
/// principal and the time it was received, built from them by
/// `stages::admit::admission` and nothing else.
pub struct Admission<'a> {
    /// The compiled schema catalog.
    pub catalog: &'a Catalog,
    /// The authenticated source.
    pub source: &'a Source,
    /// Dead-letter, identity and unclassified topics.
    pub kafka: &'a KafkaConfig,
    /// When the gateway received the request.
    pub received_at: DateTime<Utc>,
    /// `received_at` formatted once per request, not once per event, and
    /// shared by the request's records (their `received-at` header).
    pub received_at_text: Arc<str>,
    /// The batch's `sentAt`, if any; an event's own `sentAt` wins.
    pub sent_at: Option<&'a str>,
    /// How the request authenticated, carried as the `auth` header.
    pub auth_method: AuthMethod,
    /// The tracker protocol the request came in (the `protocol` record header).
    pub protocol: &'static str,
    /// A verified JWT's subject: it replaces whatever `userId` the event
    /// says, so a client cannot speak for another user.
    pub subject: Option<&'a str>,
    /// Further identities the JWT vouches for: with the subject, the only
    /// ones an `alias` under the token may name as `previousId`.
    pub vouched: &'a [String],
    /// The request's client, resolved once when it arrived.
    pub client: &'a Client,
    /// Applies the anonymise setting to client-reported IPs.
    pub clients: &'a ClientResolver,
    /// Largest event accepted, as compact JSON.
    pub max_event_bytes: usize,
    /// Registry ids of framed domains' schemas (Confluent wire format).
    pub schema_ids: Arc<SchemaIds>,
    /// Geo, device, bots, IP policy, personal data, suppression, consent
    /// for the request's events (its caches and counts are the request's).
    pub edge: EdgeRequest<'a>,
    /// Present when the live view watches the source: each record built
    /// leaves what the view shows of it here (`None`: nothing is read).
    pub shown: Option<ShownSlot>,
}

/// The contract an event is checked against: a catalog event, an identity
/// call, or nothing (unknown events passed through).
struct Route {
    topic: Text,
    key: String,
    schema: Text,
    version: Text,
    name: Text,
    /// Under the `warn` rollout, the waived violations for the
    /// `contract-warning` header.
    warning: Option<String>,
}

/// Longest `contract-warning` header value; the full reasons are in the
/// schema, the header only has to say what to look for.
pub const MAX_WARNING_BYTES: usize = 1024;

/// The hasher of a map whose keys are already hashes (keyed SipHash of a
/// `messageId`): a key is its own hash.
#[derive(Default)]
struct Spread(u64);

impl Hasher for Spread {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; any other input is folded in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl Admission<'_> {
    /// Decides the fate of every event of one request, in order. A
    /// `messageId` repeated within the request is produced once: later
    /// copies of an event that is produced are [`Verdict::Duplicate`]. An
    /// event its decoder could not read (`undecodable`) is dead-lettered as
    /// sent with its reason, and nothing else is done with it.
    pub fn admit_all(&self, events: Vec<Value>, undecodable: Vec<Undecodable>) -> Vec<Planned> {
        let dedupe = events.len() > 1;
        let mut unreadable: Vec<Option<String>> = vec![None; events.len()];
        for Undecodable { index, reason } in undecodable {
            if let Some(slot) = unreadable.get_mut(index) {
                *slot = Some(reason);
            }
        }
        // Ids are remembered by hash and index, not copied: the earlier
        // event's own id (in `planned`) confirms a match. Two different ids
        // sharing a 64-bit hash in one request (odds about 1e-14 for 500
        // events) would at worst store a repeated id twice, which is what
        // downstream deduplication on `messageId` is for anyway.
        // The map is keyed by those hashes and sized once for the request:
        // keyed SipHash already spread them, so hashing each again would
        // only cost.
        let ids = RandomState::new();
        let mut produced: HashMap<u64, usize, BuildHasherDefault<Spread>> =
            HashMap::with_capacity_and_hasher(if dedupe { events.len() } else { 0 }, BuildHasherDefault::default());
        let mut planned: Vec<Planned> = Vec::with_capacity(events.len());
        for (index, event) in events.into_iter().enumerate() {
            if let Some(reason) = unreadable[index].take() {
                planned.push(self.undecodable(&event, reason));
                continue;
            }
            let hash = match compact::field(&event, "messageId") {
                Some(Value::String(id)) if dedupe => {
                    let hash = ids.hash_one(id.as_str());
                    let first = produced.get(&hash).copied();
                    if let Some(first) = first.filter(|f| planned[*f].message_id.as_deref() == Some(id.as_str())) {
                        planned.push(Planned {
                            message_id: Some(id.clone()),
                            verdict: Verdict::Duplicate { first },
                            violation: None,
                            shown: None,
                        });
                        continue;
                    }
                    Some(hash)
                }
                _ => None,
            };
            let decided = self.admit(event);
            if let (Some(hash), true) = (hash, decided.verdict.is_produced()) {
                produced.entry(hash).or_insert(index);
            }
            planned.push(decided);
        }
        planned
    }

    /// Decides one event's fate.
    pub fn admit(&self, event: Value) -> Planned {
        let (mut event, message_id) = match self.validate(event) {
            Ok(valid) => valid,
            Err((message_id, code, message)) => return reject(message_id, code, message),
        };
        let normalized = envelope::normalize(&mut event);
        // No copy of the event is made: enrichment only mutates it once every
        // check has passed, so a refused event is still the one received
        // (with its envelope normalised).
        let event = Value::Object(event);
        let mut violation = None;
        let verdict = match normalized.map_err(|(code, message)| Refusal::dead(code, message)).and_then(|()| {
            let route = self.route(&event, &mut violation)?;
            envelope::check_key(&route.key).map_err(|(code, message)| Refusal::dead(code, message))?;
            Ok(route)
        }) {
            Ok(route) => match (
                clock::event_time(&event, self.sent_at, self.received_at),
                self.edge.consent(&route.name, &event),
            ) {
                (Ok(time), Ok(consent_warning)) => self.accept(&route, &message_id, event, &time, consent_warning),
                (Err(message), _) => self.dead_letter(&event, &message_id, Code::InvalidTimestamp, message, Vec::new()),
                (_, Err((code, message))) => self.dead_letter(&event, &message_id, code, message, Vec::new()),
            },
            Err(Refusal::Reject(code, message)) => Verdict::Reject { code, message },
            Err(Refusal::DeadLetter(code, message, errors)) => {
                self.dead_letter(&event, &message_id, code, message, errors)
            }
        };
        Planned { message_id: Some(message_id), verdict, violation, shown: self.take_shown() }
    }

    /// Notes what the live view shows of the record built from `event`,
    /// when it watches.
    fn note_shown(&self, event: &Map<String, Value>) {
        if let Some(slot) = &self.shown {
            slot.0.set(Some(Shown::of(event)));
        }
    }

    /// What the last record built left for the live view.
    fn take_shown(&self) -> Option<Shown> {
        self.shown.as_ref().and_then(|slot| slot.0.take())
    }

    /// Enriches a valid event into its record, unless enrichment made the
    /// record larger than the event limit plus [`MAX_ENRICHMENT_BYTES`].
    fn accept(
        &self,
        route: &Route,
        message_id: &str,
        event: Value,
        time: &EventTime,
        consent_warning: Option<String>,
    ) -> Verdict {
        let Value::Object(map) = event else { unreachable!("admit builds the event as an object") };
        let (payload, marks) = self.enriched_payload(&route.name, map, time, consent_warning);
        let mut record = self.record(route, message_id, payload, time.flag);
        marks.apply(&mut record);
        let bound = self.max_event_bytes + MAX_ENRICHMENT_BYTES;
        if record.payload.len() > bound {
            let message = format!("the enriched event is {} bytes; at most {bound} are stored", record.payload.len());
            return Verdict::Reject { code: Code::EventTooLarge, message };
        }
        Verdict::Accept(record)
    }
}

enum Refusal {
    Reject(Code, String),
    DeadLetter(Code, String, Vec<SchemaViolation>),
}

impl Refusal {
    fn dead(code: Code, message: String) -> Self {
        Self::DeadLetter(code, message, Vec::new())
    }
}

fn reject(message_id: Option<String>, code: Code, message: String) -> Planned {
    Planned { message_id, verdict: Verdict::Reject { code, message }, violation: None, shown: None }
}
