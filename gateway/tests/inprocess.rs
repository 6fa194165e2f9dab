//! The gateway in-process, without Kafka (`inprocess_support`): every error
//! code of the error table of `docs/api.md` produced by a real request and checked
//! against the table (status and code), then CORS, limits at and past
//! their edge, credentials, quotas, reload and drain. `scripts/test` runs
//! this before it starts a broker.

mod inprocess_support;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use gateway::Signal;
use gateway::config::Config;
use gateway::sink::SinkError;
use inprocess_support::{TestGateway, answer, dev_config_text};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use reqwest::RequestBuilder;
use serde_json::{Value, json};

const DEMO: &str = "demo-write-key";
const BILLING: &str = "billing-backend-key";
const HS_SECRET: &str = "an-hs256-secret-of-thirty-two-b!";

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

fn one_event() -> Value {
    json!({"batch": [{"type": "track", "event": "Link Clicked", "userId": "u",
        "properties": {"href": "https://a.example/"}}]})
}

fn batch_of(n: usize) -> Value {
    json!({"batch": vec![one_event()["batch"][0].clone(); n]})
}

/// Status and code of an answer: the JSON body's `code`, or the pixel's
/// `X-Eventgw-Error` header (its body is a GIF).
async fn code_of(request: RequestBuilder) -> (u16, String) {
    let (status, headers, body) = answer(request.send().await.expect("answered")).await;
    let code = match body["code"].as_str() {
        Some(code) => code.to_owned(),
        None => headers.get("x-eventgw-error").map(|v| v.to_str().expect("ascii").to_owned()).unwrap_or_default(),
    };
    (status, code)
}

fn batch_post(gw: &TestGateway) -> RequestBuilder {
    client().post(format!("{}/v1/batch", gw.url))
}

fn raw_body(gw: &TestGateway, body: impl Into<reqwest::Body>) -> RequestBuilder {
    batch_post(gw).basic_auth(DEMO, Some("")).header("content-type", "application/json").body(body)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

/// Writes `head` and `body` on a fresh connection, optionally closes the
/// sending side, and reads the answer until the server closes.
fn exchange(addr: &str, bytes: &[u8], close_sending: bool) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    stream.write_all(bytes).expect("write");
    if close_sending {
        stream.shutdown(Shutdown::Write).expect("half close");
    }
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    String::from_utf8_lossy(&received).into_owned()
}

fn raw_code(received: &str) -> (u16, String) {
    let status = received.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = received.split("\r\n\r\n").nth(1).unwrap_or_default();
    let code = serde_json::from_str::<Value>(body).ok().and_then(|v| v["code"].as_str().map(str::to_owned));
    (status, code.unwrap_or_else(|| format!("(no code in {received:?})")))
}

async fn off_thread(addr: &str, bytes: Vec<u8>, close_sending: bool) -> (u16, String) {
    let addr = addr.to_owned();
    let received = actix_web::rt::task::spawn_blocking(move || exchange(&addr, &bytes, close_sending)).await;
    raw_code(&received.expect("socket thread"))
}

// ---------------------------------------------------------------- JWT

fn keys(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/keys").join(name)
}

fn with_issuers(config: &mut Config) {
    let issuer = |v: Value| serde_json::from_value(v).expect("issuer config");
    config.jwt.issuers = vec![
        issuer(json!({"issuer": "https://rsa.example", "audiences": ["eventgw"], "algorithms": ["RS256"],
            "default_source": "demo", "keys": [{"pem_file": keys("rsa-public.pem")}]})),
        issuer(json!({"issuer": "https://hs.example", "audiences": ["eventgw"], "algorithms": ["HS256"],
            "default_source": "demo", "source_claim": "src", "keys": [{"secret": HS_SECRET}]})),
        issuer(json!({"issuer": "https://jwks-down.example", "audiences": ["eventgw"], "algorithms": ["RS256"],
            "default_source": "demo", "jwks_url": "http://127.0.0.1:9/jwks.json"})),
    ];
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

fn rsa() -> EncodingKey {
    EncodingKey::from_rsa_pem(&std::fs::read(keys("rsa-private.pem")).expect("key")).expect("rsa key")
}

fn sign(alg: Algorithm, kid: Option<&str>, claims: &Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, key).expect("sign")
}

