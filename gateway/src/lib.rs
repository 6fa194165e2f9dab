//! The event-tracking ingestion gateway.
//!
//! A request's path, one [`stages`] module per step, called in order by
//! each handler of [`api`]: authenticate ([`auth`]) → decode ([`wire`]) →
//! charge ([`quota`]) → validate, enrich and route each event
//! ([`pipeline`]) → produce ([`sink`]) → answer, with each event's outcome
//! once Kafka acknowledged them all. [`error`] decides every status,
//! [`code`] names every stable code, [`config`] holds every setting.

pub mod api;
pub mod auth;
pub mod catalog_page;
pub mod code;
pub mod compact;
pub mod config;
pub mod cors;
pub mod dedupe;
pub mod enrichment;
pub mod error;
pub mod features;
pub mod heap;
pub mod live;
pub mod outcome;
pub mod pipeline;
pub mod privacy;
pub mod quota;
pub mod recover;
pub mod registry;
pub mod run;
pub mod server;
pub mod sink;
pub mod stages;
pub mod state;
pub mod storage;
pub mod telemetry;
pub mod text;
pub mod tls;
pub mod topics;
pub mod wire;

pub use run::{Signal, run, run_state};
pub use server::serve;
pub use state::{AppState, Clock, StartupError};
