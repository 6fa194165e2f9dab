//! Who is sending. A source is found by its write key (HTTP Basic user name,
//! or `writeKey` in the body for `navigator.sendBeacon`), or by a verified
//! JWT whose issuer and claims name the source and the user. Everything
//! here is rebuilt from configuration on reload and swapped in whole.

mod error;
pub mod jwks;
pub mod jwt;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

pub use error::AuthError;

use actix_web::http::header::AUTHORIZATION;
use actix_web::http::header::HeaderMap;
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use self::jwt::Verified;
use crate::config::{Config, SourceConfig, UnknownEvents};
use crate::cors::OriginPolicy;
use crate::quota::Quotas;

/// A sending source as the request path needs it.
#[derive(Debug)]
pub struct Source {
    /// Stable name, carried on every record as the `source` header (a
    /// count on this one text, not a copy).
    pub id: Arc<str>,
    /// Domains whose events it may send.
    pub domains: HashSet<String>,
    /// Policy for events the catalog does not know.
    pub unknown_events: UnknownEvents,
    /// Origins whose pages may read this source's answers.
    pub origins: OriginPolicy,
    /// Refuse a whole batch (422) when any event would not be accepted.
    pub strict: bool,
    /// Whether its key may travel in a URL (pixel, beacon, settings paths).
    pub key_in_url: bool,
    /// Whether its events may go to the spool (`sources.spool`).
    pub spool: bool,
}

/// Left in the request's extensions once a source is authenticated, so
/// middleware (CORS) can answer per source.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Arc<Source>);

/// Who a request speaks for.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The source whose permissions apply.
    pub source: Arc<Source>,
    /// The JWT subject; it overrides `userId` in every event.
    pub subject: Option<String>,
    /// Further identities the JWT vouches for (its issuer's
    /// `identity_claim`); empty without a JWT.
    pub identities: Vec<String>,
    /// How it authenticated, carried as the `auth` record header.
    pub method: AuthMethod,
}

/// How a request authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// A source's write key (header, body or URL).
    WriteKey,
    /// A verified JWT bearer token.
    Jwt,
    /// A Snowplow app id (`aid`) a source lists in `snowplow_app_ids`.
    AppId,
}

impl AuthMethod {
    /// The value of the `auth` record header.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::WriteKey => "write-key",
            Self::Jwt => "jwt",
            Self::AppId => "app-id",
        }
    }
}

/// Credentials from the `Authorization` header.
#[derive(Debug)]
pub enum Credentials {
    /// `Basic base64(writeKey:)`.
    WriteKey(String),
    /// `Bearer <JWT>`.
    Bearer(String),
}

/// Everything authentication and quotas need, swapped whole on reload.
pub struct AuthState {
    /// SHA-256 of each write key to its source; keys can be configured as
    /// hashes so server secrets never sit in the file in clear.
    by_key_hash: HashMap<[u8; 32], Arc<Source>>,
    /// Sources by id, for JWTs that name one.
    by_id: HashMap<String, Arc<Source>>,
    /// Sources by Snowplow app id (`sources.snowplow_app_ids`).
    by_app_id: HashMap<String, Arc<Source>>,
    /// JWT issuers and their keys.
    jwt: jwt::JwtVerifier,
    /// Rate limiters.
    pub quotas: Quotas,
    /// Origins any source allows, for CORS preflights.
    pub preflight_origins: OriginPolicy,
}

/// SHA-256 of a write key, the form keys are stored and compared in.
pub fn key_hash(write_key: &str) -> [u8; 32] {
    Sha256::digest(write_key.as_bytes()).into()
}

impl AuthState {
    /// Builds from configuration (already checked); the error names the part at fault.
    pub fn new(config: &Config) -> Result<Self, String> {
        let mut by_key_hash = HashMap::new();
        let mut by_id = HashMap::new();
        let mut by_app_id = HashMap::new();
        for s in &config.sources {
            let source = Arc::new(Source {
                id: s.id.as_str().into(),
                domains: s.domains.iter().cloned().collect(),
                unknown_events: s.unknown_events,
                origins: OriginPolicy::for_source(s),
                strict: s.strict,
                key_in_url: s.key_in_url(),
                spool: s.spool,
            });
            if let Some(hash) = configured_hash(s)? {
                by_key_hash.insert(hash, Arc::clone(&source));
            }
            for app_id in &s.snowplow_app_ids {
                by_app_id.insert(app_id.clone(), Arc::clone(&source));
            }
            by_id.insert(s.id.clone(), source);
        }
        let jwt = jwt::JwtVerifier::new(&config.jwt.issuers).map_err(|e| format!("jwt.issuers: {e}"))?;
        for issuer in &config.jwt.issuers {
            if !by_id.contains_key(&issuer.default_source) {
                return Err(format!(
                    "jwt.issuers: `{}` names unknown default_source `{}`",
                    issuer.issuer, issuer.default_source
                ));
            }
        }
        Ok(Self {
            by_key_hash,
            by_id,
            by_app_id,
            jwt,
            quotas: Quotas::new(&config.quotas),
            preflight_origins: OriginPolicy::union(&config.sources),
        })
    }

    /// The configured source named `id` (`gateway dead-letter replay`
    /// re-validates each dead-lettered event with its source's settings).
    pub fn source(&self, id: &str) -> Option<Arc<Source>> {
        self.by_id.get(id).cloned()
    }

