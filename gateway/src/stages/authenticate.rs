//! Authenticate: the request's credentials → one [`Principal`]. The
//! `Authorization` header is checked before the body is read (so refused
//! requests cost no body); a `writeKey` in the body (beacons cannot set
//! headers) or in the URL (the pixel, RudderStack's beacon path) after.
//! Every failure counts against the client's address (`quotas.auth_failures`).

use std::collections::HashMap;
use std::sync::Arc;

use actix_web::http::header::{HeaderMap, ORIGIN};
use actix_web::{HttpMessage, HttpRequest, web};

use super::Request;
use crate::auth::{self, AuthError, Authenticated, Principal};
use crate::error::ApiError;

/// Refuses an address locked out for failing authentication too often.
pub fn not_locked_out(request: &Request) -> Result<(), ApiError> {
    Ok(request.auth.check_locked_out(request.client.ip)?)
}

/// The principal of the `Authorization` header, if it has one, kept in
/// `request` for [`principal`].
pub async fn header(request: &mut Request<'_>, headers: &HeaderMap) -> Result<(), ApiError> {
    let credentials = auth::header_credentials(headers).inspect_err(|_| request.failed_authentication())?;
    if let Some(credentials) = credentials {
        let principal =
            request.auth.authenticate(credentials).await.inspect_err(|_| request.failed_authentication())?;
        request.header = Some(principal);
    }
    Ok(())
}

/// Who the request speaks for, from every credential it carries: the
/// header's principal, `body_key` and the URL's `writeKey`. It is left in
/// the request's extensions for the CORS middleware ([`leave_for_cors`]).
pub fn principal(request: &Request, req: &HttpRequest, body_key: Option<&str>) -> Result<Principal, ApiError> {
    let url_key = url_write_key(req);
    let principal = identify(request, body_key, url_key.as_deref()).inspect_err(|_| request.failed_authentication())?;
    leave_for_cors(req, &principal);
    Ok(principal)
}

/// As [`principal`], for a protocol whose own key travels in the URL under
/// another name (GA4's `api_secret`): that key is held to the rule of a
/// `writeKey` in a URL (`key_in_url`), and must name the same source as
/// the header's, if any.
pub fn url_principal(request: &Request, req: &HttpRequest, url_key: Option<&str>) -> Result<Principal, ApiError> {
    let principal = identify(request, None, url_key).inspect_err(|_| request.failed_authentication())?;
    leave_for_cors(req, &principal);
    Ok(principal)
}

/// As [`principal`], for Snowplow's protocol, which carries no key: each
/// event's app id (`aid`, an empty one when it has none) must belong to a
/// source (`sources.snowplow_app_ids`), all to the same one, and to the
/// `Authorization` header's source if the request has one.
pub fn app_principal<'a>(
    request: &Request,
    req: &HttpRequest,
    app_ids: impl IntoIterator<Item = &'a str>,
) -> Result<Principal, ApiError> {
    let principal = by_app_ids(request, app_ids).inspect_err(|_| request.failed_authentication())?;
    leave_for_cors(req, &principal);
    Ok(principal)
}

/// Leaves the request's source for the CORS middleware, which reads it only
/// to answer an `Origin`: a request without one (a server's, an app's)
/// makes no extension map and does not count the source's shared `Arc` up
/// and down.
fn leave_for_cors(req: &HttpRequest, principal: &Principal) {
    if req.headers().contains_key(ORIGIN) {
        req.extensions_mut().insert(Authenticated(Arc::clone(&principal.source)));
    }
}

fn by_app_ids<'a>(request: &Request, app_ids: impl IntoIterator<Item = &'a str>) -> Result<Principal, ApiError> {
    let mut found: Option<Principal> = None;
    for app_id in app_ids {
        let principal = request.auth.by_app_id(app_id)?;
        match &found {
            None => found = Some(principal),
            Some(held) if held.source.id == principal.source.id => {}
            Some(_) => return Err(ApiError::ConflictingAppIds("different sources")),
        }
    }
    let found = found.ok_or_else(|| AuthError::UnknownAppId(String::new()))?;
    match &request.header {
        Some(header) if header.source.id != found.source.id => {
            Err(ApiError::ConflictingAppIds("another source than the Authorization header"))
        }
        // A header's principal (a JWT's subject) says more than an app id.
        Some(header) => Ok(header.clone()),
        None => Ok(found),
    }
}

/// Every key present must name the same source, else
/// `conflicting_write_keys`; a key in a URL must belong to a source whose
/// key may travel there, else `key_not_allowed_in_url`.
fn identify(request: &Request, body_key: Option<&str>, url_key: Option<&str>) -> Result<Principal, ApiError> {
    let mut principal = request.header.clone();
    for (key, place) in [(body_key, "body"), (url_key, "URL")] {
        let Some(key) = key else { continue };
        let found = request.auth.by_write_key(key);
        if place == "URL" && found.as_ref().is_ok_and(|p| !p.source.key_in_url) {
            return Err(ApiError::KeyNotAllowedInUrl);
        }
        match (&principal, found) {
            (None, found) => principal = Some(found?),
            (Some(held), Ok(other)) if held.source.id == other.source.id => {}
            (Some(_), _) => return Err(ApiError::ConflictingWriteKeys(place)),
        }
    }
    principal.ok_or(ApiError::MissingCredentials)
}

/// The `writeKey` query parameter, if the URL has one. Most requests have
/// no query at all, and reading none builds no map.
pub fn url_write_key(req: &HttpRequest) -> Option<String> {
    if req.query_string().is_empty() {
        return None;
    }
    web::Query::<HashMap<String, String>>::from_query(req.query_string())
        .ok()
        .and_then(|query| query.into_inner().remove("writeKey"))
}

#[cfg(test)]
#[path = "authenticate_tests.rs"]
mod tests;
