//! The bounded queue between callers and the worker: bounded by events and
//! by bytes, FIFO, with the overflow policy applied at the door. A push is a
//! short critical section and, most of the time, no wake-up at all: the
//! worker is woken only when a batch may have become ready.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use crate::event::Encoded;

/// One queued event.
#[derive(Debug)]
pub(crate) struct Queued {
    /// Position in the client's history; flush waits by it.
    pub seq: u64,
    /// Its `messageId`.
    pub id: Uuid,
    /// Its JSON.
    pub json: Vec<u8>,
    /// When it was queued; the batch timer runs from the oldest.
    pub at: Instant,
}

/// What a push did.
#[derive(Debug)]
pub(crate) enum Pushed {
    /// Queued; events evicted to make room (drop-oldest) come back here.
    Queued(Vec<Queued>),
    /// No room and no eviction allowed: the event comes back.
    Full(Encoded),
    /// The client is shut down.
    Closed,
}

/// Limits of the queue and of one batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Most events queued at once.
    pub max_events: usize,
    /// Most bytes of JSON queued at once.
    pub max_bytes: usize,
    /// A batch is ready at this many events…
    pub batch_events: usize,
    /// …or at this many bytes.
    pub batch_bytes: usize,
}

#[derive(Debug, Default)]
struct Inner {
    items: VecDeque<Queued>,
    bytes: usize,
    next_seq: u64,
    closed: bool,
}

/// The queue and the two signals around it.
#[derive(Debug)]
pub(crate) struct Queue {
    inner: Mutex<Inner>,
    limits: Limits,
    /// Wakes the worker: a batch may be ready, a timer must start, or a
    /// flush or shutdown was asked for.
    pub wake: Notify,
    /// Wakes callers waiting for room (the `Wait` policy).
    pub space: Notify,
}

impl Queue {
    pub fn new(limits: Limits) -> Self {
        Self { inner: Mutex::new(Inner::default()), limits, wake: Notify::new(), space: Notify::new() }
    }

    // A panic while holding the lock leaves plain data behind, still usable.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `event`, evicting the oldest events when `evict` and full.
    pub fn push(&self, event: Encoded, evict: bool, now: Instant) -> Pushed {
        let size = event.json.len();
        let mut inner = self.lock();
        if inner.closed {
            return Pushed::Closed;
        }
        let mut evicted = Vec::new();
        while inner.items.len() + 1 > self.limits.max_events || inner.bytes + size > self.limits.max_bytes {
            if !evict {
                return Pushed::Full(event);
            }
            match inner.items.pop_front() {
                Some(old) => {
                    inner.bytes -= old.json.len();
                    evicted.push(old);
                }
                None => return Pushed::Full(event),
            }
        }
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let before = inner.bytes;
        inner.bytes += size;
        inner.items.push_back(Queued { seq, id: event.id, json: event.json, at: now });
        // Only on a transition: waking a parked worker is a syscall, and at
        // high rates waking it for every event would cost the caller more
        // than the rest of the call. The worker re-checks after each batch.
        let wake = inner.items.len() == 1
            || inner.items.len() == self.limits.batch_events
            || (before < self.limits.batch_bytes && inner.bytes >= self.limits.batch_bytes);
        drop(inner);
        if wake {
            self.wake.notify_one();
        }
        Pushed::Queued(evicted)
    }

    /// Takes the next batch when one is ready: full by count or bytes, or
    /// `force`d (timer expired, flush, shutdown) with anything queued.
    pub fn take_batch(&self, force: impl Fn(&Queued) -> bool) -> Option<Vec<Queued>> {
        let mut inner = self.lock();
        let front = inner.items.front()?;
        let full = inner.items.len() >= self.limits.batch_events || inner.bytes >= self.limits.batch_bytes;
        if !full && !force(front) {
            return None;
        }
        let mut bytes = 0;
        let mut count = 0;
        for item in &inner.items {
            if count == self.limits.batch_events || (count > 0 && bytes + item.json.len() > self.limits.batch_bytes) {
                break;
            }
            bytes += item.json.len();
            count += 1;
        }
        let batch: Vec<Queued> = if count == inner.items.len() {
            std::mem::take(&mut inner.items).into()
        } else {
            inner.items.drain(..count).collect()
        };
        inner.bytes -= bytes;
        drop(inner);
        self.space.notify_waiters();
        Some(batch)
    }

