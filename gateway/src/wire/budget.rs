//! What requests still being received may hold. A client that announces a
//! large `Content-Length` and then stalls costs the gateway only what it
//! sent: a body's buffer grows as its bytes arrive ([`BodyBuffer`]), every
//! unfinished body's buffer is charged to one process-wide budget
//! (`limits.max_unfinished_body_bytes`, [`BodyBudget`]), and one HTTP/2
//! connection may have at most `server.max_streams_per_connection` requests
//! in flight ([`StreamSlots`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::web::Bytes;
use prometheus::{IntGauge, Registry};

/// The first buffer a body gets when it announces more (or nothing): large
/// enough for a typical batch in one allocation, small enough that a
/// thousand stalled bodies hold 16 MiB, not a thousand body limits.
pub const FIRST_BUFFER_BYTES: usize = 16 * 1024;

/// The bytes the buffers of all unfinished bodies hold together, and the
/// most they may: past it a body that needs more is refused (`503
/// body_buffer_full`), so stalled clients cannot make the gateway hold more.
#[derive(Debug)]
pub struct BodyBudget {
    /// Bytes charged by live [`BodyBuffer`]s; only compared and swapped, so
    /// the limit is never passed, even for a moment.
    held: AtomicUsize,
    /// `limits.max_unfinished_body_bytes`.
    limit: usize,
    /// `eventgw_unfinished_body_bytes`: `held`, for dashboards and alerts.
    gauge: IntGauge,
}

impl BodyBudget {
    /// A budget of `limit` bytes, none held.
    pub fn new(limit: usize) -> Self {
        let gauge = IntGauge::new(
            "eventgw_unfinished_body_bytes",
            "Bytes the buffers of request bodies still being received hold together.",
        )
        .expect("static gauge");
        Self { held: AtomicUsize::new(0), limit, gauge }
    }

    /// Registers the gauge in `registry` (once per registry).
    pub fn register(&self, registry: &Registry) {
        if let Err(e) = registry.register(Box::new(self.gauge.clone())) {
            tracing::warn!(error = %e, "The unfinished-body gauge could not be registered");
        }
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The most that may be held.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Takes `bytes` from the budget, or nothing when they would pass the limit.
    fn try_charge(&self, bytes: usize) -> bool {
        let charged = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok();
        if charged {
            self.gauge.add(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        charged
    }

    fn release(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::AcqRel);
        self.gauge.sub(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}

/// Why a chunk could not be added to a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The body would pass its own limit.
    TooLarge,
    /// The budget of all unfinished bodies has no room for the growth.
    BudgetFull,
}

/// One body's bytes as they arrive. Its buffer grows to the next power of
/// two of what arrived (at least [`FIRST_BUFFER_BYTES`], at most the
/// announced length), so it holds at most twice what the client sent; the
/// growth is charged to the budget, and all of it is given back when the
/// body is finished or dropped.
pub struct BodyBuffer<'a> {
    bytes: Vec<u8>,
    /// The capacity asked for and charged to `budget`.
    charged: usize,
    /// The announced length (or the limit when none was): never grown past,
    /// so a body whose length was announced ends in one exact buffer.
    target: usize,
    limit: usize,
    budget: &'a BodyBudget,
}

impl<'a> BodyBuffer<'a> {
    /// An empty body announced as `declared` bytes (which the caller checked
    /// against `limit`), charged to `budget`. Allocates nothing yet.
    pub fn new(budget: &'a BodyBudget, declared: Option<usize>, limit: usize) -> Self {
        let target = declared.unwrap_or(limit).min(limit);
        Self { bytes: Vec::new(), charged: 0, target, limit, budget }
    }

    /// Appends `chunk`, growing (and charging) the buffer when it must.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), Refused> {
        let need = self.bytes.len() + chunk.len();
        if need > self.limit {
            return Err(Refused::TooLarge);
        }
        if need > self.charged {
            let capacity = need.next_power_of_two().max(FIRST_BUFFER_BYTES).min(self.target).max(need);
            if !self.budget.try_charge(capacity - self.charged) {
                return Err(Refused::BudgetFull);
            }
            self.charged = capacity;
            self.bytes.reserve_exact(capacity - self.bytes.len());
        }
        self.bytes.extend_from_slice(chunk);
        Ok(())
    }

    /// The body's own limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The limit of the budget it is charged to.
    pub fn budget_limit(&self) -> usize {
        self.budget.limit()
    }

    /// The bytes charged to the budget now.
    pub fn charged(&self) -> usize {
        self.charged
    }

    /// The whole body; its charge goes back to the budget.
    pub fn finish(mut self) -> Bytes {
        Bytes::from(std::mem::take(&mut self.bytes))
    }
}

impl Drop for BodyBuffer<'_> {
    fn drop(&mut self) {
        self.budget.release(self.charged);
    }
}

/// The requests one connection has in flight, kept in the connection's data
/// (`HttpServer::on_connect`). actix-web 4 sets no HTTP/2
/// `SETTINGS_MAX_CONCURRENT_STREAMS` (its h2 builder takes only window
/// sizes), so a client may open any number of streams; past the limit each
/// new one is answered `503 too_many_streams` before its body is read.
#[derive(Debug, Clone)]
pub struct StreamSlots {
    open: Arc<AtomicUsize>,
    limit: usize,
}

impl StreamSlots {
    /// Slots for one connection, `limit` of them.
    pub fn new(limit: usize) -> Self {
        Self { open: Arc::new(AtomicUsize::new(0)), limit }
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// A slot, held until the request's answer is written, or `None` when
    /// all are taken.
    pub fn acquire(&self) -> Option<StreamSlot> {
        let limit = self.limit;
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| (open < limit).then_some(open + 1))
            .ok()
            .map(|_| StreamSlot(Arc::clone(&self.open)))
    }
}

/// One request's place on its connection; given back when dropped.
#[derive(Debug)]
pub struct StreamSlot(Arc<AtomicUsize>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
