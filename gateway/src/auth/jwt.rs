//! JWT bearer tokens for server-to-server calls and signed-in app users.
//! The issuer is chosen by `iss`, the algorithm is pinned by that issuer's
//! configuration (never taken from the token), `exp`, `nbf`, `iss` and `aud`
//! are required, and the subject claim becomes the event's `userId`.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::jwks::{Jwks, JwksLocation, NamedKey, find};
pub use crate::config::jwt::{IssuerConfig, KeyConfig};

/// Most verified tokens kept; past it moka evicts (TinyLFU: the tokens
/// used least often go first).
pub const TOKEN_CACHE_CAPACITY: usize = 10_000;

/// Why a token is refused; each is a 401 with its own code (`crate::error::jwt_code`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// Not three base64url parts of JSON.
    #[error("the bearer token is not a well-formed JWT")]
    Malformed,
    /// `alg: none`.
    #[error("unsigned tokens (alg `none`) are never accepted")]
    Unsigned,
    /// `iss` names no configured issuer.
    #[error("the token's issuer is not trusted")]
    InvalidIssuer,
    /// The token's `alg` is not one its issuer is configured for.
    #[error("algorithm {0} is not allowed for this issuer")]
    AlgorithmNotAllowed(String),
    /// No key with the token's `kid` (JWKS refreshed or unreachable).
    #[error("no verification key matches the token's `kid`")]
    UnknownKey,
    /// The signature does not verify.
    #[error("the token's signature does not verify")]
    InvalidSignature,
    /// `exp` has passed.
    #[error("the token has expired")]
    Expired,
    /// `nbf` is in the future.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// `aud` names none of the accepted audiences.
    #[error("the token is not meant for this gateway (aud)")]
    InvalidAudience,
    /// A required claim is missing.
    #[error("the token lacks the required claim `{0}`")]
    MissingClaim(String),
    /// A claim has the wrong JSON type (e.g. a string `exp`).
    #[error("the token's claim `{0}` has the wrong type")]
    InvalidClaimType(String),
    /// The source the token names does not exist.
    #[error("the token names unknown source `{0}`")]
    UnknownSource(String),
}

/// What a verified token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The user the token speaks for; overrides `userId` in events.
    pub subject: String,
    /// The source whose permissions apply.
    pub source_id: String,
    /// Further identities the issuer's `identity_claim` lists: an `alias`
    /// under the token may name them as `previousId`.
    pub identities: Vec<String>,
    /// `exp`, seconds since the epoch; the cache forgets the token then.
    pub expires_at: u64,
}

struct Issuer {
    config: IssuerConfig,
    keys: Vec<NamedKey>,
    jwks: Option<Jwks>,
}

/// Verifies tokens of every configured issuer, caching verified ones until expiry.
pub struct JwtVerifier {
    issuers: HashMap<String, Issuer>,
    cache: TokenCache,
}

/// Verified tokens until they expire, bounded. moka's cache, not a
/// hand-written one: it bounds the entries with TinyLFU admission (a flood
/// of one-off tokens does not push out the ones in use, and it never
/// empties itself), expires each entry at its token's `exp`, and takes no
/// lock shared by every request.
struct TokenCache {
    entries: moka::sync::Cache<String, Verified>,
}

impl TokenCache {
    fn new(capacity: usize) -> Self {
        let capacity = u64::try_from(capacity).unwrap_or(u64::MAX);
        Self { entries: moka::sync::Cache::builder().max_capacity(capacity).expire_after(UntilExp).build() }
    }

    /// The verified token, unless it expired (checked to the second here:
    /// moka's expiry may lag a little behind `exp`).
    fn get(&self, token: &str, now: u64) -> Option<Verified> {
        self.entries.get(token).filter(|v| v.expires_at > now)
    }

    fn insert(&self, token: &str, verified: Verified, now: u64) {
        if verified.expires_at > now {
            self.entries.insert(token.to_owned(), verified);
        }
    }
}

