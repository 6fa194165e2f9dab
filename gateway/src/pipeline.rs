//! One event's way through the gateway after the request is authenticated:
//! classify → check against the catalog → enrich → route. The result is a
//! [`Verdict`] per event; nothing here touches the network.

use chrono::{DateTime, SecondsFormat, Utc};
use eventgw_schemas::{Catalog, Rollout, SchemaViolation, Violation};
use serde_json::{Map, Value, json};

use crate::auth::Source;
use crate::config::{KafkaConfig, UnknownEvents};
use crate::enrich::{ClientInfo, ClientResolver};
use crate::sink::OutRecord;

/// Longest `messageId` accepted; it is a dedup key downstream, not a payload.
pub const MAX_MESSAGE_ID_LEN: usize = 128;

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
        /// Stable machine code of the reason.
        code: &'static str,
        /// The reason in words.
        message: String,
        /// Schema violations, when the reason is the schema.
        errors: Vec<SchemaViolation>,
    },
    /// Not produced anywhere; the client is told why.
    Reject {
        /// Stable machine code of the reason.
        code: &'static str,
        /// The reason in words.
        message: String,
    },
}

/// One event's verdict and its id.
#[derive(Debug)]
pub struct Planned {
    /// The event's `messageId` (the client's or the one given here).
    pub message_id: Option<String>,
    /// What happens to it.
    pub verdict: Verdict,
}

/// Everything an event's verdict depends on besides the event.
pub struct Admission<'a> {
    /// The compiled schema catalog.
    pub catalog: &'a Catalog,
    /// The authenticated source.
    pub source: &'a Source,
    /// Dead-letter, identity and unclassified topics.
    pub kafka: &'a KafkaConfig,
    /// When the gateway received the request.
    pub received_at: DateTime<Utc>,
    /// `received_at` formatted once per request, not once per event.
    pub received_at_text: &'a str,
    /// The batch's `sentAt`, if any; an event's own `sentAt` wins.
    pub sent_at: Option<&'a str>,
    /// How the request authenticated, carried as the `auth` header.
    pub auth_method: &'static str,
    /// A verified JWT's subject: it replaces whatever `userId` the event
    /// says, so a client cannot speak for another user.
    pub subject: Option<&'a str>,
    /// The client's IP and user agent, as the gateway sees them.
    pub client: &'a ClientInfo,
    /// Applies the anonymise setting to client-reported IPs.
    pub clients: &'a ClientResolver,
    /// Largest event accepted, as compact JSON.
    pub max_event_bytes: usize,
    /// Where contract violations are counted, by schema and rollout.
    pub metrics: &'a crate::telemetry::Metrics,
    /// Geo, device, bots, IP policy, personal data, suppression, consent.
    pub edge: &'a crate::enrichment::request::EdgeRequest<'a>,
}

/// The contract an event is checked against: a catalog event, an identity
/// call, or nothing (unknown events passed through).
struct Route {
    topic: String,
    key: String,
    schema: String,
    version: String,
    name: String,
    /// Under the `warn` rollout, the waived violations for the
    /// `contract-warning` header.
    warning: Option<String>,
}

/// Longest `contract-warning` header value; the full reasons are in the
/// schema, the header only has to say what to look for.
pub const MAX_WARNING_BYTES: usize = 1024;

