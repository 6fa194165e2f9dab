//! A governor state store that can give cells back. A batch is charged to
//! several limiters (source, subject, global) and must conform to all or
//! spend nothing; governor has no "would it conform" query and no refund,
//! so the quotas charge each limiter in turn and, when a later one refuses,
//! give the earlier ones their cells back through this store. The GCRA
//! arithmetic stays governor's; this file only keeps its state.

use std::collections::HashMap;
use std::hash::Hash;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use governor::nanos::Nanos;
use governor::state::StateStore;
use governor::state::keyed::ShrinkableKeyedStateStore;

/// Each key's theoretical arrival time (GCRA's state), in nanoseconds since
/// the limiter was created; 0 is a key never seen. A clone shares the map,
/// so the quotas keep one to refund through while the limiter owns another.
pub struct RefundableStore<K>(Arc<RwLock<HashMap<K, AtomicU64>>>);

impl<K> Clone for RefundableStore<K> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<K> Default for RefundableStore<K> {
    fn default() -> Self {
        Self(Arc::new(RwLock::new(HashMap::new())))
    }
}

impl<K: Hash + Eq + Clone> RefundableStore<K> {
    /// Gives back `weight` (cells × their period) charged to `key`. Exact
    /// also when other charges landed in between: a charge moved the
    /// arrival time forward by its weight, and only that weight is removed.
    pub fn refund(&self, key: &K, weight: Duration) {
        let weight = u64::try_from(weight.as_nanos()).unwrap_or(u64::MAX);
        let map = self.0.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(tat) = map.get(key) {
            // The closure always returns Some, so this cannot fail.
            let _ = tat.fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| Some(t.saturating_sub(weight)));
        }
    }
}

/// Compare-and-swap on one key's arrival time, as governor's own stores do.
fn measure<T, E>(tat: &AtomicU64, f: impl Fn(Option<Nanos>) -> Result<(T, Nanos), E>) -> Result<T, E> {
    let mut previous = tat.load(Ordering::Acquire);
    loop {
        let (result, next) = f(NonZeroU64::new(previous).map(|n| Nanos::from(n.get())))?;
        match tat.compare_exchange_weak(previous, next.as_u64(), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(result),
            Err(now) => previous = now,
        }
    }
}

impl<K: Hash + Eq + Clone> StateStore for RefundableStore<K> {
    type Key = K;

    fn measure_and_replace<T, F, E>(&self, key: &K, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        {
            let map = self.0.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(tat) = map.get(key) {
                return measure(tat, f);
            }
        }
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        measure(map.entry(key.clone()).or_default(), f)
    }
}

impl<K: Hash + Eq + Clone> ShrinkableKeyedStateStore<K> for RefundableStore<K> {
    fn retain_recent(&self, drop_below: Nanos) {
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, tat| tat.load(Ordering::Relaxed) > drop_below.as_u64());
    }

    fn shrink_to_fit(&self) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).shrink_to_fit();
    }

    fn len(&self) -> usize {
        self.0.read().unwrap_or_else(PoisonError::into_inner).len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
