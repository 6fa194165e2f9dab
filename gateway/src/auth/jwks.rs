//! Keys of one JWT issuer: fixed ones from configuration and, optionally, a
//! JWKS document (file or URL) selected by `kid`. An unknown `kid` triggers
//! at most one refresh per interval; when the JWKS source is down the last
//! good keys are kept up to a maximum age.

use std::sync::RwLock;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{AlgorithmFamily, DecodingKey};

/// One verification key.
#[derive(Clone)]
pub struct NamedKey {
    /// The `kid` tokens name it by; a key without one matches any token of its family.
    pub kid: Option<String>,
    /// Which algorithms it can verify.
    pub family: AlgorithmFamily,
    /// The key itself.
    pub key: DecodingKey,
}

/// Where a JWKS document comes from.
#[derive(Debug, Clone)]
pub enum JwksLocation {
    /// A local file, re-read on refresh.
    File(std::path::PathBuf),
    /// An `http://` URL (TLS is not built in; terminate it in a sidecar).
    Url(String),
}

/// A JWKS document with its refresh policy.
pub struct Jwks {
    location: JwksLocation,
    /// Least time between two fetches, so unknown `kid`s cannot hammer the source.
    min_interval: Duration,
    /// Keys older than this are dropped when a refresh fails.
    max_age: Duration,
    /// Keys are re-fetched when older than this, even if every `kid` is known.
    refresh_every: Duration,
    state: RwLock<JwksState>,
    /// One fetch at a time; waiters then see its result.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct JwksState {
    keys: Vec<NamedKey>,
    fetched_at: Option<Instant>,
    attempted_at: Option<Instant>,
}

impl Jwks {
    /// A JWKS source; nothing is fetched until a key is needed.
    pub fn new(location: JwksLocation, min_interval: Duration, max_age: Duration, refresh_every: Duration) -> Self {
        Self {
            location,
            min_interval,
            max_age,
            refresh_every,
            state: RwLock::new(JwksState::default()),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The key for `kid` in `family`, refreshing the document when the key
    /// is unknown or the document is due (rate-limited).
    pub async fn key(&self, kid: Option<&str>, family: AlgorithmFamily) -> Option<NamedKey> {
        let (found, due) = {
            let state = self.state.read().ok()?;
            let due = state.fetched_at.is_none_or(|t| t.elapsed() >= self.refresh_every);
            (find(&state.keys, kid, family), due)
        };
        if found.is_some() && !due {
            return found;
        }
        self.refresh().await;
        let state = self.state.read().ok()?;
        find(&state.keys, kid, family)
    }

    async fn refresh(&self) {
        let _one_at_a_time = self.fetching.lock().await;
        {
            let Ok(mut state) = self.state.write() else { return };
            if state.attempted_at.is_some_and(|t| t.elapsed() < self.min_interval) {
                return;
            }
            state.attempted_at = Some(Instant::now());
        }
        let fetched = self.fetch().await;
        let Ok(mut state) = self.state.write() else { return };
        match fetched {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), location = ?self.location, "JWKS refreshed");
                state.keys = keys;
                state.fetched_at = Some(Instant::now());
            }
            Err(error) => {
                let too_old = state.fetched_at.is_none_or(|t| t.elapsed() > self.max_age);
                if too_old {
                    state.keys.clear();
                }
                tracing::warn!(%error, location = ?self.location, kept_keys = state.keys.len(), "JWKS refresh failed");
            }
        }
    }

    async fn fetch(&self) -> Result<Vec<NamedKey>, String> {
        let text = match &self.location {
            JwksLocation::File(path) => tokio::fs::read_to_string(path).await.map_err(|e| e.to_string())?,
            JwksLocation::Url(url) => {
                let client =
                    reqwest::Client::builder().timeout(Duration::from_secs(3)).build().map_err(|e| e.to_string())?;
                let response = client.get(url).send().await.map_err(|e| e.to_string())?;
                if !response.status().is_success() {
                    return Err(format!("JWKS answered {}", response.status()));
                }
                response.text().await.map_err(|e| e.to_string())?
            }
        };
        parse_jwks(&text)
    }
}

/// The usable keys of a JWKS document; keys of unknown types are skipped.
pub fn parse_jwks(text: &str) -> Result<Vec<NamedKey>, String> {
    let set: JwkSet = serde_json::from_str(text).map_err(|e| format!("not a JWKS document: {e}"))?;
    Ok(set
        .keys
        .iter()
        .filter_map(|jwk| {
            let family = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa,
                AlgorithmParameters::EllipticCurve(_) => AlgorithmFamily::Ec,
                AlgorithmParameters::OctetKeyPair(_) => AlgorithmFamily::Ed,
                AlgorithmParameters::OctetKey(_) => AlgorithmFamily::Hmac,
                _ => return None,
            };
            let key = DecodingKey::from_jwk(jwk).ok()?;
            Some(NamedKey { kid: jwk.common.key_id.clone(), family, key })
        })
        .collect())
}

/// The key named `kid` (or, for a token without `kid`, the only key) of `family`.
pub fn find(keys: &[NamedKey], kid: Option<&str>, family: AlgorithmFamily) -> Option<NamedKey> {
    let mut candidates = keys.iter().filter(|k| k.family == family);
    match kid {
        Some(kid) => candidates.find(|k| k.kid.as_deref() == Some(kid) || k.kid.is_none()).cloned(),
        None => {
            let first = candidates.next()?;
            candidates.next().is_none().then(|| first.clone())
        }
    }
}
