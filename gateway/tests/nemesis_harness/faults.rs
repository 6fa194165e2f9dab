//! The nemesis proper: a schedule of faults drawn from the seed, in lanes
//! that run side by side (so faults of different lanes overlap), each fault
//! healing itself after a drawn time. A fault the harness cannot inject or
//! heal (a broker that will not come back, a gateway that will not start)
//! panics with what failed: the run then never reports a pass.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::history::{Fault, History, now};
use super::topology::{Topology, redis, redis_pid};
use super::{Rng, Settings};
use crate::faults_harness::balancer::Balancer;
use crate::faults_harness::cluster::Cluster;
use crate::faults_harness::gateway_process::GatewayProcess;
use crate::faults_harness::proxy::{Mode, Proxy};
use crate::faults_harness::{blocking, sleep};

/// One planned fault: when (from the run's start), what, on which target, how long.
#[derive(Debug, Clone)]
pub struct Planned {
    pub at: Duration,
    pub kind: &'static str,
    pub target: u64,
    pub hold: Duration,
}

/// The kinds of each lane with their hold times (seconds, drawn uniformly).
fn lanes(s: &Settings) -> Vec<Vec<(&'static str, u64, u64)>> {
    let mut lanes = vec![
        vec![("broker-kill9", 8, 25), ("broker-pause", 3, 12), ("leader-move", 0, 0)],
        vec![("gateway-kill9", 2, 8), ("gateway-rolling-restart", 0, 0)],
        vec![("net-cut", 3, 15), ("net-delay", 5, 15)],
        vec![("redis-pause", 2, 8), ("redis-restart", 1, 4)],
    ];
    if s.spool_tmpfs {
        lanes.push(vec![("disk-full", 10, 30)]);
    }
    if s.faketime.is_some() {
        lanes.push(vec![("clock-step", 10, 30)]);
    }
    lanes
}

/// The whole schedule of a run: the same seed and length give the same plan.
pub fn plan(s: &Settings) -> Vec<Vec<Planned>> {
    let mut rng = Rng::new(s.seed);
    let end = s.run_for.as_secs().saturating_sub(10);
    lanes(s)
        .into_iter()
        .map(|kinds| {
            let mut t = rng.range(3, 15);
            let mut lane = Vec::new();
            while t < end {
                let (kind, lo, hi) = *rng.pick(&kinds);
                let hold = rng.range(lo, hi).min(end - t);
                lane.push(Planned {
                    at: Duration::from_secs(t),
                    kind,
                    target: rng.next_u64(),
                    hold: Duration::from_secs(hold),
                });
                t += hold + rng.range(5, 20);
            }
            lane
        })
        .collect()
}

/// What the lanes act on; each lane borrows only its own part.
pub struct Targets<'a> {
    pub cluster: &'a Cluster,
    pub proxies: &'a [Proxy],
    pub gateways: &'a mut [GatewayProcess],
    pub balancer: &'a Balancer,
    pub spool_dirs: &'a [PathBuf],
    pub clock_file: Option<&'a Path>,
}

impl Topology {
    pub fn targets<'a>(&'a mut self, s: &'a Settings) -> Targets<'a> {
        Targets {
            cluster: &self.cluster,
            proxies: &self.proxies,
            gateways: &mut self.gateways,
            balancer: &self.balancer,
            spool_dirs: &s.spool_dirs,
            clock_file: self.clock_file.as_deref(),
        }
    }
}

/// Runs every lane of the plan from `started`; returns when all healed. A
/// fault whose lane ran late (a rolling restart takes half a minute) is
/// skipped once `stop` passed: the load ends then, and so do the faults.
pub async fn run(plan: Vec<Vec<Planned>>, t: Targets<'_>, (started, stop): (Instant, Instant), history: &History) {
    let Targets { cluster, proxies, gateways, balancer, spool_dirs, clock_file } = t;
    let mut gateways = Some(gateways);
    let lanes = plan.into_iter().map(|lane| {
        // Only the gateway lane restarts gateways; it takes the mutable borrow.
        let gws = if lane.iter().any(|p| p.kind.starts_with("gateway")) { gateways.take() } else { None };
        async move {
            let mut gws = gws;
            for p in lane {
                let wait = (started + p.at).saturating_duration_since(Instant::now());
                sleep(wait).await;
                if Instant::now() >= stop {
                    eprintln!("nemesis: {} at {:?} skipped: its lane ran past the end of the load", p.kind, p.at);
                    continue;
                }
                let start = now();
                let target = match p.kind {
                    "broker-kill9" => broker_kill9(cluster, p.target % 3 + 1, p.hold).await,
                    "broker-pause" => broker_pause(cluster, p.target % 3 + 1, p.hold).await,
                    "leader-move" => leader_move(cluster).await,
                    "net-cut" | "net-delay" => net(&proxies[(p.target % 3) as usize], &p).await,
                    "gateway-kill9" => gateway_kill9(gws.as_deref_mut().expect("gateways"), balancer, &p).await,
                    "gateway-rolling-restart" => rolling(gws.as_deref_mut().expect("gateways"), balancer).await,
                    "redis-pause" => redis_pause(p.hold).await,
                    "redis-restart" => redis_restart(p.hold).await,
                    "disk-full" => disk_full(&spool_dirs[(p.target % spool_dirs.len() as u64) as usize], p.hold).await,
                    "clock-step" => clock_step(clock_file.expect("clock file"), &p).await,
                    other => unreachable!("unknown fault {other}"),
                };
                history.fault(Fault { kind: p.kind, target, start, end: now() });
            }
        }
    });
    futures::future::join_all(lanes).await;
}

