//! `gateway dead-letter inspect|replay` against the real broker: events
//! dead-lettered under version 1 of a schema, a compatible fix in a copy
//! of the catalog, a dry run that moves nothing, a replay that stores each
//! once with `recovered-from`, a rerun that stores nothing, a replay killed
//! with SIGKILL half-way and rerun (every event once), and the records
//! that are not ours. Each test has a source of its own, so tests sharing
//! the broker never count each other's records. Skips without Kafka.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Consumed, TestGateway};
use gateway::config::Config;
use gateway::recover::RECOVERED_FROM;
use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};

/// A catalog copy, a configuration using it with a source of its own.
struct Setup {
    dir: PathBuf,
    config: PathBuf,
    source: String,
    key: String,
    /// The start of the test's range (RFC 3339), a little before its first event.
    from: String,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").map(|e| e.expect("entry")) {
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).expect("copy");
        }
    }
}

fn setup(name: &str) -> Setup {
    let id = common::unique(name);
    let dir = std::env::temp_dir().join(&id);
    let schemas = common::repo_root().join("schemas");
    for domain in std::fs::read_dir(&schemas).expect("schemas").map(|e| e.expect("entry").path()) {
        if domain.join("catalog.toml").is_file() || domain.ends_with("mappings") {
            copy_dir(&domain, &dir.join("schemas").join(domain.file_name().expect("name")));
        }
    }
    let dev = std::fs::read_to_string(common::repo_root().join("gateway/config/dev.toml")).expect("dev.toml");
    let catalog = format!("dir = {:?}", dir.join("schemas").display().to_string());
    assert!(dev.contains("dir = \"../../schemas\""), "dev.toml names its catalog as expected");
    let key = format!("{id}-key");
    let text = dev.replace("dir = \"../../schemas\"", &catalog)
        + &format!(
            "\n[[sources]]\nid = {id:?}\nwrite_key = {key:?}\ndomains = [\"crm\"]\nunknown_events = \"dead_letter\"\n"
        );
    let config = dir.join("gateway.toml");
    std::fs::write(&config, text).expect("write config");
    let from = (chrono::Utc::now() - chrono::TimeDelta::seconds(5)).to_rfc3339();
    Setup { dir, config, source: id, key, from }
}

impl Setup {
    fn load(&self) -> Config {
        let env = vec![("EVENTGW__KAFKA__BROKERS".to_owned(), common::brokers())];
        Config::load_with_env(&self.config, env.into_iter()).expect("test config loads")
    }

    /// The compatible fix: `nurturing` becomes a status in version 1.
    fn fix_schema(&self) {
        let path = self.dir.join("schemas/crm/lead_status_changed/1.json");
        let text = std::fs::read_to_string(&path).expect("schema");
        let fixed = text.replace("\"lost\"\n", "\"lost\",\n            \"nurturing\"\n");
        assert_ne!(text, fixed, "the schema changed");
        std::fs::write(&path, fixed).expect("write schema");
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gateway"));
        command
            .arg("--config")
            .arg(&self.config)
            .args(["dead-letter"])
            .args(args)
            .args(["--from", &self.from, "--source", &self.source])
            .env("EVENTGW__KAFKA__BROKERS", common::brokers())
            .env("RUST_LOG", "warn")
            .env_remove(gateway::recover::THROTTLE_ENV);
        command
    }

    fn run(&self, args: &[&str]) -> String {
        let out: Output = self.command(args).output().expect("gateway runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{args:?}: {text}{}", String::from_utf8_lossy(&out.stderr));
        text
    }

    /// This test's records on `crm.leads`.
    fn stored(&self) -> Vec<Consumed> {
        common::read_topic(&common::brokers(), "crm.leads")
            .into_iter()
            .filter(|r| r.headers.get("source") == Some(&self.source))
            .collect()
    }
}

fn lead(id: &str, status: &str) -> Value {
    json!({"type": "track", "event": "Lead Status Changed", "messageId": id, "userId": "rep-7",
           "properties": {"lead_id": format!("lead-{id}"), "to_status": status}})
}

