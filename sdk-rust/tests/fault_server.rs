//! Fault tests over real HTTP against a scripted fake gateway: 503 then
//! recovery, 429 with `Retry-After`, connection refused, a slow server, a
//! refused JWT, and shutdown while the gateway is down. The client and the
//! fake share one paused-clock runtime, so every delay in these tests
//! (backoff, `Retry-After`, timeouts, hangs) is virtual and exact; no test
//! sleeps in real time.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::fake::{Action, FakeGateway};
use eventgw_sdk::{
    Client, ClientBuilder, Credentials, EnqueueError, FreshToken, Identity, RefreshingToken, Report, RetryPolicy,
};
use serde_json::json;
use tokio::time::Instant;

fn builder(url: &str) -> ClientBuilder {
    Client::builder(url, Credentials::write_key("demo-write-key"))
        .batch_max_events(20)
        .linger(Duration::from_millis(100))
        .request_timeout(Duration::from_secs(10))
        .retry(RetryPolicy { max_attempts: 20, initial_backoff: Duration::from_millis(100), ..RetryPolicy::default() })
}

async fn track_n(client: &Client, n: usize) -> Vec<String> {
    let who = Identity::user("u1");
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(
            client
                .track(&who, "Link Clicked", &json!({"href": format!("https://x.example/{i}")}))
                .await
                .expect("queued")
                .to_string(),
        );
    }
    ids
}

/// A port nothing listens on (bound, then released).
fn refused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Every id was accepted exactly once, and any id sent more than once was
/// only ever re-sent inside a retry of the very same batch.
fn assert_no_loss_and_only_batch_retries(fake: &FakeGateway, ids: &[String]) {
    let seen = fake.seen();
    let mut accepted: HashMap<&str, usize> = HashMap::new();
    let mut batch_of: HashMap<&str, &Vec<String>> = HashMap::new();
    for request in &seen {
        for id in &request.ids {
            if let Some(first) = batch_of.insert(id, &request.ids) {
                assert_eq!(first, &request.ids, "{id} was re-sent in a different batch");
            }
            if request.action.starts_with("Accept") || request.action.starts_with("Hang") {
                *accepted.entry(id).or_default() += 1;
            }
        }
    }
    for id in ids {
        assert_eq!(accepted.get(id.as_str()), Some(&1), "{id} accepted {:?} times", accepted.get(id.as_str()));
    }
    assert_eq!(accepted.len(), ids.len(), "no event the test did not send");
}

#[tokio::test(start_paused = true)]
async fn unavailable_then_recovery_loses_nothing_and_duplicates_only_retries() {
    let fake = FakeGateway::start(vec![
        Action::Fail(503, Some(1), "kafka_unavailable"),
        Action::Fail(503, Some(2), "backpressure"),
        Action::Close,
    ])
    .await;
    let client = builder(&fake.url).build().expect("client");
    let ids = track_n(&client, 50).await;
    client.flush().await;
    let seen = fake.seen();
    assert_eq!(seen[1].at - seen[0].at, Duration::from_secs(1), "Retry-After: 1");
    assert_eq!(seen[2].at - seen[1].at, Duration::from_secs(2), "Retry-After: 2");
    assert_no_loss_and_only_batch_retries(&fake, &ids);
    let metrics = client.metrics();
    assert_eq!(metrics.retried, 60, "three failed attempts of the first 20-event batch");
    let report = client.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report, Report { sent: 50, ..Report::default() });
}

#[tokio::test(start_paused = true)]
async fn too_many_requests_waits_exactly_retry_after() {
    let fake = FakeGateway::start(vec![Action::Fail(429, Some(7), "rate_limited")]).await;
    let client = builder(&fake.url).build().expect("client");
    let ids = track_n(&client, 3).await;
    client.flush().await;
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].at - seen[0].at, Duration::from_secs(7));
    assert_eq!(seen[1].ids, ids);
    // How every request is sent: Basic auth with the write key, gzip, JSON.
    let headers = &seen[0].headers;
    assert_eq!(headers.get("authorization").map(String::as_str), Some("Basic ZGVtby13cml0ZS1rZXk6"));
    assert_eq!(headers.get("content-encoding").map(String::as_str), Some("gzip"));
    assert_eq!(headers.get("content-type").map(String::as_str), Some("application/json"));
    assert!(seen[0].body["sentAt"].is_string());
    assert_eq!(client.shutdown(Duration::from_secs(1)).await, Report { sent: 3, ..Report::default() });
}