/// Each cached token expires at its `exp`.
struct UntilExp;

impl moka::Expiry<String, Verified> for UntilExp {
    fn expire_after_create(&self, _: &String, verified: &Verified, _: std::time::Instant) -> Option<Duration> {
        Some(until(verified.expires_at, jsonwebtoken::get_current_timestamp()))
    }
}

/// How long from `now` to `expires_at` (both seconds since the epoch).
fn until(expires_at: u64, now: u64) -> Duration {
    Duration::from_secs(expires_at.saturating_sub(now))
}

impl JwtVerifier {
    /// Builds the verifier; fails on unreadable or invalid keys, naming the issuer.
    pub fn new(issuers: &[IssuerConfig]) -> Result<Self, String> {
        let mut built = HashMap::new();
        for config in issuers {
            let name = &config.issuer;
            if config.algorithms.is_empty() || config.audiences.is_empty() {
                return Err(format!("issuer `{name}`: algorithms and audiences must not be empty"));
            }
            let keys = config.keys.iter().map(|k| static_key(k, &config.algorithms)).collect::<Result<Vec<_>, _>>();
            let keys = keys.map_err(|e| format!("issuer `{name}`: {e}"))?;
            let location = match (&config.jwks_file, &config.jwks_url) {
                (Some(file), None) => Some(JwksLocation::File(file.clone())),
                (None, Some(url)) if url.starts_with("http://") => Some(JwksLocation::Url(url.clone())),
                (None, Some(_)) => {
                    return Err(format!("issuer `{name}`: jwks_url must be http:// (no TLS client built in)"));
                }
                (Some(_), Some(_)) => return Err(format!("issuer `{name}`: set jwks_file or jwks_url, not both")),
                (None, None) => None,
            };
            if keys.is_empty() && location.is_none() {
                return Err(format!("issuer `{name}`: needs keys, jwks_file or jwks_url"));
            }
            let jwks = location.map(|l| {
                let secs = Duration::from_secs;
                Jwks::new(
                    l,
                    secs(config.jwks_min_refresh_secs),
                    secs(config.jwks_max_age_secs),
                    secs(config.jwks_refresh_secs),
                )
            });
            built.insert(name.clone(), Issuer { config: config.clone(), keys, jwks });
        }
        Ok(Self { issuers: built, cache: TokenCache::new(TOKEN_CACHE_CAPACITY) })
    }

    /// Verifies `token` and returns who it speaks for.
    pub async fn verify(&self, token: &str, source_exists: impl Fn(&str) -> bool) -> Result<Verified, JwtError> {
        let now = jsonwebtoken::get_current_timestamp();
        if let Some(hit) = self.cache.get(token, now) {
            return Ok(hit);
        }
        let verified = self.verify_uncached(token, source_exists).await?;
        self.cache.insert(token, verified.clone(), now);
        Ok(verified)
    }

    /// Verifies without consulting or filling the cache (what a cache miss
    /// costs; the benchmark measures it).
    pub async fn verify_uncached(
        &self,
        token: &str,
        source_exists: impl Fn(&str) -> bool,
    ) -> Result<Verified, JwtError> {
        let (alg, kid) = read_header(token)?;
        let claims: Value = jsonwebtoken::dangerous::insecure_decode_claims(token).map_err(|_| JwtError::Malformed)?;
        check_claim_types(&claims)?;
        let iss = claims.get("iss").and_then(Value::as_str).ok_or(JwtError::MissingClaim("iss".into()))?;
        let issuer = self.issuers.get(iss).ok_or(JwtError::InvalidIssuer)?;
        if !issuer.config.algorithms.contains(&alg) {
            return Err(JwtError::AlgorithmNotAllowed(format!("{alg:?}")));
        }
        let key = match find(&issuer.keys, kid.as_deref(), alg.family()) {
            Some(key) => key,
            None => match &issuer.jwks {
                Some(jwks) => jwks.key(kid.as_deref(), alg.family()).await.ok_or(JwtError::UnknownKey)?,
                None => return Err(JwtError::UnknownKey),
            },
        };
        let mut validation = Validation::new(alg);
        validation.leeway = issuer.config.leeway_secs;
        validation.validate_nbf = true;
        validation.set_issuer(&[&issuer.config.issuer]);
        validation.set_audience(&issuer.config.audiences);
        validation.set_required_spec_claims(&["exp", "nbf", "iss", "aud"]);
        jsonwebtoken::decode::<Value>(token, &key.key, &validation).map_err(|e| classify(e.kind()))?;
        identity(&issuer.config, &claims, &source_exists)
    }
}

