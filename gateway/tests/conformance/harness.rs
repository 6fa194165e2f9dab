//! What every conformance case shares: the suite's own gateway
//! configuration, running a driver program (another vendor's SDK, unchanged)
//! and proving from Kafka what it delivered.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use gateway::config::Config;
use serde_json::Value;

use crate::common::{Consumed, TestGateway, brokers, read_topic, repo_root, unique};

/// The write key of the suite's source (`gateway/tests/conformance/gateway.toml`).
pub const WRITE_KEY: &str = "conformance-write-key";
/// The Snowplow app id of the suite's source (`snowplow_app_ids`).
pub const SNOWPLOW_APP_ID: &str = "conformance-app";
/// Where SDK events are produced, per the shipped catalog.
pub const WEB: &str = "web.tracking";
pub const APP: &str = "app.tracking";
pub const IDENTITY: &str = "crm.identities";
pub const DEAD_LETTER: &str = "eventgw.dead-letter";

/// `gateway/tests/conformance`: the drivers and the suite's configuration.
pub fn suite_dir() -> PathBuf {
    repo_root().join("gateway/tests/conformance")
}

/// Installed SDKs that do not live in the clone (the Python venv, built Go
/// and JVM drivers), as `scripts/test-conformance` leaves them.
pub fn deps_dir() -> PathBuf {
    std::env::var_os("EVENTGW_CONFORMANCE_DEPS").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache/eventgw/conformance")
    })
}

/// The suite's configuration, pointed at the test broker; `origins` are
/// pages (of another origin than the gateway) that browser cases serve.
pub fn suite_config(origins: &[String]) -> Config {
    let env = vec![("EVENTGW__KAFKA__BROKERS".to_owned(), brokers())];
    let mut config = Config::load_with_env(&suite_dir().join("gateway.toml"), env.into_iter())
        .expect("gateway/tests/conformance/gateway.toml loads");
    for source in &mut config.sources {
        source.allowed_origins.extend(origins.iter().cloned());
    }
    config
}

/// A gateway with the suite's configuration on 127.0.0.1:0.
pub async fn start_gateway(origins: &[String]) -> TestGateway {
    TestGateway::start(suite_config(origins)).await
}

