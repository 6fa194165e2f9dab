//! Why credentials do not hold. The auth module knows nothing of HTTP
//! answers: `crate::error` turns each of these into its status and code.

/// Everything authentication can refuse.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The Authorization header could not be read.
    #[error("the Authorization header is malformed: {0}")]
    MalformedCredentials(&'static str),
    /// No source has this write key. The message starts with "Invalid write
    /// key" because RudderStack's v1 mobile SDKs look for those words in the
    /// body to stop retrying instead of looping.
    #[error("Invalid write key: no source has this write key")]
    InvalidWriteKey,
    /// No source lists this Snowplow app id (`aid`; empty when the event
    /// has none) in `snowplow_app_ids`.
    #[error("{}", unknown_app_id(.0))]
    UnknownAppId(String),
    /// A bearer token that does not verify.
    #[error("{0}")]
    Jwt(crate::auth::jwt::JwtError),
    /// Too many failed authentications from this address.
    #[error("too many failed authentications from this address; retry after the delay in Retry-After")]
    LockedOut(crate::quota::Denied),
}

/// Longest app id echoed in a refusal: it is the client's own text.
const MAX_ECHOED_APP_ID: usize = 64;

fn unknown_app_id(app_id: &str) -> String {
    let fix = "set the tracker's appId to one a source lists in `snowplow_app_ids`";
    if app_id.is_empty() {
        return format!("an event has no Snowplow app id (`aid`); {fix}");
    }
    let shown: String = app_id.chars().take(MAX_ECHOED_APP_ID).collect();
    format!("unknown Snowplow app id `{shown}`: no source lists it; {fix}")
}

#[cfg(test)]
impl AuthError {
    /// The stable code it is answered with (`crate::error` decides it).
    pub(crate) fn code(&self) -> crate::code::Code {
        crate::error::auth_code(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_app_id_is_echoed_up_to_its_limit() {
        let at = "a".repeat(MAX_ECHOED_APP_ID);
        assert!(AuthError::UnknownAppId(at.clone()).to_string().contains(&format!("`{at}`")));
        let past = AuthError::UnknownAppId(format!("{at}~")).to_string();
        assert!(past.contains(&format!("`{at}`")) && !past.contains('~'), "{past}");
        assert!(AuthError::UnknownAppId(String::new()).to_string().starts_with("an event has no Snowplow app id"));
    }
}
