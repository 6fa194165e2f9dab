//! Credentials: a source's write key (HTTP Basic user name), or a JWT from a
//! [`TokenProvider`] sent as a bearer token. [`RefreshingToken`] caches a
//! token until shortly before it expires, and the client asks for a fresh
//! one once when the gateway answers 401.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::error::TokenError;

/// How the client proves which source it is.
#[derive(Clone)]
pub enum Credentials {
    /// A source's write key, sent as the HTTP Basic user name with an empty
    /// password.
    WriteKey(String),
    /// A bearer token from a provider, asked before every request.
    Token(Arc<dyn TokenProvider>),
}

impl Credentials {
    /// A write key.
    pub fn write_key(key: impl Into<String>) -> Self {
        Self::WriteKey(key.into())
    }

    /// A token provider.
    pub fn token(provider: impl TokenProvider) -> Self {
        Self::Token(Arc::new(provider))
    }
}

impl std::fmt::Debug for Credentials {
    // Never print the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::WriteKey(_) => f.write_str("WriteKey(***)"),
            Self::Token(_) => f.write_str("Token(..)"),
        }
    }
}

/// Supplies JWTs. Called before every request, so it should answer from a
/// cache; [`RefreshingToken`] is such a cache around any async fetch.
pub trait TokenProvider: Send + Sync + 'static {
    /// The token to send now.
    fn token(&self) -> BoxFuture<'_, Result<String, TokenError>>;

    /// The gateway refused the last token (401): forget it, so the next
    /// `token()` fetches a fresh one.
    fn invalidate(&self) {}
}

/// A freshly fetched token and how long it is good for.
#[derive(Debug, Clone)]
pub struct FreshToken {
    /// The JWT.
    pub token: String,
    /// Its lifetime from now (e.g. the token endpoint's `expires_in`).
    pub expires_in: Duration,
}

/// A [`TokenProvider`] that fetches with `fetch`, caches the token and
/// fetches again `margin` before it expires or after a 401.
pub struct RefreshingToken<F> {
    /// Fetches a new token (from an identity provider, a file, …).
    fetch: F,
    /// Refresh this long before expiry, so a token never expires in flight.
    margin: Duration,
    /// The cached token and when to stop using it. A `tokio` mutex, so
    /// concurrent callers wait for one fetch instead of starting several.
    cached: Mutex<Option<(String, Instant)>>,
    /// Set by `invalidate` (which cannot await the mutex).
    stale: std::sync::atomic::AtomicBool,
}

impl<F, Fut> RefreshingToken<F>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<FreshToken, TokenError>> + Send + 'static,
{
    /// Caches tokens from `fetch`, refreshing 30 s before they expire.
    pub fn new(fetch: F) -> Self {
        Self::with_margin(fetch, Duration::from_secs(30))
    }

    /// Caches tokens from `fetch`, refreshing `margin` before they expire.
    pub fn with_margin(fetch: F, margin: Duration) -> Self {
        Self { fetch, margin, cached: Mutex::new(None), stale: false.into() }
    }

    async fn current(&self) -> Result<String, TokenError> {
        let mut cached = self.cached.lock().await;
        let stale = self.stale.swap(false, std::sync::atomic::Ordering::AcqRel);
        if let Some((token, until)) = cached.as_ref()
            && !stale
            && Instant::now() < *until
        {
            return Ok(token.clone());
        }
        let fresh = (self.fetch)().await?;
        let until = Instant::now() + fresh.expires_in.saturating_sub(self.margin);
        *cached = Some((fresh.token.clone(), until));
        Ok(fresh.token)
    }
}

impl<F, Fut> TokenProvider for RefreshingToken<F>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<FreshToken, TokenError>> + Send + 'static,
{
    fn token(&self) -> BoxFuture<'_, Result<String, TokenError>> {
        Box::pin(self.current())
    }

    fn invalidate(&self) {
        self.stale.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// A fixed token, for tests and short-lived jobs.
impl TokenProvider for String {
    fn token(&self) -> BoxFuture<'_, Result<String, TokenError>> {
        Box::pin(futures::future::ready(Ok(self.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    type Fetch = BoxFuture<'static, Result<FreshToken, TokenError>>;

    fn counting() -> (Arc<AtomicU32>, RefreshingToken<impl Fn() -> Fetch>) {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let provider = RefreshingToken::with_margin(
            move || -> Fetch {
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                Box::pin(async move { Ok(FreshToken { token: format!("t{n}"), expires_in: Duration::from_secs(60) }) })
            },
            Duration::from_secs(10),
        );
        (calls, provider)
    }

    #[tokio::test(start_paused = true)]
    async fn caches_until_the_margin_before_expiry_then_refreshes() {
        let (calls, provider) = counting();
        assert_eq!(provider.token().await.expect("token"), "t1");
        tokio::time::advance(Duration::from_secs(49)).await;
        assert_eq!(provider.token().await.expect("token"), "t1");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(provider.token().await.expect("token"), "t2");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn invalidate_forces_a_fetch() {
        let (_, provider) = counting();
        assert_eq!(provider.token().await.expect("token"), "t1");
        provider.invalidate();
        assert_eq!(provider.token().await.expect("token"), "t2");
        assert_eq!(provider.token().await.expect("token"), "t2");
    }
}