impl Admission<'_> {
    /// Decides one event's fate.
    pub fn admit(&self, event: Value) -> Planned {
        let Value::Object(mut event) = event else {
            return reject(None, "event_not_object", "each event in `batch` must be a JSON object".into());
        };
        let size = compact_size(&event);
        if size > self.max_event_bytes {
            let id = event.get("messageId").and_then(Value::as_str).map(str::to_owned);
            let message = format!("the event is {size} bytes; at most {} are accepted", self.max_event_bytes);
            return reject(id, "event_too_large", message);
        }
        let message_id = match event.get("messageId") {
            None | Some(Value::Null) => uuid::Uuid::now_v7().to_string(),
            Some(Value::String(id)) if !id.is_empty() && id.len() <= MAX_MESSAGE_ID_LEN => id.clone(),
            Some(_) => {
                let message = format!("`messageId` must be a non-empty string of at most {MAX_MESSAGE_ID_LEN} bytes");
                return reject(None, "invalid_message_id", message);
            }
        };
        event.insert("messageId".into(), Value::String(message_id.clone()));
        event.remove("writeKey");
        if let Some(subject) = self.subject {
            event.insert("userId".into(), Value::String(subject.to_owned()));
        }
        if self.edge.suppressed(&event) {
            let message = "the user asked not to be tracked; the event was dropped".into();
            return reject(Some(message_id), crate::privacy::SUPPRESSED, message);
        }
        // No copy of the event is made: enrichment only mutates it once every
        // check has passed, so a refused event is still the one received.
        let event = Value::Object(event);
        let verdict = match self.route(&event) {
            Ok(route) => match (self.corrected_timestamp(&event), self.edge.consent(&route.name, &event)) {
                (Ok(timestamp), Ok(consent_warning)) => {
                    let Value::Object(mut map) = event else { unreachable!("built as an object above") };
                    self.enrich(&mut map, timestamp);
                    let marks = self.edge.finish(&route.name, consent_warning, &mut map);
                    let mut record = self.record(&route, &message_id, Value::Object(map));
                    marks.apply(&mut record);
                    Verdict::Accept(record)
                }
                (Err(message), _) => self.dead_letter(&event, &message_id, "invalid_timestamp", message, Vec::new()),
                (_, Err((code, message))) => self.dead_letter(&event, &message_id, code, message, Vec::new()),
            },
            Err(Refusal::Reject(code, message)) => Verdict::Reject { code, message },
            Err(Refusal::DeadLetter(code, message, errors)) => {
                self.dead_letter(&event, &message_id, code, message, errors)
            }
        };
        Planned { message_id: Some(message_id), verdict }
    }

    fn route(&self, event: &Value) -> Result<Route, Refusal> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or_default();
        let name = match kind {
            "track" => match event.get("event").and_then(Value::as_str) {
                Some(name) if !name.is_empty() => name.to_owned(),
                _ => return Err(Refusal::dead("missing_event_name", "a track call needs an `event` name".into())),
            },
            "page" => "Page Viewed".to_owned(),
            "screen" => "Screen Viewed".to_owned(),
            "identify" | "group" | "alias" => return self.identity_route(kind, event),
            "" => return Err(Refusal::Reject("invalid_type", "the event has no `type`".into())),
            other => {
                let message = format!("`type` `{other}` is not one of track, page, screen, identify, group, alias");
                return Err(Refusal::Reject("invalid_type", message));
            }
        };
        let Some(event_type) = self.catalog.event(&name) else {
            return self.unknown_event(&name, event);
        };
        if !self.source.domains.contains(&event_type.domain) {
            let message = format!("source `{}` may not send `{name}` (domain `{}`)", self.source.id, event_type.domain);
            return Err(Refusal::Reject("domain_not_allowed", message));
        }
        let pinned = match event.pointer("/context/schemaVersion") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64().and_then(|v| u32::try_from(v).ok()) {
                Some(v) => Some(v),
                None => {
                    let message = "`context.schemaVersion` must be a positive integer".into();
                    return Err(Refusal::dead("invalid_schema_version", message));
                }
            },
        };
        let schema_name = format!("{}/{}", event_type.domain, event_type.schema);
        let rollout = event_type.rollout();
        let checked = event_type.check_rollout(event, pinned).map_err(|v| {
            if matches!(v, Violation::Schema(_)) {
                self.metrics.contract_violations.with_label_values(&[&schema_name, rollout.as_str()]).inc();
            }
            violation(&name, v)
        })?;
        let warning = if checked.waived.is_empty() {
            None
        } else {
            self.metrics.contract_violations.with_label_values(&[&schema_name, rollout.as_str()]).inc();
            (rollout == Rollout::Warn).then(|| warning_text(&checked.waived))
        };
        Ok(Route {
            topic: event_type.topic.clone(),
            key: checked.key,
            schema: schema_name,
            version: checked.schema.version.to_string(),
            name,
            warning,
        })
    }

    fn unknown_event(&self, name: &str, event: &Value) -> Result<Route, Refusal> {
        let message = format!("`{name}` is not in the event catalog");
        match self.source.unknown_events {
            UnknownEvents::Reject => Err(Refusal::Reject("unknown_event", message)),
            UnknownEvents::DeadLetter => Err(Refusal::dead("unknown_event", message)),
            UnknownEvents::Pass => Ok(Route {
                topic: self.kafka.unclassified_topic.clone(),
                key: user_key(event)
                    .ok_or_else(|| Refusal::dead("missing_key", "needs `userId` or `anonymousId`".into()))?,
                schema: "unclassified".into(),
                version: "0".into(),
                name: name.to_owned(),
                warning: None,
            }),
        }
    }

    /// `identify`, `group` and `alias` carry identity, not domain events:
    /// they share one topic, keyed by user, with the Segment spec's fields.
    fn identity_route(&self, kind: &str, event: &Value) -> Result<Route, Refusal> {
        let required: &[&str] = match kind {
            "group" => &["groupId"],
            "alias" => &["userId", "previousId"],
            _ => &[],
        };
        let missing: Vec<SchemaViolation> = required
            .iter()
            .filter(|f| event.get(**f).and_then(Value::as_str).is_none_or(str::is_empty))
            .map(|f| SchemaViolation { path: format!("/{f}"), message: format!("`{f}` is required for {kind}") })
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::DeadLetter("schema_violation", format!("the {kind} call is incomplete"), missing));
        }
        let key =
            user_key(event).ok_or_else(|| Refusal::dead("missing_key", "needs `userId` or `anonymousId`".into()))?;
        Ok(Route {
            topic: self.kafka.identity_topic.clone(),
            key,
            schema: format!("identity/{kind}"),
            version: "1".into(),
            name: kind.to_owned(),
            warning: None,
        })
    }

    /// `timestamp` corrected for the device's clock skew (the offset between
    /// its `sentAt` and our `receivedAt`); `receivedAt` when it sent none.
    fn corrected_timestamp(&self, event: &Value) -> Result<DateTime<Utc>, String> {
        let received = self.received_at;
        let sent_at = event.get("sentAt").and_then(Value::as_str).or(self.sent_at);
        let sent_at = sent_at.and_then(|s| DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&Utc));
        let timestamp = match event.get("timestamp") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(
                DateTime::parse_from_rfc3339(s)
                    .map_err(|e| format!("`timestamp` is not an ISO 8601 date-time: {e}"))?
                    .with_timezone(&Utc),
            ),
            Some(_) => return Err("`timestamp` must be an ISO 8601 string".into()),
        };
        Ok(match (timestamp, sent_at) {
            (Some(ts), Some(sent)) => ts + (received - sent),
            (Some(ts), None) => ts,
            (None, _) => received,
        })
    }

    /// Adds `receivedAt`, the corrected `timestamp` (keeping the client's as
    /// `originalTimestamp`) and the client context.
    fn enrich(&self, event: &mut Map<String, Value>, corrected: DateTime<Utc>) {
        event.insert("receivedAt".into(), Value::String(self.received_at_text.to_owned()));
        if let Some(original) = event.remove("timestamp") {
            event.insert("originalTimestamp".into(), original);
        }
        event.insert("timestamp".into(), Value::String(format_time(corrected)));
        self.enrich_context(event);
    }

    /// `context.ip` and `context.userAgent`, unless the client reported its
    /// own (server SDKs forward their users'); the anonymise setting applies
    /// to both.
    fn enrich_context(&self, event: &mut Map<String, Value>) {
        let context = event.entry("context").or_insert_with(|| Value::Object(Map::new()));
        // A non-object `context` is the client's data; never overwrite it.
        let Some(context) = context.as_object_mut() else { return };
        let reported = context.get("ip").and_then(Value::as_str).and_then(|s| s.parse::<std::net::IpAddr>().ok());
        match (reported, self.client.ip) {
            (Some(ip), _) => {
                context.insert("ip".into(), Value::String(self.clients.reported_ip(ip).to_string()));
            }
            (None, Some(ip)) => {
                context.insert("ip".into(), Value::String(ip.to_string()));
            }
            (None, None) => {}
        }
        if let (None, Some(agent)) = (context.get("userAgent"), &self.client.user_agent) {
            context.insert("userAgent".into(), Value::String(agent.clone()));
        }
    }

    fn headers(&self, message_id: &str, route: Option<&Route>) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            ("event-id", message_id.to_owned()),
            ("source", self.source.id.clone()),
            ("received-at", self.received_at_text.to_owned()),
            ("auth", self.auth_method.to_owned()),
        ];
        if let Some(route) = route {
            headers.push(("event-name", route.name.clone()));
            headers.push(("schema", route.schema.clone()));
            headers.push(("schema-version", route.version.clone()));
            if let Some(warning) = &route.warning {
                headers.push(("contract-warning", warning.clone()));
            }
        }
        headers
    }

    fn record(&self, route: &Route, message_id: &str, event: Value) -> OutRecord {
        OutRecord {
            topic: route.topic.clone(),
            key: route.key.clone(),
            payload: event.to_string().into_bytes(),
            headers: self.headers(message_id, Some(route)),
        }
    }

    fn dead_letter(
        &self,
        original: &Value,
        message_id: &str,
        code: &'static str,
        message: String,
        errors: Vec<SchemaViolation>,
    ) -> Verdict {
        let envelope = json!({
            "reason": code,
            "message": message,
            "errors": errors,
            "source": self.source.id,
            "receivedAt": self.received_at_text,
            "messageId": message_id,
            "event": self.edge.scrub(original),
        });
        let mut headers = self.headers(message_id, None);
        headers.push(("dead-letter-reason", code.to_owned()));
        let record = OutRecord {
            topic: self.kafka.dead_letter_topic.clone(),
            key: message_id.to_owned(),
            payload: envelope.to_string().into_bytes(),
            headers,
        };
        Verdict::DeadLetter { record, code, message, errors }
    }
}

