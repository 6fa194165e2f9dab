//! The configuration documents SDKs fetch before they send, so an SDK can
//! be pointed at this gateway by its host alone:
//! - Segment's `GET /v1/projects/{writeKey}/settings`: analytics-next and
//!   the mobile SDKs take the API host for uploads from
//!   `integrations["Segment.io"].apiHost` (`host/v1`, no scheme) and
//!   analytics-next its `protocol`; here both point back at the gateway.
//! - RudderStack's `GET /sourceConfig?p=...&v=...` (write key as the Basic
//!   user name, or `writeKey` in the query for older JS SDKs): mobile v1
//!   SDKs send nothing until it says the source is enabled.
//!
//! An unknown key is `401 invalid_write_key`, whose message starts with
//! "Invalid write key": RudderStack's v1 SDKs match those words to stop
//! asking (other failures are retried with back-off), v2 SDKs shut down on
//! 401, Segment's fall back to their built-in settings and then hear 401 on
//! upload, which they drop. None of them loops.

use actix_web::http::header::CACHE_CONTROL;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use crate::auth::{self, AuthError, Credentials, Principal};
use crate::error::ApiError;
use crate::state::AppState;

/// `GET /v1/projects/{writeKey}/settings`.
pub async fn segment(
    req: HttpRequest,
    write_key: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let key = write_key.into_inner();
    lookup(&req, &state, None, Some(&key))?;
    let (scheme, host) = public_base(&req, &state);
    Ok(answer(segment_settings(&key, &scheme, &host)))
}

/// `GET /sourceConfig`.
pub async fn source_config(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let header_key = match auth::header_credentials(req.headers()) {
        Ok(Some(Credentials::WriteKey(key))) => Some(key),
        Ok(Some(Credentials::Bearer(_))) => {
            return Err(
                AuthError::MalformedCredentials("sourceConfig takes the write key as the Basic user name").into()
            );
        }
        Ok(None) => None,
        Err(e) => return Err(e.into()),
    };
    let url_key = crate::stages::authenticate::url_write_key(&req);
    let (principal, key) = lookup(&req, &state, header_key.as_deref(), url_key.as_deref())?;
    let (scheme, host) = public_base(&req, &state);
    let updated = crate::pipeline::format_time((state.clock)());
    Ok(answer(rudderstack_source_config(&principal, &key, &format!("{scheme}://{host}"), &updated)))
}

fn answer(document: Value) -> HttpResponse {
    HttpResponse::Ok().insert_header((CACHE_CONTROL, "private, max-age=60")).json(document)
}

/// The source of the key(s) presented, with the auth-failure lock-out and
/// the rule on keys in URLs applied as on the ingestion path.
fn lookup(
    req: &HttpRequest,
    state: &AppState,
    header_key: Option<&str>,
    url_key: Option<&str>,
) -> Result<(Principal, String), ApiError> {
    let client = state.clients.resolve(req);
    let auth = state.auth.load_full();
    auth.check_locked_out(client.ip)?;
    let found = resolve(&auth, header_key, url_key);
    if found.is_err() {
        auth.quotas.record_auth_failure(client.ip);
    }
    found
}

fn resolve(
    auth: &auth::AuthState,
    header_key: Option<&str>,
    url_key: Option<&str>,
) -> Result<(Principal, String), ApiError> {
    let key = header_key.or(url_key).ok_or(ApiError::MissingCredentials)?;
    let principal = auth.by_write_key(key)?;
    if let Some(url_key) = url_key {
        let other = auth.by_write_key(url_key).map_err(|_| ApiError::ConflictingWriteKeys("URL"))?;
        if header_key.is_some() && other.source.id != principal.source.id {
            return Err(ApiError::ConflictingWriteKeys("URL"));
        }
        if !principal.source.key_in_url {
            return Err(ApiError::KeyNotAllowedInUrl);
        }
    }
    Ok((principal, key.to_owned()))
}

/// Scheme and `host[:port]` SDKs should use to reach the gateway:
/// `server.public_host` (with its scheme, if it has one), else what the
/// request was addressed to.
fn public_base(req: &HttpRequest, state: &AppState) -> (String, String) {
    let info = req.connection_info();
    let configured = state.config.server.public_host.as_deref().map(|h| h.trim_end_matches('/'));
    match configured {
        Some(public) => match public.split_once("://") {
            Some((scheme, host)) => (scheme.to_owned(), host.to_owned()),
            None => (info.scheme().to_owned(), public.to_owned()),
        },
        None => (info.scheme().to_owned(), info.host().to_owned()),
    }
}

/// Segment's settings document, with only what its SDKs read: the
/// `Segment.io` integration (upload host, protocol, key), a plan that
/// enables every call, and no remote plugins, middleware or metrics.
pub fn segment_settings(write_key: &str, scheme: &str, host: &str) -> Value {
    json!({
        "integrations": {
            "Segment.io": {
                "apiKey": write_key,
                "apiHost": format!("{host}/v1"),
                "protocol": scheme,
                "unbundledIntegrations": [],
                "addBundledMetadata": true,
                "maybeBundledConfigIds": {},
            }
        },
        "plan": {
            "track": {"__default": {"enabled": true, "integrations": {}}},
            "identify": {"__default": {"enabled": true}},
            "group": {"__default": {"enabled": true}},
        },
        "edgeFunction": {},
        "analyticsNextEnabled": true,
        "middlewareSettings": {},
        "enabledMiddleware": {},
        "metrics": {"sampleRate": 0},
        "legacyVideoPluginsEnabled": false,
        "remotePlugins": [],
    })
}

/// RudderStack's source configuration: the source enabled, no device-mode
/// destinations, and this gateway as the data plane for every residency.
pub fn rudderstack_source_config(principal: &Principal, write_key: &str, data_plane: &str, updated: &str) -> Value {
    let plane = json!([{"url": data_plane, "default": true}]);
    json!({
        "isHosted": false,
        "source": {
            "id": principal.source.id,
            "name": principal.source.id,
            "writeKey": write_key,
            "enabled": true,
            "deleted": false,
            "workspaceId": "eventgw",
            "config": {"statsCollection": {"errorReports": {"enabled": false}, "metrics": {"enabled": false}}},
            "destinations": [],
            "dataplanes": {"US": plane.clone(), "EU": plane},
            "createdAt": updated,
            "updatedAt": updated,
        },
        "dataPlaneUrl": data_plane,
        "updatedAt": updated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_settings_point_uploads_back_here() {
        let doc = segment_settings("key-1", "https", "events.example:8443");
        let io = &doc["integrations"]["Segment.io"];
        assert_eq!(io["apiHost"], "events.example:8443/v1");
        assert_eq!(io["protocol"], "https");
        assert_eq!(io["apiKey"], "key-1");
    }
}
