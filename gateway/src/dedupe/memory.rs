//! The embedded store, for one gateway: exact ids (no filter, so no false
//! positive can ever drop a distinct event), bounded by `max_ids`.
//!
//! Ids live in [`SLICES`] hash maps, each holding the ids confirmed during
//! one slice of the window (or up to `max_ids / SLICES` of them); a slice is
//! dropped whole once its newest id is older than the window, so an id is
//! kept at least the window and at most one slice longer, with no per-id
//! queue. Past `max_ids` the oldest slice is dropped early (counted).
//! A canonical lower-case UUID `messageId` (what every SDK generates) is
//! kept as its 16 bytes, anything else as its text: both exact.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt};

use super::{Claim, Reservation, Store, StoreError};

/// Slices the window is cut into: more slices, finer expiry and eviction,
/// more lookups for an id never seen.
pub const SLICES: usize = 16;

/// An id as kept: its source's number and the `messageId`, exactly.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum CompactId {
    Uuid(u32, [u8; 16]),
    Text(u32, Box<str>),
}

struct Pending {
    token: u64,
    expires: Instant,
}

struct Slice {
    opened: Instant,
    ids: HashMap<CompactId, u32>,
}

#[derive(Default)]
struct State {
    sources: HashMap<Box<str>, u32>,
    pending: HashMap<CompactId, Pending>,
    /// Oldest first; the last one takes new ids.
    slices: VecDeque<Slice>,
    total: usize,
}

/// The embedded, exact, bounded store.
pub struct MemoryStore {
    state: Mutex<State>,
    /// How long an id is kept at least.
    window: Duration,
    /// Time one slice covers.
    slice_span: Duration,
    /// Ids one slice takes before the next is opened.
    slice_ids: usize,
    /// Bound on ids held.
    max_ids: usize,
    /// A reservation never settled (its request's task died) lapses after this.
    pending_ttl: Duration,
    evicted: AtomicU64,
    held: AtomicUsize,
}

