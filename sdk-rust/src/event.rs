//! Events as the gateway wants them (the Segment spec's fields), encoded to
//! compact JSON once, at the call: the queue then holds bytes whose size is
//! known, and every retry sends exactly what was first encoded, `messageId`
//! included.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

/// The six calls of the Segment spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// Something a user did: routed by its event name.
    Track,
    /// A web page view (`Page Viewed` in the catalog).
    Page,
    /// A mobile screen view (`Screen Viewed` in the catalog).
    Screen,
    /// Who a user is: traits.
    Identify,
    /// A user joined a group (account, company).
    Group,
    /// A user's previous id is now this one.
    Alias,
}

impl CallKind {
    /// The event's `type` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Track => "track",
            Self::Page => "page",
            Self::Screen => "screen",
            Self::Identify => "identify",
            Self::Group => "group",
            Self::Alias => "alias",
        }
    }
}

/// Who an event is about: a `userId`, an `anonymousId`, or both. The gateway
/// keys most topics by `userId`, falling back to `anonymousId`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The known user, once signed in.
    pub user_id: Option<String>,
    /// A device or session id, before sign-in.
    pub anonymous_id: Option<String>,
}

impl Identity {
    /// A known user.
    pub fn user(id: impl Into<String>) -> Self {
        Self { user_id: Some(id.into()), anonymous_id: None }
    }

    /// Someone not (yet) known by a user id.
    pub fn anonymous(id: impl Into<String>) -> Self {
        Self { user_id: None, anonymous_id: Some(id.into()) }
    }

    /// Adds the anonymous id a known user had before, so both are sent.
    pub fn with_anonymous_id(mut self, id: impl Into<String>) -> Self {
        self.anonymous_id = Some(id.into());
        self
    }
}

/// A fully general event, for what the shorthand calls do not cover: your
/// own `messageId` (e.g. derived from a payment id, so a re-sent event after
/// a process restart deduplicates), a timestamp from the past, context.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The call.
    pub kind: CallKind,
    /// Who it is about.
    pub identity: Identity,
    /// `event` of a track call.
    pub event: Option<String>,
    /// `name` of a page or screen call.
    pub name: Option<String>,
    /// `groupId` of a group call.
    pub group_id: Option<String>,
    /// `previousId` of an alias call.
    pub previous_id: Option<String>,
    /// `properties` of track, page and screen calls.
    pub properties: Option<Value>,
    /// `traits` of identify and group calls.
    pub traits: Option<Value>,
    /// Extra `context` fields (the client adds `library`).
    pub context: Map<String, Value>,
    /// When it happened; now when `None`.
    pub timestamp: Option<DateTime<Utc>>,
    /// Its id; a fresh UUID v7 when `None`.
    pub message_id: Option<Uuid>,
    /// Pins the schema version the gateway checks it against
    /// (`context.schemaVersion`); the newest when `None`.
    pub schema_version: Option<u32>,
}

impl Message {
    /// An empty event of `kind` about `identity`.
    pub fn new(kind: CallKind, identity: Identity) -> Self {
        Self {
            kind,
            identity,
            event: None,
            name: None,
            group_id: None,
            previous_id: None,
            properties: None,
            traits: None,
            context: Map::new(),
            timestamp: None,
            message_id: None,
            schema_version: None,
        }
    }

    /// A track call of `event` with `properties`.
    pub fn track(identity: Identity, event: impl Into<String>, properties: Value) -> Self {
        Self { event: Some(event.into()), properties: Some(properties), ..Self::new(CallKind::Track, identity) }
    }

    pub(crate) fn encode(&self, limit: usize) -> Result<Encoded, crate::EnqueueError> {
        let parts = Parts {
            kind: self.kind,
            identity: &self.identity,
            event: self.event.as_deref(),
            name: self.name.as_deref(),
            group_id: self.group_id.as_deref(),
            previous_id: self.previous_id.as_deref(),
            properties: self.properties.as_ref(),
            traits: self.traits.as_ref(),
            context: Some(&self.context).filter(|c| !c.is_empty()),
            schema_version: self.schema_version,
        };
        parts.encode(self.message_id.unwrap_or_else(Uuid::now_v7), self.timestamp.unwrap_or_else(Utc::now), limit)
    }
}

/// One event as queued: its id and its compact JSON.
#[derive(Debug, Clone)]
pub(crate) struct Encoded {
    /// The `messageId` inside `json`, kept apart to report outcomes by it.
    pub id: Uuid,
    /// The event, exactly as it will be sent on every attempt.
    pub json: Vec<u8>,
}

