//! Quotas over real HTTP: exactly the burst is accepted, the next request
//! is 429 with `Retry-After` and the IETF RateLimit headers and produces
//! nothing, a batch larger than the burst is refused whole, one source does
//! not consume another's quota, and repeated 401s lock an address out.
//! Rates are one cell per 1000 s, so nothing refills during a test.

mod common;

use common::{TestGateway, answer, brokers, client, config, find, unique};
use gateway::quota::Rate;
use serde_json::{Value, json};

const SLOW: f64 = 0.001;

fn clicks(n: usize) -> (Vec<String>, Value) {
    let ids: Vec<String> = (0..n).map(|_| unique("quota")).collect();
    let events: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"type": "track", "event": "Link Clicked", "userId": "q", "messageId": id,
            "properties": {"href": "https://shop.example/"}})
        })
        .collect();
    (ids, json!({"batch": events}))
}

#[actix_web::test]
async fn a_source_gets_exactly_its_burst_then_429_with_rate_limit_headers() {
    if common::without_kafka() {
        return;
    }
    let mut cfg = config(&brokers());
    cfg.quotas.source = Some(Rate { per_second: SLOW, burst: 5 });
    let gw = TestGateway::start(cfg).await;
    let (ids, batch) = clicks(3);
    assert_eq!(gw.post("/v1/batch", &batch).await.0, 200, "3 of 5");
    let (over, batch) = clicks(3);
    let request = client().post(format!("{}/v1/batch", gw.url)).basic_auth("demo-write-key", Some("")).json(&batch);
    let (status, headers, body) = answer(request.send().await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (429, Some("quota_exceeded")), "3 more do not fit in 2: {body}");
    assert_eq!(headers["retry-after"], "1000", "one cell per 1000 s");
    assert_eq!(headers["ratelimit-policy"], "\"source\";q=5;w=5000");
    assert_eq!(headers["ratelimit"], "\"source\";r=0;t=1000");
    let (_, batch) = clicks(2);
    assert_eq!(gw.post("/v1/batch", &batch).await.0, 200, "the refused batch consumed nothing of this source");
    let (_, batch) = clicks(1);
    assert_eq!(gw.post("/v1/batch", &batch).await.0, 429, "exactly the burst, then no more");
    for id in &over {
        assert!(find(&brokers(), "web.tracking", id).is_empty(), "nothing of a 429 request is produced");
    }
    assert_eq!(find(&brokers(), "web.tracking", &ids[0]).len(), 1);

    // Another source has its own quota.
    let order = json!({"batch": [{"type": "track", "event": "Order Completed", "userId": "b",
        "properties": {"order_id": "o-q", "total": 1, "currency": "EUR"}}]});
    let request =
        client().post(format!("{}/v1/batch", gw.url)).basic_auth("billing-backend-key", Some("")).json(&order);
    assert_eq!(answer(request.send().await.expect("sent")).await.0, 200, "not starved by the noisy source");

    let (_, batch) = clicks(6);
    let request =
        client().post(format!("{}/v1/batch", gw.url)).basic_auth("billing-backend-key", Some("")).json(&batch);
    let (status, _, body) = answer(request.send().await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (413, Some("batch_exceeds_quota")), "6 can never fit a burst of 5");
    gw.stop().await;
}

