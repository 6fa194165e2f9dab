//! Worker tests against a scripted transport on a paused clock: batching,
//! retry timing (backoff, `Retry-After`), splitting, token refresh, the
//! overflow policies, flush and the shutdown report, all deterministic.

use std::collections::VecDeque;
use std::io::Read as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::transport::{Auth, Request, Response, Transport};
use crate::*;

/// What the fake answers to one request.
enum Reply {
    /// 200 with every event accepted, except those whose properties say
    /// `"bad": true`, which are invalid.
    Ok,
    /// This status, `Retry-After` and JSON body.
    Status(u16, Option<u64>, Value),
    /// A transport error.
    Refused,
}

/// One request as the fake saw it.
#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    ids: Vec<String>,
    auth: String,
}

#[derive(Default)]
struct Fake {
    script: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
}

impl Fake {
    fn new(script: Vec<Reply>) -> Arc<Self> {
        Arc::new(Self { script: Mutex::new(script.into()), seen: Mutex::default() })
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

fn decode(body: &[u8]) -> Value {
    let mut text = String::new();
    flate2::read::GzDecoder::new(body).read_to_string(&mut text).expect("gzip");
    serde_json::from_str(&text).expect("JSON body")
}

impl Transport for Fake {
    fn send(&self, request: Request) -> BoxFuture<'static, Result<Response, String>> {
        let body = decode(&request.body);
        let events = body["batch"].as_array().cloned().unwrap_or_default();
        assert!(body["sentAt"].is_string());
        let ids = events.iter().map(|e| e["messageId"].as_str().unwrap_or_default().to_owned()).collect();
        let auth = match request.auth {
            Auth::WriteKey(k) => format!("key:{k}"),
            Auth::Bearer(t) => format!("bearer:{t}"),
        };
        self.seen.lock().expect("lock").push(Seen { at: Instant::now(), ids, auth });
        let reply = self.script.lock().expect("lock").pop_front().unwrap_or(Reply::Ok);
        let result = match reply {
            Reply::Refused => Err("connection refused".to_owned()),
            Reply::Status(status, retry, body) => Ok(Response {
                status,
                retry_after: retry.map(Duration::from_secs),
                body: serde_json::to_vec(&body).expect("JSON").into(),
            }),
            Reply::Ok => {
                let outcomes: Vec<Value> = events
                    .iter()
                    .enumerate()
                    .map(|(i, e)| match e["properties"]["bad"].as_bool() {
                        Some(true) => {
                            json!({"index": i, "status": "invalid", "code": "schema_violation", "message": "bad"})
                        }
                        _ => json!({"index": i, "status": "accepted", "topic": "web.tracking"}),
                    })
                    .collect();
                Ok(Response {
                    status: 200,
                    retry_after: None,
                    body: serde_json::to_vec(&json!({"events": outcomes})).expect("JSON").into(),
                })
            }
        };
        Box::pin(async move { result })
    }
}

fn builder() -> ClientBuilder {
    Client::builder("http://gateway.test", Credentials::write_key("k"))
        .linger(Duration::from_millis(500))
        .retry(RetryPolicy { max_attempts: 5, initial_backoff: Duration::from_millis(100), ..RetryPolicy::default() })
}

fn start(builder: ClientBuilder, fake: &Arc<Fake>) -> Client {
    Client::start(builder, Arc::clone(fake) as Arc<dyn Transport>).expect("client starts")
}

async fn track_n(client: &Client, n: usize) -> Vec<String> {
    let who = Identity::user("u1");
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(client.track(&who, "E", &json!({"i": i})).await.expect("queued").to_string());
    }
    ids
}

#[tokio::test(start_paused = true)]
async fn batches_by_count_and_sends_the_rest_after_linger() {
    let fake = Fake::new(vec![]);
    let client = start(builder().batch_max_events(500), &fake);
    let t0 = Instant::now();
    let ids = track_n(&client, 1200).await;
    tokio::time::sleep(Duration::from_millis(499)).await;
    assert_eq!(fake.seen().iter().map(|s| s.ids.len()).collect::<Vec<_>>(), vec![500, 500]);
    tokio::time::sleep(Duration::from_millis(2)).await;
    let seen = fake.seen();
    assert_eq!(seen.iter().map(|s| s.ids.len()).collect::<Vec<_>>(), vec![500, 500, 200]);
    assert_eq!(seen[2].at - t0, Duration::from_millis(500), "the rest goes when the oldest has waited linger");
    assert_eq!(seen.iter().flat_map(|s| s.ids.clone()).collect::<Vec<_>>(), ids, "in order, each once");
    let report = client.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report, Report { sent: 1200, ..Report::default() });
}

#[tokio::test(start_paused = true)]
async fn a_batch_stops_at_its_byte_limit() {
    let fake = Fake::new(vec![]);
    let client = start(builder().batch_max_bytes(1000), &fake);
    track_n(&client, 30).await;
    client.flush().await;
    let seen = fake.seen();
    assert!(seen.len() > 1, "split by bytes");
    assert_eq!(seen.iter().map(|s| s.ids.len()).sum::<usize>(), 30);
}