/// The borrowed pieces of one event, encoded without copying them first.
pub(crate) struct Parts<'a, P: Serialize + ?Sized> {
    pub kind: CallKind,
    pub identity: &'a Identity,
    pub event: Option<&'a str>,
    pub name: Option<&'a str>,
    pub group_id: Option<&'a str>,
    pub previous_id: Option<&'a str>,
    pub properties: Option<&'a P>,
    pub traits: Option<&'a P>,
    pub context: Option<&'a Map<String, Value>>,
    pub schema_version: Option<u32>,
}

impl<'a, P: Serialize + ?Sized> Parts<'a, P> {
    /// A call with only `kind`, `identity` and one of `properties`/`traits`.
    pub fn new(kind: CallKind, identity: &'a Identity) -> Self {
        Self {
            kind,
            identity,
            event: None,
            name: None,
            group_id: None,
            previous_id: None,
            properties: None,
            traits: None,
            context: None,
            schema_version: None,
        }
    }

    pub fn encode(&self, id: Uuid, timestamp: DateTime<Utc>, limit: usize) -> Result<Encoded, crate::EnqueueError> {
        let wire = Wire {
            kind: self.kind.as_str(),
            event: self.event,
            name: self.name,
            message_id: id,
            user_id: self.identity.user_id.as_deref(),
            anonymous_id: self.identity.anonymous_id.as_deref(),
            group_id: self.group_id,
            previous_id: self.previous_id,
            timestamp,
            properties: self.properties,
            traits: self.traits,
            context: WireContext { library: LIBRARY, schema_version: self.schema_version, extra: self.context },
        };
        let json = serde_json::to_vec(&wire)?;
        if json.len() > limit {
            return Err(crate::EnqueueError::TooLarge { size: json.len(), limit });
        }
        Ok(Encoded { id, json })
    }
}

/// The Segment spec's `context.library`, so the gateway's data shows which
/// client sent an event.
const LIBRARY: Library = Library { name: "eventgw-sdk-rust", version: env!("CARGO_PKG_VERSION") };

#[derive(Serialize)]
struct Library {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Wire<'a, P: Serialize + ?Sized> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    message_id: Uuid,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    anonymous_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_id: Option<&'a str>,
    timestamp: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    properties: Option<&'a P>,
    #[serde(skip_serializing_if = "Option::is_none")]
    traits: Option<&'a P>,
    context: WireContext<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireContext<'a> {
    library: Library,
    #[serde(skip_serializing_if = "Option::is_none")]
    schema_version: Option<u32>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    extra: Option<&'a Map<String, Value>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_the_segment_fields_and_keeps_the_given_id() {
        let id = Uuid::now_v7();
        let who = Identity::user("u1").with_anonymous_id("a1");
        let props = json!({"order_id": "o-1"});
        let parts =
            Parts { event: Some("Order Completed"), properties: Some(&props), ..Parts::new(CallKind::Track, &who) };
        let encoded = parts.encode(id, Utc::now(), 1 << 20).expect("encodes");
        let value: Value = serde_json::from_slice(&encoded.json).expect("JSON");
        assert_eq!(value["type"], "track");
        assert_eq!(value["event"], "Order Completed");
        assert_eq!(value["messageId"], id.to_string());
        assert_eq!(value["userId"], "u1");
        assert_eq!(value["anonymousId"], "a1");
        assert_eq!(value["properties"]["order_id"], "o-1");
        assert_eq!(value["context"]["library"]["name"], "eventgw-sdk-rust");
        assert!(value.get("traits").is_none());
    }

    #[test]
    fn refuses_an_event_over_the_limit_and_takes_one_at_it() {
        let who = Identity::user("u1");
        let props = json!({"pad": ""});
        let parts = Parts { event: Some("E"), properties: Some(&props), ..Parts::new(CallKind::Track, &who) };
        let (id, at) = (Uuid::now_v7(), Utc::now());
        let size = parts.encode(id, at, usize::MAX).expect("encodes").json.len();
        assert!(parts.encode(id, at, size).is_ok());
        assert!(matches!(parts.encode(id, at, size - 1), Err(crate::EnqueueError::TooLarge { .. })));
    }

    #[test]
    fn a_message_carries_its_context_version_and_id() {
        let id = Uuid::now_v7();
        let mut message =
            Message::track(Identity::anonymous("a1"), "Link Clicked", json!({"href": "https://x.example/"}));
        message.message_id = Some(id);
        message.schema_version = Some(1);
        message.context.insert("locale".into(), json!("de-DE"));
        let value: Value = serde_json::from_slice(&message.encode(1 << 20).expect("encodes").json).expect("JSON");
        assert_eq!(value["messageId"], id.to_string());
        assert_eq!(value["context"]["schemaVersion"], 1);
        assert_eq!(value["context"]["locale"], "de-DE");
    }
}
