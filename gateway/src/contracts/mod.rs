//! Data contracts as code: the `eventgw-catalog` tool's logic. Topic
//! provisioning from the catalog ([`plan`], [`admin`]), the readable catalog
//! site ([`docs`], [`fields`]) and its `/catalog` route ([`site`]), schemas
//! in a Schema Registry ([`registry`]), and the
//! command-line front ends ([`cli`]). The compatibility checker itself is
//! pure and lives in the schemas crate.

pub mod admin;
pub mod cli;
pub mod docs;
pub mod fields;
pub mod plan;
pub mod registry;
pub mod site;
