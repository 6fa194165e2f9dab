//! The HTTP endpoints, one file per family.

pub mod batch;
pub mod health;
mod outcome;

pub use outcome::{BatchAnswer, EventOutcome};