fn static_key(config: &KeyConfig, algorithms: &[Algorithm]) -> Result<NamedKey, String> {
    let pem = match (&config.pem, &config.pem_file) {
        (Some(pem), _) => Some(pem.clone().into_bytes()),
        (None, Some(file)) => Some(std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?),
        (None, None) => None,
    };
    let family = algorithms[0].family();
    if algorithms.iter().any(|a| a.family() != family) {
        return Err("fixed keys need algorithms of one family (HS*, RS*/PS*, ES* or EdDSA)".into());
    }
    let key = match (family, &config.secret, pem) {
        (jsonwebtoken::AlgorithmFamily::Hmac, Some(secret), None) => DecodingKey::from_secret(secret.as_bytes()),
        (jsonwebtoken::AlgorithmFamily::Rsa, None, Some(pem)) => DecodingKey::from_rsa_pem(&pem),
        (jsonwebtoken::AlgorithmFamily::Ec, None, Some(pem)) => DecodingKey::from_ec_pem(&pem),
        (jsonwebtoken::AlgorithmFamily::Ed, None, Some(pem)) => DecodingKey::from_ed_pem(&pem),
        _ => return Err("HMAC algorithms take `secret`; RSA, EC and EdDSA take `pem` or `pem_file`".into()),
    }
    .map_err(|e| format!("invalid key: {e}"))?;
    Ok(NamedKey { kid: config.kid.clone(), family, key })
}

/// The header's `alg` and `kid`, refusing `none` before anything else.
fn read_header(token: &str) -> Result<(Algorithm, Option<String>), JwtError> {
    let header_part = token.split('.').next().ok_or(JwtError::Malformed)?;
    let bytes =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(header_part).map_err(|_| JwtError::Malformed)?;
    let header: Value = serde_json::from_slice(&bytes).map_err(|_| JwtError::Malformed)?;
    if header.get("alg").and_then(Value::as_str).is_some_and(|a| a.eq_ignore_ascii_case("none")) {
        return Err(JwtError::Unsigned);
    }
    let parsed = jsonwebtoken::decode_header(token).map_err(|_| JwtError::Malformed)?;
    Ok((parsed.alg, parsed.kid))
}

fn check_claim_types(claims: &Value) -> Result<(), JwtError> {
    for name in ["exp", "nbf"] {
        match claims.get(name) {
            None => return Err(JwtError::MissingClaim(name.into())),
            Some(v) if v.as_u64().is_none() => return Err(JwtError::InvalidClaimType(name.into())),
            Some(_) => {}
        }
    }
    match claims.get("aud") {
        None => return Err(JwtError::MissingClaim("aud".into())),
        Some(Value::String(_)) => {}
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
        Some(_) => return Err(JwtError::InvalidClaimType("aud".into())),
    }
    match claims.get("iss") {
        Some(Value::String(_)) | None => Ok(()),
        Some(_) => Err(JwtError::InvalidClaimType("iss".into())),
    }
}