fn b64(value: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}

/// One token per JWT error code.
fn bad_tokens() -> Vec<(&'static str, String)> {
    let valid = json!({"iss": "https://rsa.example", "sub": "alice", "aud": "eventgw",
        "exp": now() + 600, "nbf": now() - 10, "iat": now()});
    let with = |patch: Value| {
        let mut c = valid.clone();
        c.as_object_mut().expect("object").extend(patch.as_object().expect("object").clone());
        c
    };
    let mut no_nbf = valid.clone();
    no_nbf.as_object_mut().expect("object").remove("nbf");
    let signed = sign(Algorithm::RS256, None, &valid, &rsa());
    let parts: Vec<&str> = signed.split('.').collect();
    let public = std::fs::read(keys("rsa-public.pem")).expect("key");
    let hs = EncodingKey::from_secret(HS_SECRET.as_bytes()).expect("hs key");
    let unknown_source = with(json!({"iss": "https://hs.example", "src": "no-such-source"}));
    vec![
        ("malformed_token", "not.a-jwt".to_owned()),
        ("unsigned_token", format!("{}.{}.", b64(&json!({"alg": "none", "typ": "JWT"})), b64(&valid))),
        (
            "algorithm_not_allowed",
            sign(Algorithm::HS256, None, &valid, &EncodingKey::from_secret(&public).expect("hs key")),
        ),
        ("invalid_issuer", sign(Algorithm::RS256, None, &with(json!({"iss": "https://evil.example"})), &rsa())),
        ("unknown_key", sign(Algorithm::RS256, Some("k9"), &with(json!({"iss": "https://jwks-down.example"})), &rsa())),
        ("invalid_signature", format!("{}.{}.{}", parts[0], b64(&with(json!({"sub": "mallory"}))), parts[2])),
        ("token_expired", sign(Algorithm::RS256, None, &with(json!({"exp": now() - 3600})), &rsa())),
        ("token_not_yet_valid", sign(Algorithm::RS256, None, &with(json!({"nbf": now() + 3600})), &rsa())),
        ("invalid_audience", sign(Algorithm::RS256, None, &with(json!({"aud": "another-service"})), &rsa())),
        ("missing_claim", sign(Algorithm::RS256, None, &no_nbf, &rsa())),
        ("invalid_claim_type", sign(Algorithm::RS256, None, &with(json!({"exp": (now() + 600).to_string()})), &rsa())),
        ("unknown_source", sign(Algorithm::HS256, None, &unknown_source, &hs)),
    ]
}

// ------------------------------------------------------ the error table

/// `(status, code)` of every row of the "Error codes" table of `docs/api.md`.
/// Documented codes produced (with the same in-process memory gateway) by
/// another test file: status, code, file under `gateway/tests`.
const PRODUCED_BY_OTHER_TESTS: [(u16, &str, &str); 5] = [
    (503, "body_buffer_full", "body_memory.rs"),
    (503, "too_many_streams", "body_memory.rs"),
    (401, "operator_unauthorized", "live.rs"),
    (404, "live_event_gone", "live.rs"),
    (503, "live_event_unreadable", "live.rs"),
];

fn documented_error_codes() -> BTreeSet<(u16, String)> {
    let api = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/api.md"))
        .expect("docs/api.md");
    let table = api.split("\n## Error codes\n").nth(1).expect("an Error codes section");
    let table = table.split("\n#").next().unwrap_or_default();
    let mut codes = BTreeSet::new();
    for row in table.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| status") && !l.starts_with("| ---")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let status: u16 = cells[1].parse().expect("a status in the first column");
        let names = cells[2].split('`').skip(1).step_by(2);
        // Backticked asides such as (`alg: none`) are not codes.
        for code in names.filter(|c| c.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')) {
            codes.insert((status, code.to_owned()));
        }
    }
    assert!(codes.len() > 40, "the table was read: {codes:?}");
    codes
}

