//! The cryptography of personal data: keyed hashes that still join, and
//! per-user encryption (the keys: [`super::keys`]) that an erasure makes
//! unreadable ("crypto-shredding") without rewriting anything in Kafka.

use std::path::Path;

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Prefix of an encrypted value: scheme and version, so consumers know
/// what they hold and a future scheme can sit beside this one.
pub const ENCRYPTED_PREFIX: &str = "enc:v1:";

/// Prefix of a value encrypted with a derived key: then the generation of
/// the master key and `:` (see [`super::keys`]).
pub const ENCRYPTED_V2_PREFIX: &str = "enc:v2:";

/// Bytes of a user key (AES-256).
pub const KEY_BYTES: usize = 32;
/// Bytes of an AES-GCM nonce.
const NONCE_BYTES: usize = 12;

/// Why a personal value could not be encrypted or decrypted.
#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    /// The key store could not be read or written.
    #[error("user key store {path}: {source}")]
    Store {
        /// The key file.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// A key file that is not a key.
    #[error("user key file {0} is not {KEY_BYTES} bytes")]
    BadKey(String),
    /// No key: the value's master generation is retired, or (a value of a
    /// former per-user key file) that file was deleted.
    #[error("no key for this value: its generation is retired or its user key was deleted")]
    NoKey,
    /// Not a value this gateway encrypted, or not with this user's key.
    #[error("the value does not decrypt with this key")]
    Undecryptable,
}

/// `HMAC-SHA256(key, text)` in lower-case hex: equal inputs give equal
/// outputs under one key (joins work), and without the key nothing can be
/// guessed back from them.
pub fn keyed_hash(key: &[u8], text: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(text);
    hex(&mac.finalize().into_bytes())
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Encrypts `plain` for `user` with `key` (AES-256-GCM, random nonce, the
/// user id bound as associated data so a value cannot be moved to another
/// user): `enc:v1:` then base64 of nonce and ciphertext.
pub fn encrypt(key: &[u8; KEY_BYTES], user: &str, plain: &[u8]) -> String {
    let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key));
    let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
    let sealed = cipher
        .encrypt(&nonce, Payload { msg: plain, aad: user.as_bytes() })
        .expect("AES-GCM encryption of an in-memory buffer cannot fail");
    let mut bytes = Vec::with_capacity(NONCE_BYTES + sealed.len());
    bytes.extend_from_slice(&nonce);
    bytes.extend_from_slice(&sealed);
    format!("{ENCRYPTED_PREFIX}{}", STANDARD.encode(bytes))
}

/// Encrypts `plain` for `user` with `key`, derived from master
/// `generation`: `enc:v2:<generation>:` then base64 of nonce and
/// ciphertext (AES-256-GCM, the user id as associated data).
pub fn encrypt_v2(key: &[u8; KEY_BYTES], generation: u32, user: &str, plain: &[u8]) -> String {
    let sealed = encrypt(key, user, plain);
    let body = sealed.strip_prefix(ENCRYPTED_PREFIX).unwrap_or(&sealed);
    format!("{ENCRYPTED_V2_PREFIX}{generation}:{body}")
}

/// The master generation an `enc:v2:` value names.
pub fn generation_of(text: &str) -> Option<u32> {
    text.strip_prefix(ENCRYPTED_V2_PREFIX)?.split_once(':')?.0.parse().ok()
}

/// Decrypts a value [`encrypt_v2`] produced for `user` with `key`.
pub fn decrypt_v2(key: &[u8; KEY_BYTES], user: &str, text: &str) -> Result<Vec<u8>, CryptoError> {
    let (_, body) =
        text.strip_prefix(ENCRYPTED_V2_PREFIX).and_then(|t| t.split_once(':')).ok_or(CryptoError::Undecryptable)?;
    decrypt(key, user, &format!("{ENCRYPTED_PREFIX}{body}"))
}

/// Decrypts a value [`encrypt`] produced for `user`; for consumers holding
/// the user's key (and for the tests that prove shredding works).
pub fn decrypt(key: &[u8; KEY_BYTES], user: &str, text: &str) -> Result<Vec<u8>, CryptoError> {
    let encoded = text.strip_prefix(ENCRYPTED_PREFIX).ok_or(CryptoError::Undecryptable)?;
    let bytes = STANDARD.decode(encoded).map_err(|_| CryptoError::Undecryptable)?;
    if bytes.len() < NONCE_BYTES {
        return Err(CryptoError::Undecryptable);
    }
    let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
    let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key));
    cipher
        .decrypt(Nonce::from_slice(nonce), Payload { msg: sealed, aad: user.as_bytes() })
        .map_err(|_| CryptoError::Undecryptable)
}

pub use super::keys::UserKeys;

pub(crate) fn store(path: &Path, source: std::io::Error) -> CryptoError {
    CryptoError::Store { path: path.display().to_string(), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_join_only_under_the_same_key() {
        assert_eq!(keyed_hash(b"k1", b"a@example.com"), keyed_hash(b"k1", b"a@example.com"));
        assert_ne!(keyed_hash(b"k1", b"a@example.com"), keyed_hash(b"k2", b"a@example.com"));
        assert_ne!(keyed_hash(b"k1", b"a@example.com"), keyed_hash(b"k1", b"b@example.com"));
        assert_eq!(keyed_hash(b"k1", b"x").len(), 64);
    }

    #[test]
    fn encrypted_values_need_the_users_key() {
        let key = [7u8; KEY_BYTES];
        let sealed = encrypt(&key, "u1", b"Ada Lovelace");
        assert!(sealed.starts_with(ENCRYPTED_PREFIX));
        assert!(!sealed.contains("Ada"));
        assert_eq!(decrypt(&key, "u1", &sealed).expect("decrypts"), b"Ada Lovelace");
        assert!(decrypt(&[8u8; KEY_BYTES], "u1", &sealed).is_err(), "another key");
        assert!(decrypt(&key, "u2", &sealed).is_err(), "moved to another user");
    }
}
