//! A bounded cache shared across requests, for results that cost
//! microseconds to compute and repeat across requests (a visitor's geo, a
//! browser's profile). Two generations instead of an LRU list: entries go
//! to the current map; when it is full it becomes the previous one and the
//! old previous is dropped; a hit in the previous map moves back to the
//! current one. So memory stays under twice the bound, what is in use
//! survives a turnover, and a lookup costs one lock and one or two hashes,
//! with no allocation.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

/// The two generations.
#[derive(Debug)]
struct Generations<K, V> {
    current: HashMap<K, V>,
    previous: HashMap<K, V>,
}

/// Up to `2 * bound` entries, most recently used kept.
///
/// Hand-written on purpose, not a cache crate: it sits on the per-event
/// enrichment path (sub-microsecond per event is the target in
/// `BENCHMARKS.md`), and two generations give a lookup with no allocation
/// per lookup and no per-entry bookkeeping, with no expiry to pay for (geo
/// and user-agent results do not go stale within a process). The JWT cache,
/// which needs expiry, uses moka instead.
#[derive(Debug)]
pub struct BoundedCache<K, V> {
    generations: Mutex<Generations<K, V>>,
    /// Entries per generation.
    bound: usize,
}

impl<K: Hash + Eq, V: Clone> BoundedCache<K, V> {
    /// An empty cache of `bound` entries per generation (at least one).
    pub fn new(bound: usize) -> Self {
        let generations = Generations { current: HashMap::new(), previous: HashMap::new() };
        Self { generations: Mutex::new(generations), bound: bound.max(1) }
    }

    /// The entry of `key`, if cached.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut generations = self.generations.lock().ok()?;
        if let Some(found) = generations.current.get(key) {
            return Some(found.clone());
        }
        let (key, value) = generations.previous.remove_entry(key)?;
        let found = value.clone();
        self.put(&mut generations, key, value);
        Some(found)
    }

    /// Caches `value` under `key`.
    pub fn insert(&self, key: K, value: V) {
        if let Ok(mut generations) = self.generations.lock() {
            self.put(&mut generations, key, value);
        }
    }

    fn put(&self, generations: &mut Generations<K, V>, key: K, value: V) {
        if generations.current.len() >= self.bound {
            generations.previous = std::mem::take(&mut generations.current);
        }
        generations.current.insert(key, value);
    }

    /// How many entries are held (both generations).
    pub fn len(&self) -> usize {
        self.generations.lock().map_or(0, |g| g.current.len() + g.previous.len())
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_is_used_and_stays_under_twice_the_bound() {
        let cache = BoundedCache::new(2);
        cache.insert("a".to_owned(), 1);
        cache.insert("b".to_owned(), 2);
        cache.insert("c".to_owned(), 3); // a and b become the previous generation
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("a"), Some(1), "a hit in the previous generation");
        cache.insert("d".to_owned(), 4); // current {c, a} is full: b is dropped
        assert_eq!(cache.get("b"), None);
        assert_eq!((cache.get("a"), cache.get("c"), cache.get("d")), (Some(1), Some(3), Some(4)));
        for i in 0..100 {
            cache.insert(format!("k{i}"), i);
            assert!(cache.len() <= 4, "bounded: {}", cache.len());
        }
    }

    #[test]
    fn a_bound_of_zero_still_caches_one() {
        let cache = BoundedCache::new(0);
        cache.insert(1_u8, "one");
        assert_eq!(cache.get(&1), Some("one"));
    }
}
