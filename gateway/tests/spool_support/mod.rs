//! What the spool scenarios add to the fault harness: beacon-style clients
//! (one attempt per batch, never a retry, like `navigator.sendBeacon`),
//! the spool's settings, waiting for the spool to drain, and a per-key
//! order check over what Kafka holds.
#![allow(dead_code, missing_docs)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::faults_harness::load::{Answer, Attempt, BatchLog};
use crate::faults_harness::{REQUEST_TIMEOUT_MS, blocking, sleep};

/// `[spool]` overrides: on, in `dir`, Kafka given 1 s of the 6 s deadline.
pub fn spool_env(dir: &std::path::Path) -> Vec<(String, String)> {
    vec![
        ("EVENTGW__SPOOL__ENABLED".into(), "true".into()),
        ("EVENTGW__SPOOL__DIR".into(), dir.display().to_string()),
        ("EVENTGW__SPOOL__ACK_TIMEOUT_MS".into(), "1000".into()),
    ]
}

/// A fresh spool directory for scenario `name`.
pub fn spool_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eventgw-spool-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("spool dir");
    dir
}

pub fn borrowed(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[derive(Debug, Clone)]
pub struct Beacons {
    pub users: usize,
    pub batch: usize,
    pub every: Duration,
    pub run_for: Duration,
}

impl Default for Beacons {
    fn default() -> Self {
        Self { users: 16, batch: 4, every: Duration::from_millis(100), run_for: Duration::from_secs(30) }
    }
}

fn event(id: &str, user: usize, seq: usize) -> Value {
    let (name, props) = if seq.is_multiple_of(2) {
        ("Form Submitted", json!({"form_id": "signup"}))
    } else {
        ("Link Clicked", json!({"href": "https://shop.example/"}))
    };
    json!({"type": "track", "event": name, "userId": format!("user-{user}"), "messageId": id, "properties": props})
}

/// One attempt; a 200 must account for every event as accepted or spooled.
async fn send_once(client: &reqwest::Client, url: &str, body: &Value, events: usize) -> (Answer, usize) {
    let request = client.post(format!("{url}/v1/batch")).basic_auth("demo-write-key", Some("")).json(body);
    let Ok(response) = request.send().await else { return (Answer::NoAnswer, 0) };
    let status = response.status().as_u16();
    let Ok(body) = response.json::<Value>().await else { return (Answer::NoAnswer, 0) };
    let spooled = body["spooled"].as_u64().unwrap_or(0) as usize;
    if status == 200 {
        let accepted = body["accepted"].as_u64().unwrap_or(0) as usize;
        assert_eq!(accepted + spooled, events, "every event is accepted or spooled: {body}");
    }
    (Answer::Status(status), spooled)
}

/// Beacon clients: each user sends its batches one after another (so its
/// events have an order), every batch exactly once whatever the answer.
/// Returns the batch logs and how many events were answered `spooled`.
pub async fn beacons(load: Beacons, run_id: String, url: String) -> (Vec<BatchLog>, usize) {
    let client =
        reqwest::Client::builder().timeout(Duration::from_millis(REQUEST_TIMEOUT_MS + 2000)).build().expect("client");
    let stop = Instant::now() + load.run_for;
    let shared = Rc::new((client, url, run_id, load));
    let users: Vec<_> = (0..shared.3.users)
        .map(|user| {
            let shared = Rc::clone(&shared);
            actix_web::rt::spawn(async move {
                let (client, url, run_id, load) = &*shared;
                let mut logs = Vec::new();
                let mut spooled = 0;
                sleep(load.every * user as u32 / load.users as u32).await;
                let mut seq = 0;
                while Instant::now() < stop {
                    let ids: Vec<String> = (0..load.batch).map(|k| format!("{run_id}-u{user}-b{seq}-e{k}")).collect();
                    let events: Vec<Value> = ids.iter().enumerate().map(|(k, id)| event(id, user, seq + k)).collect();
                    let started = Instant::now();
                    let (answer, n) = send_once(client, url, &json!({"batch": events}), load.batch).await;
                    spooled += n;
                    logs.push(BatchLog {
                        ids,
                        attempts: vec![Attempt { started, ended: Instant::now(), answer }],
                        duplicates: Vec::new(),
                    });
                    seq += 1;
                    sleep(load.every).await;
                }
                (logs, spooled)
            })
        })
        .collect();
    let mut logs = Vec::new();
    let mut spooled = 0;
    for user in users {
        let (l, n) = user.await.expect("user task");
        logs.extend(l);
        spooled += n;
    }
    (logs, spooled)
}

/// The spool's part of `/readyz`, when the gateway answers.
pub async fn spool_status(url: &str) -> Option<Value> {
    let body: Value = reqwest::get(format!("{url}/readyz")).await.ok()?.json().await.ok()?;
    body.get("spool").cloned()
}

/// Waits until the spool holds nothing and requests go direct again;
/// returns how long that took.
pub async fn wait_drained(url: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        if let Some(s) = spool_status(url).await
            && s["records"] == 0
            && s["spooling"] == false
        {
            return started.elapsed();
        }
        assert!(started.elapsed() < limit, "the spool did not drain within {limit:?}: {:?}", spool_status(url).await);
        sleep(Duration::from_millis(250)).await;
    }
}

/// (batch, event) of an id `{run}-u{user}-b{batch}-e{event}`.
fn position(id: &str) -> Option<(String, u64, u64)> {
    let mut parts = id.rsplitn(4, '-');
    let e = parts.next()?.strip_prefix('e')?.parse().ok()?;
    let b = parts.next()?.strip_prefix('b')?.parse().ok()?;
    let user = parts.next()?.to_owned();
    Some((user, b, e))
}

/// Reads every topic of the run in offset order and counts, per key and
/// topic, records that come after a record sent later by the same user.
pub async fn order_violations(brokers: &str, run_id: &str) -> (usize, Vec<String>) {
    let (brokers, run_id) = (brokers.to_owned(), run_id.to_owned());
    blocking(move || {
        let cfg = crate::common::config(&brokers);
        let catalog = eventgw_schemas::loader::load_catalog(&cfg.catalog.dir).expect("catalog");
        let mut last: HashMap<(String, String), (u64, u64)> = HashMap::new();
        let mut violations = Vec::new();
        let mut checked = 0;
        for (topic, _) in gateway::topics::wanted(&catalog, &cfg.kafka) {
            let mut records = crate::common::read_topic(&brokers, &topic);
            records.sort_by_key(|r| (r.partition, r.offset));
            for record in records {
                let Some(id) = record.headers.get("event-id").filter(|id| id.starts_with(&run_id)) else { continue };
                let Some((user, b, e)) = position(id) else { continue };
                checked += 1;
                let slot = last.entry((topic.clone(), user)).or_insert((0, 0));
                if (b, e) < *slot {
                    violations.push(format!("{topic}: {id} after b{}-e{}", slot.0, slot.1));
                }
                *slot = (*slot).max((b, e));
            }
        }
        (checked, violations)
    })
    .await
}
