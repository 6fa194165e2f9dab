//! JWT bearer authentication end to end: every algorithm family works, the
//! token's subject overrides a forged `userId` (read back from Kafka), each
//! attack is a 401 with its own code and produces nothing, and JWKS keys
//! rotate without a restart.

mod common;

use std::path::PathBuf;

use common::{TestGateway, answer, brokers, client, config, find, unique};
use gateway::config::Config;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};

const HS_SECRET: &str = "an-hs256-secret-of-thirty-two-b!";

fn keys() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/keys")
}

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(keys().join(name)).expect("test key")
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// The dev config plus one issuer per algorithm family, a JWKS issuer
/// reading `jwks`, and one whose JWKS URL is unreachable.
fn jwt_config(jwks: &std::path::Path) -> Config {
    let mut cfg = config(&brokers());
    let issuer = |iss: &str, alg: &str, extra: Value| {
        let mut v = json!({"issuer": iss, "audiences": ["eventgw"], "algorithms": [alg], "default_source": "demo"});
        v.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        serde_json::from_value(v).expect("issuer config")
    };
    let key_file = |name: &str| json!({"keys": [{"pem_file": keys().join(name)}]});
    cfg.jwt.issuers = vec![
        issuer("https://rsa.example", "RS256", key_file("rsa-public.pem")),
        issuer("https://ec.example", "ES256", key_file("ec-public.pem")),
        issuer("https://ed.example", "EdDSA", key_file("ed-public.pem")),
        issuer("https://hs.example", "HS256", json!({"keys": [{"secret": HS_SECRET}], "source_claim": "src"})),
        issuer("https://jwks.example", "RS256", json!({"jwks_file": jwks, "jwks_min_refresh_secs": 0})),
        issuer("https://jwks-down.example", "RS256", json!({"jwks_url": "http://127.0.0.1:9/jwks.json"})),
    ];
    cfg
}

fn scratch_jwks(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("eventgw-jwks-{name}-{}.json", std::process::id()));
    std::fs::copy(keys().join("jwks-k1.json"), &path).expect("copy jwks");
    path
}

fn claims(iss: &str, sub: &str) -> Value {
    json!({"iss": iss, "sub": sub, "aud": "eventgw", "exp": now() + 600, "nbf": now() - 10, "iat": now()})
}

fn sign(alg: Algorithm, kid: Option<&str>, claims: &Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, key).expect("sign")
}

fn rsa() -> EncodingKey {
    EncodingKey::from_rsa_pem(&pem("rsa-private.pem")).expect("rsa key")
}

fn event(id: &str, forged_user: &str) -> Value {
    json!({"batch": [{"type": "track", "event": "Link Clicked", "userId": forged_user, "messageId": id,
        "properties": {"href": "https://shop.example/"}}]})
}

async fn post_with_token(gw: &TestGateway, token: &str, body: &Value) -> (u16, Value) {
    let request = client().post(format!("{}/v1/batch", gw.url)).bearer_auth(token).json(body);
    let (status, _, body) = answer(request.send().await.expect("sent")).await;
    (status, body)
}

#[actix_web::test]
async fn each_algorithm_family_is_accepted_and_the_subject_overrides_a_forged_user_id() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(jwt_config(&scratch_jwks("families"))).await;
    let tokens = [
        ("RS256", sign(Algorithm::RS256, None, &claims("https://rsa.example", "alice"), &rsa())),
        (
            "ES256",
            sign(
                Algorithm::ES256,
                None,
                &claims("https://ec.example", "alice"),
                &EncodingKey::from_ec_pem(&pem("ec-private.pem")).expect("ec"),
            ),
        ),
        (
            "EdDSA",
            sign(
                Algorithm::EdDSA,
                None,
                &claims("https://ed.example", "alice"),
                &EncodingKey::from_ed_pem(&pem("ed-private.pem")).expect("ed"),
            ),
        ),
        (
            "HS256",
            sign(
                Algorithm::HS256,
                None,
                &claims("https://hs.example", "alice"),
                &EncodingKey::from_secret(HS_SECRET.as_bytes()).expect("hs key"),
            ),
        ),
    ];
    for (alg, token) in tokens {
        let id = unique(alg);
        let (status, body) = post_with_token(&gw, &token, &event(&id, "mallory")).await;
        assert_eq!(status, 200, "{alg}: {body}");
        let found = find(&brokers(), "web.tracking", &id);
        assert_eq!(found.len(), 1, "{alg}");
        assert_eq!(found[0].value["userId"], "alice", "{alg}: the token's subject, not the forged userId");
        assert_eq!(found[0].key.as_deref(), Some("alice"), "{alg}: keyed by the real user");
        assert_eq!(found[0].headers["auth"], "jwt", "{alg}: JWT and write-key traffic can be told apart");
    }
    gw.stop().await;
}