#[actix_web::test]
async fn per_ip_requests_and_repeated_auth_failures_are_limited() {
    if common::without_kafka() {
        return;
    }
    let mut cfg = config(&brokers());
    cfg.quotas.ip = Some(Rate { per_second: SLOW, burst: 3 });
    let gw = TestGateway::start(cfg).await;
    for _ in 0..3 {
        assert_eq!(gw.post("/v1/batch", &clicks(1).1).await.0, 200);
    }
    let (status, body) = gw.post("/v1/batch", &clicks(1).1).await;
    assert_eq!((status, body["code"].as_str()), (429, Some("quota_exceeded")));
    gw.stop().await;

    let mut cfg = config(&brokers());
    cfg.quotas.auth_failures = Some(Rate { per_second: SLOW, burst: 2 });
    let gw = TestGateway::start(cfg).await;
    let guess = || {
        client().post(format!("{}/v1/batch", gw.url)).basic_auth("guessed-key-123", Some("")).json(&clicks(1).1).send()
    };
    assert_eq!(answer(guess().await.expect("sent")).await.0, 401);
    assert_eq!(answer(guess().await.expect("sent")).await.0, 401);
    assert_eq!(answer(guess().await.expect("sent")).await.0, 401, "the third failure is answered, then locks out");
    let (status, headers, body) = answer(guess().await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (429, Some("too_many_auth_failures")));
    assert!(headers.contains_key("retry-after"));
    let (status, body) = gw.post("/v1/batch", &clicks(1).1).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (429, Some("too_many_auth_failures")),
        "locked out means not even tried"
    );
    gw.stop().await;
}

#[actix_web::test]
async fn a_hashed_write_key_authenticates_and_its_clear_text_is_nowhere_in_the_config() {
    if common::without_kafka() {
        return;
    }
    let mut cfg = config(&brokers());
    let hash: String = gateway::auth::key_hash("server-secret-key-42").iter().map(|b| format!("{b:02x}")).collect();
    cfg.sources[1].write_key = None;
    cfg.sources[1].write_key_sha256 = Some(hash);
    let gw = TestGateway::start(cfg).await;
    let order = json!({"batch": [{"type": "track", "event": "Order Completed", "userId": "b",
        "properties": {"order_id": "o-h", "total": 1, "currency": "EUR"}}]});
    let send =
        |key: &'static str| client().post(format!("{}/v1/batch", gw.url)).basic_auth(key, Some("")).json(&order).send();
    assert_eq!(answer(send("server-secret-key-42").await.expect("sent")).await.0, 200);
    assert_eq!(answer(send("billing-backend-key").await.expect("sent")).await.0, 401, "the old clear key is gone");
    gw.stop().await;
}

/// Issue 13: the example configuration had no quotas, so a flood from the
/// public demo key was never refused. With the shipped `dev.toml` as it is,
/// full batches are accepted until the source's burst is spent, then the
/// flood gets 429 with `Retry-After`, and nothing of a refused batch lands.
#[actix_web::test]
async fn the_example_config_refuses_a_flood_from_the_demo_source() {
    if common::without_kafka() {
        return;
    }
    let cfg = config(&brokers());
    let rate = cfg.quotas.source.expect("dev.toml sets a source quota");
    let batch_len = cfg.limits.max_batch_events;
    let gw = TestGateway::start(cfg).await;
    let mut accepted_events = 0;
    let mut first_ids = None;
    let refused = loop {
        let (ids, batch) = clicks(batch_len);
        let request = client().post(format!("{}/v1/batch", gw.url)).basic_auth("demo-write-key", Some("")).json(&batch);
        let (status, headers, body) = answer(request.send().await.expect("sent")).await;
        if status == 429 {
            assert_eq!(body["code"], "quota_exceeded", "{body}");
            let retry: u64 = headers["retry-after"].to_str().expect("ascii").parse().expect("seconds");
            assert!(retry >= 1, "Retry-After in whole seconds");
            assert!(headers.contains_key("ratelimit"), "IETF RateLimit header");
            break ids;
        }
        assert_eq!(status, 200, "{body}");
        first_ids.get_or_insert(ids);
        accepted_events += batch_len;
        assert!(accepted_events <= 10 * rate.burst as usize, "a flood of {accepted_events} events was never refused");
    };
    assert!(accepted_events >= rate.burst as usize, "the whole burst ({}) is usable: {accepted_events}", rate.burst);
    let landed = common::read_topic(&brokers(), "web.tracking");
    let landed: std::collections::HashSet<&str> = landed.iter().map(|r| r.headers["event-id"].as_str()).collect();
    assert!(refused.iter().all(|id| !landed.contains(id.as_str())), "nothing of the refused batch is produced");
    let first = first_ids.expect("at least one batch before the quota");
    assert!(first.iter().all(|id| landed.contains(id.as_str())), "every accepted event landed");
    gw.stop().await;
}

