//! Rust client for the eventgw event-tracking gateway, for backends that
//! cannot afford to lose events or to wait for them.
//!
//! A call (`track`, `page`, `screen`, `identify`, `group`, `alias`, or
//! [`Client::record`] for a typed event) encodes the event once, gives it a
//! UUID v7 `messageId` and puts it in a queue bounded by events and bytes;
//! it never waits on the network. A background tokio task batches by count,
//! bytes and time, gzips, `POST`s to `/v1/batch`, retries with exponential
//! backoff and jitter (or exactly the `Retry-After` asked for) with the same
//! `messageId`s, and reports each event's [`Outcome`] through a callback or
//! an [`OutcomeStream`]. A full queue follows an [`OverflowPolicy`] and every
//! event it costs is counted. [`Client::shutdown`] delivers what it can by a
//! deadline and returns an honest [`Report`].
//!
//! ```no_run
//! use std::time::Duration;
//! use eventgw_sdk::{Client, Credentials, Identity};
//! use eventgw_sdk::catalog::billing::{PaymentCaptured, PaymentCapturedV1Method};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::builder("http://127.0.0.1:8080", Credentials::write_key("demo-write-key")).build()?;
//! let user = Identity::user("user-1");
//!
//! // Typed: generated from schemas/billing/payment_captured/1.json.
//! client.record(&user, &PaymentCaptured {
//!     order_id: "order-1001".into(),
//!     payment_id: "pay-555".into(),
//!     amount: 99.5,
//!     currency: "EUR".into(),
//!     method: Some(PaymentCapturedV1Method::Card),
//! }).await?;
//!
//! // Untyped: any `Serialize`.
//! client.track(&user, "Feature Used", &serde_json::json!({"feature": "export"})).await?;
//!
//! let report = client.shutdown(Duration::from_secs(5)).await;
//! println!("{report:?}");
//! # Ok(()) }
//! ```
//!
//! A property of the wrong type does not compile:
//!
//! ```compile_fail
//! let _ = eventgw_sdk::catalog::billing::PaymentCaptured {
//!     order_id: "order-1001".into(),
//!     payment_id: "pay-555".into(),
//!     amount: "99.5", // a string where the schema says number
//!     currency: "EUR".into(),
//!     method: None,
//! };
//! ```
//!
//! while the same event with a number does:
//!
//! ```
//! let _ = eventgw_sdk::catalog::billing::PaymentCaptured {
//!     order_id: "order-1001".into(),
//!     payment_id: "pay-555".into(),
//!     amount: 99.5,
//!     currency: "EUR".into(),
//!     method: None,
//! };
//! ```

mod auth;
mod blocking;
mod client;
mod config;
mod delivery;
mod error;
mod event;
mod metrics;
mod outcome;
mod queue;
mod reporter;
mod transport;
mod typed;
mod worker;

#[cfg(test)]
mod tests;

/// Typed events generated at build time from the schema catalog, one module
/// per business domain; `<Event>V<N>` is version N, `<Event>` the newest.
#[allow(clippy::all)]
pub mod catalog {
    include!(concat!(env!("OUT_DIR"), "/catalog.rs"));
}

pub use auth::{Credentials, FreshToken, RefreshingToken, TokenProvider};
pub use blocking::BlockingClient;
pub use client::Client;
pub use config::{ClientBuilder, OverflowPolicy};
pub use delivery::RetryPolicy;
pub use error::{BuildError, EnqueueError, TokenError};
pub use event::{CallKind, Identity, Message};
pub use metrics::Metrics;
pub use outcome::{Outcome, Report, Status};
pub use reporter::{OutcomeCallback, OutcomeEvent, OutcomeStream};
pub use typed::TypedEvent;
