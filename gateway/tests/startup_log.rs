//! What the gateway logs (issue 28, item 12), read from a subscriber this
//! test binary installs for the whole process (the suppression consumer
//! logs from a thread of its own, and rdkafka through the `log` crate):
//! one `Gateway started` line naming the features that are on; a reload
//! whose geo database is missing is refused and says so; the suppression
//! consumer does not log the end of a partition as an error.

#[path = "inprocess_support/mod.rs"]
mod inprocess_support;
#[path = "common/servers.rs"]
mod servers;

use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use inprocess_support::{TestGateway, dev_config_text};

/// Everything logged by this process.
static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Captured;

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOG.lock().expect("log").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber once (the main binary's filter, with
/// the suppression consumer's DEBUG lines).
fn capture() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(|| Captured)
            .with_env_filter("info,librdkafka=warn,gateway::privacy=debug")
            .try_init()
            .expect("the only subscriber of this binary");
    });
}

fn log_lines() -> Vec<String> {
    String::from_utf8_lossy(&LOG.lock().expect("log")).lines().map(str::to_owned).collect()
}

/// Waits (bounded: a hang guard) for a line containing every one of `parts`.
async fn line_with(parts: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(line) = log_lines().into_iter().find(|l| parts.iter().all(|p| l.contains(p))) {
            return line;
        }
        assert!(Instant::now() < deadline, "no line with {parts:?} in:\n{}", log_lines().join("\n"));
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix_web::test]
async fn the_start_up_line_names_the_features_that_are_on() {
    capture();
    let gw = TestGateway::start_text(dev_config_text()).await;
    let line = line_with(&["Gateway started", &gw.addr]).await;
    for field in ["spool=off", "dedupe=off", "geo=off", "enrichment=", "privacy=", "jwt=", "http=http/1.1+h2c"] {
        assert!(line.contains(field), "{field} in {line}");
    }
    assert!(line.contains("quotas=source auth_failures (ipv6 /64)"), "dev.toml's quotas: {line}");
    gw.shutdown().await.expect("stops");
}

/// Before the fix a reload naming a geo database that does not exist was
/// applied and said nothing about it (the `[geo]` section was ignored).
#[actix_web::test]
async fn a_reload_naming_a_missing_geo_database_is_refused_and_says_which() {
    capture();
    let gw = TestGateway::start_text(dev_config_text()).await;
    let missing = std::env::temp_dir().join(format!("eventgw-no-such-geo-{}.mmdb", std::process::id()));
    gw.rewrite_config(&format!("{}\n[geo]\ndatabase = \"{}\"\n", dev_config_text(), missing.display()));
    assert_eq!(gw.reload().await, "refused", "a restart with this file would fail");
    let line = line_with(&["Configuration reload refused", &missing.display().to_string()]).await;
    assert!(line.contains("ERROR"), "{line}");
    gw.shutdown().await.expect("stops");
}

/// Before the fix rdkafka's default context logged every partition's end
/// as `ERROR librdkafka: Global error: PartitionEOF` at each start.
#[actix_web::test]
async fn the_suppression_consumer_does_not_log_a_partition_end_as_an_error() {
    if servers::without_kafka() {
        return;
    }
    capture();
    let mut config = gateway::config::Config::load_with_env(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/dev.toml"),
        [("EVENTGW__KAFKA__BROKERS".to_owned(), std::env::var("KAFKA_BROKERS").unwrap_or("127.0.0.1:9092".into()))]
            .into_iter(),
    )
    .expect("dev config");
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_nanos();
    let topic = format!("test.suppression-eof-{}-{nanos}", std::process::id());
    config.privacy.suppression_topic = Some(topic.clone());
    gateway::privacy::suppression_topic::ensure_topic(&config.kafka, &topic).await.expect("Kafka answers");
    let list = gateway::privacy::suppression_topic::SuppressionTopic::follow(&config.kafka, &topic).expect("follows");
    line_with(&["Suppression topic partition read to its end", &topic]).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while list.ready().is_err() {
        assert!(Instant::now() < deadline, "never read: {:?}", list.ready());
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }
    let errors: Vec<String> = log_lines()
        .into_iter()
        .filter(|l| l.contains("ERROR") && (l.contains("PartitionEOF") || l.contains("Partition EOF")))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}
