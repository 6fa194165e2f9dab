//! The per-request cost of authentication and quota checks, printed in
//! nanoseconds. `cargo bench -p eventgw --bench auth_quota` measures; under
//! `cargo test` (no `--bench` argument) it runs a few iterations only, to
//! prove it still works.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use gateway::auth::jwt::{IssuerConfig, JwtVerifier};
use gateway::auth::{AuthState, Credentials};
use gateway::config::Config;
use gateway::quota::{QuotaConfig, Quotas, Rate};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::json;

const HS_SECRET: &str = "an-hs256-secret-of-thirty-two-b!";

fn keys() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/keys")
}

fn issuer(iss: &str, alg: &str, keys: serde_json::Value) -> IssuerConfig {
    serde_json::from_value(json!({"issuer": iss, "audiences": ["eventgw"], "algorithms": [alg],
        "default_source": "demo", "keys": keys}))
    .expect("issuer")
}

fn token(iss: &str, alg: Algorithm, key: &EncodingKey) -> String {
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({"iss": iss, "sub": "bench-user", "aud": "eventgw", "exp": now + 3600, "nbf": now - 10});
    encode(&Header::new(alg), &claims, key).expect("sign")
}

/// Runs `f` `n` times and prints the mean cost.
fn measure(name: &str, n: u32, mut f: impl FnMut()) {
    for _ in 0..n / 10 {
        f();
    }
    let started = Instant::now();
    for _ in 0..n {
        f();
    }
    let per = started.elapsed().as_nanos() as f64 / f64::from(n);
    println!("{name:<44} {per:>10.0} ns/op  {:>12.0} ops/s", 1e9 / per);
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = |iterations: u32| if full { iterations } else { 10 };
    let dev = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/dev.toml");
    let mut config = Config::load(&dev).expect("dev config");
    config.jwt.issuers = vec![
        issuer("https://hs.example", "HS256", json!([{"secret": HS_SECRET}])),
        issuer("https://ec.example", "ES256", json!([{"pem_file": keys().join("ec-public.pem")}])),
        issuer("https://rsa.example", "RS256", json!([{"pem_file": keys().join("rsa-public.pem")}])),
    ];
    config.quotas = QuotaConfig { source: Some(Rate { per_second: 1e9, burst: 1_000_000 }), ..QuotaConfig::default() };
    let auth = AuthState::new(&config).expect("auth state");
    let verifier = JwtVerifier::new(&config.jwt.issuers).expect("verifier");
    let hs =
        token("https://hs.example", Algorithm::HS256, &EncodingKey::from_secret(HS_SECRET.as_bytes()).expect("hs"));
    let ec_key = EncodingKey::from_ec_pem(&std::fs::read(keys().join("ec-private.pem")).expect("pem")).expect("ec");
    let es = token("https://ec.example", Algorithm::ES256, &ec_key);
    let rsa_key = EncodingKey::from_rsa_pem(&std::fs::read(keys().join("rsa-private.pem")).expect("pem")).expect("rsa");
    let rs = token("https://rsa.example", Algorithm::RS256, &rsa_key);
    let quotas = Quotas::new(&config.quotas);
    let exists = |_: &str| true;

    println!("auth + quota cost per request ({})", if full { "measured" } else { "smoke run, not a measurement" });
    measure("write key (hash + constant-time compare)", n(1_000_000), || {
        black_box(auth.by_write_key(black_box("demo-write-key")).is_ok());
    });
    measure("quota: one source check (1 event)", n(1_000_000), || {
        black_box(quotas.check_events(black_box("demo"), None, 1).is_ok());
    });
    measure("quota: one source check (batch of 50)", n(1_000_000), || {
        black_box(quotas.check_events(black_box("demo"), None, 50).is_ok());
    });
    for (name, token, iterations) in [("HS256", &hs, 200_000), ("ES256", &es, 5_000), ("RS256", &rs, 5_000)] {
        measure(&format!("JWT {name}, not cached"), n(iterations), || {
            black_box(futures::executor::block_on(verifier.verify_uncached(token, exists)).is_ok());
        });
    }
    measure("JWT ES256, cached", n(1_000_000), || {
        black_box(futures::executor::block_on(verifier.verify(&es, exists)).is_ok());
    });
    measure("write key + source quota (a whole request's checks)", n(1_000_000), || {
        let principal = auth.by_write_key("demo-write-key").expect("key");
        black_box(quotas.check_events(&principal.source.id, None, 1).is_ok());
    });
    let credentials = || Credentials::Bearer(es.clone());
    measure("bearer ES256 cached + source quota", n(500_000), || {
        let principal = futures::executor::block_on(auth.authenticate(credentials())).expect("jwt");
        black_box(quotas.check_events(&principal.source.id, principal.subject.as_deref(), 1).is_ok());
    });
}