/// Sends `statuses` as one batch each an event of its own id; returns the ids.
async fn send(gateway: &TestGateway, setup: &Setup, statuses: &[&str]) -> Vec<String> {
    let ids: Vec<String> = statuses.iter().map(|_| common::unique("lead")).collect();
    let batch: Vec<Value> = ids.iter().zip(statuses).map(|(id, s)| lead(id, s)).collect();
    let response = common::client()
        .post(format!("{}/v1/batch", gateway.url))
        .basic_auth(&setup.key, Some(""))
        .json(&json!({ "batch": batch }))
        .send()
        .await
        .expect("sent");
    let (status, _, body) = common::answer(response).await;
    assert_eq!(status, 200, "{body}");
    let text = body.to_string();
    assert_eq!(
        text.matches("\"topic\":\"eventgw.dead-letter\"").count(),
        statuses.len(),
        "every event dead-lettered: {text}"
    );
    ids
}

/// How many times each id is stored, checking each record is a recovered one.
fn counts(records: &[Consumed]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for record in records {
        let id = record.headers.get("event-id").expect("event-id").clone();
        assert_eq!(record.value["messageId"], json!(id), "the original messageId");
        let from = record.headers.get(RECOVERED_FROM).expect("recovered-from");
        assert!(from.starts_with("eventgw.dead-letter/"), "{from}");
        assert_eq!(record.key.as_deref(), Some(format!("lead-{id}").as_str()), "keyed by lead as the catalog says");
        *counts.entry(id).or_insert(0) += 1;
    }
    counts
}

#[actix_web::test]
async fn dry_run_then_replay_stores_each_fixed_event_once_and_reports_the_rest() {
    if common::without_kafka() {
        return;
    }
    let setup = setup("recover");
    let gateway = TestGateway::start(setup.load()).await;
    let fixable = send(&gateway, &setup, &["nurturing"; 4]).await;
    let broken = send(&gateway, &setup, &["bogus", "bogus"]).await;
    gateway.stop().await;

    let inspect = setup.run(&["inspect"]);
    assert!(inspect.contains("       6  schema_violation"), "{inspect}");
    assert!(inspect.contains("Lead Status Changed vnewest"), "{inspect}");
    setup.fix_schema();

    let dry = setup.run(&["replay", "--dry-run"]);
    assert_eq!(dry.matches("would recover eventgw.dead-letter/").count(), 4, "{dry}");
    for id in &broken {
        let line = dry.lines().find(|l| l.contains(id.as_str())).unwrap_or_else(|| panic!("{id} reported: {dry}"));
        assert!(line.starts_with("still failing eventgw.dead-letter/"), "{line}");
    }
    assert!(dry.contains("schema_violation"), "the reason's code: {dry}");
    assert!(dry.contains("/properties/to_status: \"bogus\" is not one of"), "the violation: {dry}");
    assert!(dry.contains("would recover 4, still failing 2, skipped as already recovered 0"), "{dry}");
    assert!(setup.stored().is_empty(), "a dry run produces nothing");

    let prom = setup.dir.join("textfile/eventgw_recovery.prom");
    std::fs::create_dir_all(prom.parent().expect("dir")).expect("mkdir");
    let metrics_file = prom.to_str().expect("utf-8 path");
    let first = setup.run(&["replay", "--metrics-file", metrics_file]);
    assert!(first.contains("recovered 4, still failing 2, skipped as already recovered 0"), "{first}");
    let stored = counts(&setup.stored());
    assert_eq!(stored.len(), 4, "{stored:?}");
    assert!(fixable.iter().all(|id| stored.get(id) == Some(&1)), "each once: {stored:?}");
    let text = metrics_text(&prom);
    assert_file_counts(&text, "eventgw_recovery_events_total", &first);
    assert_file_counts(&text, "eventgw_recovery_last_run_events", &first);
    let by_event =
        format!("eventgw_recovery_recovered_events_total{{source=\"{}\",event=\"Lead Status Changed\"}}", setup.source);
    assert_eq!(metric(&text, &by_event), 4, "{text}");
    assert_eq!(metric(&text, "eventgw_recovery_last_run_success"), 1);

    let second = setup.run(&["replay", "--metrics-file", metrics_file]);
    assert!(second.contains("recovered 0, still failing 2, skipped as already recovered 4"), "{second}");
    assert_eq!(setup.stored().len(), 4, "a rerun stores nothing");
    let text = metrics_text(&prom);
    assert_file_counts(&text, "eventgw_recovery_last_run_events", &second);
    let total = |outcome: &str| metric(&text, &format!("eventgw_recovery_events_total{{outcome=\"{outcome}\"}}"));
    assert_eq!((total("recovered"), total("still_failing"), total("already_recovered")), (4, 4, 4), "{text}");
    assert_eq!(metric(&text, &by_event), 4, "the counters add over runs: {text}");
    let names: Vec<_> =
        std::fs::read_dir(prom.parent().expect("dir")).expect("dir").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
}

