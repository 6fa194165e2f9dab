//! Who is sending: a source found by its write key, taken from the HTTP
//! Basic user name or, for `navigator.sendBeacon` which cannot set headers,
//! from `writeKey` in the body.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use actix_web::HttpRequest;
use actix_web::http::header::AUTHORIZATION;
use base64::Engine;

use crate::config::{SourceConfig, UnknownEvents};
use crate::cors::OriginPolicy;
use crate::error::ApiError;

/// A sending source as the request path needs it.
#[derive(Debug)]
pub struct Source {
    /// Stable name, carried on every record as the `source` header.
    pub id: String,
    /// Domains whose events it may send.
    pub domains: HashSet<String>,
    /// Policy for events the catalog does not know.
    pub unknown_events: UnknownEvents,
    /// Origins whose pages may read this source's answers.
    pub origins: OriginPolicy,
    /// Refuse a whole batch (422) when any event would not be accepted.
    pub strict: bool,
}

/// Left in the request's extensions once a source is authenticated, so
/// middleware (CORS) can answer per source.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Arc<Source>);

/// Write key to source.
#[derive(Debug, Default)]
pub struct WriteKeys {
    by_key: HashMap<String, Arc<Source>>,
}

impl WriteKeys {
    /// Builds the table from configuration (already checked for duplicates).
    pub fn new(sources: &[SourceConfig]) -> Self {
        let by_key = sources
            .iter()
            .map(|s| {
                let source = Source {
                    id: s.id.clone(),
                    domains: s.domains.iter().cloned().collect(),
                    unknown_events: s.unknown_events,
                    origins: OriginPolicy::for_source(s),
                    strict: s.strict,
                };
                (s.write_key.clone(), Arc::new(source))
            })
            .collect();
        Self { by_key }
    }

    /// The source a write key belongs to.
    pub fn source(&self, write_key: &str) -> Result<Arc<Source>, ApiError> {
        self.by_key.get(write_key).cloned().ok_or(ApiError::InvalidWriteKey)
    }
}

/// The write key from `Authorization: Basic base64(key:)`, if the header is
/// there. A header of another scheme is an error, not a fallback to the body.
pub fn basic_user(req: &HttpRequest) -> Result<Option<String>, ApiError> {
    let Some(header) = req.headers().get(AUTHORIZATION) else { return Ok(None) };
    let value = header.to_str().map_err(|_| ApiError::MalformedCredentials("it is not ASCII"))?;
    let (scheme, encoded) =
        value.trim().split_once(' ').ok_or(ApiError::MalformedCredentials("expected `Basic <base64>`"))?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(ApiError::MalformedCredentials("only the Basic scheme is supported"));
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| ApiError::MalformedCredentials("the Basic credentials are not base64"))?;
    let text = String::from_utf8(decoded)
        .map_err(|_| ApiError::MalformedCredentials("the Basic credentials are not UTF-8"))?;
    let user = text.split_once(':').map_or(text.as_str(), |(user, _password)| user);
    if user.is_empty() {
        return Err(ApiError::MalformedCredentials("the Basic user name (the write key) is empty"));
    }
    Ok(Some(user.to_owned()))
}
