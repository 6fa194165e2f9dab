//! The HTTP endpoints, one file per family.

pub mod batch;
pub mod ga4;
pub mod health;
pub mod live;
pub mod metrics;
pub mod pixel;
pub mod posthog;
pub mod routes;
pub mod settings;
pub mod snowplow;

pub use crate::stages::answer::{BatchAnswer, EventOutcome, EventStatus};
