//! The background task: takes batches off the queue when they are full by
//! count or bytes, when the oldest event has waited `linger`, or at once on
//! flush and shutdown; keeps up to `max_in_flight` deliveries running; turns
//! their results into outcomes; and at the shutdown deadline abandons what is
//! left, so the report it leaves behind is honest.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt as _, StreamExt as _};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use uuid::Uuid;

use crate::delivery::Sender;
use crate::outcome::{Outcome, Status};
use crate::queue::Queue;
use crate::reporter::Reporter;

/// State shared by the client handles and the worker.
pub(crate) struct Shared {
    /// The bounded queue of encoded events.
    pub queue: Queue,
    /// Counters, callback and streams.
    pub reporter: Arc<Reporter>,
    /// A batch is sent when its oldest event has waited this long.
    pub linger: Duration,
    /// Deliveries running at once; 1 keeps the client's events in order.
    pub max_in_flight: usize,
    /// Events with a seq below this are sent without waiting for `linger`
    /// (raised by `flush`).
    pub flush_to: AtomicU64,
    /// Set by `shutdown` (or by dropping the client): send everything now,
    /// give up on what is not delivered by then.
    pub shutdown_at: Mutex<Option<Instant>>,
    /// Every seq below this value is resolved; `flush` waits on it.
    pub resolved_below: watch::Sender<u64>,
}

impl Shared {
    /// Asks the worker to wind down by `at` (an earlier deadline wins).
    pub fn shut_down_by(&self, at: Instant) {
        {
            let mut slot = self.shutdown_at.lock().unwrap_or_else(PoisonError::into_inner);
            *slot = Some(slot.map_or(at, |old| old.min(at)));
        }
        self.queue.close();
    }

    fn deadline(&self) -> Option<Instant> {
        *self.shutdown_at.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A batch in flight: what the worker must account for if it never returns.
struct InFlight {
    ids: Vec<Uuid>,
    first_seq: u64,
}

type Delivering = BoxFuture<'static, (u64, Vec<Status>)>;

/// Runs until shut down and everything is resolved, or the deadline passes.
pub(crate) async fn run(shared: Arc<Shared>, sender: Arc<Sender>) {
    let mut running: FuturesUnordered<Delivering> = FuturesUnordered::new();
    let mut batches: HashMap<u64, InFlight> = HashMap::new();
    let mut next_batch = 0u64;
    loop {
        let deadline = shared.deadline();
        while running.len() < shared.max_in_flight {
            let now = Instant::now();
            let flush_to = shared.flush_to.load(SeqCst);
            let ready = |front: &crate::queue::Queued| {
                deadline.is_some() || front.seq < flush_to || front.at + shared.linger <= now
            };
            let Some(batch) = shared.queue.take_batch(ready) else { break };
            let first_seq = batch.first().map_or(0, |q| q.seq);
            let (ids, jsons): (Vec<Uuid>, Vec<Vec<u8>>) = batch.into_iter().map(|q| (q.id, q.json)).unzip();
            let id = next_batch;
            next_batch += 1;
            batches.insert(id, InFlight { ids, first_seq });
            running.push(Arc::clone(&sender).deliver(Arc::new(jsons)).map(move |statuses| (id, statuses)).boxed());
        }
        publish_low_water(&shared, &batches);
        if deadline.is_some() && running.is_empty() && shared.queue.depth().0 == 0 {
            break;
        }
        let timer = (running.len() < shared.max_in_flight).then(|| shared.queue.oldest()).flatten();
        let timer = timer.map(|oldest| oldest + shared.linger);
        tokio::select! {
            Some((id, statuses)) = running.next(), if !running.is_empty() => {
                if let Some(batch) = batches.remove(&id) {
                    settle(&shared.reporter, batch.ids, statuses);
                }
            }
            () = shared.queue.wake.notified() => {}
            () = sleep_until(timer.unwrap_or_else(Instant::now)), if timer.is_some() => {}
            () = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => break,
        }
    }
    abandon(&shared, batches);
}

fn settle(reporter: &Reporter, ids: Vec<Uuid>, statuses: Vec<Status>) {
    for (message_id, status) in ids.into_iter().zip(statuses) {
        reporter.resolve(Outcome { message_id, status });
    }
}

/// The deadline passed: whatever is in flight or queued fails, counted.
fn abandon(shared: &Shared, batches: HashMap<u64, InFlight>) {
    let mut in_flight = 0usize;
    for batch in batches.into_values() {
        in_flight += batch.ids.len();
        let reason = "the shutdown deadline passed while sending; it may or may not be in Kafka";
        for message_id in batch.ids {
            shared.reporter.resolve(Outcome { message_id, status: Status::Failed { reason: reason.into() } });
        }
    }
    let queued = shared.queue.drain_all();
    let never_sent = queued.len();
    for event in queued {
        let reason = "not sent before the shutdown deadline".to_owned();
        shared.reporter.resolve(Outcome { message_id: event.id, status: Status::Failed { reason } });
    }
    if in_flight + never_sent > 0 {
        tracing::warn!(in_flight, never_sent, "Shutdown deadline passed with events undelivered");
    }
    shared.resolved_below.send_replace(u64::MAX);
}

fn publish_low_water(shared: &Shared, batches: &HashMap<u64, InFlight>) {
    let queued = shared.queue.low_water();
    let low = batches.values().map(|b| b.first_seq).min().map_or(queued, |f| f.min(queued));
    shared.resolved_below.send_if_modified(|current| {
        let changed = *current != low;
        *current = low;
        changed
    });
}
