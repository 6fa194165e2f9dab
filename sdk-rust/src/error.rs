//! The errors a caller can see: one enum for a refused event, one for a
//! client that cannot be built, one for a token provider. Sending errors are
//! never returned from a call; they arrive as per-event [`crate::Outcome`]s.

use std::time::Duration;

/// Why an event was not queued. Every refusal is also counted in
/// [`crate::Metrics::dropped`] (and in the shutdown report), so a caller that
/// ignores the `Result` still shows up in numbers; refusals of an encoded
/// event (full queue, wait timed out, shut down) are also reported as a
/// [`crate::Status::Dropped`] outcome under its `messageId`.
#[derive(Debug, thiserror::Error)]
pub enum EnqueueError {
    /// The queue was full and the policy is to drop the newest event.
    #[error("the event queue is full ({events} events, {bytes} bytes); the event was dropped")]
    QueueFull {
        /// Events queued at the time.
        events: usize,
        /// Bytes queued at the time.
        bytes: usize,
    },
    /// The queue stayed full for the whole wait the policy allows.
    #[error("the event queue stayed full for {0:?}; the event was dropped")]
    WaitTimedOut(Duration),
    /// The event is bigger than the gateway would take (it would answer
    /// `event_too_large`), so it is refused here, where the caller can act.
    #[error("the event is {size} bytes of JSON, over the {limit}-byte limit")]
    TooLarge {
        /// The event's size as compact JSON.
        size: usize,
        /// [`crate::ClientBuilder::max_event_bytes`].
        limit: usize,
    },
    /// The properties or traits could not be serialised to JSON (e.g. a map
    /// with non-string keys).
    #[error("the event cannot be encoded as JSON: {0}")]
    Encode(#[from] serde_json::Error),
    /// `shutdown` was called; nothing more is taken.
    #[error("the client is shut down")]
    Closed,
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The endpoint is not an absolute `http://` URL.
    #[error("the endpoint `{0}` is not an absolute http:// URL")]
    InvalidEndpoint(String),
    /// Two settings contradict each other, or one is zero where it cannot be.
    #[error("invalid client configuration: {0}")]
    Config(String),
    /// `build` was called outside a tokio runtime, so there is nowhere to run
    /// the background worker. Use [`crate::BlockingClient`] in programs
    /// without one.
    #[error("no tokio runtime: build the client inside one, or use BlockingClient")]
    NoRuntime,
    /// The HTTP client could not be created.
    #[error("cannot create the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
    /// The blocking facade could not start its runtime.
    #[error("cannot start the blocking client's runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// Why a [`crate::TokenProvider`] has no token to give.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no token: {0}")]
pub struct TokenError(pub String);
