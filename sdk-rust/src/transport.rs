//! The one HTTP exchange the client makes: `POST /v1/batch`. Behind a small
//! trait so the worker's retry and timing logic is unit-tested against a
//! scripted fake on a paused clock.

use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use reqwest::header::{CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER, USER_AGENT};

/// How a request authenticates.
#[derive(Debug, Clone)]
pub(crate) enum Auth {
    /// HTTP Basic with the write key as user name, empty password.
    WriteKey(String),
    /// `Authorization: Bearer <token>`.
    Bearer(String),
}

/// One request: the body (maybe gzipped) and how to authenticate it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub body: Bytes,
    pub gzip: bool,
    pub auth: Auth,
}

/// What came back.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub status: u16,
    /// `Retry-After`, as a delay from now.
    pub retry_after: Option<Duration>,
    pub body: Bytes,
}

/// Sends one request; errors are transport failures (refused, reset,
/// timed out), never HTTP statuses.
pub(crate) trait Transport: Send + Sync + 'static {
    fn send(&self, request: Request) -> BoxFuture<'static, Result<Response, String>>;
}

/// The real transport: reqwest over plain HTTP with pooled connections.
pub(crate) struct HttpTransport {
    client: reqwest::Client,
    url: String,
}

impl HttpTransport {
    pub fn new(endpoint: &str, timeout: Duration, connect_timeout: Duration) -> Result<Self, crate::BuildError> {
        let client = reqwest::Client::builder().timeout(timeout).connect_timeout(connect_timeout).no_proxy().build()?;
        Ok(Self { client, url: format!("{}/v1/batch", endpoint.trim_end_matches('/')) })
    }
}

impl Transport for HttpTransport {
    fn send(&self, request: Request) -> BoxFuture<'static, Result<Response, String>> {
        let mut builder = self
            .client
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, concat!("eventgw-sdk-rust/", env!("CARGO_PKG_VERSION")));
        if request.gzip {
            builder = builder.header(CONTENT_ENCODING, "gzip");
        }
        builder = match &request.auth {
            Auth::WriteKey(key) => builder.basic_auth(key, Some("")),
            Auth::Bearer(token) => builder.bearer_auth(token),
        };
        let pending = builder.body(request.body).send();
        Box::pin(async move {
            let response = pending.await.map_err(describe)?;
            let status = response.status().as_u16();
            let retry_after = response.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(retry_after);
            let body = response.bytes().await.map_err(describe)?;
            Ok(Response { status, retry_after, body })
        })
    }
}

/// The error and its causes on one line: reqwest's own message alone
/// ("error sending request") does not say what went wrong.
fn describe(error: reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `Retry-After` as delta seconds or an HTTP date.
pub(crate) fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let delta = when.signed_duration_since(chrono::Utc::now());
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_seconds_and_dates() {
        assert_eq!(retry_after(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
        let later = (chrono::Utc::now() + chrono::Duration::seconds(120)).to_rfc2822();
        let delay = retry_after(&later).expect("a date");
        assert!(delay > Duration::from_secs(100) && delay <= Duration::from_secs(120), "{delay:?}");
        assert_eq!(retry_after("soon"), None);
        assert_eq!(retry_after("-1"), None);
    }
}
