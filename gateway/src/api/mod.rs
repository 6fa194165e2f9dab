//! The HTTP endpoints, one file per family.

pub mod batch;
pub mod health;
mod ingest;
pub mod metrics;
mod outcome;
pub mod pixel;
pub mod routes;
pub mod settings;

pub use outcome::{BatchAnswer, EventOutcome, EventStatus};