/// One run of a driver program.
pub struct Driver {
    /// What is run, e.g. `node` or the built Go driver.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Its working directory (where its dependencies resolve from).
    pub dir: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Driver {
    pub fn new(program: impl Into<PathBuf>, dir: impl Into<PathBuf>) -> Self {
        Self { program: program.into(), args: Vec::new(), dir: dir.into(), env: Vec::new() }
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn env(mut self, key: &str, value: impl Into<String>) -> Self {
        self.env.push((key.to_owned(), value.into()));
        self
    }

    /// Runs the driver off the runtime's thread (the in-process gateway
    /// keeps serving) and returns the JSON line it printed last. The SDK's
    /// own verdict is `ok`; a driver exits non-zero when the SDK reported a
    /// failure, and that fails the case with everything it printed.
    pub async fn run(self) -> Value {
        match self.try_run().await {
            Ok(report) => report,
            Err(failure) => panic!("{failure}"),
        }
    }

    /// As [`Driver::run`], returning the failure instead of panicking (for
    /// controls that expect the SDK to fail).
    pub async fn try_run(self) -> Result<Value, String> {
        let shown: Vec<&str> = self.args.iter().map(|a| if a.len() > 80 { "…" } else { a.as_str() }).collect();
        let label = format!("{} {}", self.program.display(), shown.join(" "));
        let output = tokio::task::spawn_blocking(move || {
            Command::new(&self.program)
                .args(&self.args)
                .current_dir(&self.dir)
                .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .output()
        })
        .await
        .expect("driver thread")
        .unwrap_or_else(|e| panic!("cannot run `{label}`: {e}; run scripts/test-conformance, which installs the SDKs"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let report = stdout.lines().rev().find_map(|l| serde_json::from_str::<Value>(l).ok());
        let Some(report) = report.filter(|_| output.status.success()) else {
            return Err(format!(
                "driver `{label}` failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
                output.status
            ));
        };
        if report["ok"] != true {
            return Err(format!("the SDK reported a failure: {report}\n--- stderr\n{stderr}"));
        }
        Ok(report)
    }
}

/// The driver environment every case gets: where the gateway is, the write
/// key and a user id no other run shares.
pub fn driver_env(driver: Driver, url: &str, user: &str) -> Driver {
    driver
        .env("GATEWAY_URL", url)
        .env("WRITE_KEY", WRITE_KEY)
        .env("SNOWPLOW_APP_ID", SNOWPLOW_APP_ID)
        .env("USER_ID", user)
}

/// A fresh user id for one case.
pub fn user(case: &str) -> String {
    unique(&format!("conf-{case}"))
}

/// Records of `topic` keyed `key`, waiting up to 15 s for at least `want`.
pub fn keyed(topic: &str, key: &str, want: usize) -> Vec<Consumed> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let found: Vec<Consumed> =
            read_topic(&brokers(), topic).into_iter().filter(|r| r.key.as_deref() == Some(key)).collect();
        if found.len() >= want || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Dead-letter records about `user` (its id anywhere in the record).
pub fn dead_letters_of(user: &str) -> Vec<Consumed> {
    read_topic(&brokers(), DEAD_LETTER).into_iter().filter(|r| r.value.to_string().contains(user)).collect()
}

/// One event a case expects on a domain topic.
pub struct Expect {
    pub topic: &'static str,
    /// The record's `event-name` header (`Page Viewed` for a page call).
    pub event: &'static str,
}

pub const LINK_CLICKED: Expect = Expect { topic: WEB, event: "Link Clicked" };
pub const PAGE_VIEWED: Expect = Expect { topic: WEB, event: "Page Viewed" };
pub const SCREEN_VIEWED: Expect = Expect { topic: APP, event: "Screen Viewed" };
pub const IDENTIFY: Expect = Expect { topic: IDENTITY, event: "identify" };
pub const FORM_SUBMITTED: Expect = Expect { topic: WEB, event: "Form Submitted" };

/// Proves each expected event landed exactly once on its domain topic keyed
/// by `user`, carrying that `userId`, and that nothing of this run was
/// dead-lettered (beyond `dead_lettered` events a case sends on purpose).
pub fn assert_delivered(case: &str, user: &str, expected: &[Expect], dead_lettered: usize) -> Vec<Consumed> {
    let dead = dead_letters_of(user);
    let why: Vec<String> = dead
        .iter()
        .map(|r| format!("{}: {}", r.value["reason"], r.value["message"].as_str().unwrap_or_default()))
        .collect();
    let mut all = Vec::new();
    let mut topics: Vec<&str> = expected.iter().map(|e| e.topic).collect();
    topics.dedup();
    for topic in topics {
        let want: Vec<&Expect> = expected.iter().filter(|e| e.topic == topic).collect();
        let records = keyed(topic, user, want.len());
        for e in &want {
            let n = records.iter().filter(|r| event_name(r) == e.event).count();
            assert_eq!(
                n,
                1,
                "{case}: expected one `{}` on {topic} keyed {user}; found {:?}; dead-lettered: {why:?}",
                e.event,
                records.iter().map(event_name).collect::<Vec<_>>()
            );
        }
        assert_eq!(records.len(), want.len(), "{case}: unexpected extra records on {topic}: {records:#?}");
        for r in &records {
            assert_eq!(r.value["userId"], user, "{case}: record value carries the user: {}", r.value);
            assert!(r.headers.contains_key("event-id"), "{case}: record headers {:?}", r.headers);
        }
        all.extend(records);
    }
    assert_eq!(
        dead.len(),
        dead_lettered,
        "{case}: dead-lettered records of this run: {:#?}",
        dead.iter().map(|r| (&r.headers, &r.value)).collect::<Vec<_>>()
    );
    all
}

/// The `event-name` header, or the record's `type` for identity calls.
fn event_name(r: &Consumed) -> &str {
    r.headers.get("event-name").map(String::as_str).or_else(|| r.value["type"].as_str()).unwrap_or("?")
}

/// Upload requests the gateway answered so far (every endpoint but health,
/// readiness and metrics), from its own `/metrics`.
pub async fn upload_requests(url: &str) -> u64 {
    let text = reqwest::get(format!("{url}/metrics")).await.expect("metrics").text().await.expect("metrics text");
    text.lines()
        .filter(|l| l.starts_with("eventgw_http_requests_total{"))
        .filter(|l| !["/metrics", "/healthz", "/readyz"].iter().any(|p| l.contains(&format!("endpoint=\"{p}\""))))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// A test CA and a server certificate it signed for `localhost` and
/// 127.0.0.1, written as PEM files for `[server.tls]` and for the SDK's
/// trust store.
pub struct TestPki {
    dir: PathBuf,
    pub ca_file: PathBuf,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl TestPki {
    pub fn new(name: &str) -> Self {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, format!("eventgw conformance CA {name}"));
        let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().expect("server key");
        let mut leaf = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("params");
        leaf.distinguished_name.push(DnType::CommonName, "eventgw conformance".to_owned());
        let cert = leaf.signed_by(&key, &issuer).expect("server certificate");
        let dir = std::env::temp_dir().join(unique(&format!("eventgw-conformance-tls-{name}")));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let write = |file: &str, text: String| {
            let path = dir.join(file);
            std::fs::write(&path, text).expect("write PEM");
            path
        };
        Self {
            ca_file: write("ca.pem", ca_cert.pem()),
            cert_file: write("cert.pem", cert.pem()),
            key_file: write("key.pem", key.serialize_pem()),
            dir,
        }
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
