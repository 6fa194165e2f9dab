//! What happened to each event of a request, as the answer tells it: the
//! 200 answer ([`crate::stages::answer`]) and a strict source's 422
//! ([`crate::error`]) both list these. A leaf: it uses nothing of the crate,
//! so `error` and `stages` can both use it without using each other.

use std::sync::Arc;

use serde::Serialize;

/// What happened to one event; serialised as its lowercase name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventStatus {
    /// Produced to its domain topic.
    Accepted,
    /// Broke its contract: produced to the dead-letter topic.
    Invalid,
    /// Produced nowhere.
    Rejected,
    /// Repeats a `messageId` already stored: not stored again.
    Duplicate,
    /// Kept in the local spool for replay to its topic.
    Spooled,
    /// A suppressed user's: produced nowhere by their wish.
    Suppressed,
}

impl EventStatus {
    /// The name in answers and in the `outcome` label of `eventgw_events_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Invalid => "invalid",
            Self::Rejected => "rejected",
            Self::Duplicate => "duplicate",
            Self::Spooled => "spooled",
            Self::Suppressed => "suppressed",
        }
    }
}

/// One event's outcome.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventOutcome {
    /// Position in the request.
    pub index: usize,
    /// Its `messageId`, generated when the client sent none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// What happened to it.
    pub status: EventStatus,
    /// The topic it went to (domain topic or dead-letter topic).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<Arc<str>>,
    /// Stable machine code of the reason, unless accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    /// The reason in words, unless accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Schema violations, for `schema_violation`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<eventgw_schemas::SchemaViolation>,
}
