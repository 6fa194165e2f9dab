//! Applies the catalog's personal-data actions to one event: each declared
//! field is hashed, removed or encrypted in place before the event is
//! serialised, so the clear value never reaches a record.

use std::cell::RefCell;

use eventgw_schemas::{PersonalAction, PersonalField};
use serde_json::{Map, Value};

use super::crypto::{self, CryptoError, UserKeys};

/// The secrets the actions need, and one request's cache of user keys (a
/// batch usually speaks for one user: its key is derived once).
pub struct PersonalData<'a> {
    /// Key of `hash`.
    pub hash_key: Option<&'a [u8]>,
    /// Where `encrypt` finds each user's key.
    pub keys: Option<&'a UserKeys>,
    /// Keys derived during this request, by user, with their generation.
    pub cache: RefCell<Vec<(String, u32, [u8; 32])>>,
}

/// Users whose keys one request keeps in memory; past it keys are derived
/// again (which reads the user's erasure file).
const MAX_CACHED_KEYS: usize = 16;

impl PersonalData<'_> {
    /// Applies `fields` to `event`, returning what was done to each field
    /// present, or the key-store error that stops the event.
    pub fn apply(
        &self,
        fields: &[PersonalField],
        event: &mut Map<String, Value>,
    ) -> Result<Vec<PersonalAction>, CryptoError> {
        let user = ["userId", "anonymousId"]
            .iter()
            .find_map(|f| event.get(*f).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned));
        let mut done = Vec::new();
        for field in fields {
            let Some((last, parents)) = field.segments.split_last() else { continue };
            let Some(parent) = walk(event, parents) else { continue };
            let Some(value) = parent.get(last.as_str()) else { continue };
            if value.is_null() {
                continue;
            }
            let action = match (field.action, &user, self.keys, self.hash_key) {
                (PersonalAction::Hash, _, _, Some(key)) => {
                    let hashed = crypto::keyed_hash(key, text_of(value).as_bytes());
                    parent.insert(last.clone(), Value::String(hashed));
                    PersonalAction::Hash
                }
                (PersonalAction::Encrypt, Some(user), Some(keys), _) => {
                    let (generation, key) = self.key_of(keys, user)?;
                    let sealed = crypto::encrypt_v2(&key, generation, user, text_of(value).as_bytes());
                    parent.insert(last.clone(), Value::String(sealed));
                    PersonalAction::Encrypt
                }
                // Without a user there is no key to shred, and without a
                // hash key nothing to hash with: the value goes.
                _ => {
                    parent.remove(last.as_str());
                    PersonalAction::Redact
                }
            };
            done.push(action);
        }
        Ok(done)
    }

    fn key_of(&self, keys: &UserKeys, user: &str) -> Result<(u32, [u8; 32]), CryptoError> {
        if let Some((_, generation, key)) = self.cache.borrow().iter().find(|(u, ..)| u == user) {
            return Ok((*generation, *key));
        }
        let (generation, key) = keys.encryption_key(user)?;
        let mut cache = self.cache.borrow_mut();
        if cache.len() < MAX_CACHED_KEYS {
            cache.push((user.to_owned(), generation, key));
        }
        Ok((generation, key))
    }
}

/// The object at `path` below `event`, if every step is an object.
fn walk<'m>(event: &'m mut Map<String, Value>, path: &[String]) -> Option<&'m mut Map<String, Value>> {
    path.iter().try_fold(event, |map, segment| map.get_mut(segment.as_str())?.as_object_mut())
}

/// A string as itself, anything else as its JSON text: `"a"` and `a`
/// hash alike whichever way a client wrote them.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(spec: &[(&str, PersonalAction)]) -> Vec<PersonalField> {
        spec.iter()
            .map(|(p, a)| PersonalField {
                path: (*p).to_owned(),
                segments: p.split('.').map(str::to_owned).collect(),
                action: *a,
            })
            .collect()
    }

    #[test]
    fn hashes_redacts_and_skips_absent_fields() {
        let data =
            PersonalData { hash_key: Some(b"0123456789abcdef0123456789abcdef"), keys: None, cache: RefCell::default() };
        let spec = fields(&[
            ("properties.email", PersonalAction::Hash),
            ("properties.phone", PersonalAction::Redact),
            ("properties.name", PersonalAction::Encrypt),
            ("properties.absent", PersonalAction::Hash),
        ]);
        let mut event =
            json!({"userId": "u1", "properties": {"email": "a@example.com", "phone": "+49", "name": "Ada"}});
        let map = event.as_object_mut().expect("object");
        let done = data.apply(&spec, map).expect("applies");
        assert_eq!(done, vec![PersonalAction::Hash, PersonalAction::Redact, PersonalAction::Redact], "no key store");
        let email = event.pointer("/properties/email").and_then(Value::as_str).expect("hashed");
        assert_eq!(email, crypto::keyed_hash(b"0123456789abcdef0123456789abcdef", b"a@example.com"));
        assert!(event.pointer("/properties/phone").is_none() && event.pointer("/properties/name").is_none());
    }
}