async fn broker_kill9(cluster: &Cluster, n: u64, hold: Duration) -> String {
    cluster.kill9(n as u16).await;
    sleep(hold).await;
    assert!(cluster.run(&["start-node", &n.to_string()]).await, "nemesis: broker {n} did not come back after kill -9");
    format!("broker {n}")
}

async fn broker_pause(cluster: &Cluster, n: u64, hold: Duration) -> String {
    assert!(cluster.run(&["pause", &n.to_string()]).await, "nemesis: SIGSTOP of broker {n} failed (is it running?)");
    sleep(hold).await;
    assert!(cluster.run(&["resume", &n.to_string()]).await, "nemesis: SIGCONT of broker {n} failed");
    format!("broker {n}")
}

/// Rotates the replicas of web.tracking's partitions and elects the preferred leaders.
async fn leader_move(cluster: &Cluster) -> String {
    let brokers = cluster.brokers();
    let out = blocking(move || {
        let libs = std::env::var("NEMESIS_KAFKA_LIBS").unwrap_or_default();
        Command::new("java")
            .arg("-cp")
            .arg(format!("{libs}/*"))
            .arg(crate::common::repo_root().join("scripts/nemesis.d/LeaderMove.java"))
            .args([brokers.as_str(), "web.tracking"])
            .output()
    })
    .await
    .expect("nemesis: java runs (NEMESIS_KAFKA_LIBS names Kafka's libs)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("nemesis: leader move: {}", text.trim());
    // No leader moved (a broker down, the preferred one out of the ISR) is a fault that did nothing, not an error.
    format!("web.tracking ({})", if out.status.success() { "moved" } else { "no leader moved" })
}

async fn net(proxy: &Proxy, p: &Planned) -> String {
    let ms = 100 + p.target % 700;
    proxy.set(if p.kind == "net-cut" { Mode::BlackHole } else { Mode::Delay(Duration::from_millis(ms)) });
    sleep(p.hold).await;
    proxy.set(Mode::Pass);
    let n = p.target % 3 + 1;
    if p.kind == "net-cut" { format!("gw1 <-> broker {n}") } else { format!("gw1 <-> broker {n}, +{ms} ms") }
}

async fn gateway_kill9(gws: &mut [GatewayProcess], balancer: &Balancer, p: &Planned) -> String {
    let i = (p.target % gws.len() as u64) as usize;
    gws[i].kill9();
    sleep(p.hold).await;
    gws[i].spawn().await;
    balancer.wait_state(&format!("gw{}", i + 1), true, Duration::from_secs(60)).await;
    format!("gw{}", i + 1)
}

/// Every gateway in turn: SIGTERM, wait for its exit, start it, wait until the balancer has it back.
async fn rolling(gws: &mut [GatewayProcess], balancer: &Balancer) -> String {
    for (i, gw) in gws.iter_mut().enumerate() {
        let status = gw.terminate().await;
        eprintln!("nemesis: gw{} exited after SIGTERM: {status}", i + 1);
        sleep(Duration::from_secs(1)).await;
        gw.spawn().await;
        balancer.wait_state(&format!("gw{}", i + 1), true, Duration::from_secs(60)).await;
        sleep(Duration::from_secs(2)).await;
    }
    "gw1, gw2, gw3".into()
}

fn signal(sig: &str, pid: &str) -> bool {
    Command::new("kill").args([sig, pid]).status().is_ok_and(|s| s.success())
}

async fn redis_pause(hold: Duration) -> String {
    let pid = redis_pid().expect("nemesis: Redis has no pid file");
    assert!(signal("-STOP", &pid), "nemesis: SIGSTOP of Redis failed");
    sleep(hold).await;
    assert!(signal("-CONT", &pid), "nemesis: SIGCONT of Redis failed");
    "redis (SIGSTOP)".into()
}

async fn redis_restart(hold: Duration) -> String {
    assert!(blocking(|| redis("stop")).await, "nemesis: Redis did not stop");
    sleep(hold).await;
    assert!(blocking(|| redis("start")).await, "nemesis: Redis did not come back");
    "redis (stop, start)".into()
}

/// Fills the spool's file system (a small tmpfs) to the last byte, then frees it.
async fn disk_full(dir: &Path, hold: Duration) -> String {
    let filler = dir.join("nemesis-filler");
    let path = filler.clone();
    let written = blocking(move || {
        use std::io::Write as _;
        let mut f = std::fs::File::create(&path).expect("nemesis: filler file");
        let chunk = vec![0u8; 64 * 1024];
        let mut written = 0u64;
        while f.write_all(&chunk).is_ok() {
            written += chunk.len() as u64;
        }
        written
    })
    .await;
    sleep(hold).await;
    std::fs::remove_file(&filler).expect("nemesis: removing the filler");
    format!("{} ({} MiB filler)", dir.file_name().and_then(|n| n.to_str()).unwrap_or("?"), written >> 20)
}

/// Steps gateway 3's wall clock (libfaketime) forward or back, then back to true time.
async fn clock_step(file: &Path, p: &Planned) -> String {
    let secs = 30 + (p.target % 570) as i64;
    let step = if p.target.is_multiple_of(2) { secs } else { -secs };
    std::fs::write(file, format!("{step:+}\n")).expect("nemesis: clock file");
    sleep(p.hold).await;
    std::fs::write(file, "+0\n").expect("nemesis: clock file");
    format!("gw3 {step:+} s")
}
