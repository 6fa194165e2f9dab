//! `[[jwt.issuers]]`: the token issuers trusted, their keys or JWKS, and
//! which claims name the user and the source.

use jsonwebtoken::Algorithm;
use serde::Deserialize;

/// One trusted token issuer, as configured.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerConfig {
    /// The exact `iss` its tokens carry.
    pub issuer: String,
    /// Accepted `aud` values; a token must name at least one.
    pub audiences: Vec<String>,
    /// Algorithms its tokens may use, e.g. `["RS256"]`; tokens naming any other are refused.
    pub algorithms: Vec<Algorithm>,
    /// Clock tolerance for `exp` and `nbf`.
    #[serde(default = "default_leeway")]
    pub leeway_secs: u64,
    /// The claim that becomes `userId`.
    #[serde(default = "default_user_claim")]
    pub user_claim: String,
    /// A claim listing further identities the token vouches for besides
    /// the user (a string or an array of strings, e.g. the device's
    /// `anonymousId`s): an `alias` call under the token may name one of
    /// them, or the user, as its `previousId`, and no other.
    #[serde(default)]
    pub identity_claim: Option<String>,
    /// The claim naming the source (tenant) whose permissions apply; when
    /// absent from the token, `default_source` applies.
    #[serde(default)]
    pub source_claim: Option<String>,
    /// The source for tokens that name none.
    pub default_source: String,
    /// Fixed keys.
    #[serde(default)]
    pub keys: Vec<KeyConfig>,
    /// A JWKS document on disk.
    #[serde(default)]
    pub jwks_file: Option<std::path::PathBuf>,
    /// A JWKS document over plain HTTP.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// Least seconds between two JWKS fetches.
    #[serde(default = "default_jwks_min")]
    pub jwks_min_refresh_secs: u64,
    /// JWKS keys are re-fetched when older than this.
    #[serde(default = "default_jwks_refresh")]
    pub jwks_refresh_secs: u64,
    /// Last good JWKS keys are kept this long while the source is down.
    #[serde(default = "default_jwks_max_age")]
    pub jwks_max_age_secs: u64,
}

/// A fixed verification key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// The `kid` it answers to; none matches any token of its algorithm family.
    #[serde(default)]
    pub kid: Option<String>,
    /// An HMAC secret (HS256/384/512).
    #[serde(default)]
    pub secret: Option<String>,
    /// A public key in PEM (RSA, EC or Ed25519).
    #[serde(default)]
    pub pem: Option<String>,
    /// A file holding a public key in PEM.
    #[serde(default)]
    pub pem_file: Option<std::path::PathBuf>,
}

fn default_leeway() -> u64 {
    30
}
fn default_user_claim() -> String {
    "sub".into()
}
fn default_jwks_min() -> u64 {
    30
}
fn default_jwks_refresh() -> u64 {
    300
}
fn default_jwks_max_age() -> u64 {
    86_400
}
