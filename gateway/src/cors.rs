//! CORS, answered per source from its configured origins. A preflight
//! carries no credentials, so it is granted when any source allows the
//! origin; an actual answer is readable by the page only when the source
//! that authenticated allows it. Credentials are never allowed, and an
//! origin is never reflected unless configured.

use std::collections::HashSet;

use actix_web::HttpResponse;
use actix_web::http::header::{self, HeaderMap, HeaderValue};

use crate::config::SourceConfig;

/// Which origins may read answers.
#[derive(Debug, Clone, Default)]
pub struct OriginPolicy {
    any: bool,
    origins: HashSet<String>,
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
        Self {
            any: list.iter().any(|o| o == "*"),
            origins: list.iter().filter(|o| *o != "*").map(|o| o.trim_end_matches('/').to_ascii_lowercase()).collect(),
        }
    }

    /// Whether a page from `origin` may read the answer.
    pub fn allows(&self, origin: &str) -> bool {
        self.any || self.origins.contains(&origin.to_ascii_lowercase())
    }
}

/// Grants `origin` read access to a response.
pub fn grant(headers: &mut HeaderMap, origin: &HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("Retry-After, RateLimit, RateLimit-Policy"),
    );
    vary_origin(headers);
}

/// Answers differ by `Origin`, so caches must key on it.
pub fn vary_origin(headers: &mut HeaderMap) {
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

/// The answer to a preflight from an allowed origin.
pub fn preflight(origin: &HeaderValue) -> HttpResponse {
    let mut response = HttpResponse::NoContent()
        .insert_header((header::ACCESS_CONTROL_ALLOW_METHODS, "POST, GET, OPTIONS"))
        .insert_header((header::ACCESS_CONTROL_ALLOW_HEADERS, "Content-Type, Authorization, Content-Encoding"))
        .insert_header((header::ACCESS_CONTROL_MAX_AGE, "86400"))
        .finish();
    grant(response.headers_mut(), origin);
    response
}
