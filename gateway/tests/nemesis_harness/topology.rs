//! The production-like set-up the nemesis runs against: three KRaft
//! brokers (RF 3, `min.insync.replicas=2`), a Redis for the shared dedupe
//! store, three gateways with the spool on behind HAProxy. Gateway 1 reaches
//! every broker through a TCP proxy of its own (the network faults cut or
//! slow one gateway-broker path); gateway 3 runs under libfaketime when it
//! is installed (the clock-step fault).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::{GATEWAYS, GW_BASE, KAFKA_BASE, LB_PORT, PROXY_BASE, REDIS_PORT, Settings};
use crate::faults_harness::balancer::Balancer;
use crate::faults_harness::cluster::Cluster;
use crate::faults_harness::gateway_process::GatewayProcess;
use crate::faults_harness::proxy::Proxy;
use crate::faults_harness::{blocking, sleep};

pub struct Topology {
    pub cluster: Cluster,
    pub proxies: Vec<Proxy>,
    pub gateways: Vec<GatewayProcess>,
    pub balancer: Balancer,
    /// The file libfaketime reads gateway 3's clock offset from.
    pub clock_file: Option<PathBuf>,
}

/// Every port the set-up needs, free before anything starts: a port in use
/// ends the run with its number, not with a confusing failure later.
pub fn preflight() {
    let mut ports: Vec<u16> = Vec::new();
    for n in 0..3 {
        ports.extend([KAFKA_BASE + 3 * n, KAFKA_BASE + 3 * n + 1, KAFKA_BASE + 3 * n + 2, PROXY_BASE + n]);
    }
    ports.extend((0..GATEWAYS).map(|i| GW_BASE + i));
    ports.extend([LB_PORT, LB_PORT + 1, LB_PORT + 2, REDIS_PORT]);
    let busy: Vec<u16> = ports.into_iter().filter(|p| TcpListener::bind(("127.0.0.1", *p)).is_err()).collect();
    assert!(busy.is_empty(), "nemesis: ports already in use: {busy:?} (another run, or something else on them)");
}

pub fn redis(arg: &str) -> bool {
    Command::new(crate::common::repo_root().join("scripts/redis"))
        .arg(arg)
        .env("REDIS_INSTANCE", "nemesis")
        .env("REDIS_PORT", REDIS_PORT.to_string())
        .status()
        .is_ok_and(|s| s.success())
}

/// Redis's process id (for SIGSTOP / SIGCONT), from its pid file.
pub fn redis_pid() -> Option<String> {
    let state = std::env::var_os("EVENTGW_STATE")
        .map_or_else(|| crate::common::repo_root().join(".cache"), std::path::PathBuf::from);
    let pid = std::fs::read_to_string(state.join("redis/nemesis/redis.pid")).ok()?;
    Some(pid.trim().to_owned())
}

fn gateway_env(s: &Settings, i: usize) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("EVENTGW__SPOOL__ENABLED", "true".to_owned()),
        ("EVENTGW__SPOOL__DIR", s.spool_dirs[i].display().to_string()),
        ("EVENTGW__SPOOL__ACK_TIMEOUT_MS", "1000".to_owned()),
        ("EVENTGW__SPOOL__SEGMENT_BYTES", (4 * 1024 * 1024).to_string()),
        ("EVENTGW__DEDUPE__ENABLED", "true".to_owned()),
        ("EVENTGW__DEDUPE__STORE", "redis".to_owned()),
        ("EVENTGW__DEDUPE__REDIS_URL", format!("redis://127.0.0.1:{REDIS_PORT}/")),
        // Redis away: 503 rather than produce unchecked (which would store retries twice).
        ("EVENTGW__DEDUPE__ON_STORE_ERROR", "unavailable".to_owned()),
        ("EVENTGW__SERVER__DRAIN_GRACE_SECS", "3".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .chain(s.extra_env.iter().cloned())
    .collect();
    if i == 2
        && let Some(lib) = &s.faketime
    {
        let file = s.out.join("clock-gw3");
        std::fs::write(&file, "+0\n").expect("clock file");
        env.extend([
            ("LD_PRELOAD".to_owned(), lib.display().to_string()),
            ("FAKETIME_TIMESTAMP_FILE".to_owned(), file.display().to_string()),
            ("FAKETIME_CACHE_DURATION".to_owned(), "1".to_owned()),
            // Only the wall clock steps; timers and timeouts keep their pace.
            ("DONT_FAKE_MONOTONIC".to_owned(), "1".to_owned()),
        ]);
    }
    env
}

impl Topology {
    pub async fn start(s: &Settings) -> Self {
        preflight();
        let mut cluster = Cluster::new("nemesis", 3, KAFKA_BASE);
        cluster.proxy_base = Some(PROXY_BASE);
        cluster.start_fresh().await;
        let mut proxies = Vec::new();
        for n in 1..=3 {
            proxies.push(Proxy::start(PROXY_BASE + n - 1, cluster.external_port(n)).await);
        }
        assert!(blocking(|| redis("reset") && redis("start")).await, "nemesis: scripts/redis start failed");
        let through_proxies = (0..3).map(|n| format!("127.0.0.1:{}", PROXY_BASE + n)).collect::<Vec<_>>().join(",");
        let mut gateways = Vec::new();
        for i in 0..GATEWAYS as usize {
            let env = gateway_env(s, i);
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let brokers = if i == 0 { through_proxies.clone() } else { cluster.brokers() };
            let name = format!("nemesis-gw{}", i + 1);
            gateways.push(GatewayProcess::start_on(&name, GW_BASE + i as u16, &brokers, 3, &env).await);
        }
        let ports: Vec<u16> = (0..GATEWAYS).map(|i| GW_BASE + i).collect();
        let balancer = Balancer::new("nemesis", LB_PORT, &ports, "conn-failure empty-response");
        balancer.start().await;
        for i in 1..=GATEWAYS {
            balancer.wait_state(&format!("gw{i}"), true, Duration::from_secs(30)).await;
        }
        // Every gateway's producer writes each key's partition once before the
        // run (KAFKA-15591: a new producer's first batch to a new partition).
        for gw in &gateways {
            crate::spool_support::warm_up(&gw.url, 16).await;
        }
        sleep(Duration::from_secs(1)).await;
        let clock_file = s.faketime.as_ref().map(|_| s.out.join("clock-gw3"));
        Self { cluster, proxies, gateways, balancer, clock_file }
    }

    pub async fn stop(mut self) {
        self.balancer.stop().await;
        for gw in &mut self.gateways {
            gw.kill9();
        }
        blocking(|| redis("stop")).await;
        self.cluster.stop().await;
    }

    pub fn gateway_logs(&self) -> String {
        self.gateways.iter().map(GatewayProcess::log_text).collect::<Vec<_>>().join("\n")
    }
}
