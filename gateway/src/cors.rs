//! CORS, answered per source from its configured origins. A preflight
//! carries no credentials, so it is granted when any source allows the
//! origin; an actual answer is readable by the page only when the source
//! that authenticated allows it. Credentials are allowed only on the paths
//! of a tracker that sends them (Snowplow's, see
//! [`crate::api::routes::credentialed`]) and only to a configured origin,
//! never with `*`; what is echoed is always the configured origin (or
//! `*`), never the client's text.

use std::collections::HashMap;

use actix_web::HttpResponse;
use actix_web::http::header::{self, HeaderMap, HeaderValue};

use crate::config::SourceConfig;

/// Request headers every preflight grants: what Segment's and RudderStack's
/// browser SDKs send. RudderStack JS v3 adds `AnonymousId` (base64 of the
/// anonymous id, `DataPlaneEventsQueue`) and its retry headers
/// `Rsa-Retry-Attempt`, `Rsa-Since-Last-Attempt`, `Rsa-Retry-Reason`;
/// `SentAt` is RudderStack's too.
pub const GRANTED_HEADERS: &str = "Content-Type, Content-Encoding, Authorization, Accept, AnonymousId, SentAt, \
                                   Rsa-Retry-Attempt, Rsa-Since-Last-Attempt, Rsa-Retry-Reason, X-Requested-With";

/// Longest `Access-Control-Request-Headers` echoed back; past it only
/// [`GRANTED_HEADERS`] are granted.
pub const MAX_REQUESTED_HEADERS_BYTES: usize = 1024;

/// Which origins may read answers.
#[derive(Debug, Clone, Default)]
pub struct OriginPolicy {
    any: bool,
    /// Lower-cased origin (scheme and host are case-insensitive) to the
    /// value echoed: the configured origin, normalised.
    origins: HashMap<String, HeaderValue>,
}

impl OriginPolicy {
    /// One source's policy.
    pub fn for_source(source: &SourceConfig) -> Self {
        Self::from_list(&source.allowed_origins)
    }

    /// The union of every source's policy, for preflights.
    pub fn union(sources: &[SourceConfig]) -> Self {
        let all: Vec<String> = sources.iter().flat_map(|s| s.allowed_origins.iter().cloned()).collect();
        Self::from_list(&all)
    }

    fn from_list(list: &[String]) -> Self {
        let origins = list
            .iter()
            .filter(|o| *o != "*")
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .filter_map(|o| HeaderValue::from_str(&o).ok().map(|value| (o, value)))
            .collect();
        Self { any: list.iter().any(|o| o == "*"), origins }
    }

    /// What `Access-Control-Allow-Origin` says to a page from `origin`, if
    /// it may read the answer: the configured origin, or `*`.
    pub fn grant_for(&self, origin: &str) -> Option<HeaderValue> {
        if self.any {
            return Some(HeaderValue::from_static("*"));
        }
        self.origins.get(&origin.trim_end_matches('/').to_ascii_lowercase()).cloned()
    }

    /// Whether a page from `origin` may read the answer.
    pub fn allows(&self, origin: &str) -> bool {
        self.grant_for(origin).is_some()
    }
}

/// Grants read access to a response (`allowed` from [`OriginPolicy::grant_for`]).
pub fn grant(headers: &mut HeaderMap, allowed: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("Retry-After, RateLimit, RateLimit-Policy, X-RateLimit-Reset"),
    );
    vary_origin(headers);
}

/// Lets the page send and read with credentials (cookies): only for a
/// configured origin, as browsers refuse credentials with `*` anyway.
pub fn allow_credentials(headers: &mut HeaderMap) {
    let specific = headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_some_and(|v| v.as_bytes() != b"*");
    if specific {
        headers.insert(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
    }
}

/// Answers differ by `Origin`, so caches must key on it.
pub fn vary_origin(headers: &mut HeaderMap) {
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

/// The answer to a preflight from an allowed origin: the SDKs' headers,
/// and whatever else the page asks for (a page may add its own headers to
/// an SDK's requests; nothing here is a credential; credentials are
/// allowed by [`allow_credentials`] where a path needs them).
pub fn preflight(allowed: HeaderValue, requested: Option<&HeaderValue>) -> HttpResponse {
    let mut granted = GRANTED_HEADERS.to_owned();
    if let Some(extra) = requested.and_then(|r| requested_headers(r.as_bytes())) {
        granted.push_str(", ");
        granted.push_str(&extra);
    }
    let mut response = HttpResponse::NoContent()
        .insert_header((header::ACCESS_CONTROL_ALLOW_METHODS, "POST, GET, OPTIONS"))
        .insert_header((header::ACCESS_CONTROL_ALLOW_HEADERS, granted))
        .insert_header((header::ACCESS_CONTROL_MAX_AGE, "86400"))
        .finish();
    grant(response.headers_mut(), allowed);
    response.headers_mut().append(header::VARY, HeaderValue::from_static("Access-Control-Request-Headers"));
    response
}

/// The requested header names when each is a valid token and all fit in
/// [`MAX_REQUESTED_HEADERS_BYTES`].
fn requested_headers(raw: &[u8]) -> Option<String> {
    if raw.len() > MAX_REQUESTED_HEADERS_BYTES {
        return None;
    }
    let text = std::str::from_utf8(raw).ok()?;
    let names: Vec<&str> = text.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    let token = |n: &str| n.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    (!names.is_empty() && names.iter().all(|n| token(n))).then(|| names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(list: &[&str]) -> OriginPolicy {
        OriginPolicy::from_list(&list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn the_configured_origin_is_echoed_whatever_the_clients_letter_case() {
        let p = policy(&["https://Shop.Example/"]);
        for asked in ["https://shop.example", "HTTPS://SHOP.EXAMPLE", "https://shop.example/"] {
            assert_eq!(p.grant_for(asked).expect(asked), "https://shop.example");
        }
        assert!(p.grant_for("https://evil.example").is_none());
        assert_eq!(policy(&["*"]).grant_for("https://any.example").expect("any"), "*");
    }

    #[test]
    fn requested_headers_are_granted_only_when_well_formed() {
        assert_eq!(requested_headers(b"x-custom, AnonymousId").as_deref(), Some("x-custom, AnonymousId"));
        assert_eq!(requested_headers(b"bad header"), None);
        assert_eq!(requested_headers(b"a\r\nb"), None);
        assert_eq!(requested_headers(&vec![b'a'; MAX_REQUESTED_HEADERS_BYTES + 1]), None);
    }
}
