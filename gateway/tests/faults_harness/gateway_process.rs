//! The real gateway binary as a child process, so a scenario can `kill -9`
//! it, stop it with SIGTERM (graceful drain and producer flush) and start
//! it again on the same port; its peak resident memory is sampled.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{DELIVERY_TIMEOUT_MS, REQUEST_TIMEOUT_MS, blocking, sleep};

pub struct GatewayProcess {
    child: Option<Child>,
    pub url: String,
    pub port: u16,
    config: PathBuf,
    pub log: PathBuf,
    env: Vec<(String, String)>,
    /// Largest VmHWM seen across every run of the process, in KiB.
    pub peak_rss_kib: Arc<AtomicU64>,
}

/// The gateway binary: `$EVENTGW_GATEWAY_BIN` when set (scripts/faults
/// copies one build aside so a rebuild during the run cannot change it),
/// else the one cargo built for this test.
pub fn gateway_bin() -> PathBuf {
    std::env::var_os("EVENTGW_GATEWAY_BIN").map_or_else(|| env!("CARGO_BIN_EXE_gateway").into(), PathBuf::from)
}

impl GatewayProcess {
    /// Creates the topics (`gateway topics`), then starts `gateway serve`
    /// producing to `brokers`.
    pub async fn start(name: &str, brokers: &str, replication: u16) -> Self {
        Self::start_with_env(name, brokers, replication, &[]).await
    }

    /// As [`GatewayProcess::start`], with more `EVENTGW__...` overrides
    /// (e.g. the `[spool]` section) for every run of the process.
    pub async fn start_with_env(name: &str, brokers: &str, replication: u16, extra: &[(&str, &str)]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
        Self::start_on(name, port, brokers, replication, extra).await
    }

    /// As [`GatewayProcess::start_with_env`], on a given port (behind a
    /// balancer whose configuration names it).
    pub async fn start_on(name: &str, port: u16, brokers: &str, replication: u16, extra: &[(&str, &str)]) -> Self {
        let dir = std::env::temp_dir().join(format!("eventgw-faults-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let config = dir.join("gateway.toml");
        let dev = crate::common::repo_root().join("gateway/config/dev.toml");
        let catalog = crate::common::repo_root().join("schemas");
        let text = std::fs::read_to_string(dev)
            .expect("dev config")
            .replace("listen = \"127.0.0.1:8080\"", &format!("listen = \"127.0.0.1:{port}\""))
            .replace("dir = \"../../schemas\"", &format!("dir = \"{}\"", catalog.display()));
        std::fs::write(&config, text).expect("write config");
        let env = vec![
            ("EVENTGW__KAFKA__BROKERS".to_owned(), brokers.to_owned()),
            ("EVENTGW__KAFKA__DELIVERY_TIMEOUT_MS".to_owned(), DELIVERY_TIMEOUT_MS.to_string()),
            ("EVENTGW__KAFKA__REPLICATION_FACTOR".to_owned(), replication.to_string()),
            ("EVENTGW__SERVER__REQUEST_TIMEOUT_MS".to_owned(), REQUEST_TIMEOUT_MS.to_string()),
            ("EVENTGW__SERVER__SHUTDOWN_TIMEOUT_SECS".to_owned(), "10".to_owned()),
            // Dedupe on (the embedded store): a client's retry of a batch
            // already stored is answered `duplicate`, not stored again.
            ("EVENTGW__DEDUPE__ENABLED".to_owned(), "true".to_owned()),
        ];
        let env = env.into_iter().chain(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))).collect();
        let mut gw = Self {
            child: None,
            url: format!("http://127.0.0.1:{port}"),
            port,
            config,
            log: dir.join("gateway.log"),
            env,
            peak_rss_kib: Arc::new(AtomicU64::new(0)),
        };
        let (config, env) = (gw.config.clone(), gw.env.clone());
        let created =
            blocking(move || Command::new(gateway_bin()).arg("topics").arg("--config").arg(config).envs(env).output())
                .await
                .expect("gateway topics runs");
        assert!(created.status.success(), "gateway topics: {}", String::from_utf8_lossy(&created.stderr));
        wait_topics_writable(brokers).await;
        gw.spawn().await;
        gw
    }

    /// Starts (again) `gateway serve` and waits until it answers.
    pub async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).expect("log");
        let child = Command::new(gateway_bin())
            .args(["serve", "--config"])
            .arg(&self.config)
            .envs(self.env.clone())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("gateway starts");
        actix_web::rt::spawn(sample_peak(child.id(), Arc::clone(&self.peak_rss_kib)));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while reqwest::get(format!("{}/healthz", self.url)).await.is_err() {
            assert!(Instant::now() < deadline, "gateway did not start: {}", self.log_text());
            sleep(Duration::from_millis(50)).await;
        }
    }

    /// The configuration file the process runs with (for `gateway spool ...`).
    pub fn config_path(&self) -> &std::path::Path {
        &self.config
    }

    /// The environment overrides the process runs with.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// SIGKILL: no drain, no flush.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill -9");
            child.wait().expect("reaped");
        }
    }

    /// SIGTERM, then waits for the exit: actix drains in-flight requests,
    /// main flushes the producer.
    pub async fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the gateway did not exit within 30 s of SIGTERM");
            sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn peak_mib(&self) -> f64 {
        self.peak_rss_kib.load(Ordering::SeqCst) as f64 / 1024.0
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Waits until every partition of every topic the gateway writes has a
/// leader in its ISR, and a moment more, before any produce. Kafka before
/// 4.5 (KAFKA-15591, apache/kafka pull request 23234) can lose records
/// produced to a partition created moments before: the first produce
/// request reaches the broker before it applied the topic creation
/// (retriable `NOT_LEADER_OR_FOLLOWER`), the next one after, and a broker
/// with no state for the producer accepts its non-zero first sequence; the
/// first request's records are then never in the log, yet librdkafka
/// reported them delivered (seen twice in the broker kill -9 scenario: its
/// first batches of the run, answered 200, missing, and the partition's
/// log starting at sequence 4). Production creates topics long before the
/// gateway takes traffic; so does the harness now.
pub async fn wait_topics_writable(brokers: &str) {
    let brokers = brokers.to_owned();
    blocking(move || {
        let cfg = crate::common::config(&brokers);
        let catalog = eventgw_schemas::loader::load_catalog(&cfg.catalog.dir).expect("catalog");
        let topics: Vec<String> = gateway::topics::wanted(&catalog, &cfg.kafka).into_iter().map(|(t, _)| t).collect();
        crate::common::wait_settled(&brokers, &topics, Duration::from_secs(120));
    })
    .await;
    sleep(Duration::from_secs(2)).await;
}

/// Whether the gateway binary accepts these `EVENTGW__...` overrides (it
/// refuses unknown keys at start-up): how a scenario learns whether the
/// build it runs has a feature (e.g. `[dedupe]`) before relying on it.
pub fn accepts_overrides(overrides: &[(&str, &str)]) -> bool {
    let dev = crate::common::repo_root().join("gateway/config/dev.toml");
    Command::new(gateway_bin())
        .arg("check-config")
        .arg("--config")
        .arg(dev)
        .envs(overrides.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The process's high-water mark of resident memory (VmHWM), in KiB.
pub fn vm_hwm_kib(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

async fn sample_peak(pid: u32, peak: Arc<AtomicU64>) {
    let pid = pid.to_string();
    while let Some(kib) = vm_hwm_kib(&pid) {
        peak.fetch_max(kib, Ordering::SeqCst);
        sleep(Duration::from_millis(100)).await;
    }
}
