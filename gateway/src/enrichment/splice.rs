//! One event as enrichment leaves it, without copying into every event
//! what its request shares and without inserting into its maps. What
//! enrichment adds to the event (`receivedAt`, `timestamp`, the device's
//! as `originalTimestamp`, an absent `context`) and to its `context`
//! (`ip`, `userAgent`, `agent`, `bot`, `geo`, `ipHash`) is kept beside the
//! client's maps as fragments: text borrowed from the request, or JSON
//! serialised once per place and per user agent ([`RawValue`]). The record
//! is written from the maps and the fragments in one pass, byte for byte
//! what inserting the same values into the maps and serialising them would
//! give. With `preserve_order`, a `serde_json` map is an `IndexMap` whose
//! `insert` keeps an existing key's place and whose `remove` is a
//! swap-remove; [`EventSplice`] reproduces both, at each level.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::compact;

/// A value enrichment puts in `context`.
#[derive(Debug, Clone)]
pub enum Fragment<'r> {
    /// A string, escaped when written.
    Text(Cow<'r, str>),
    /// JSON kept by the request (its own address's place, its own agent).
    Json(&'r RawValue),
    /// JSON kept by a cache shared across requests.
    Shared(Arc<RawValue>),
    /// The value taken out of the event (the device's `timestamp`, kept as
    /// `originalTimestamp`), kept by its [`Entries`].
    Device,
    /// `context`, for an event that had none: an empty map with the
    /// splice's `context` entries.
    Context,
}

impl Fragment<'_> {
    fn to_value(&self) -> Value {
        match self {
            Self::Text(text) => Value::String(text.clone().into_owned()),
            // A fragment's text is JSON (RawValue checked it).
            Self::Json(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
            Self::Shared(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
            // Resolved by the splice that holds them (`resolve`).
            Self::Device => Value::Null,
            Self::Context => Value::Object(Map::new()),
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Self::Text(text) => Some(text),
            Self::Json(_) | Self::Shared(_) | Self::Device | Self::Context => None,
        }
    }
}

impl Fragment<'_> {
    /// Appends the fragment as JSON: a string escaped, JSON as it is.
    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Self::Text(text) => compact::write_str(out, text),
            Self::Json(raw) => out.extend_from_slice(raw.get().as_bytes()),
            Self::Shared(raw) => out.extend_from_slice(raw.get().as_bytes()),
            // Written by the splice that holds them.
            Self::Device | Self::Context => {}
        }
    }
}

/// `value` as compact JSON, to be shared by the records that carry it.
pub fn shared_json(value: &Value) -> Arc<RawValue> {
    // A `Value`'s own text is JSON, so the check cannot fail.
    let raw = RawValue::from_string(value.to_string()).unwrap_or_else(|_| unreachable!("a Value serialises to JSON"));
    Arc::from(raw)
}

/// One entry enrichment wrote: its key and value.
#[derive(Debug, Clone)]
struct Entry<'r> {
    key: &'static str,
    value: Fragment<'r>,
}

/// Keys enrichment may write into `context`: at most six entries are ever
/// added, and at most three of the client's entries replaced, so both fit
/// in fixed arrays and an event's splice allocates nothing.
const MAX_ADDED: usize = 6;
const MAX_REPLACED: usize = 3;

/// A list of at most `N` items kept inline.
#[derive(Debug)]
struct Inline<T, const N: usize> {
    items: [Option<T>; N],
    len: usize,
}

impl<T, const N: usize> Default for Inline<T, N> {
    fn default() -> Self {
        Self { items: [const { None }; N], len: 0 }
    }
}

impl<T, const N: usize> Inline<T, N> {
    fn iter(&self) -> impl Iterator<Item = &T> {
        self.items[..self.len].iter().flatten()
    }

    fn position(&self, found: impl Fn(&T) -> bool) -> Option<usize> {
        self.items[..self.len].iter().position(|item| item.as_ref().is_some_and(&found))
    }

    fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.items.get_mut(index)?.as_mut()
    }

    fn push(&mut self, item: T) {
        // The callers write a closed set of keys, fewer than `N`; a slot
        // past it would be a bug, and dropping the item is safer than a panic.
        debug_assert!(self.len < N, "more splice entries than keys enrichment writes");
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = Some(item);
            self.len += 1;
        }
    }

    fn pop(&mut self) -> Option<T> {
        self.len = self.len.checked_sub(1)?;
        self.items[self.len].take()
    }

    /// Removes item `index`, the last one taking its place.
    fn swap_remove(&mut self, index: usize) {
        let last = self.pop();
        if index < self.len {
            self.items[index] = last;
        }
    }

    fn clear(&mut self) {
        self.items.iter_mut().for_each(|item| *item = None);
        self.len = 0;
    }
}

/// What enrichment did to one of the client's maps (the event, or its
/// `context`): entries of it replaced (in place, or, after a removal, by
/// another entry) and entries added after the client's, in order.
#[derive(Debug, Default)]
pub struct Entries<'r> {
    /// By the client's key: the entry now in that key's place.
    replaced: Inline<(&'static str, Entry<'r>), MAX_REPLACED>,
    /// Entries after the client's.
    added: Inline<Entry<'r>, MAX_ADDED>,
    /// A value taken out of the map to be written under another key
    /// ([`Fragment::Device`]: the device's `timestamp`, as
    /// `originalTimestamp`, at the event's level).
    device: Option<Value>,
}

impl<'r> Entries<'r> {
    /// Whether nothing was added or replaced.
    fn is_empty(&self) -> bool {
        self.replaced.len == 0 && self.added.len == 0
    }

    /// Where the client's `key` is: `None` when the client sent none or a
    /// removal put another entry in its place.
    fn client_has(&self, map: &Map<String, Value>, key: &str) -> bool {
        compact::entry(map, key).is_some() && !self.replaced.iter().any(|(at, entry)| *at == key && entry.key != key)
    }

    /// Whether the map holds `key` now.
    pub fn contains(&self, map: &Map<String, Value>, key: &str) -> bool {
        self.added.iter().any(|e| e.key == key)
            || self.replaced.iter().any(|(_, e)| e.key == key)
            || self.client_has(map, key)
    }

    /// `map[key]` now, when it is a string.
    pub fn text<'s>(&'s self, map: &'s Map<String, Value>, key: &str) -> Option<&'s str> {
        if let Some(entry) = self.added.iter().chain(self.replaced.iter().map(|(_, e)| e)).find(|e| e.key == key) {
            return entry.value.as_str();
        }
        if self.client_has(map, key) { compact::entry(map, key).and_then(Value::as_str) } else { None }
    }

    /// `map.insert(key, value)`: in the key's place if present, last otherwise.
    pub fn set(&mut self, map: &Map<String, Value>, key: &'static str, value: Fragment<'r>) {
        let added = self.added.position(|e| e.key == key);
        if let Some(entry) = added.and_then(|i| self.added.get_mut(i)) {
            entry.value = value;
            return;
        }
        let replaced = self.replaced.position(|(_, e)| e.key == key);
        if let Some((_, entry)) = replaced.and_then(|i| self.replaced.get_mut(i)) {
            entry.value = value;
            return;
        }
        if self.client_has(map, key) {
            self.replaced.push((key, Entry { key, value }));
        } else {
            self.added.push(Entry { key, value });
        }
    }

    /// `map.remove(key)`, a swap-remove: the last entry takes its place.
    pub fn remove(&mut self, map: &mut Map<String, Value>, key: &'static str) {
        if let Some(index) = self.added.position(|e| e.key == key) {
            self.added.swap_remove(index);
            return;
        }
        // The client's key whose place holds `key` now.
        let at = match self.replaced.iter().find(|(_, e)| e.key == key) {
            Some((at, _)) => *at,
            None if self.client_has(map, key) => key,
            None => return,
        };
        let index = self.replaced.position(|(k, _)| *k == at);
        match (self.added.pop(), index) {
            (Some(last), Some(index)) => {
                if let Some(slot) = self.replaced.get_mut(index) {
                    slot.1 = last;
                }
            }
            (Some(last), None) => self.replaced.push((at, last)),
            (None, index) => {
                // Nothing was added: the client's last entry takes the
                // place, as in the map.
                if let Some(index) = index {
                    self.replaced.swap_remove(index);
                }
                map.remove(at);
            }
        }
    }

