//! The fault harness: steady load with unique ids from many users through
//! the gateway while a scenario injects faults, then a read-back of every
//! topic and a reconciliation of what was answered against what is stored.
//! Each scenario writes its section of RELIABILITY.md into
//! `$FAULTS_REPORT_DIR` (scripts/faults assembles them).
#![allow(dead_code, missing_docs)]

pub mod balancer;
pub mod cluster;
pub mod gateway_process;
pub mod load;
pub mod proxy;
pub mod reconcile;
pub mod window;

use std::time::Duration;

/// Gateway settings shared by every scenario: `kafka.delivery_timeout_ms`
/// and the request deadline; the client's own timeout is 2 s longer. With
/// `[dedupe]` on, as [`gateway_process::GatewayProcess`] runs it, the
/// producer's `message.timeout.ms` is `dedupe.delivery_timeout_ms` (10 min),
/// not this: a request Kafka does not acknowledge is answered 503 at its
/// deadline, and its records may still land afterwards.
pub const DELIVERY_TIMEOUT_MS: u64 = 3000;
pub const REQUEST_TIMEOUT_MS: u64 = 6000;

/// Runs a blocking closure (a script, a consumer) off the test's
/// single-threaded runtime, so the load keeps flowing meanwhile.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    actix_web::rt::task::spawn_blocking(f).await.expect("blocking task")
}

pub async fn sleep(d: Duration) {
    actix_web::rt::time::sleep(d).await;
}

/// A run id unique to this scenario run; every messageId starts with it.
pub fn run_id(scenario: &str) -> String {
    format!("{scenario}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// Runs the load and the fault side by side; the fault returns when it healed.
pub async fn drive(
    load: load::Load,
    run_id: &str,
    url: &str,
    fault: impl std::future::Future<Output = std::time::Instant>,
) -> (Vec<load::BatchLog>, std::time::Instant) {
    futures::join!(load::run(load, run_id.to_owned(), url.to_owned()), fault)
}
