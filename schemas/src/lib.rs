//! The event catalog: which events exist, in which business domain, under
//! which versioned JSON Schema, and to which Kafka topic and key they route.
//!
//! The core is pure (no files, network or async runtime) so it also compiles
//! to `wasm32-unknown-unknown`; [`loader`] (feature `fs`) reads a catalog
//! directory and hands [`Catalog::compile`] the parsed documents.

mod catalog;
pub mod compat;
mod compile;
mod error;
mod key;
#[cfg(feature = "fs")]
pub mod loader;
pub mod lookup;
mod personal;
mod spec;

pub use catalog::{Catalog, Checked, Domain, EventSchema, EventType, SchemaViolation, Violation};
pub use error::CatalogError;
pub use key::KeyPath;
pub use personal::{PersonalAction, PersonalField, WITHHELD};
pub use spec::{
    Compatibility, DomainSource, DomainSpec, EventSpec, Rollout, SchemaDocument, TopicSettings, WireFormat,
};