#[actix_web::test]
async fn the_source_claim_selects_the_source_and_its_permissions() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(jwt_config(&scratch_jwks("source"))).await;
    let hs = EncodingKey::from_secret(HS_SECRET.as_bytes()).expect("hs key");
    let mut c = claims("https://hs.example", "svc-billing");
    c["src"] = json!("billing-backend");
    let token = sign(Algorithm::HS256, None, &c, &hs);
    let id = unique("billing-jwt");
    let order = json!({"batch": [{"type": "track", "event": "Order Completed", "messageId": id,
        "properties": {"order_id": "o-jwt", "total": 5, "currency": "EUR"}}]});
    let (status, body) = post_with_token(&gw, &token, &order).await;
    assert_eq!(status, 200, "{body}");
    let found = find(&brokers(), "billing.payments", &id);
    assert_eq!(found[0].headers["source"], "billing-backend");
    let (status, body) = post_with_token(&gw, &token, &event(&unique("x"), "u")).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("batch_rejected")),
        "strict billing source, web event: {body}"
    );
    assert_eq!(body["events"][0]["code"], "domain_not_allowed");
    c["src"] = json!("no-such-source");
    let (status, body) = post_with_token(&gw, &sign(Algorithm::HS256, None, &c, &hs), &order).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("unknown_source")));
    gw.stop().await;
}

fn b64(value: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}

#[actix_web::test]
async fn every_attack_is_a_401_with_its_own_code_and_produces_nothing() {
    if common::without_kafka() {
        return;
    }
    let gw = TestGateway::start(jwt_config(&scratch_jwks("attacks"))).await;
    let rsa_iss = "https://rsa.example";
    let valid = claims(rsa_iss, "alice");
    let with = |patch: Value| {
        let mut c = valid.clone();
        c.as_object_mut().expect("object").extend(patch.as_object().expect("object").clone());
        c
    };
    let without = |claim: &str| {
        let mut c = valid.clone();
        c.as_object_mut().expect("object").remove(claim);
        c
    };
    let unsigned = format!("{}.{}.", b64(&json!({"alg": "none", "typ": "JWT"})), b64(&valid));
    // The classic confusion: HS256 keyed with the issuer's public RSA key.
    let confused =
        sign(Algorithm::HS256, None, &valid, &EncodingKey::from_secret(&pem("rsa-public.pem")).expect("hs key"));
    let signed = sign(Algorithm::RS256, None, &valid, &rsa());
    let parts: Vec<&str> = signed.split('.').collect();
    let tampered = format!("{}.{}.{}", parts[0], b64(&with(json!({"sub": "mallory"}))), parts[2]);
    let rotated_away = sign(Algorithm::RS256, Some("k9"), &claims("https://jwks-down.example", "alice"), &rsa());
    let cases = [
        ("unsigned_token", unsigned),
        ("algorithm_not_allowed", confused),
        ("token_expired", sign(Algorithm::RS256, None, &with(json!({"exp": now() - 3600})), &rsa())),
        ("token_not_yet_valid", sign(Algorithm::RS256, None, &with(json!({"nbf": now() + 3600})), &rsa())),
        ("invalid_audience", sign(Algorithm::RS256, None, &with(json!({"aud": "another-service"})), &rsa())),
        ("invalid_issuer", sign(Algorithm::RS256, None, &with(json!({"iss": "https://evil.example"})), &rsa())),
        ("unknown_key", rotated_away),
        ("invalid_claim_type", sign(Algorithm::RS256, None, &with(json!({"exp": (now() + 600).to_string()})), &rsa())),
        ("invalid_signature", tampered),
        ("missing_claim", sign(Algorithm::RS256, None, &without("nbf"), &rsa())),
        ("malformed_token", "not.a-jwt".to_owned()),
    ];
    let id = unique("attack");
    for (code, token) in cases {
        let (status, body) = post_with_token(&gw, &token, &event(&id, "mallory")).await;
        assert_eq!((status, body["code"].as_str()), (401, Some(code)), "{body}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    assert!(find(&brokers(), "web.tracking", &id).is_empty(), "no attack produced anything");
    gw.stop().await;
}

#[actix_web::test]
async fn a_token_signed_with_a_new_key_is_accepted_once_the_jwks_document_has_it() {
    if common::without_kafka() {
        return;
    }
    let jwks = scratch_jwks("rotation");
    let gw = TestGateway::start(jwt_config(&jwks)).await;
    let iss = "https://jwks.example";
    let old = sign(Algorithm::RS256, Some("k1"), &claims(iss, "alice"), &rsa());
    let new_key = EncodingKey::from_rsa_pem(&pem("rsa2-private.pem")).expect("rsa2");
    let new = sign(Algorithm::RS256, Some("k2"), &claims(iss, "alice"), &new_key);
    assert_eq!(post_with_token(&gw, &old, &event(&unique("k1"), "a")).await.0, 200);
    let (status, body) = post_with_token(&gw, &new, &event(&unique("k2-early"), "a")).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("unknown_key")));
    std::fs::copy(keys().join("jwks-k1-k2.json"), &jwks).expect("rotate");
    let id = unique("k2");
    assert_eq!(post_with_token(&gw, &new, &event(&id, "a")).await.0, 200, "no restart needed");
    assert_eq!(post_with_token(&gw, &old, &event(&unique("k1-again"), "a")).await.0, 200, "old and new overlap");
    assert_eq!(find(&brokers(), "web.tracking", &id).len(), 1);
    gw.stop().await;
}