    /// The oldest event's queue time, if any.
    pub fn oldest(&self) -> Option<Instant> {
        self.lock().items.front().map(|q| q.at)
    }

    /// The seq of the oldest queued event, or the next seq when empty: no
    /// event below it is still queued.
    pub fn low_water(&self) -> u64 {
        let inner = self.lock();
        inner.items.front().map_or(inner.next_seq, |q| q.seq)
    }

    /// The seq the next event will get.
    pub fn next_seq(&self) -> u64 {
        self.lock().next_seq
    }

    /// Events and bytes queued now.
    pub fn depth(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.items.len(), inner.bytes)
    }

    /// Refuses further pushes.
    pub fn close(&self) {
        self.lock().closed = true;
        self.space.notify_waiters();
        self.wake.notify_one();
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Everything still queued, for the shutdown report.
    pub fn drain_all(&self) -> Vec<Queued> {
        let mut inner = self.lock();
        inner.bytes = 0;
        std::mem::take(&mut inner.items).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(size: usize) -> Encoded {
        Encoded { id: Uuid::now_v7(), json: vec![b'x'; size] }
    }

    fn queue(max_events: usize, max_bytes: usize) -> Queue {
        Queue::new(Limits { max_events, max_bytes, batch_events: 2, batch_bytes: 1000 })
    }

    #[test]
    fn holds_exactly_max_events_and_refuses_one_more() {
        let q = queue(3, 1 << 20);
        let now = Instant::now();
        for _ in 0..3 {
            assert!(matches!(q.push(event(1), false, now), Pushed::Queued(ref e) if e.is_empty()));
        }
        assert!(matches!(q.push(event(1), false, now), Pushed::Full(_)));
        assert_eq!(q.depth(), (3, 3));
    }

    #[test]
    fn holds_exactly_max_bytes_and_refuses_one_more() {
        let q = queue(100, 10);
        let now = Instant::now();
        assert!(matches!(q.push(event(6), false, now), Pushed::Queued(_)));
        assert!(matches!(q.push(event(4), false, now), Pushed::Queued(_)));
        assert!(matches!(q.push(event(1), false, now), Pushed::Full(_)));
    }

    #[test]
    fn drop_oldest_evicts_from_the_front_until_the_new_event_fits() {
        let q = queue(100, 10);
        let now = Instant::now();
        let first = event(4);
        let first_id = first.id;
        q.push(first, true, now);
        q.push(event(4), true, now);
        let Pushed::Queued(evicted) = q.push(event(4), true, now) else { panic!("queued") };
        assert_eq!(evicted.iter().map(|e| e.id).collect::<Vec<_>>(), vec![first_id]);
        assert_eq!(q.depth(), (2, 8));
    }

    #[test]
    fn a_batch_is_ready_at_its_count_or_when_forced_and_stops_at_its_bytes() {
        let q = Queue::new(Limits { max_events: 100, max_bytes: 1 << 20, batch_events: 3, batch_bytes: 10 });
        let now = Instant::now();
        q.push(event(4), false, now);
        q.push(event(4), false, now);
        assert!(q.take_batch(|_| false).is_none());
        q.push(event(4), false, now);
        // Ready by count; 4 + 4 fits in 10 bytes, a third would not.
        let batch = q.take_batch(|_| false).expect("ready");
        assert_eq!(batch.iter().map(|b| b.seq).collect::<Vec<_>>(), vec![0, 1]);
        let rest = q.take_batch(|_| true).expect("forced");
        assert_eq!(rest.len(), 1);
        assert_eq!(q.low_water(), 3);
    }

    #[test]
    fn a_closed_queue_refuses_events() {
        let q = queue(10, 100);
        q.close();
        assert!(matches!(q.push(event(1), false, Instant::now()), Pushed::Closed));
    }
}
