//! The keys of `encrypt` fields. Each user's key is derived, never stored:
//! `HMAC-SHA256(master, "eventgw/user-key/v2/" ‖ erasure salt ‖ "/" ‖ user)`.
//! A client names users freely (every new `anonymousId` is a new user), so
//! nothing a client sends may make the gateway store anything: what sits in
//! `user_keys_dir` grows only by operator action.
//!
//! ```text
//! user_keys_dir/
//!   master/<generation>   32 random bytes each; the highest encrypts
//!   erased/<sha256(user)> 16 random bytes: the salt of an erased user
//! ```
//!
//! - Rotation: [`UserKeys::rotate`] adds generation n+1; new values name
//!   their generation (`enc:v2:<n>:…`), older ones still decrypt while their
//!   master exists. Retiring a generation (deleting its file) makes every
//!   value of it unreadable at once.
//! - Erasure: [`UserKeys::forget`] writes the user's salt. From then on the
//!   user's key is derived with it: everything encrypted for them before no
//!   longer decrypts through this store, and new events get a fresh key.
//!   Only an operator erases, so the list is as long as the erasure
//!   requests. The old values' key is still derivable by whoever holds the
//!   old generation's master, so the erasure is cryptographic once the
//!   generations holding them are retired: rotate on a schedule and retire
//!   generations with the data's retention.
//!
//! Values of the former per-user key files (`enc:v1:`, a file named by the
//! SHA-256 of the user at the top of the directory) still decrypt, and
//! `forget` deletes such a file.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use aes_gcm::aead::OsRng;
use aes_gcm::aead::rand_core::RngCore as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::crypto::{self, CryptoError, KEY_BYTES};

/// Bytes of an erased user's salt.
const SALT_BYTES: usize = 16;

/// The derived keys of `encrypt` fields, under one directory shared by every
/// gateway instance.
#[derive(Debug)]
pub struct UserKeys {
    dir: PathBuf,
    /// Master keys by generation, ascending; re-read by [`UserKeys::reload`].
    masters: RwLock<Vec<(u32, [u8; KEY_BYTES])>>,
}

impl UserKeys {
    /// The store under `dir`: created if missing, with generation 1 when it
    /// has no master yet (two instances racing agree on the first).
    pub fn open(dir: &Path) -> Result<Self, CryptoError> {
        for sub in ["master", "erased"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(|source| crypto::store(&path, source))?;
        }
        let keys = Self { dir: dir.to_path_buf(), masters: RwLock::default() };
        keys.reload()?;
        if keys.current().is_none() {
            keys.create_master(1)?;
            keys.reload()?;
        }
        Ok(keys)
    }