#[tokio::test(start_paused = true)]
async fn honours_retry_after_to_the_second_and_keeps_message_ids() {
    let fake = Fake::new(vec![Reply::Status(429, Some(7), json!({"code": "rate_limited", "message": "slow down"}))]);
    let client = start(builder(), &fake);
    let ids = track_n(&client, 3).await;
    client.flush().await;
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].at - seen[0].at, Duration::from_secs(7));
    assert_eq!(seen[0].ids, ids);
    assert_eq!(seen[1].ids, ids);
    let m = client.metrics();
    assert_eq!((m.sent, m.retried, m.requests), (3, 3, 2));
}

#[tokio::test(start_paused = true)]
async fn backs_off_exponentially_with_jitter_then_recovers() {
    let unavailable = || Reply::Status(503, None, json!({"code": "kafka_unavailable", "message": "down"}));
    let fake = Fake::new(vec![unavailable(), Reply::Refused, unavailable()]);
    let client = start(builder(), &fake);
    track_n(&client, 2).await;
    client.flush().await;
    let seen = fake.seen();
    assert_eq!(seen.len(), 4);
    for (i, pair) in seen.windows(2).enumerate() {
        let step = Duration::from_millis(100) * 2u32.pow(i as u32);
        let waited = pair[1].at - pair[0].at;
        assert!(waited >= step / 2 && waited <= step, "retry {i}: waited {waited:?}, step {step:?}");
    }
    assert_eq!(client.metrics().sent, 2);
}

#[tokio::test(start_paused = true)]
async fn gives_up_after_max_attempts_and_reports_failed() {
    let fake = Fake::new((0..5).map(|_| Reply::Refused).collect());
    let client = start(builder(), &fake);
    let mut outcomes = client.outcomes();
    let ids = track_n(&client, 2).await;
    client.flush().await;
    assert_eq!(fake.seen().len(), 5);
    let report = client.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report, Report { failed: 2, ..Report::default() });
    use futures::StreamExt as _;
    let Some(OutcomeEvent::Outcome(first)) = outcomes.next().await else { panic!("an outcome") };
    assert_eq!(first.message_id.to_string(), ids[0]);
    assert!(matches!(first.status, Status::Failed { ref reason } if reason.contains("5 attempts")), "{first:?}");
}

#[tokio::test(start_paused = true)]
async fn a_client_error_is_not_retried() {
    let fake = Fake::new(vec![Reply::Status(400, None, json!({"code": "malformed_json", "message": "no"}))]);
    let seen_statuses = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen_statuses);
    let client = start(builder().on_outcome(move |o| sink.lock().expect("lock").push(o.status.clone())), &fake);
    track_n(&client, 2).await;
    client.flush().await;
    assert_eq!(fake.seen().len(), 1);
    let statuses = seen_statuses.lock().expect("lock").clone();
    assert_eq!(statuses, vec![Status::Rejected { code: "malformed_json".into(), message: "no".into() }; 2]);
}

#[tokio::test(start_paused = true)]
async fn a_batch_too_large_is_split_in_halves() {
    let too_large = Reply::Status(413, None, json!({"code": "body_too_large", "message": "too big"}));
    let fake = Fake::new(vec![too_large]);
    let client = start(builder(), &fake);
    let ids = track_n(&client, 4).await;
    client.flush().await;
    let seen = fake.seen();
    assert_eq!(
        seen.iter().map(|s| s.ids.clone()).collect::<Vec<_>>(),
        vec![ids.clone(), ids[..2].to_vec(), ids[2..].to_vec()]
    );
    assert_eq!(client.metrics().sent, 4);
}

#[tokio::test(start_paused = true)]
async fn invalid_events_are_reported_as_invalid() {
    let fake = Fake::new(vec![]);
    let client = start(builder(), &fake);
    let who = Identity::user("u1");
    client.track(&who, "E", &json!({"bad": true})).await.expect("queued");
    client.track(&who, "E", &json!({"bad": false})).await.expect("queued");
    let report = client.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report, Report { sent: 1, invalid: 1, ..Report::default() });
}

#[tokio::test(start_paused = true)]
async fn spooled_and_duplicate_events_count_as_sent_and_suppressed_as_rejected() {
    let body = json!({"events": [
        {"index": 0, "status": "spooled", "topic": "web.tracking"},
        {"index": 1, "status": "duplicate", "code": "duplicate_message_id", "message": "stored already"},
        {"index": 2, "status": "suppressed", "code": "user_suppressed", "message": "by their wish"}]});
    let fake = Fake::new(vec![Reply::Status(200, None, body)]);
    let client = start(builder(), &fake);
    track_n(&client, 3).await;
    let report = client.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report, Report { sent: 2, rejected: 1, ..Report::default() });
    assert_eq!(fake.seen().len(), 1, "a 200 is never retried");
}