/// The metrics file's text, checked by `promtool check metrics` when promtool is installed
/// (Debian's prometheus package; scripts/test-ops installs it).
fn metrics_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("the metrics file was written");
    if let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        use std::io::Write;
        child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("to promtool");
        let out = child.wait_with_output().expect("promtool ran");
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics: {said}\n{text}");
    } else {
        eprintln!("promtool is not installed: the metrics file's syntax is not checked");
    }
    text
}

/// The value of `series` (name and labels, exactly) in an exposition text.
fn metric(text: &str, series: &str) -> u64 {
    let prefix = format!("{series} ");
    let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{series} in:\n{text}"));
    // Counts are integers; the timestamp has a fraction, whole seconds do here.
    line[prefix.len()..].parse::<f64>().unwrap_or_else(|_| panic!("a number: {line}")) as u64
}

/// `name`'s outcome counts in the metrics file equal the run's summary line.
fn assert_file_counts(text: &str, name: &str, output: &str) {
    let line = output.lines().find(|l| l.starts_with("replay: ")).unwrap_or_else(|| panic!("a summary in {output}"));
    let filtered = if line.contains(", filtered out ") { count_after(line, ", filtered out ") } else { 0 };
    for (outcome, label) in [
        ("recovered", ", recovered "),
        ("still_failing", "still failing "),
        ("already_recovered", "skipped as already recovered "),
        ("unreadable", "skipped as unreadable "),
    ] {
        let series = format!("{name}{{outcome=\"{outcome}\"}}");
        assert_eq!(metric(text, &series) as usize, count_after(line, label), "{series} against `{line}`");
    }
    assert_eq!(metric(text, &format!("{name}{{outcome=\"filtered_out\"}}")) as usize, filtered, "`{line}`");
}

#[test]
fn a_replay_that_fails_still_writes_the_metrics_file_saying_so() {
    let setup = setup("recover-fails");
    let prom = setup.dir.join("eventgw_recovery.prom");
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .arg("--config")
        .arg(&setup.config)
        .args(["dead-letter", "replay", "--source", "no-such-source", "--metrics-file"])
        .arg(&prom)
        .output()
        .expect("gateway runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown_source"), "{out:?}");
    let text = metrics_text(&prom);
    assert_eq!(metric(&text, "eventgw_recovery_last_run_success"), 0, "{text}");
    assert_eq!(metric(&text, "eventgw_recovery_events_total{outcome=\"recovered\"}"), 0, "{text}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let stamp = metric(&text, "eventgw_recovery_last_run_timestamp_seconds");
    assert!(now.abs_diff(stamp) < 120, "the run's end, {stamp}, is now, {now}");
}