    /// Re-reads the master keys (after a rotation or a retirement).
    pub fn reload(&self) -> Result<(), CryptoError> {
        let dir = self.dir.join("master");
        let entries = std::fs::read_dir(&dir).map_err(|source| crypto::store(&dir, source))?;
        let mut masters = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| crypto::store(&dir, source))?;
            let Some(generation) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            masters.push((generation, read_key(&entry.path())?));
        }
        masters.sort_by_key(|(g, _)| *g);
        *self.masters.write().unwrap_or_else(std::sync::PoisonError::into_inner) = masters;
        Ok(())
    }

    /// Adds the next generation and makes it the one that encrypts;
    /// returns its number. An operator's action (`gateway keys rotate`).
    pub fn rotate(&self) -> Result<u32, CryptoError> {
        let next = self.current().map_or(1, |(g, _)| g + 1);
        self.create_master(next)?;
        self.reload()?;
        Ok(next)
    }

    /// Every file the store holds: masters plus erasures (what bounds it).
    pub fn stored_files(&self) -> usize {
        ["master", "erased"]
            .iter()
            .filter_map(|sub| std::fs::read_dir(self.dir.join(sub)).ok())
            .map(|entries| entries.flatten().count())
            .sum()
    }

    /// `user`'s key of the current generation, and that generation.
    pub fn encryption_key(&self, user: &str) -> Result<(u32, [u8; KEY_BYTES]), CryptoError> {
        let (generation, master) = self.current().ok_or(CryptoError::NoKey)?;
        Ok((generation, derive(&master, self.salt(user)?.as_deref(), user)))
    }

    /// `user`'s key of `generation`, if that generation is not retired.
    pub fn key(&self, user: &str, generation: u32) -> Result<[u8; KEY_BYTES], CryptoError> {
        let masters = self.masters.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let master = masters.iter().find(|(g, _)| *g == generation).map(|(_, k)| *k).ok_or(CryptoError::NoKey)?;
        drop(masters);
        Ok(derive(&master, self.salt(user)?.as_deref(), user))
    }

    /// Encrypts `plain` for `user` with the current generation.
    pub fn encrypt(&self, user: &str, plain: &[u8]) -> Result<String, CryptoError> {
        let (generation, key) = self.encryption_key(user)?;
        Ok(crypto::encrypt_v2(&key, generation, user, plain))
    }

    /// Decrypts a value the gateway encrypted for `user` (any generation
    /// still held, or a former per-user key file): what a consumer entitled
    /// to read runs (`gateway keys decrypt`).
    pub fn decrypt(&self, user: &str, text: &str) -> Result<Vec<u8>, CryptoError> {
        if text.starts_with(crypto::ENCRYPTED_PREFIX) {
            return crypto::decrypt(&read_key(&self.legacy_path(user))?, user, text);
        }
        let generation = crypto::generation_of(text).ok_or(CryptoError::Undecryptable)?;
        crypto::decrypt_v2(&self.key(user, generation)?, user, text)
    }

    /// Erases `user`: their salt is written, so nothing encrypted for them
    /// so far decrypts through this store (and a former per-user key file
    /// is deleted). Returns whether they were not erased before. Erasing
    /// again keeps the first salt: values encrypted since stay readable.
    pub fn forget(&self, user: &str) -> Result<bool, CryptoError> {
        let legacy = self.legacy_path(user);
        match std::fs::remove_file(&legacy) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(crypto::store(&legacy, source)),
        }
        let mut salt = [0u8; SALT_BYTES];
        OsRng.fill_bytes(&mut salt);
        write_new(&self.erased_path(user), &salt)
    }

    fn current(&self) -> Option<(u32, [u8; KEY_BYTES])> {
        self.masters.read().unwrap_or_else(std::sync::PoisonError::into_inner).last().copied()
    }

    fn create_master(&self, generation: u32) -> Result<(), CryptoError> {
        let mut key = [0u8; KEY_BYTES];
        OsRng.fill_bytes(&mut key);
        write_new(&self.dir.join("master").join(generation.to_string()), &key).map(drop)
    }

    fn salt(&self, user: &str) -> Result<Option<Vec<u8>>, CryptoError> {
        let path = self.erased_path(user);
        match std::fs::read(&path) {
            Ok(salt) => Ok(Some(salt)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(crypto::store(&path, source)),
        }
    }

    fn erased_path(&self, user: &str) -> PathBuf {
        self.dir.join("erased").join(user_file(user))
    }

    fn legacy_path(&self, user: &str) -> PathBuf {
        self.dir.join(user_file(user))
    }
}

/// The key of `user` under `master` and the user's erasure salt (hex, so
/// the separator cannot occur in it).
fn derive(master: &[u8; KEY_BYTES], salt: Option<&[u8]>, user: &str) -> [u8; KEY_BYTES] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(master).expect("HMAC takes keys of any length");
    mac.update(b"eventgw/user-key/v2/");
    mac.update(crypto::hex(salt.unwrap_or_default()).as_bytes());
    mac.update(b"/");
    mac.update(user.as_bytes());
    mac.finalize().into_bytes().into()
}

/// A file name for `user` that does not list who the users are.
fn user_file(user: &str) -> String {
    crypto::hex(&Sha256::digest(user.as_bytes()))
}

fn read_key(path: &Path) -> Result<[u8; KEY_BYTES], CryptoError> {
    match std::fs::read(path) {
        Ok(bytes) => bytes.try_into().map_err(|_| CryptoError::BadKey(path.display().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CryptoError::NoKey),
        Err(source) => Err(crypto::store(path, source)),
    }
}

/// Writes `bytes` to a new file (owner-only), synced, appearing whole: it
/// is written under a temporary name and linked into place, so a reader
/// never sees it half-written. `Ok(false)` if the file already exists
/// (another instance or an earlier call wrote it).
fn write_new(path: &Path, bytes: &[u8]) -> Result<bool, CryptoError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("key");
    let temp = path.with_file_name(format!(".{name}.{}.tmp", uuid::Uuid::new_v4()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options
        .open(&temp)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::hard_link(&temp, path));
    let _ = std::fs::remove_file(&temp);
    match written {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(crypto::store(path, source)),
    }
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