impl MemoryStore {
    /// A store keeping ids for `window`, at most `max_ids` of them.
    pub fn new(window: Duration, max_ids: usize, pending_ttl: Duration) -> Self {
        let slices = u32::try_from(SLICES).unwrap_or(u32::MAX);
        Self {
            state: Mutex::new(State::default()),
            window,
            slice_span: (window / slices).max(Duration::from_millis(1)),
            slice_ids: (max_ids / SLICES).max(1),
            max_ids,
            pending_ttl,
            evicted: AtomicU64::new(0),
            held: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves maps that are still valid.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// [`Store::reserve`] at time `now`.
    pub fn reserve_at(&self, ids: &[Reservation], now: Instant) -> Vec<Claim> {
        let mut state = self.lock();
        self.expire(&mut state, now);
        ids.iter()
            .map(|r| {
                let id = compact(&mut state, &r.id.source, &r.id.message_id);
                if state.pending.get(&id).is_some_and(|p| p.expires > now) {
                    return Claim::Pending;
                }
                if let Some(fingerprint) = state.slices.iter().rev().find_map(|s| s.ids.get(&id)) {
                    return Claim::Stored(*fingerprint);
                }
                let pending = Pending { token: r.token, expires: now + self.pending_ttl };
                state.pending.insert(id, pending);
                Claim::New
            })
            .collect()
    }

    /// [`Store::confirm`] at time `now`.
    pub fn confirm_at(&self, ids: &[Reservation], now: Instant) {
        let mut state = self.lock();
        for r in ids {
            let id = compact(&mut state, &r.id.source, &r.id.message_id);
            state.pending.remove(&id);
            let open =
                state.slices.back().is_some_and(|s| s.opened + self.slice_span > now && s.ids.len() < self.slice_ids);
            if !open {
                state.slices.push_back(Slice { opened: now, ids: HashMap::new() });
                // Few and short-lived: swept when a slice opens.
                state.pending.retain(|_, p| p.expires > now);
            }
            if let Some(slice) = state.slices.back_mut()
                && slice.ids.insert(id, r.fingerprint).is_none()
            {
                state.total += 1;
            }
        }
        while state.total > self.max_ids {
            let Some(oldest) = state.slices.pop_front() else { break };
            state.total -= oldest.ids.len();
            self.evicted.fetch_add(oldest.ids.len() as u64, Ordering::Relaxed);
        }
        self.held.store(state.total, Ordering::Relaxed);
    }

    /// [`Store::release`]: forgets reservations still held with their token.
    pub fn release_now(&self, ids: &[Reservation]) {
        let mut state = self.lock();
        for r in ids {
            let id = compact(&mut state, &r.id.source, &r.id.message_id);
            if state.pending.get(&id).is_some_and(|p| p.token == r.token) {
                state.pending.remove(&id);
            }
        }
    }

    /// Bytes of the id tables (each slot: its id, fingerprint and control
    /// byte, at the table's capacity) plus the text of non-UUID ids: what
    /// the store holds, allocator overhead aside.
    pub fn approximate_bytes(&self) -> usize {
        let state = self.lock();
        let slot = std::mem::size_of::<(CompactId, u32)>() + 1;
        state
            .slices
            .iter()
            .map(|s| {
                let text: usize = s.ids.keys().map(|id| if let CompactId::Text(_, t) = id { t.len() } else { 0 }).sum();
                s.ids.capacity() * slot + text
            })
            .sum()
    }

    /// [`Store::extend`] at time `now`.
    pub fn extend_at(&self, ids: &[Reservation], now: Instant) {
        let mut state = self.lock();
        for r in ids {
            let id = compact(&mut state, &r.id.source, &r.id.message_id);
            if let Some(pending) = state.pending.get_mut(&id).filter(|p| p.token == r.token) {
                pending.expires = now + self.pending_ttl;
            }
        }
    }

    /// Drops the slices whose newest id is older than the window.
    fn expire(&self, state: &mut State, now: Instant) {
        while let Some(front) = state.slices.front() {
            if front.opened + self.slice_span + self.window > now {
                break;
            }
            state.total -= front.ids.len();
            state.slices.pop_front();
        }
        self.held.store(state.total, Ordering::Relaxed);
    }
}

/// The kept form of an id; numbers sources on first sight (there are as
/// many as configured sources).
fn compact(state: &mut State, source: &str, message_id: &str) -> CompactId {
    let next = u32::try_from(state.sources.len()).unwrap_or(u32::MAX);
    let source = *state.sources.entry(source.into()).or_insert(next);
    // Only the canonical form: `ABC…` and `abc…` are different ids.
    let canonical = message_id.len() == 36 && !message_id.bytes().any(|b| b.is_ascii_uppercase());
    match uuid::Uuid::try_parse(message_id) {
        Ok(uuid) if canonical => CompactId::Uuid(source, *uuid.as_bytes()),
        _ => CompactId::Text(source, message_id.into()),
    }
}

impl Store for MemoryStore {
    fn reserve(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<Vec<Claim>, StoreError>> {
        let claims = self.reserve_at(&ids, Instant::now());
        async move { Ok(claims) }.boxed()
    }

    fn confirm(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>> {
        self.confirm_at(&ids, Instant::now());
        async { Ok(()) }.boxed()
    }

    fn release(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>> {
        self.release_now(&ids);
        async { Ok(()) }.boxed()
    }

    fn extend(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>> {
        self.extend_at(&ids, Instant::now());
        async { Ok(()) }.boxed()
    }

    fn check(&self) -> BoxFuture<'static, Result<(), StoreError>> {
        async { Ok(()) }.boxed()
    }

    fn pending_ttl(&self) -> Duration {
        self.pending_ttl
    }

    fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    fn held(&self) -> Option<usize> {
        Some(self.held.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