/// A request from `ip`, as the trusted proxy on 127.0.0.1 forwards it.
fn from(gw: &TestGateway, ip: &str, key: &str) -> reqwest::RequestBuilder {
    client()
        .post(format!("{}/v1/batch", gw.url))
        .header("x-forwarded-for", ip)
        .basic_auth(key, Some(""))
        .json(&clicks(1).1)
}

/// Issue 28, item 10: an IPv6 client holds a whole /64 and can send each
/// request from a fresh address of it. Before the fix the IP quota and the
/// lock-out were keyed by the full address and never caught it.
#[actix_web::test]
async fn rotating_ipv6_addresses_within_one_64_share_the_ip_quota_and_the_lock_out() {
    if common::without_kafka() {
        return;
    }
    let mut cfg = config(&brokers());
    cfg.quotas.ip = Some(Rate { per_second: SLOW, burst: 3 });
    let gw = TestGateway::start(cfg).await;
    for host in 1..=3 {
        let ip = format!("2001:db8:a:b::{host}");
        assert_eq!(answer(from(&gw, &ip, "demo-write-key").send().await.expect("sent")).await.0, 200, "{ip}");
    }
    let (status, _, body) =
        answer(from(&gw, "2001:db8:a:b:ffff::99", "demo-write-key").send().await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (429, Some("quota_exceeded")), "a fourth address of the /64: {body}");
    let next = from(&gw, "2001:db8:a:c::1", "demo-write-key").send().await.expect("sent");
    assert_eq!(answer(next).await.0, 200, "the next /64 is another client");
    gw.stop().await;

    let mut cfg = config(&brokers());
    cfg.quotas.auth_failures = Some(Rate { per_second: SLOW, burst: 2 });
    let gw = TestGateway::start(cfg).await;
    for host in 1..=3 {
        let ip = format!("2001:db8:a:b::{host}");
        assert_eq!(answer(from(&gw, &ip, "guessed-key-123").send().await.expect("sent")).await.0, 401, "{ip}");
    }
    let (status, _, body) = answer(from(&gw, "2001:db8:a:b::4", "guessed-key-123").send().await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (429, Some("too_many_auth_failures")), "{body}");
    let (status, _, body) = answer(from(&gw, "2001:db8:a:b::5", "demo-write-key").send().await.expect("sent")).await;
    assert_eq!((status, body["code"].as_str()), (429, Some("too_many_auth_failures")), "the whole /64: {body}");
    let other = from(&gw, "2001:db8:a:c::1", "demo-write-key").send().await.expect("sent");
    assert_eq!(answer(other).await.0, 200, "another /64 is not locked out");
    gw.stop().await;
}

/// `quotas.ipv6_prefix_len = 128`: each address is its own client again.
#[actix_web::test]
async fn with_a_128_bit_prefix_each_ipv6_address_has_its_own_quota() {
    if common::without_kafka() {
        return;
    }
    let mut cfg = config(&brokers());
    cfg.quotas.ip = Some(Rate { per_second: SLOW, burst: 1 });
    cfg.quotas.ipv6_prefix_len = 128;
    let gw = TestGateway::start(cfg).await;
    for ip in ["2001:db8:a:b::1", "2001:db8:a:b::2"] {
        assert_eq!(answer(from(&gw, ip, "demo-write-key").send().await.expect("sent")).await.0, 200, "{ip}");
    }
    let again = from(&gw, "2001:db8:a:b::1", "demo-write-key").send().await.expect("sent");
    assert_eq!(answer(again).await.0, 429, "the same address again");
    gw.stop().await;
}
