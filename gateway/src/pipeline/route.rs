//! Which contract and topic an event belongs to: a catalog event of a domain
//! the source may send, an identity call (the `identity` domain), or an
//! unknown event under the source's `unknown_events` rule.

use eventgw_schemas::{Rollout, SchemaViolation, Violation};
use serde_json::Value;

use super::{Admission, ContractViolation, Refusal, Route, warning_text};
use crate::code::Code;
use crate::compact::field;
use crate::config::UnknownEvents;
use crate::sink::Text;

/// The domain a source must list to send `identify`, `group` and `alias`
/// calls: they merge and rename users, so not every write key may.
pub const IDENTITY_DOMAIN: &str = "identity";

impl Admission<'_> {
    /// The event's route, or why it has none; `violation` says which
    /// schema it broke, if it broke one (also when the rollout waives it).
    pub(super) fn route(&self, event: &Value, violation: &mut Option<ContractViolation>) -> Result<Route, Refusal> {
        let kind = field(event, "type").and_then(Value::as_str).unwrap_or_default();
        let name = match kind {
            "track" => match field(event, "event").and_then(Value::as_str) {
                Some(name) if !name.is_empty() => name,
                _ => return Err(Refusal::dead(Code::MissingEventName, "a track call needs an `event` name".into())),
            },
            "page" => "Page Viewed",
            "screen" => "Screen Viewed",
            "identify" | "group" | "alias" => return self.identity_route(kind, event),
            "" => return Err(Refusal::Reject(Code::InvalidType, "the event has no `type`".into())),
            other => {
                let message = format!("`type` `{other}` is not one of track, page, screen, identify, group, alias");
                return Err(Refusal::Reject(Code::InvalidType, message));
            }
        };
        let Some(event_type) = self.catalog.event(name) else {
            return self.unknown_event(name, event);
        };
        if !self.source.domains.contains(&event_type.domain) {
            let message = format!("source `{}` may not send `{name}` (domain `{}`)", self.source.id, event_type.domain);
            return Err(Refusal::Reject(Code::DomainNotAllowed, message));
        }
        // Not `pointer`: it splits and unescapes the path on every call.
        let pinned = match field(event, "context").and_then(|c| field(c, "schemaVersion")) {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64().and_then(|v| u32::try_from(v).ok()) {
                Some(v) => Some(v),
                None => {
                    let message = "`context.schemaVersion` must be a positive integer".into();
                    return Err(Refusal::dead(Code::InvalidSchemaVersion, message));
                }
            },
        };
        let rollout = event_type.rollout();
        let broken = || Some(ContractViolation { schema: event_type.contract.to_string(), rollout });
        let checked = event_type.check_rollout(event, pinned).map_err(|v| {
            if matches!(v, Violation::Schema(_)) {
                *violation = broken();
            }
            refusal(name, v)
        })?;
        let warning = if checked.waived.is_empty() {
            None
        } else {
            *violation = broken();
            (rollout == Rollout::Warn).then(|| warning_text(&checked.waived))
        };
        Ok(Route {
            topic: Text::from(&event_type.topic),
            key: checked.key,
            schema: Text::from(&event_type.contract),
            version: Text::from(&checked.schema.version_text),
            name: Text::from(&event_type.name),
            warning,
        })
    }

    fn unknown_event(&self, name: &str, event: &Value) -> Result<Route, Refusal> {
        let message = format!("`{name}` is not in the event catalog");
        match self.source.unknown_events {
            UnknownEvents::Reject => Err(Refusal::Reject(Code::UnknownEvent, message)),
            UnknownEvents::DeadLetter => Err(Refusal::dead(Code::UnknownEvent, message)),
            UnknownEvents::Pass => Ok(Route {
                topic: Text::from(&self.kafka.unclassified_topic),
                key: user_key(event)?,
                schema: Text::Static("unclassified"),
                version: Text::Static("0"),
                name: Text::copied(name),
                warning: None,
            }),
        }
    }

    /// `identify`, `group` and `alias` carry identity, not domain events:
    /// they share one topic, keyed by user, with the Segment spec's fields,
    /// and only sources granted the [`IDENTITY_DOMAIN`] may send them.
    fn identity_route(&self, kind: &str, event: &Value) -> Result<Route, Refusal> {
        if !self.source.domains.contains(IDENTITY_DOMAIN) {
            let message = format!(
                "source `{}` may not send `{kind}` calls (domain `{IDENTITY_DOMAIN}` is not in its `domains`)",
                self.source.id
            );
            return Err(Refusal::Reject(Code::DomainNotAllowed, message));
        }
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
            return Err(Refusal::DeadLetter(Code::SchemaViolation, format!("the {kind} call is incomplete"), missing));
        }
        if kind == "alias" {
            self.check_vouched(event)?;
        }
        let (name, schema) = match kind {
            "group" => ("group", "identity/group"),
            "alias" => ("alias", "identity/alias"),
            _ => ("identify", "identity/identify"),
        };
        Ok(Route {
            topic: Text::from(&self.kafka.identity_topic),
            key: user_key(event)?,
            schema: Text::Static(schema),
            version: Text::Static("1"),
            name: Text::Static(name),
            warning: None,
        })
    }
}

impl Admission<'_> {
    /// Under a JWT, an alias merges `previousId` into the token's user: it
    /// may only name an identity the token vouches for (its subject or one
    /// its issuer's `identity_claim` lists), unless the source allows any.
    /// Checked after the envelope step, so a numeric `previousId` is
    /// compared as the text it is stored as.
    fn check_vouched(&self, event: &Value) -> Result<(), Refusal> {
        let Some(subject) = self.subject else { return Ok(()) };
        if self.edge.alias_any_previous_id() {
            return Ok(());
        }
        let previous = event.get("previousId").and_then(Value::as_str).unwrap_or_default();
        if previous == subject || self.vouched.iter().any(|v| v == previous) {
            return Ok(());
        }
        let message = "under a JWT, an alias's `previousId` must be the token's subject or an identity its \
                       issuer's `identity_claim` lists; the event was not stored";
        Err(Refusal::Reject(Code::IdentityNotVouched, message.into()))
    }
}

fn refusal(name: &str, violation: Violation) -> Refusal {
    match violation {
        Violation::Schema(errors) => {
            Refusal::DeadLetter(Code::SchemaViolation, format!("`{name}` does not match its schema"), errors)
        }
        Violation::UnknownVersion { requested, latest } => Refusal::dead(
            Code::UnknownSchemaVersion,
            format!("`{name}` has no schema version {requested}; the newest is {latest}"),
        ),
        Violation::MissingKey(fields) => {
            Refusal::dead(Code::MissingKey, format!("`{name}` is keyed by {fields}, and none is present"))
        }
    }
}

/// `userId`, falling back to `anonymousId` (the envelope step has already
/// dropped empty ones).
fn user_key(event: &Value) -> Result<String, Refusal> {
    ["userId", "anonymousId"]
        .iter()
        .find_map(|f| event.get(*f).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned))
        .ok_or_else(|| Refusal::dead(Code::MissingKey, "needs `userId` or `anonymousId`".into()))
}
