//! Steady load from many users, each a closed loop like an SDK: send a
//! batch of fresh unique `messageId`s, and on anything but 200 retry the
//! same batch (same ids) until it is acknowledged or the run gives up.

use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{REQUEST_TIMEOUT_MS, sleep};

/// What the gateway answered one request, or that no answer came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Answer {
    Status(u16),
    /// Connection refused or reset, or no answer within the client timeout.
    NoAnswer,
}

#[derive(Debug, Clone)]
pub struct Attempt {
    pub started: Instant,
    pub ended: Instant,
    pub answer: Answer,
}

/// One batch and every try of it.
#[derive(Debug, Clone)]
pub struct BatchLog {
    pub ids: Vec<String>,
    pub attempts: Vec<Attempt>,
    /// Ids a 200 answered `duplicate` (already stored by an earlier try,
    /// not stored again): the gateway's dedupe at work.
    pub duplicates: Vec<String>,
}

impl BatchLog {
    pub fn acked(&self) -> bool {
        self.attempts.iter().any(|a| a.answer == Answer::Status(200))
    }
}

#[derive(Debug, Clone)]
pub struct Load {
    /// Concurrent users, each with its own userId and closed loop.
    pub users: usize,
    /// Events per batch.
    pub batch: usize,
    /// Pause between one user's batches.
    pub every: Duration,
    /// How long new batches are started.
    pub run_for: Duration,
    /// After `run_for`, how long unacknowledged batches keep being retried.
    pub retry_for: Duration,
    /// Pause before retrying a batch.
    pub backoff: Duration,
}

impl Default for Load {
    fn default() -> Self {
        Self {
            users: 16,
            batch: 4,
            every: Duration::from_millis(100),
            run_for: Duration::from_secs(30),
            retry_for: Duration::from_secs(40),
            backoff: Duration::from_millis(250),
        }
    }
}

fn event(id: &str, user: usize, seq: usize) -> Value {
    if seq.is_multiple_of(2) {
        json!({"type": "track", "event": "Form Submitted", "userId": format!("user-{user}"), "messageId": id,
            "properties": {"form_id": "signup"}})
    } else {
        json!({"type": "track", "event": "Link Clicked", "userId": format!("user-{user}"), "messageId": id,
            "properties": {"href": "https://shop.example/"}})
    }
}

/// Sends one batch; the answer and the ids it answered `duplicate`.
async fn send(client: &reqwest::Client, url: &str, body: &Value, events: usize) -> (Answer, Vec<String>) {
    let request = client.post(format!("{url}/v1/batch")).basic_auth("demo-write-key", Some("")).json(body);
    let Ok(response) = request.send().await else { return (Answer::NoAnswer, Vec::new()) };
    let status = response.status().as_u16();
    let Ok(body) = response.json::<Value>().await else { return (Answer::NoAnswer, Vec::new()) };
    let mut duplicates = Vec::new();
    if status == 200 {
        // With dedupe on, a retry's events already stored are `duplicate`.
        let accepted = body["accepted"].as_u64().unwrap_or(0)
            + body["duplicate"].as_u64().unwrap_or(0)
            + body["spooled"].as_u64().unwrap_or(0);
        assert_eq!(accepted, events as u64, "every event of the batch is accepted or a duplicate: {body}");
        DUPLICATE_ANSWERS
            .fetch_add(body["duplicate"].as_u64().unwrap_or(0) as usize, std::sync::atomic::Ordering::Relaxed);
        for event in body["events"].as_array().into_iter().flatten() {
            if event["status"] == "duplicate" {
                duplicates.push(event["messageId"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    (Answer::Status(status), duplicates)
}

/// Events answered `duplicate` (a retry of an id already stored) in 200s
/// since the process started, by every client of this test process (one
/// scenario per process under scripts/faults; read it before and after a run).
pub static DUPLICATE_ANSWERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub fn duplicate_answers() -> usize {
    DUPLICATE_ANSWERS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs the load against `url` (read each time, so a restarted gateway on
/// another address could be followed) and returns every batch's log.
pub async fn run(load: Load, run_id: String, url: String) -> Vec<BatchLog> {
    let client =
        reqwest::Client::builder().timeout(Duration::from_millis(REQUEST_TIMEOUT_MS + 2000)).build().expect("client");
    let stop_new = Instant::now() + load.run_for;
    let give_up = stop_new + load.retry_for;
    let shared = Rc::new((client, url, run_id, load));
    let users: Vec<_> = (0..shared.3.users)
        .map(|user| {
            let shared = Rc::clone(&shared);
            actix_web::rt::spawn(async move {
                let (client, url, run_id, load) = &*shared;
                user_loop(client, url, run_id, load, user, stop_new, give_up).await
            })
        })
        .collect();
    let mut logs = Vec::new();
    for user in users {
        logs.extend(user.await.expect("user task"));
    }
    logs
}

async fn user_loop(
    client: &reqwest::Client,
    url: &str,
    run_id: &str,
    load: &Load,
    user: usize,
    stop_new: Instant,
    give_up: Instant,
) -> Vec<BatchLog> {
    let mut logs = Vec::new();
    let mut seq = 0;
    // Spread users over the interval so the load is steady, not bursts.
    sleep(load.every * user as u32 / load.users as u32).await;
    while Instant::now() < stop_new {
        let ids: Vec<String> = (0..load.batch).map(|k| format!("{run_id}-u{user}-b{seq}-e{k}")).collect();
        let body = json!({"batch": ids.iter().enumerate().map(|(k, id)| event(id, user, seq + k)).collect::<Vec<_>>()});
        let mut log = BatchLog { ids, attempts: Vec::new(), duplicates: Vec::new() };
        loop {
            let started = Instant::now();
            let (answer, duplicates) = send(client, url, &body, load.batch).await;
            log.duplicates.extend(duplicates);
            log.attempts.push(Attempt { started, ended: Instant::now(), answer });
            if answer == Answer::Status(200) || Instant::now() > give_up {
                break;
            }
            sleep(load.backoff).await;
        }
        logs.push(log);
        seq += 1;
        sleep(load.every).await;
    }
    logs
}
