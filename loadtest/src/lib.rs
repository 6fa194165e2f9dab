//! The load generator and benchmark harness, as a library so its own tests
//! can drive the generator against the ceiling server.

pub mod args;
pub mod bench_catalog;
pub mod ceiling;
pub mod connections;
pub mod curves;
pub mod e2e;
pub mod generator;
pub mod kafka_ceiling;
pub mod memory;
pub mod protocol;
pub mod stalled;
pub mod suite;
pub mod watch;
pub mod workload;

/// The client every run uses: keep-alive, a large pool, no proxy.
pub fn client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder().pool_max_idle_per_host(4096).no_proxy().tcp_nodelay(true).build()?)
}
