//! The SHA-256 of the write keys a worker thread found valid lately.
//! Keys are looked up by their digest (configuration may hold only the
//! digest), and SHA-256 of a key is about 3,500 instructions: a twentieth
//! of a whole single-event request. A worker sees the same few keys over
//! and over (a site's, an app's), so it keeps the last [`RECENT_KEYS`]
//! valid ones with their digests.
//!
//! What this keeps and how it compares:
//! - only keys that named a source: a stream of wrong keys cannot push the
//!   good ones out, and nothing an attacker invents is kept;
//! - the key's bytes, not a shorter hash of them, so a remembered digest is
//!   only ever reused for the very key it was computed from;
//! - each presented key is compared with every kept one in constant time
//!   (`subtle`); what timing can tell is only whether the presented key has
//!   the length of a kept one.
//!
//! A key to digest is a pure function, so a configuration reload needs
//! nothing here: the digest is looked up in the new sources.

use std::cell::RefCell;

use subtle::ConstantTimeEq;

/// Valid keys kept per worker thread.
pub const RECENT_KEYS: usize = 4;

/// A key and its SHA-256.
type Kept = (Box<[u8]>, [u8; 32]);

#[derive(Default)]
struct Recent {
    kept: [Option<Kept>; RECENT_KEYS],
    /// The slot the next valid key replaces (the oldest).
    next: usize,
}

thread_local! {
    static RECENT: RefCell<Recent> = RefCell::default();
}

/// The kept digest of `key`, if this thread found it valid lately.
pub fn digest(key: &str) -> Option<[u8; 32]> {
    RECENT.with_borrow(|recent| {
        let mut found = None;
        // Every slot is compared, so the time does not say which one matched.
        for (kept, digest) in recent.kept.iter().flatten() {
            if kept.len() == key.len() && bool::from(kept.as_ref().ct_eq(key.as_bytes())) {
                found = Some(*digest);
            }
        }
        found
    })
}

/// Keeps `key`, which named a source, with its `digest`, in place of the
/// oldest kept key.
pub fn keep(key: &str, digest: [u8; 32]) {
    RECENT.with_borrow_mut(|recent| {
        let slot = recent.next;
        recent.kept[slot] = Some((key.as_bytes().into(), digest));
        recent.next = (slot + 1) % RECENT_KEYS;
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::key_hash;

    #[test]
    fn a_kept_digest_is_reused_for_its_own_key_only() {
        let key = "site-key-0123456789";
        assert_eq!(digest(key), None, "nothing is kept before a key is found valid");
        keep(key, key_hash(key));
        assert_eq!(digest(key), Some(key_hash(key)));
        // The same length, one byte apart at either end; a prefix; a longer key.
        for other in ["site-key-012345678X", "Xite-key-0123456789", "site-key-012345678", "site-key-0123456789!"] {
            assert_eq!(digest(other), None, "{other}");
        }
    }

    #[test]
    fn the_oldest_key_makes_room_for_a_new_one() {
        let keys: Vec<String> = (0..=RECENT_KEYS).map(|i| format!("key-{i}")).collect();
        for key in &keys {
            keep(key, key_hash(key));
        }
        assert_eq!(digest(&keys[0]), None, "the first key was the oldest");
        for key in &keys[1..] {
            assert_eq!(digest(key), Some(key_hash(key)), "{key}");
        }
    }
}
