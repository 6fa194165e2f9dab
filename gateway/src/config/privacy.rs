//! The `[privacy]` section and each source's `[sources.privacy]`.

use std::path::PathBuf;

use serde::Deserialize;

/// `[privacy]`: the secrets and lists every source shares.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrivacyConfig {
    /// Key of `hash` fields and of IP hashes (at least 32 bytes). Keep it
    /// secret and stable: changing it breaks joins across the change.
    pub hash_key: Option<String>,
    /// The IP-hash salt is derived from the key and the current period of
    /// this many hours, so one address hashes alike within a period (daily
    /// unique visitors) and differently across periods (no long profile).
    pub ip_salt_rotation_hours: u64,
    /// The key store of `encrypt` fields: `master/<generation>` keys from
    /// which each user's key is derived (nothing is stored per user) and
    /// `erased/` users (`gateway keys rotate|forget`). Relative to the
    /// configuration file.
    pub user_keys_dir: Option<PathBuf>,
    /// File of suppressed `userId`s / `anonymousId`s, one a line; re-read on
    /// change and on SIGHUP. Relative to the configuration file.
    pub suppression_file: Option<PathBuf>,
    /// A compacted topic of suppressed ids, followed from its beginning
    /// (see [`suppression_topic`]); with the file, both lists apply.
    pub suppression_topic: Option<String>,
}

impl Default for PrivacyConfig {
    fn default() -> Self {
        Self {
            hash_key: None,
            ip_salt_rotation_hours: 24,
            user_keys_dir: None,
            suppression_file: None,
            suppression_topic: None,
        }
    }
}

/// What happens to the client IP once geo has used it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IpPolicy {
    /// `context.ip` as resolved (the default, as before this setting).
    #[default]
    Keep,
    /// The host part zeroed (last octet of IPv4, last 80 bits of IPv6;
    /// an IPv4 address inside an IPv6 one keeps its /24 at most: see
    /// `crate::privacy::anonymize`).
    Truncate,
    /// `context.ip` removed; `context.ipHash` holds its keyed hash with the
    /// period's salt.
    Hash,
    /// `context.ip` removed.
    Drop,
}

/// A source's `[sources.privacy]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourcePrivacy {
    /// What happens to the client IP after geo.
    pub ip: IpPolicy,
    /// Apply the catalog's personal-data actions (on by default: the
    /// catalog's owners declared them).
    pub personal_data: bool,
    /// Refuse events of suppressed users (on by default when a list exists).
    pub suppression: bool,
    /// Check consent against each event's purpose (off by default: backends
    /// usually send no consent, and turning it on changes what is accepted).
    pub consent: bool,
    /// Under a JWT, let an `alias` call's `previousId` name any identity
    /// (a trusted backend merging users on their behalf). Off by default:
    /// it must be the token's subject or an identity the issuer's
    /// `identity_claim` lists, else the event is rejected
    /// (`identity_not_vouched`), so a token holder cannot merge someone
    /// else's profile into theirs.
    pub alias_any_previous_id: bool,
}

impl Default for SourcePrivacy {
    fn default() -> Self {
        Self {
            ip: IpPolicy::Keep,
            personal_data: true,
            suppression: true,
            consent: false,
            alias_any_previous_id: false,
        }
    }
}
