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
    #[error(
        "unknown Snowplow app id `{0}`: no source lists it in `snowplow_app_ids`; set the tracker's appId to one \
         that a source lists"
    )]
    UnknownAppId(String),
    /// A bearer token that does not verify.
    #[error("{0}")]
    Jwt(crate::auth::jwt::JwtError),
    /// Too many failed authentications from this address.
    #[error("too many failed authentications from this address; retry after the delay in Retry-After")]
    LockedOut(crate::quota::Denied),
}

#[cfg(test)]
impl AuthError {
    /// The stable code it is answered with (`crate::error` decides it).
    pub(crate) fn code(&self) -> crate::code::Code {
        crate::error::auth_code(self)
    }
}