#[tokio::test(start_paused = true)]
async fn connection_refused_is_retried_until_the_gateway_comes_up() {
    let port = refused_port();
    let client = builder(&format!("http://127.0.0.1:{port}")).build().expect("client");
    let ids = track_n(&client, 5).await;
    let flushing = tokio::spawn({
        let client = client.clone();
        async move { client.flush().await }
    });
    while client.metrics().requests < 3 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(client.metrics().sent, 0);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("rebind the port");
    let fake = FakeGateway::serve(listener, vec![]);
    flushing.await.expect("flush ends");
    assert_eq!(fake.seen().len(), 1);
    assert_eq!(fake.seen()[0].ids, ids);
    let report = client.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report, Report { sent: 5, ..Report::default() });
}

#[tokio::test(start_paused = true)]
async fn a_slow_server_times_out_and_the_retry_delivers() {
    let fake = FakeGateway::start(vec![Action::Hang(Duration::from_secs(60))]).await;
    let client = builder(&fake.url).build().expect("client");
    let ids = track_n(&client, 4).await;
    client.flush().await;
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    // The 10 s request timeout, then a first backoff of 50–100 ms.
    assert!(gap >= Duration::from_millis(10_050) && gap <= Duration::from_millis(10_100), "{gap:?}");
    assert_eq!(seen[1].ids, ids);
    assert_eq!(client.metrics().retried, 4);
    assert_eq!(client.shutdown(Duration::from_secs(1)).await, Report { sent: 4, ..Report::default() });
}

#[tokio::test(start_paused = true)]
async fn shutdown_while_the_gateway_is_down_reports_honestly_at_the_deadline() {
    let client = builder(&format!("http://127.0.0.1:{}", refused_port())).build().expect("client");
    track_n(&client, 45).await;
    let started = Instant::now();
    let report = client.shutdown(Duration::from_secs(5)).await;
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(report, Report { failed: 45, ..Report::default() });
    assert!(client.metrics().requests >= 2, "it kept trying until the deadline");
    let late = client.track(&Identity::user("u1"), "Link Clicked", &json!({})).await;
    assert!(matches!(late, Err(EnqueueError::Closed)), "{late:?}");
    assert_eq!(client.report(), Report { failed: 45, dropped: 1, ..Report::default() });
}

#[tokio::test(start_paused = true)]
async fn a_refused_jwt_is_replaced_by_a_fresh_one() {
    let fake = FakeGateway::start(vec![Action::Fail(401, None, "invalid_token")]).await;
    let fetches = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&fetches);
    let provider = RefreshingToken::new(move || {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        async move { Ok(FreshToken { token: format!("jwt-{n}"), expires_in: Duration::from_secs(3600) }) }
    });
    let client = Client::builder(&fake.url, Credentials::token(provider)).build().expect("client");
    track_n(&client, 2).await;
    client.flush().await;
    let auth: Vec<String> = fake.seen().iter().map(|r| r.headers["authorization"].clone()).collect();
    assert_eq!(auth, vec!["Bearer jwt-1", "Bearer jwt-2"]);
    // The cached token serves later requests without another fetch.
    track_n(&client, 1).await;
    client.flush().await;
    assert_eq!(fake.seen()[2].headers["authorization"], "Bearer jwt-2");
    assert_eq!(fetches.load(Ordering::SeqCst), 2);
    assert_eq!(client.shutdown(Duration::from_secs(1)).await, Report { sent: 3, ..Report::default() });
}