    /// The source a write key belongs to. The lookup is by hash, and the
    /// final comparison is constant-time, so timing reveals nothing of a key.
    pub fn by_write_key(&self, write_key: &str) -> Result<Principal, AuthError> {
        let presented = key_hash(write_key);
        let found =
            self.by_key_hash.get_key_value(&presented).filter(|(stored, _)| bool::from(stored.ct_eq(&presented)));
        let (_, source) = found.ok_or(AuthError::InvalidWriteKey)?;
        Ok(Principal {
            source: Arc::clone(source),
            subject: None,
            identities: Vec::new(),
            method: AuthMethod::WriteKey,
        })
    }

    /// The source a Snowplow app id (`aid`) belongs to. App ids are public
    /// (in every page), so no constant-time comparison is needed.
    pub fn by_app_id(&self, app_id: &str) -> Result<Principal, AuthError> {
        let source = self.by_app_id.get(app_id).ok_or_else(|| AuthError::UnknownAppId(app_id.to_owned()))?;
        Ok(Principal { source: Arc::clone(source), subject: None, identities: Vec::new(), method: AuthMethod::AppId })
    }

    /// Checks credentials from the header.
    pub async fn authenticate(&self, credentials: Credentials) -> Result<Principal, AuthError> {
        match credentials {
            Credentials::WriteKey(key) => self.by_write_key(&key),
            Credentials::Bearer(token) => {
                let verified =
                    self.jwt.verify(&token, |id| self.by_id.contains_key(id)).await.map_err(AuthError::Jwt)?;
                let source = self.by_id.get(&verified.source_id).cloned().ok_or(AuthError::InvalidWriteKey)?;
                let Verified { subject, identities, .. } = verified;
                Ok(Principal { source, subject: Some(subject), identities, method: AuthMethod::Jwt })
            }
        }
    }

    /// Refuses an address locked out for failing authentication too often.
    pub fn check_locked_out(&self, ip: Option<IpAddr>) -> Result<(), AuthError> {
        self.quotas.check_locked_out(ip).map_err(AuthError::LockedOut)
    }
}

fn configured_hash(source: &SourceConfig) -> Result<Option<[u8; 32]>, String> {
    match (&source.write_key, &source.write_key_sha256) {
        (Some(key), None) => Ok(Some(key_hash(key))),
        (None, Some(hex)) => parse_hex32(hex)
            .map(Some)
            .ok_or_else(|| format!("sources.write_key_sha256: source `{}`: not 64 hex digits", source.id)),
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(format!("sources: source `{}` sets both write_key and write_key_sha256", source.id)),
    }
}

fn parse_hex32(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

/// Credentials from `Authorization`, if the header is there. A header of
/// another scheme is an error, not a fallback to the body, and so are two
/// headers (which one counts would be a guess).
pub fn header_credentials(headers: &HeaderMap) -> Result<Option<Credentials>, AuthError> {
    let mut headers = headers.get_all(AUTHORIZATION);
    let Some(header) = headers.next() else { return Ok(None) };
    if headers.next().is_some() {
        return Err(AuthError::MalformedCredentials("send one Authorization header, not several"));
    }
    let value = header.to_str().map_err(|_| AuthError::MalformedCredentials("it is not ASCII"))?;
    let (scheme, rest) = value
        .trim()
        .split_once(' ')
        .ok_or(AuthError::MalformedCredentials("expected `Basic <base64>` or `Bearer <JWT>`"))?;
    if scheme.eq_ignore_ascii_case("bearer") {
        return Ok(Some(Credentials::Bearer(rest.trim().to_owned())));
    }
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(AuthError::MalformedCredentials("only the Basic and Bearer schemes are supported"));
    }
    basic_write_key(rest.trim()).map(|key| Some(Credentials::WriteKey(key)))
}

/// The write key of `Basic base64(writeKey:)`. Every Segment and RudderStack
/// SDK sends exactly that (the key as user name, an empty password), so a
/// password or a missing colon is a client that means something else:
/// refused rather than guessed at.
fn basic_write_key(encoded: &str) -> Result<String, AuthError> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| AuthError::MalformedCredentials("the Basic credentials are not base64"))?;
    let text = String::from_utf8(decoded)
        .map_err(|_| AuthError::MalformedCredentials("the Basic credentials are not UTF-8"))?;
    let (user, password) = text
        .split_once(':')
        .ok_or(AuthError::MalformedCredentials("the Basic credentials need `writeKey:` (a colon after the key)"))?;
    if user.is_empty() {
        return Err(AuthError::MalformedCredentials("the Basic user name (the write key) is empty"));
    }
    if !password.is_empty() {
        return Err(AuthError::MalformedCredentials(
            "the Basic password must be empty: the write key is the user name",
        ));
    }
    Ok(user.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    #[test]
    fn basic_takes_the_user_name_with_an_empty_password_only() {
        assert_eq!(basic_write_key(&encoded("key-1234:")).expect("key"), "key-1234");
        for refused in ["key-1234", "key-1234:secret", ":", ":key-1234"] {
            let error = basic_write_key(&encoded(refused)).expect_err(refused);
            assert_eq!(error.code(), "malformed_credentials", "{refused}");
        }
        assert_eq!(basic_write_key("%%%").expect_err("not base64").code(), "malformed_credentials");
    }
}
