//! The heap's bytes in use, counted as the allocator hands them out and
//! takes them back. Resident memory keeps what the allocator held at its
//! highest peak (freed pages stay mapped, partly used pages cannot be
//! returned), so RSS alone cannot tell a leak from a high-water mark; this
//! count can (`eventgw_heap_bytes`; the soak plots both).
//!
//! The binary's global allocator (main.rs) calls [`allocated`] and
//! [`freed`]. Each thread adds to a counter of its own and moves it into
//! the shared one only when it passes [`FLUSH_BYTES`], so the hot path
//! pays a thread-local add, not an atomic on a line both cores write. The
//! price is precision: the figure is off by at most `FLUSH_BYTES` per
//! thread (21 threads: 1.3 MiB), and an exited thread's remainder is lost.
//! C allocations (librdkafka's, which mimalloc also serves) are not counted.

use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

/// How far a thread's own count may drift before it is added to the shared one.
pub const FLUSH_BYTES: isize = 64 * 1024;

static IN_USE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    // `const` and no destructor: usable inside the allocator, even while
    // the thread is being torn down.
    static PENDING: Cell<isize> = const { Cell::new(0) };
}

#[inline]
fn add(delta: isize) {
    let _ = PENDING.try_with(|pending| {
        let now = pending.get() + delta;
        if now.abs() >= FLUSH_BYTES {
            let total = IN_USE.fetch_add(now, Ordering::Relaxed) + now;
            PEAK.fetch_max(total, Ordering::Relaxed);
            pending.set(0);
        } else {
            pending.set(now);
        }
    });
}

/// `bytes` were handed out. A layout's size never exceeds `isize::MAX`.
#[inline]
pub fn allocated(bytes: usize) {
    add(bytes.cast_signed());
}

/// `bytes` were taken back.
#[inline]
pub fn freed(bytes: usize) {
    add(-bytes.cast_signed());
}

/// Bytes in use; `None` where no counting allocator is installed (the
/// library's tests, an embedding program).
pub fn in_use() -> Option<u64> {
    u64::try_from(IN_USE.load(Ordering::Relaxed)).ok().filter(|&n| n > 0)
}

/// The most bytes in use at any moment since start (to the same
/// precision): the high-water mark resident memory follows, so a rise of
/// RSS with a rise of this is a new peak of live data, not a leak.
pub fn peak() -> Option<u64> {
    u64::try_from(PEAK.load(Ordering::Relaxed)).ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reach_the_shared_figure_once_a_thread_passes_the_flush_size_and_leave_it_when_freed() {
        // A thread of its own: its remainder cannot mix with another test's.
        std::thread::spawn(|| {
            let before = IN_USE.load(Ordering::Relaxed);
            allocated(1000);
            assert_eq!(IN_USE.load(Ordering::Relaxed), before, "below the flush size it stays with the thread");
            allocated(FLUSH_BYTES.cast_unsigned());
            assert_eq!(IN_USE.load(Ordering::Relaxed), before + FLUSH_BYTES + 1000);
            assert!(in_use().is_some_and(|n| n >= 65_536 + 1000), "the shared figure is read back");
            let high = PEAK.load(Ordering::Relaxed);
            assert!(high >= before + FLUSH_BYTES + 1000, "the peak saw it: {high}");
            freed(FLUSH_BYTES.cast_unsigned() + 1000);
            assert_eq!(IN_USE.load(Ordering::Relaxed), before, "freeing as much takes it back out");
            assert_eq!(PEAK.load(Ordering::Relaxed), high, "the peak stays");
        })
        .join()
        .expect("the counting thread");
    }
}