#[tokio::test(start_paused = true)]
async fn a_strict_refusal_rejects_every_event_of_the_batch() {
    let body = json!({"code": "batch_rejected", "message": "strict", "events": [
        {"index": 0, "status": "accepted"}, {"index": 1, "status": "rejected", "code": "unknown_event", "message": "?"}]});
    let fake = Fake::new(vec![Reply::Status(422, None, body)]);
    let client = start(builder(), &fake);
    track_n(&client, 2).await;
    let report = client.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report, Report { rejected: 2, ..Report::default() });
    assert_eq!(fake.seen().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_refused_token_is_refreshed_once() {
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let provider = RefreshingToken::new(move || {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        async move { Ok(FreshToken { token: format!("jwt-{n}"), expires_in: Duration::from_secs(3600) }) }
    });
    let unauthorized = || Reply::Status(401, None, json!({"code": "invalid_token", "message": "expired"}));
    let fake = Fake::new(vec![unauthorized()]);
    let client = start(Client::builder("http://gateway.test", Credentials::token(provider)), &fake);
    track_n(&client, 1).await;
    client.flush().await;
    let auths: Vec<String> = fake.seen().into_iter().map(|s| s.auth).collect();
    assert_eq!(auths, vec!["bearer:jwt-1", "bearer:jwt-2"]);
    assert_eq!(client.metrics().sent, 1);

    // Refused twice in a row: believed, not retried for ever.
    fake.script.lock().expect("lock").extend([unauthorized(), unauthorized()]);
    track_n(&client, 1).await;
    client.flush().await;
    assert_eq!(fake.seen().len(), 4);
    assert_eq!(client.metrics().rejected, 1);
}

#[tokio::test(start_paused = true)]
async fn shutdown_while_the_gateway_is_down_reports_every_event_honestly() {
    let fake = Fake::new((0..100).map(|_| Reply::Refused).collect());
    let client =
        start(builder().batch_max_events(10).retry(RetryPolicy { max_attempts: 100, ..RetryPolicy::default() }), &fake);
    track_n(&client, 25).await;
    let started = Instant::now();
    let report = client.shutdown(Duration::from_secs(3)).await;
    assert_eq!(started.elapsed(), Duration::from_secs(3), "ends at the deadline, not before or after");
    assert_eq!(report, Report { failed: 25, ..Report::default() });
    assert!(matches!(client.track(&Identity::user("u"), "E", &json!({})).await, Err(EnqueueError::Closed)));
    assert_eq!(client.report(), Report { failed: 25, dropped: 1, ..Report::default() });
}

#[tokio::test(start_paused = true)]
async fn drop_newest_refuses_and_counts() {
    let fake = Fake::new(vec![]);
    let client = start(builder().queue_max_events(3).batch_max_events(10), &fake);
    track_n(&client, 3).await;
    let refused = client.track(&Identity::user("u"), "E", &json!({})).await;
    assert!(matches!(refused, Err(EnqueueError::QueueFull { events: 3, .. })), "{refused:?}");
    assert_eq!(client.metrics().dropped, 1);
    let report = client.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report, Report { sent: 3, dropped: 1, ..Report::default() });
}

#[tokio::test(start_paused = true)]
async fn drop_oldest_evicts_and_reports_the_evicted() {
    let fake = Fake::new(vec![]);
    let client = start(builder().queue_max_events(3).batch_max_events(10).overflow(OverflowPolicy::DropOldest), &fake);
    let ids = track_n(&client, 5).await;
    client.flush().await;
    assert_eq!(fake.seen()[0].ids, ids[2..].to_vec());
    let report = client.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report, Report { sent: 3, dropped: 2, ..Report::default() });
}

#[tokio::test(start_paused = true)]
async fn wait_policy_waits_for_room_until_its_deadline() {
    let fake = Fake::new(vec![Reply::Status(503, Some(2), json!({"code": "backpressure", "message": "full"}))]);
    let policy = OverflowPolicy::Wait(Duration::from_millis(1500));
    let client = start(builder().queue_max_events(2).batch_max_events(2).overflow(policy), &fake);
    track_n(&client, 2).await; // a full batch, taken at once; its send gets 503
    track_n(&client, 2).await; // fills the queue again
    let t0 = Instant::now();
    let late = client.track(&Identity::user("u"), "E", &json!({})).await;
    assert!(matches!(late, Err(EnqueueError::WaitTimedOut(_))), "{late:?}");
    assert_eq!(t0.elapsed(), Duration::from_millis(1500));
    // The retry at 2 s succeeds and frees room: a waiting call gets in.
    let waited = client.track(&Identity::user("u"), "E", &json!({})).await;
    assert!(waited.is_ok(), "{waited:?}");
    let report = client.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report, Report { sent: 5, dropped: 1, ..Report::default() });
}