/// Issue 28 item 9: the subject overrides `userId`, so an alias's
/// `previousId` is the only identity left for a token holder to forge.
/// Under a JWT it may only name the subject or an identity the issuer's
/// `identity_claim` lists; a source with `alias_any_previous_id` (a trusted
/// backend) may name any; write-key traffic is unchanged.
#[actix_web::test]
async fn an_alias_under_a_jwt_may_only_merge_identities_the_token_vouches_for() {
    if common::without_kafka() {
        return;
    }
    let mut cfg = jwt_config(&scratch_jwks("alias"));
    let issuer = json!({"issuer": "https://app.example", "audiences": ["eventgw"], "algorithms": ["HS256"],
        "default_source": "demo", "source_claim": "src", "identity_claim": "anonymous_ids",
        "keys": [{"secret": HS_SECRET}]});
    cfg.jwt.issuers.push(serde_json::from_value(issuer).expect("issuer"));
    let mut trusted = cfg.sources.iter().find(|s| s.id == "demo").expect("demo").clone();
    (trusted.id, trusted.write_key) = ("trusted-backend".into(), None);
    trusted.privacy.alias_any_previous_id = true;
    cfg.sources.push(trusted);
    let gw = TestGateway::start(cfg).await;
    let hs = EncodingKey::from_secret(HS_SECRET.as_bytes()).expect("hs key");
    let mut c = claims("https://app.example", "alice");
    c["anonymous_ids"] = json!(["device-a1"]);
    let alice = sign(Algorithm::HS256, None, &c, &hs);
    c["src"] = json!("trusted-backend");
    let backend = sign(Algorithm::HS256, None, &c, &hs);
    let alias = |id: &str, previous: Value| json!({"batch": [{"type": "alias", "messageId": id, "userId": "alice", "previousId": previous}]});
    let ids: Vec<String> = (0..5).map(|_| unique("alias")).collect();
    let (status, foreign) = post_with_token(&gw, &alice, &alias(&ids[0], json!("bob"))).await;
    assert_eq!(status, 200, "{foreign}");
    assert_eq!(foreign["events"][0]["status"], "rejected", "{foreign}");
    assert_eq!(foreign["events"][0]["code"], "identity_not_vouched");
    let (_, numeric) = post_with_token(&gw, &alice, &alias(&ids[1], json!(42))).await;
    assert_eq!(numeric["events"][0]["code"], "identity_not_vouched", "compared as stored: {numeric}");
    let (_, vouched) = post_with_token(&gw, &alice, &alias(&ids[2], json!("device-a1"))).await;
    assert_eq!(vouched["events"][0]["status"], "accepted", "an identity of the claim: {vouched}");
    let (_, allowed) = post_with_token(&gw, &backend, &alias(&ids[3], json!("bob"))).await;
    assert_eq!(allowed["events"][0]["status"], "accepted", "the source allows any: {allowed}");
    let (_, keyed) = gw.post("/v1/batch", &alias(&ids[4], json!("bob"))).await;
    assert_eq!(keyed["events"][0]["status"], "accepted", "write keys unchanged: {keyed}");

    for id in &ids[..2] {
        assert!(find(&brokers(), "crm.identities", id).is_empty(), "{id} merged a foreign profile");
    }
    let merged = find(&brokers(), "crm.identities", &ids[2]);
    assert_eq!(
        (merged[0].value["userId"].as_str(), merged[0].value["previousId"].as_str()),
        (Some("alice"), Some("device-a1"))
    );
    assert_eq!(find(&brokers(), "crm.identities", &ids[3]).len(), 1);
    gw.stop().await;
}