/// The number after `label` in a summary line.
fn count_after(text: &str, label: &str) -> usize {
    let at = text.find(label).unwrap_or_else(|| panic!("`{label}` in {text}")) + label.len();
    text[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().expect("a count")
}

#[actix_web::test]
async fn a_replay_killed_half_way_and_rerun_stores_every_event_once() {
    if common::without_kafka() {
        return;
    }
    let setup = setup("recover-kill");
    let gateway = TestGateway::start(setup.load()).await;
    let ids = send(&gateway, &setup, &["nurturing"; 12]).await;
    gateway.stop().await;
    setup.fix_schema();

    let mut child = setup
        .command(&["replay"])
        .env(gateway::recover::THROTTLE_ENV, "400")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("replay starts");
    let started = Instant::now();
    let killed_at = loop {
        let n = setup.stored().len();
        if n >= 3 {
            child.kill().expect("SIGKILL");
            break n;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "replay produced nothing in 60 s");
        assert!(child.try_wait().expect("wait").is_none(), "replay ended before it was killed");
        std::thread::sleep(Duration::from_millis(100));
    };
    child.wait().expect("reaped");
    let after_kill = setup.stored().len();
    assert!(after_kill < ids.len(), "killed half-way: {after_kill} of {} stored (seen {killed_at})", ids.len());

    let rerun = setup.run(&["replay"]);
    // A produce request the broker took just before the kill may land after
    // the count above: the rerun's own counts must add up either way.
    let skipped = count_after(&rerun, "skipped as already recovered ");
    assert!(skipped >= after_kill, "{rerun}");
    assert_eq!(count_after(&rerun, ", recovered ") + skipped, ids.len(), "{rerun}");
    eprintln!("killed after {killed_at} seen, {after_kill} stored; rerun: {}", rerun.trim());
    let stored = counts(&setup.stored());
    assert!(ids.iter().all(|id| stored.get(id) == Some(&1)), "every event exactly once: {stored:?}");
    assert_eq!(stored.len(), ids.len());
}

#[actix_web::test]
async fn records_that_are_not_ours_are_named_and_never_produced() {
    if common::without_kafka() {
        return;
    }
    let setup = setup("recover-junk");
    let gateway = TestGateway::start(setup.load()).await; // creates the topics
    gateway.stop().await;
    let producer: FutureProducer =
        ClientConfig::new().set("bootstrap.servers", common::brokers()).create().expect("producer");
    let good = json!({"reason": "schema_violation", "source": "no-such-source", "receivedAt": "2026-12-05T14:00:00Z",
                      "messageId": common::unique("orphan"), "event": lead("x", "new")})
    .to_string();
    let mut expected = Vec::new();
    for (payload, code) in [
        (b"not json at all".to_vec(), "not_json"),
        (good.as_bytes()[..good.len() / 2].to_vec(), "truncated"),
        (br#"{"hello":"world"}"#.to_vec(), "not_a_gateway_envelope"),
    ] {
        let delivery = producer
            .send(FutureRecord::<str, [u8]>::to("eventgw.dead-letter").payload(&payload), Duration::from_secs(10))
            .await
            .expect("produced");
        expected.push(format!("eventgw.dead-letter/{}/{} {code}", delivery.partition, delivery.offset));
    }
    let delivery = producer
        .send(FutureRecord::<str, str>::to("eventgw.dead-letter").payload(&good), Duration::from_secs(10))
        .await
        .expect("produced");
    let (partition, offset) = (delivery.partition, delivery.offset);

    // Not filtered by source: unreadable records name no source.
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["--config"])
        .arg(&setup.config)
        .args(["dead-letter", "replay", "--from", &setup.from])
        .env("EVENTGW__KAFKA__BROKERS", common::brokers())
        .env("RUST_LOG", "warn")
        .output()
        .expect("gateway runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    for named in &expected {
        assert!(text.contains(named.as_str()), "`{named}` named in: {text}");
    }
    let orphan = format!("still failing eventgw.dead-letter/{partition}/{offset} ");
    let line = text.lines().find(|l| l.starts_with(&orphan)).unwrap_or_else(|| panic!("{orphan} in {text}"));
    assert!(line.contains("source_not_configured"), "{line}");
    let leaked = common::read_topic(&common::brokers(), "crm.leads")
        .into_iter()
        .filter(|r| r.headers.get(RECOVERED_FROM).is_some_and(|f| f.ends_with(&format!("/{partition}/{offset}"))))
        .count();
    assert_eq!(leaked, 0, "the orphan was not produced");
}
