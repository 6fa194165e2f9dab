//! The nemesis: the production-like set-up (three KRaft brokers, three
//! gateways behind HAProxy, the spool on, dedupe in a shared Redis) under
//! random, overlapping faults drawn from a seed, with beacon-like and
//! SDK-like clients; a history of every request and fault, and a checker
//! that reads every topic back and judges the whole history
//! (scripts/nemesis runs it; scripts/soak runs the same set-up without faults).
#![allow(dead_code, missing_docs)]

pub mod checker;
pub mod clients;
pub mod faults;
pub mod history;
pub mod report;
pub mod soak;
pub mod topology;

use std::path::PathBuf;
use std::time::Duration;

/// Ports of the nemesis (scripts/faults uses 19300-19470 and 29200-29260).
pub const KAFKA_BASE: u16 = 24000;
pub const PROXY_BASE: u16 = 24020;
pub const GW_BASE: u16 = 24040;
pub const LB_PORT: u16 = 24050;
pub const REDIS_PORT: u16 = 24060;
pub const GATEWAYS: u16 = 3;

/// What one run is told by scripts/nemesis (or scripts/soak).
#[derive(Debug, Clone)]
pub struct Settings {
    pub seed: u64,
    /// How long faults are injected and new requests started.
    pub run_for: Duration,
    /// Where the history, the timeline and the summary are written.
    pub out: PathBuf,
    /// Each gateway's spool directory (a small tmpfs each when the script
    /// could mount one: then the disk-full fault is on).
    pub spool_dirs: Vec<PathBuf>,
    pub spool_tmpfs: bool,
    /// The libfaketime library, when installed: gateway 3 runs under it
    /// and the clock-step fault is on.
    pub faketime: Option<PathBuf>,
    /// More `EVENTGW__...` overrides for every gateway (the soak's quota
    /// and dedupe window).
    pub extra_env: Vec<(String, String)>,
}

impl Settings {
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let seed = var("NEMESIS_SEED").and_then(|s| s.parse().ok()).unwrap_or(1);
        let secs: f64 = var("NEMESIS_MINUTES").and_then(|s| s.parse().ok()).map_or(180.0, |m: f64| m * 60.0);
        let out = var("NEMESIS_OUT").map_or_else(|| crate::common::repo_root().join("target/nemesis"), PathBuf::from);
        std::fs::create_dir_all(&out).expect("nemesis output directory");
        let spool_root = var("NEMESIS_SPOOL_ROOT").map_or_else(|| out.join("spool"), PathBuf::from);
        let spool_dirs: Vec<PathBuf> = (1..=GATEWAYS).map(|i| spool_root.join(format!("gw{i}"))).collect();
        for dir in &spool_dirs {
            std::fs::create_dir_all(dir).expect("spool directory");
        }
        let faketime = var("NEMESIS_FAKETIME").map(PathBuf::from).filter(|p| p.exists());
        Self {
            seed,
            run_for: Duration::from_secs_f64(secs),
            out,
            spool_dirs,
            spool_tmpfs: var("NEMESIS_SPOOL_TMPFS").is_some_and(|v| v == "1"),
            faketime,
            extra_env: Vec::new(),
        }
    }
}

/// A small deterministic generator (SplitMix64): the same seed draws the
/// same fault schedule and the same client pacing on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next_u64() % items.len() as u64) as usize]
    }
}
