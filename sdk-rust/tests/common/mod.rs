//! Shared helpers for the SDK's integration tests: a real gateway (with a
//! real Kafka) on its own actix thread, a Kafka reader, and a scriptable
//! fake gateway for fault tests.
#![allow(dead_code, missing_docs)]

pub mod fake;
pub mod gateway;
/// Whether Kafka is there (the gateway's test helper, shared by path).
#[path = "../../../gateway/tests/common/servers.rs"]
pub mod servers;
