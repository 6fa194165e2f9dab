//! What happened to each event, and the totals a shutdown reports. Every
//! event the caller hands over ends in exactly one [`Status`].

use uuid::Uuid;

/// The final outcome of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The event's `messageId`, as returned by the call that queued it.
    pub message_id: Uuid,
    /// What became of it.
    pub status: Status,
}

/// Where an event ended up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Kept by the gateway (it answered 200 for it): in Kafka on its domain
    /// topic, in the gateway's spool on its way there (`spooled`), or stored
    /// already by an earlier attempt (`duplicate`, with no topic).
    Accepted {
        /// The topic it was produced to, when the gateway said.
        topic: Option<String>,
    },
    /// Broke its contract: the gateway put it on the dead-letter topic.
    Invalid {
        /// The dead-letter topic, when the gateway said.
        topic: Option<String>,
        /// The gateway's machine code, e.g. `schema_violation`.
        code: String,
        /// The reason in words.
        message: String,
    },
    /// The gateway produced it nowhere (e.g. `domain_not_allowed`, or a
    /// strict source refused the batch, or a 4xx answer that retrying cannot
    /// fix).
    Rejected {
        /// The gateway's machine code.
        code: String,
        /// The reason in words.
        message: String,
    },
    /// Sending gave up: retries exhausted, or the shutdown deadline passed
    /// while the gateway was unreachable. The event may or may not be in
    /// Kafka if an earlier attempt timed out after the gateway took it; its
    /// `messageId` lets downstream deduplicate if it is re-sent.
    Failed {
        /// The last error seen.
        reason: String,
    },
    /// Never sent: refused at the call or evicted by the overflow policy.
    Dropped {
        /// Why, in words.
        reason: String,
    },
}

impl Status {
    /// The status word used in the gateway's answer and in logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Accepted { .. } => "accepted",
            Self::Invalid { .. } => "invalid",
            Self::Rejected { .. } => "rejected",
            Self::Failed { .. } => "failed",
            Self::Dropped { .. } => "dropped",
        }
    }
}

/// What `shutdown` returns: the totals over the client's life. Every event
/// handed to the client is counted once in `sent + invalid + rejected +
/// failed + dropped`; `pending` is what was still unresolved when the report
/// was taken (zero after a shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Report {
    /// Accepted by the gateway onto their domain topics.
    pub sent: u64,
    /// Dead-lettered by the gateway for breaking their contract.
    pub invalid: u64,
    /// Refused by the gateway and produced nowhere.
    pub rejected: u64,
    /// Refused or evicted by the client itself; never sent.
    pub dropped: u64,
    /// Sending gave up on them.
    pub failed: u64,
    /// Queued or in flight, not yet resolved.
    pub pending: u64,
}

impl Report {
    /// Every event the client was handed.
    pub fn total(&self) -> u64 {
        self.sent + self.invalid + self.rejected + self.dropped + self.failed + self.pending
    }
}
