//! Data contracts as code, from the event catalog: the Kafka topics it
//! declares, planned against a cluster and applied ([`topics`]); its schema
//! versions as Schema Registry subjects, planned and applied all or nothing
//! ([`registry`]); the other trackers' mapping files beside the catalog,
//! read for the gateway and checked by `schemas check` ([`mapping`]); the
//! readable catalog site with the in-browser checker ([`site`]); and the
//! `eventgw-catalog` subcommands ([`cli`]).
//!
//! The gateway depends on this crate, never the other way round: `gateway
//! topics` creates topics through [`topics`], the gateway's schema-id lookup
//! uses [`registry::RegistryClient`] and [`registry::subject`], and its
//! `/catalog/` page serves a [`site::Site`]. What the tool needs from the
//! gateway's configuration file it reads itself ([`gateway_config`]). The
//! compatibility checker is pure and lives in the schemas crate.

pub mod cli;
pub mod gateway_config;
pub mod mapping;
pub mod registry;
pub mod site;
pub mod topics;
