//! Personal data handled at the edge, before anything reaches Kafka: the
//! client IP kept, truncated, hashed or dropped per source; the catalog's
//! personal fields hashed, redacted or encrypted per user; suppressed users
//! refused; consent checked against each event's declared purpose.

pub mod consent;
pub mod crypto;
pub mod ip;
pub mod keys;
pub mod keys_cli;
pub mod personal;
pub mod suppression;
pub mod suppression_topic;

use crate::privacy::crypto::{CryptoError, UserKeys};
use crate::privacy::suppression::{SuppressionError, SuppressionList};

pub use self::ip::{anonymize, hash_ip};
pub use crate::config::privacy::{IpPolicy, PrivacyConfig, SourcePrivacy};

/// Outcome (and code) of an event whose user is on the suppression list.
pub const SUPPRESSED: &str = crate::code::Code::Suppressed.as_str();

/// Shortest `privacy.hash_key` accepted: HMAC-SHA256's block of security.
pub const MIN_HASH_KEY_BYTES: usize = 32;

/// Why the privacy settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PrivacyError {
    /// The suppression list cannot be read.
    #[error(transparent)]
    Suppression(#[from] SuppressionError),
    /// The user key directory cannot be used.
    #[error(transparent)]
    Keys(#[from] CryptoError),
    /// The suppression topic's consumer cannot be created.
    #[error("privacy.suppression_topic: {0}")]
    SuppressionTopic(#[from] rdkafka::error::KafkaError),
    /// A setting needs a hash key and none (or a short one) is configured.
    #[error("privacy.hash_key: {0}")]
    HashKey(String),
}

/// The shared secrets and lists, built once.
#[derive(Debug)]
pub struct Privacy {
    /// Key of hashes.
    pub hash_key: Option<Vec<u8>>,
    /// Seconds per IP-salt period.
    pub salt_period_secs: i64,
    /// Per-user encryption keys.
    pub keys: Option<UserKeys>,
    /// Suppressed users, from the file.
    pub suppressed: Option<SuppressionList>,
    /// Suppressed users, from the topic (set by [`crate::enrichment::Edge`],
    /// which knows the brokers).
    pub suppression_topic: Option<std::sync::Arc<suppression_topic::SuppressionTopic>>,
}

impl Privacy {
    /// From `[privacy]`.
    pub fn new(config: &PrivacyConfig) -> Result<Self, PrivacyError> {
        let hash_key = config.hash_key.as_ref().map(|k| k.as_bytes().to_vec());
        if hash_key.as_ref().is_some_and(|k| k.len() < MIN_HASH_KEY_BYTES) {
            return Err(PrivacyError::HashKey(format!("needs at least {MIN_HASH_KEY_BYTES} bytes")));
        }
        let hours = i64::try_from(config.ip_salt_rotation_hours.max(1)).unwrap_or(24);
        Ok(Self {
            hash_key,
            salt_period_secs: hours * 3600,
            keys: config.user_keys_dir.as_deref().map(UserKeys::open).transpose()?,
            suppressed: config.suppression_file.as_deref().map(SuppressionList::load).transpose()?,
            suppression_topic: None,
        })
    }

    /// Whether `id` is on either suppression list.
    pub fn is_suppressed(&self, id: &str) -> bool {
        self.suppressed.as_ref().is_some_and(|l| l.contains(id))
            || self.suppression_topic.as_ref().is_some_and(|t| t.contains(id))
    }

    /// Whether any suppression list is configured.
    pub fn suppresses(&self) -> bool {
        self.suppressed.is_some() || self.suppression_topic.is_some()
    }

    /// The IP-hash salt of the period holding `unix_secs`.
    pub fn ip_salt(&self, unix_secs: i64) -> Option<Vec<u8>> {
        let key = self.hash_key.as_deref()?;
        let period = unix_secs.div_euclid(self.salt_period_secs);
        Some(crypto::keyed_hash(key, format!("ip-salt/{period}").as_bytes()).into_bytes())
    }
}