fn classify(kind: &ErrorKind) -> JwtError {
    match kind {
        ErrorKind::ExpiredSignature => JwtError::Expired,
        ErrorKind::ImmatureSignature => JwtError::NotYetValid,
        ErrorKind::InvalidAudience => JwtError::InvalidAudience,
        ErrorKind::InvalidIssuer => JwtError::InvalidIssuer,
        ErrorKind::InvalidAlgorithm => JwtError::AlgorithmNotAllowed("mismatch".into()),
        ErrorKind::MissingRequiredClaim(c) => JwtError::MissingClaim(c.clone()),
        ErrorKind::InvalidClaimFormat(c) => JwtError::InvalidClaimType(c.clone()),
        ErrorKind::InvalidSignature => JwtError::InvalidSignature,
        _ => JwtError::Malformed,
    }
}

fn identity(
    config: &IssuerConfig,
    claims: &Value,
    source_exists: &impl Fn(&str) -> bool,
) -> Result<Verified, JwtError> {
    let subject = match claims.get(&config.user_claim) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err(JwtError::InvalidClaimType(config.user_claim.clone())),
        None => return Err(JwtError::MissingClaim(config.user_claim.clone())),
    };
    let named = config.source_claim.as_ref().and_then(|c| claims.get(c));
    let source_id = match named {
        None => config.default_source.clone(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(JwtError::InvalidClaimType(config.source_claim.clone().unwrap_or_default())),
    };
    if !source_exists(&source_id) {
        return Err(JwtError::UnknownSource(source_id));
    }
    let identities = match config.identity_claim.as_ref().map(|c| (c, claims.get(c))) {
        None | Some((_, None)) => Vec::new(),
        Some((_, Some(Value::String(s)))) => vec![s.clone()],
        Some((claim, Some(Value::Array(items)))) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or_else(|| JwtError::InvalidClaimType(claim.clone())))
            .collect::<Result<_, _>>()?,
        Some((claim, Some(_))) => return Err(JwtError::InvalidClaimType(claim.clone())),
    };
    let expires_at = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
    Ok(Verified { subject, source_id, identities, expires_at })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verified(expires_at: u64) -> Verified {
        Verified { subject: "s".into(), source_id: "demo".into(), identities: Vec::new(), expires_at }
    }

    #[test]
    fn a_full_token_cache_keeps_the_tokens_in_use_and_stays_bounded() {
        // moka's expiry reads the real clock: the tokens are valid for an hour from now.
        let now = jsonwebtoken::get_current_timestamp();
        let cache = TokenCache::new(100);
        cache.insert("in-use", verified(now + 3_600), now);
        for i in 0..1_000 {
            cache.insert(&format!("t{i}"), verified(now + 3_600), now);
            assert!(cache.get("in-use", now).is_some(), "the token in use survives insert {i}");
        }
        cache.entries.run_pending_tasks();
        let count = cache.entries.entry_count();
        assert!(count <= 100, "bounded at the capacity: {count}");
        assert!(count > 50, "never emptied: {count}");
    }

    #[test]
    fn tokens_are_answered_until_their_exp_and_not_from_it() {
        let now = jsonwebtoken::get_current_timestamp();
        let cache = TokenCache::new(4);
        cache.insert("t", verified(now + 60), now);
        assert!(cache.get("t", now + 59).is_some(), "valid the second before exp");
        assert!(cache.get("t", now + 60).is_none(), "expired at its exp");
        cache.insert("old", verified(now), now);
        cache.entries.run_pending_tasks();
        assert!(!cache.entries.contains_key("old"), "an expired token is not kept");
    }

    #[test]
    fn entries_expire_at_their_token_exp() {
        use moka::Expiry;
        assert_eq!(until(1_060, 1_000), Duration::from_secs(60));
        assert_eq!(until(1_000, 1_060), Duration::ZERO);
        let now = jsonwebtoken::get_current_timestamp();
        let ttl = UntilExp.expire_after_create(&"t".to_owned(), &verified(now + 60), std::time::Instant::now());
        // `now` is read again inside: a second may have passed.
        assert!(ttl.is_some_and(|d| (59..=60).contains(&d.as_secs())), "{ttl:?}");
    }
}