enum Refusal {
    Reject(&'static str, String),
    DeadLetter(&'static str, String, Vec<SchemaViolation>),
}

impl Refusal {
    fn dead(code: &'static str, message: String) -> Self {
        Self::DeadLetter(code, message, Vec::new())
    }
}

fn violation(name: &str, violation: Violation) -> Refusal {
    match violation {
        Violation::Schema(errors) => {
            Refusal::DeadLetter("schema_violation", format!("`{name}` does not match its schema"), errors)
        }
        Violation::UnknownVersion { requested, latest } => Refusal::dead(
            "unknown_schema_version",
            format!("`{name}` has no schema version {requested}; the newest is {latest}"),
        ),
        Violation::MissingKey(fields) => {
            Refusal::dead("missing_key", format!("`{name}` is keyed by {fields}, and none is present"))
        }
    }
}

fn reject(message_id: Option<String>, code: &'static str, message: String) -> Planned {
    Planned { message_id, verdict: Verdict::Reject { code, message } }
}

fn user_key(event: &Value) -> Option<String> {
    ["userId", "anonymousId"]
        .iter()
        .find_map(|f| event.get(*f).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned))
}

/// The waived violations as one header value, `path: message; ...`, cut
/// at [`MAX_WARNING_BYTES`] on a character boundary.
fn warning_text(waived: &[SchemaViolation]) -> String {
    let mut text = waived.iter().map(|v| format!("{}: {}", v.path, v.message)).collect::<Vec<_>>().join("; ");
    if text.len() > MAX_WARNING_BYTES {
        let mut cut = MAX_WARNING_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// Length of `event` as compact JSON, counted without building the text.
fn compact_size(event: &Map<String, Value>) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, event) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

/// RFC 3339 with milliseconds and `Z`, the format of every time we write.
pub fn format_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}
