//! Reading a `serde_json` map by key without hashing. With `preserve_order`
//! a map is an `IndexMap` under std's SipHash, about 200 instructions per
//! look-up of a short key. An event's objects are small, and comparing a
//! dozen keys' lengths (and the few of the same length byte for byte) costs
//! a fraction of that. The gateway's hot path (`compact` there) and the
//! catalog's key paths read events through these (inlined across crates:
//! the release build has no link-time optimisation).

use serde_json::{Map, Value};

/// Objects of up to this many entries are searched in order, larger ones
/// by hash: the scan stays bounded whatever a client sends.
pub const SCANNED_ENTRIES: usize = 16;

/// `map[key]`: a small map searched in order, a large one by hash.
#[inline]
pub fn entry<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if map.len() > SCANNED_ENTRIES {
        return map.get(key);
    }
    map.iter().find_map(|(k, v)| (k == key).then_some(v))
}

/// `map[key]` to change, found as [`entry`] finds it.
#[inline]
pub fn entry_mut<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Value> {
    if map.len() > SCANNED_ENTRIES {
        return map.get_mut(key);
    }
    map.iter_mut().find_map(|(k, v)| (k == key).then_some(v))
}

/// `value[key]` when `value` is an object, as [`entry`] finds it.
#[inline]
pub fn field<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    value.as_object().and_then(|map| entry(map, key))
}
