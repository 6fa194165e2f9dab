//! The cryptography of personal data: keyed hashes that still join, and
//! per-user encryption whose key can be deleted to forget the user
//! ("crypto-shredding") without rewriting anything already in Kafka.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Prefix of an encrypted value: scheme and version, so consumers know
/// what they hold and a future scheme can sit beside this one.
pub const ENCRYPTED_PREFIX: &str = "enc:v1:";

/// Bytes of a user key (AES-256).
const KEY_BYTES: usize = 32;
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
    /// The user has no key (never had one, or it was deleted).
    #[error("no key for this user: it was never created or it was deleted")]
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

/// Per-user keys, one file each in a directory, named by the SHA-256 of
/// the user id (the directory does not list who the users are). Several
/// gateways share one directory: a key is created with `create_new`, so
/// two instances racing for the same new user agree on the first one.
#[derive(Debug, Clone)]
pub struct UserKeys {
    dir: PathBuf,
}

impl UserKeys {
    /// Keys under `dir`, created if missing.
    pub fn open(dir: &Path) -> Result<Self, CryptoError> {
        std::fs::create_dir_all(dir).map_err(|source| store(dir, source))?;
        Ok(Self { dir: dir.to_path_buf() })
    }

    /// The file holding `user`'s key.
    pub fn path_of(&self, user: &str) -> PathBuf {
        self.dir.join(hex(&Sha256::digest(user.as_bytes())))
    }

    /// `user`'s key, if it exists.
    pub fn get(&self, user: &str) -> Result<[u8; KEY_BYTES], CryptoError> {
        let path = self.path_of(user);
        match std::fs::read(&path) {
            Ok(bytes) => bytes.try_into().map_err(|_| CryptoError::BadKey(path.display().to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CryptoError::NoKey),
            Err(source) => Err(store(&path, source)),
        }
    }

    /// `user`'s key, created on first use.
    pub fn get_or_create(&self, user: &str) -> Result<[u8; KEY_BYTES], CryptoError> {
        match self.get(user) {
            Err(CryptoError::NoKey) => {}
            found => return found,
        }
        let key: [u8; KEY_BYTES] = Aes256Gcm::generate_key(&mut OsRng).into();
        let path = self.path_of(user);
        let created = std::fs::OpenOptions::new().write(true).create_new(true).open(&path);
        match created {
            Ok(mut file) => {
                file.write_all(&key).and_then(|()| file.sync_all()).map_err(|source| store(&path, source))?;
                Ok(key)
            }
            // Another request or instance created it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => self.get(user),
            Err(source) => Err(store(&path, source)),
        }
    }

    /// Deletes `user`'s key: everything encrypted for them becomes
    /// unreadable, wherever it was copied. Returns whether a key existed.
    pub fn forget(&self, user: &str) -> Result<bool, CryptoError> {
        let path = self.path_of(user);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(store(&path, source)),
        }
    }
}

fn store(path: &Path, source: std::io::Error) -> CryptoError {
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

    #[test]
    fn a_forgotten_key_is_gone_and_a_new_one_differs() {
        let dir = std::env::temp_dir().join(format!("eventgw-keys-{}", uuid::Uuid::new_v4()));
        let keys = UserKeys::open(&dir).expect("dir");
        let first = keys.get_or_create("u1").expect("created");
        assert_eq!(keys.get_or_create("u1").expect("again"), first);
        assert!(keys.forget("u1").expect("deleted"));
        assert!(matches!(keys.get("u1"), Err(CryptoError::NoKey)));
        assert_ne!(keys.get_or_create("u1").expect("new"), first);
        let _ = std::fs::remove_dir_all(dir);
    }
}
