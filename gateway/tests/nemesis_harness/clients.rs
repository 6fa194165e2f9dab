//! The clients: beacon-like (one attempt per batch, whatever the answer)
//! and SDK-like (the same `messageId`s again until answered 200), each a
//! closed loop on one key that several clients share, so that the order of
//! a key's acknowledged events can be checked against what Kafka stored.

use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Rng;
use super::history::{History, Kind, Request, now};
use crate::faults_harness::sleep;

#[derive(Debug, Clone)]
pub struct Clients {
    pub sdk: usize,
    pub beacon: usize,
    /// Distinct keys (`userId`s); client i uses key i % keys, so keys repeat
    /// across clients and kinds.
    pub keys: usize,
    pub batch: usize,
    /// Mean pause between one client's batches (jittered from the seed).
    pub every: Duration,
    pub run_for: Duration,
    /// After `run_for`, how long SDK clients keep retrying what is unanswered.
    pub retry_for: Duration,
}

impl Default for Clients {
    fn default() -> Self {
        Self {
            sdk: 8,
            beacon: 8,
            keys: 6,
            batch: 4,
            every: Duration::from_millis(100),
            run_for: Duration::from_secs(180),
            retry_for: Duration::from_secs(120),
        }
    }
}

fn event(id: &str, key: &str) -> Value {
    json!({"type": "track", "event": "Link Clicked", "userId": key, "messageId": id,
        "properties": {"href": "https://shop.example/"}})
}

/// Sends one request; fills status, code and outcomes of `r`.
async fn send(client: &reqwest::Client, url: &str, body: &Value, r: &mut Request) {
    let request = client.post(format!("{url}/v1/batch")).basic_auth("demo-write-key", Some("")).json(body);
    r.start = now();
    match request.send().await {
        Err(_) => r.status = 0,
        Ok(response) => {
            r.status = response.status().as_u16();
            r.via = response.headers().get("x-served-by").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            match response.json::<Value>().await {
                Err(_) => {
                    // A status without a readable body is no answer the client can trust.
                    r.code = format!("{} without a JSON body", r.status);
                    r.status = 0;
                }
                Ok(body) => {
                    r.code = body["code"].as_str().unwrap_or_default().to_owned();
                    r.outcomes = body["events"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|e| e["status"].as_str().unwrap_or("?").to_owned())
                        .collect();
                }
            }
        }
    }
    r.end = now();
}

/// Runs every client against `url` until `run_for` passed (SDK clients
/// then finish their unanswered batch, up to `retry_for`).
pub async fn run(c: Clients, seed: u64, run_id: String, url: String, history: History) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(8)).build().expect("HTTP client");
    let stop = Instant::now() + c.run_for;
    let give_up = stop + c.retry_for;
    let shared = Rc::new((client, url, run_id, c, history));
    let total = shared.3.sdk + shared.3.beacon;
    let tasks: Vec<_> = (0..total)
        .map(|i| {
            let shared = Rc::clone(&shared);
            actix_web::rt::spawn(async move {
                let (client, url, run_id, c, history) = &*shared;
                let kind = if i < c.sdk { Kind::Sdk } else { Kind::Beacon };
                let mut rng = Rng::new(seed.wrapping_mul(1000).wrapping_add(i as u64));
                one_client(client, url, run_id, c, history, (kind, i), &mut rng, (stop, give_up)).await;
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("client task");
    }
}

#[allow(clippy::too_many_arguments)]
async fn one_client(
    client: &reqwest::Client,
    url: &str,
    run_id: &str,
    c: &Clients,
    history: &History,
    (kind, i): (Kind, usize),
    rng: &mut Rng,
    (stop, give_up): (Instant, Instant),
) {
    let name = format!("{}{i}", kind.name());
    let key = format!("user-{}", i % c.keys);
    let every = c.every.as_millis() as u64;
    sleep(Duration::from_millis(rng.range(0, every))).await;
    let mut seq = 0u64;
    while Instant::now() < stop {
        let ids: Vec<String> = (0..c.batch).map(|k| format!("{run_id}-{name}-b{seq}-e{k}")).collect();
        let body = json!({"batch": ids.iter().map(|id| event(id, &key)).collect::<Vec<_>>()});
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut r = Request {
                client: name.clone(),
                kind,
                key: key.clone(),
                attempt,
                ids: ids.clone(),
                start: 0.0,
                end: 0.0,
                status: 0,
                code: String::new(),
                outcomes: Vec::new(),
                via: String::new(),
            };
            send(client, url, &body, &mut r).await;
            let ok = r.ok();
            history.request(r);
            if ok || kind == Kind::Beacon || Instant::now() > give_up {
                break;
            }
            sleep(Duration::from_millis(rng.range(200, 400))).await;
        }
        seq += 1;
        sleep(Duration::from_millis(rng.range(every / 2, every * 3 / 2))).await;
    }
}