    /// `map.insert(key, device)` for a value taken out of the map.
    pub fn set_device(&mut self, map: &Map<String, Value>, key: &'static str, device: Value) {
        self.device = Some(device);
        self.set(map, key, Fragment::Device);
    }

    /// Writes the fragments into the map as values, leaving these entries
    /// empty: for the rare event whose personal-data actions reach into
    /// this map, which then work on it as it would be.
    pub fn materialize(&mut self, map: &mut Map<String, Value>) {
        if self.is_empty() {
            return;
        }
        let device = &mut self.device;
        let mut value_of = |fragment: &Fragment<'_>| match fragment {
            Fragment::Device => device.take().unwrap_or(Value::Null),
            other => other.to_value(),
        };
        let client = std::mem::take(map);
        for (key, value) in client {
            match self.replaced.iter().find(|(at, _)| *at == key) {
                Some((_, entry)) => map.insert(entry.key.to_owned(), value_of(&entry.value)),
                None => map.insert(key, value),
            };
        }
        for entry in self.added.iter() {
            map.insert(entry.key.to_owned(), value_of(&entry.value));
        }
        self.replaced.clear();
        self.added.clear();
    }
}

/// What enrichment did to one event: its top-level entries (`receivedAt`,
/// `timestamp`, `originalTimestamp`, and `context` when it had none) and
/// its `context`'s (`ip`, `userAgent`, `agent`, `bot`, `geo`, `ipHash`),
/// each kept beside the client's map.
#[derive(Debug, Default)]
pub struct EventSplice<'r> {
    /// The event's own entries.
    pub top: Entries<'r>,
    /// Its `context`'s.
    pub context: Entries<'r>,
    /// The address enrichment wrote as `context.ip`, if it wrote one.
    pub ip: Option<IpAddr>,
}

impl EventSplice<'_> {
    /// Appends a top-level entry's value: a fragment as JSON, the device's
    /// value, or the `context` of an event that had none.
    fn write_top(&self, out: &mut Vec<u8>, value: &Fragment<'_>) {
        match value {
            Fragment::Device => compact::write_value(out, self.top.device.as_ref().unwrap_or(&Value::Null)),
            Fragment::Context => self.write_context(out, &Map::new()),
            other => other.write(out),
        }
    }

    /// The record text of `event`, whose entries and `context` this splice
    /// belongs to: compact JSON, as serde_json would write the map with the
    /// splice's entries inserted and removed.
    pub fn write(&self, event: &Map<String, Value>, capacity: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(capacity);
        out.push(b'{');
        let mut first = true;
        let mut key_of = |out: &mut Vec<u8>, key: &str| {
            if !first {
                out.push(b',');
            }
            first = false;
            compact::write_str(out, key);
            out.push(b':');
        };
        for (key, value) in event {
            match self.top.replaced.iter().find(|(at, _)| at == key) {
                Some((_, entry)) => {
                    key_of(&mut out, entry.key);
                    self.write_top(&mut out, &entry.value);
                }
                None => {
                    key_of(&mut out, key);
                    match value {
                        Value::Object(context) if key == "context" => self.write_context(&mut out, context),
                        _ => compact::write_value(&mut out, value),
                    }
                }
            }
        }
        for entry in self.top.added.iter() {
            key_of(&mut out, entry.key);
            self.write_top(&mut out, &entry.value);
        }
        out.push(b'}');
        out
    }

    /// `context` as enrichment left it: the client's entries in their
    /// places (or what replaced them), then the added ones.
    fn write_context(&self, out: &mut Vec<u8>, context: &Map<String, Value>) {
        out.push(b'{');
        let mut first = true;
        let mut key_of = |out: &mut Vec<u8>, key: &str| {
            if !first {
                out.push(b',');
            }
            first = false;
            compact::write_str(out, key);
            out.push(b':');
        };
        for (key, value) in context {
            match self.context.replaced.iter().find(|(at, _)| at == key) {
                Some((_, entry)) => {
                    key_of(out, entry.key);
                    entry.value.write(out);
                }
                None => {
                    key_of(out, key);
                    compact::write_value(out, value);
                }
            }
        }
        for entry in self.context.added.iter() {
            key_of(out, entry.key);
            entry.value.write(out);
        }
        out.push(b'}');
    }
}

#[cfg(test)]
#[path = "splice_tests.rs"]
mod tests;
