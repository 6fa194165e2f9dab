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
//!
//! With `[dedupe] path` set the store also keeps an id log on disk
//! ([`super::journal`]): it survives a process crash, and the ids whose
//! produce was in flight at the crash are held *pending* (their retries
//! answered 503) until [`super::in_doubt`] found out from Kafka whether
//! their records landed.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt};

use super::journal::{InDoubt, Journal, Kind};
use super::{Claim, Reservation, Store, StoreError};

/// The token of an id left in doubt by a crash: no request holds it; only
/// the look-up in Kafka settles it.
pub const IN_DOUBT_TOKEN: u64 = 0;

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
    /// The id log, when `[dedupe] path` is set; written under this lock so
    /// its order is the store's.
    journal: Option<Journal>,
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

    /// A store that keeps its ids in the log in `dir` too: reads it back
    /// (ids confirmed within the window, as they were), and holds the ids
    /// in doubt pending; returns them for [`super::in_doubt::resolve`].
    pub fn open(
        window: Duration,
        max_ids: usize,
        pending_ttl: Duration,
        dir: &std::path::Path,
    ) -> Result<(Self, Vec<InDoubt>), StoreError> {
        let store = Self::new(window, max_ids, pending_ttl);
        let (now, now_ms) = (Instant::now(), unix_ms());
        let started = Instant::now();
        let mut loaded = 0usize;
        let (journal, replay) =
            Journal::open(dir, millis(window), millis(store.slice_span), store.slice_ids, now_ms, |at_ms, ids| {
                let at = now.checked_sub(Duration::from_millis(now_ms.saturating_sub(at_ms))).unwrap_or(now);
                let ids: Vec<Reservation> = ids
                    .iter()
                    .map(|(id, fingerprint)| Reservation {
                        id: id.clone(),
                        fingerprint: *fingerprint,
                        token: IN_DOUBT_TOKEN,
                        topic: String::new(),
                    })
                    .collect();
                loaded += ids.len();
                store.confirm_at(&ids, at);
            })?;
        {
            let mut state = store.lock();
            for doubt in &replay.in_doubt {
                let id = compact(&mut state, &doubt.id.source, &doubt.id.message_id);
                state.pending.insert(id, Pending { token: IN_DOUBT_TOKEN, expires: now + window });
            }
            state.journal = Some(journal);
        }
        tracing::info!(
            dir = %dir.display(),
            files = replay.files,
            records = replay.records,
            ids = loaded,
            held = store.held.load(Ordering::Relaxed),
            in_doubt = replay.in_doubt.len(),
            skipped_bytes = replay.skipped_bytes,
            millis = started.elapsed().as_millis() as u64,
            "Dedupe id log read back"
        );
        Ok((store, replay.in_doubt))
    }

    /// Settles ids a crash left in doubt: those `found` in Kafka are
    /// stored (their retries are duplicates), the others released (their
    /// retries are produced).
    pub fn settle_in_doubt(&self, found: &[InDoubt], missing: &[InDoubt]) {
        let reservations = |ids: &[InDoubt]| -> Vec<Reservation> {
            ids.iter()
                .map(|d| Reservation {
                    id: d.id.clone(),
                    fingerprint: d.fingerprint,
                    token: IN_DOUBT_TOKEN,
                    topic: d.topic.clone(),
                })
                .collect()
        };
        self.confirm_at(&reservations(found), Instant::now());
        self.release_now(&reservations(missing));
    }

    /// Appends to the id log, if there is one.
    fn log(state: &mut State, kind: Kind, ids: &[Reservation]) {
        if let Some(journal) = state.journal.as_mut() {
            journal.append(kind, unix_ms(), ids);
        }
    }

    /// Appends to the id log that could not be written (0 without one).
    pub fn log_write_errors(&self) -> u64 {
        self.lock().journal.as_ref().map_or(0, |j| j.write_errors)
    }

    /// [`Store::reserve`] at time `now`.
    pub fn reserve_at(&self, ids: &[Reservation], now: Instant) -> Vec<Claim> {
        let mut state = self.lock();
        self.expire(&mut state, now);
        let claims: Vec<Claim> = ids
            .iter()
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
            .collect();
        if state.journal.is_some() {
            if claims.iter().all(|c| *c == Claim::New) {
                Self::log(&mut state, Kind::Reserved, ids);
            } else {
                let new: Vec<Reservation> =
                    ids.iter().zip(&claims).filter(|(_, c)| **c == Claim::New).map(|(r, _)| r.clone()).collect();
                Self::log(&mut state, Kind::Reserved, &new);
            }
        }
        claims
    }

    /// [`Store::confirm`] at time `now`.
    pub fn confirm_at(&self, ids: &[Reservation], now: Instant) {
        let mut state = self.lock();
        Self::log(&mut state, Kind::Confirmed, ids);
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
        Self::log(&mut state, Kind::Released, ids);
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

    /// [`Store::extend`] at time `now`: how many of `ids` are no longer
    /// reserved with their token.
    pub fn extend_at(&self, ids: &[Reservation], now: Instant) -> usize {
        let mut state = self.lock();
        let mut lost = 0;
        for r in ids {
            let id = compact(&mut state, &r.id.source, &r.id.message_id);
            match state.pending.get_mut(&id).filter(|p| p.token == r.token) {
                Some(pending) => pending.expires = now + self.pending_ttl,
                None => lost += 1,
            }
        }
        lost
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

fn unix_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    millis(since)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
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

    fn extend(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<usize, StoreError>> {
        let lost = self.extend_at(&ids, Instant::now());
        async move { Ok(lost) }.boxed()
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