#[actix_web::test]
async fn every_documented_error_code_is_produced_with_its_status() {
    let gw = TestGateway::start_with(|c| {
        with_issuers(c);
        c.server.body_timeout_ms = 1000;
        c.server.drain_grace_secs = 3600;
        c.quotas.source = Some(gateway::quota::Rate { per_second: 0.001, burst: 600 });
        c.quotas.auth_failures = Some(gateway::quota::Rate { per_second: 0.001, burst: 50 });
        c.sources[1].snowplow_app_ids = vec!["billing-app".into()];
    })
    .await;
    let mut seen: BTreeSet<(u16, String)> = BTreeSet::new();
    let mut see = |(status, code): (u16, String), what: &str| {
        assert!(!code.is_empty(), "{what}: no code (status {status})");
        seen.insert((status, code));
    };

    // The body and its framing.
    see(code_of(raw_body(&gw, r#"{"batch": ["#)).await, "truncated JSON");
    see(code_of(raw_body(&gw, b"{\"batch\": [\"\xff\"]}".to_vec())).await, "not UTF-8");
    see(code_of(raw_body(&gw, r#"{"batch": [], "batch": []}"#)).await, "repeated key");
    see(code_of(raw_body(&gw, r#"{"batch": [{"event": "\ud800"}]}"#)).await, "lone surrogate");
    see(code_of(raw_body(&gw, r#"{"batch": [{"n": 1e400}]}"#)).await, "number out of range");
    see(code_of(raw_body(&gw, format!("{{\"batch\": {}{}}}", "[".repeat(40), "]".repeat(40)))).await, "deep");
    see(code_of(raw_body(&gw, json!({"batch": [{"event": "x".repeat(17 * 1024)}]}).to_string())).await, "string");
    see(code_of(raw_body(&gw, "not gzip at all").header("content-encoding", "gzip")).await, "bad gzip");
    see(code_of(raw_body(&gw, r#"{"batch": 5}"#)).await, "not the endpoint's shape");
    see(code_of(raw_body(&gw, "{}".to_owned() + &" ".repeat(600 * 1024))).await, "body too large");
    let bomb = gzip(json!({"batch": [{"event": " ".repeat(3 * 1024 * 1024)}]}).to_string().as_bytes());
    see(code_of(raw_body(&gw, bomb).header("content-encoding", "gzip")).await, "inflates past the cap");
    see(code_of(raw_body(&gw, batch_of(501).to_string())).await, "501 events");
    let xml = batch_post(&gw).basic_auth(DEMO, Some("")).header("content-type", "text/xml");
    see(code_of(xml.body(one_event().to_string())).await, "media type");
    see(code_of(raw_body(&gw, one_event().to_string()).header("content-encoding", "br")).await, "encoding");
    let pixel = format!("{}/v1/pixel.gif?writeKey={DEMO}&data=%%%", gw.url);
    see(code_of(client().get(pixel)).await, "pixel without data");
    let head = |length: usize| {
        format!(
            "POST /v1/batch HTTP/1.1\r\nHost: gw\r\nAuthorization: Basic ZGVtby13cml0ZS1rZXk6\r\n\
             Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n{{\"batch\":"
        )
    };
    see(off_thread(&gw.addr, head(1000).into_bytes(), true).await, "connection broken mid-body");
    see(off_thread(&gw.addr, head(1000).into_bytes(), false).await, "body stalls");
    let big_head = client().get(format!("{}/healthz", gw.url)).header("x-padding", "p".repeat(70 * 1024));
    see(code_of(big_head).await, "headers too large");

    // Credentials.
    let event = one_event();
    see(code_of(batch_post(&gw).json(&event)).await, "no credentials");
    see(code_of(batch_post(&gw).header("authorization", "Basic !!!").json(&event)).await, "bad Basic");
    let mut with_key = event.clone();
    with_key["writeKey"] = json!(BILLING);
    see(code_of(batch_post(&gw).basic_auth(DEMO, Some("")).json(&with_key)).await, "two keys");
    see(code_of(client().get(format!("{}/v1/projects/{BILLING}/settings", gw.url))).await, "server key in URL");
    let snowplow = |app_ids: &[&str]| {
        let data: Vec<Value> = app_ids.iter().map(|aid| json!({"e": "pv", "aid": aid})).collect();
        let schema = "iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-4";
        client()
            .post(format!("{}/com.snowplowanalytics.snowplow/tp2", gw.url))
            .json(&json!({"schema": schema, "data": data}))
    };
    see(code_of(snowplow(&["nobody"])).await, "unknown Snowplow app id");
    see(code_of(snowplow(&["demo-web", "billing-app"])).await, "two sources' Snowplow app ids");
    for (code, token) in bad_tokens() {
        let (status, got) = code_of(batch_post(&gw).bearer_auth(token).json(&event)).await;
        assert_eq!(got, code, "the token made for {code}");
        see((status, got), code);
    }
    // Failed authentications from one address (the proxy is trusted): 50 allowed, the 51st locks it out.
    let from = |ip: &str, key: &str| batch_post(&gw).basic_auth(key, Some("")).header("x-forwarded-for", ip);
    for _ in 0..=50 {
        see(code_of(from("192.0.2.7", "no-such-key").json(&event)).await, "unknown key");
    }
    see(code_of(from("192.0.2.7", "no-such-key").json(&event)).await, "locked out");

    // The batch as a whole.
    let order = json!({"type": "track", "event": "Order Completed", "userId": "u", "properties": {"order_id": "o"}});
    let strict = batch_post(&gw).basic_auth(BILLING, Some("")).json(&json!({"batch": [order]}));
    see(code_of(strict).await, "a strict source's invalid event");
    assert_eq!(code_of(raw_body(&gw, batch_of(500).to_string())).await.0, 200, "500 of the 600 burst");
    see(code_of(raw_body(&gw, batch_of(200).to_string())).await, "over the quota");
    let never = TestGateway::start_with(|c| c.quotas.source = Some(gateway::quota::Rate { per_second: 1.0, burst: 2 }));
    see(code_of(raw_body(&never.await, batch_of(3).to_string())).await, "larger than the burst");

    // The edge.
    let preflight = client()
        .request(reqwest::Method::OPTIONS, format!("{}/v1/batch", gw.url))
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "POST");
    see(code_of(preflight).await, "preflight from a stranger");
    see(code_of(client().get(format!("{}/no/such/endpoint", gw.url))).await, "no such endpoint");
    see(code_of(client().get(format!("{}/v1/batch", gw.url))).await, "GET on a POST endpoint");

    // Kafka's answers, as the sink reports them; readiness; the drain.
    gw.sink.fail_with(Some(SinkError::Unavailable("Message timed out".into())));
    see(code_of(raw_body(&gw, one_event().to_string())).await, "unacknowledged");
    see(code_of(client().get(format!("{}/readyz", gw.url))).await, "Kafka away");
    gw.sink.fail_with(Some(SinkError::QueueFull));
    see(code_of(raw_body(&gw, one_event().to_string())).await, "queue full");
    gw.sink.fail_with(None);
    gw.signal(Signal::Shutdown);
    let url = format!("{}/readyz", gw.url);
    see(eventually_code(&url, "draining").await, "draining");
    gw.signal(Signal::Shutdown);

    // Codes whose set-up needs a client of its own (stalled bodies, many
    // HTTP/2 streams): produced in-process by the test named, which must
    // still assert them.
    for (status, code, test) in PRODUCED_BY_OTHER_TESTS {
        let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(test))
            .expect("the test that produces the code");
        assert!(text.contains(&format!("\"{code}\"")), "{test} no longer asserts {code}");
        seen.insert((status, code.to_owned()));
    }
    let wanted = documented_error_codes();
    let missing: Vec<_> = wanted.difference(&seen).collect();
    assert!(missing.is_empty(), "docs/api.md codes not produced (or with another status): {missing:?}\nseen: {seen:?}");
    let undocumented: Vec<_> = seen.difference(&wanted).collect();
    assert!(undocumented.is_empty(), "codes produced but not in the table of docs/api.md: {undocumented:?}");
}

/// Polls `url` until it answers `code` (a drain begins asynchronously).
async fn eventually_code(url: &str, code: &str) -> (u16, String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = code_of(client().get(url)).await;
        if got.1 == code || std::time::Instant::now() > deadline {
            return got;
        }
        actix_web::rt::time::sleep(Duration::from_millis(10)).await;
    }
}

// ------------------------------------------------------------- CORS

#[actix_web::test]
async fn cors_grants_a_sources_origins_and_nobody_else() {
    let gw = TestGateway::start().await;
    let preflight = |origin: &str| {
        client()
            .request(reqwest::Method::OPTIONS, format!("{}/v1/batch", gw.url))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let allowed = preflight("http://localhost:3000").await.expect("answered");
    assert_eq!(allowed.status().as_u16(), 204);
    assert_eq!(allowed.headers()["access-control-allow-origin"], "http://localhost:3000");
    let refused = preflight("https://evil.example").await.expect("answered");
    assert_eq!(refused.status().as_u16(), 403);
    assert!(refused.headers().get("access-control-allow-origin").is_none());

    let post = |origin: &str| raw_body(&gw, one_event().to_string()).header("origin", origin).send();
    let answer = post("http://localhost:3000").await.expect("answered");
    assert_eq!(answer.status().as_u16(), 200);
    assert_eq!(answer.headers()["access-control-allow-origin"], "http://localhost:3000");
    let answer = post("https://evil.example").await.expect("answered");
    assert!(answer.headers().get("access-control-allow-origin").is_none(), "no grant for a stranger");
    assert!(answer.headers()["vary"].to_str().expect("ascii").contains("Origin"));
}

// ----------------------------------------------------------- limits

#[actix_web::test]
async fn each_limit_takes_exactly_its_value_and_refuses_one_more() {
    let gw = TestGateway::start().await;
    let status = |body: String| async { code_of(raw_body(&gw, body)).await };
    assert_eq!(status(batch_of(500).to_string()).await.0, 200);
    assert_eq!(status(batch_of(501).to_string()).await, (413, "batch_too_large".into()));
    // Depth: the batch object and its array are two levels of 32.
    let nested = |levels: usize| format!("{{\"batch\": [{}{}]}}", "[".repeat(levels), "]".repeat(levels));
    assert_ne!(status(nested(30)).await.1, "json_too_deep");
    assert_eq!(status(nested(31)).await, (400, "json_too_deep".into()));
    let string = |n: usize| json!({"batch": [{"type": "track", "event": "x".repeat(n)}]}).to_string();
    assert_ne!(status(string(16 * 1024)).await.1, "string_too_long");
    assert_eq!(status(string(16 * 1024 + 1)).await, (400, "string_too_long".into()));
    let padded = |n: usize| {
        let body = one_event().to_string();
        format!("{body}{}", " ".repeat(n - body.len()))
    };
    assert_eq!(status(padded(512 * 1024)).await.0, 200);
    assert_eq!(status(padded(512 * 1024 + 1)).await, (413, "body_too_large".into()));
}

// ------------------------------------------------------ credentials

#[actix_web::test]
async fn a_key_in_the_header_or_the_body_and_a_valid_token_are_accepted() {
    let gw = TestGateway::start_with(with_issuers).await;
    assert_eq!(code_of(raw_body(&gw, one_event().to_string())).await.0, 200);
    let mut in_body = one_event();
    in_body["writeKey"] = json!(DEMO);
    assert_eq!(code_of(batch_post(&gw).json(&in_body)).await.0, 200, "sendBeacon's key in the body");
    let claims = json!({"iss": "https://rsa.example", "sub": "alice", "aud": "eventgw",
        "exp": now() + 600, "nbf": now() - 10});
    let mut forged = one_event();
    forged["batch"][0]["userId"] = json!("mallory");
    let token = sign(Algorithm::RS256, None, &claims, &rsa());
    assert_eq!(code_of(batch_post(&gw).bearer_auth(token).json(&forged)).await.0, 200);
    let users: Vec<Value> = gw.values().iter().map(|v| v["userId"].clone()).collect();
    assert_eq!(users, [json!("u"), json!("u"), json!("alice")], "the token's subject, not the forged id");
}

// ----------------------------------------------------------- quotas

#[actix_web::test]
async fn a_batch_the_source_quota_refuses_spends_no_global_quota() {
    let gw = TestGateway::start_with(|c| {
        c.quotas.source = Some(gateway::quota::Rate { per_second: 0.001, burst: 3 });
        c.quotas.global = Some(gateway::quota::Rate { per_second: 0.001, burst: 5 });
    })
    .await;
    assert_eq!(code_of(raw_body(&gw, batch_of(3).to_string())).await.0, 200, "demo: 3/3, global 3/5");
    for _ in 0..5 {
        assert_eq!(code_of(raw_body(&gw, batch_of(1).to_string())).await, (429, "quota_exceeded".into()));
    }
    let billing = json!({"batch": [{"type": "track", "event": "Order Completed", "userId": "u",
        "properties": {"order_id": "o-1", "total": 5, "currency": "EUR"}}]});
    for n in 0..2 {
        let answer = code_of(batch_post(&gw).basic_auth(BILLING, Some("")).json(&billing)).await;
        assert_eq!(answer.0, 200, "billing's event {n}: the global quota still has room: {answer:?}");
    }
    let answer = code_of(batch_post(&gw).basic_auth(BILLING, Some("")).json(&billing)).await;
    assert_eq!(answer, (429, "quota_exceeded".into()), "now the global quota is spent");
}

// ----------------------------------------------------------- reload

async fn status_with(gw: &TestGateway, key: &str) -> u16 {
    code_of(batch_post(gw).basic_auth(key, Some("")).json(&one_event())).await.0
}

#[actix_web::test]
async fn a_reload_swaps_in_new_keys_and_a_broken_file_is_refused() {
    let gw = TestGateway::start().await;
    assert_eq!(status_with(&gw, "partner-key").await, 401);
    let partner = "\n[[sources]]\nid = \"partner\"\nwrite_key = \"partner-key\"\ndomains = [\"web\"]\n";
    gw.rewrite_config(&(dev_config_text() + partner));
    assert_eq!(gw.reload().await, "applied");
    assert_eq!(status_with(&gw, "partner-key").await, 200, "the new key works without a restart");
    assert_eq!(status_with(&gw, DEMO).await, 200, "existing keys keep working");

    gw.rewrite_config("[server\nthis is not TOML");
    assert_eq!(gw.reload().await, "refused");
    assert_eq!(status_with(&gw, "partner-key").await, 200, "the running configuration was kept");
    let unknown_domain = dev_config_text() + &partner.replace("[\"web\"]", "[\"no-such-domain\"]");
    gw.rewrite_config(&unknown_domain);
    assert_eq!(gw.reload().await, "refused", "a file that parses but names an unknown domain");
    assert_eq!(status_with(&gw, "partner-key").await, 200);
}

// ------------------------------------------------------------ drain

#[actix_web::test]
async fn a_drain_turns_readiness_red_keeps_serving_then_stops_and_flushes() {
    let mut gw = TestGateway::start_with(|c| c.server.drain_grace_secs = 3600).await;
    assert_eq!(code_of(client().get(format!("{}/readyz", gw.url))).await.0, 200);
    gw.signal(Signal::Shutdown);
    assert_eq!(eventually_code(&format!("{}/readyz", gw.url), "draining").await, (503, "draining".into()));
    let metrics = client().get(format!("{}/metrics", gw.url)).send().await.expect("answered");
    assert!(metrics.text().await.expect("text").contains("eventgw_ready 0"));
    assert_eq!(code_of(raw_body(&gw, one_event().to_string())).await.0, 200, "still serving");
    assert_eq!(gw.sink.records().len(), 1);
    gw.signal(Signal::Shutdown);
    gw.stopped().await.expect("stops cleanly once the second signal cuts the grace short");
    assert!(client().get(format!("{}/healthz", gw.url)).send().await.is_err(), "the listener is closed");
}
