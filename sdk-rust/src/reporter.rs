//! Fans each event's outcome out to the caller: the counters, an optional
//! callback, and any number of [`OutcomeStream`]s. Outcomes are never
//! silently lost: a stream that falls behind is told how many it missed.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::broadcast;

use crate::metrics::Counters;
use crate::outcome::{Outcome, Status};

/// A callback run on the worker for every outcome; keep it quick.
pub type OutcomeCallback = Arc<dyn Fn(&Outcome) + Send + Sync>;

/// Where outcomes go.
pub(crate) struct Reporter {
    /// Totals for metrics and the shutdown report.
    pub counters: Counters,
    /// The caller's callback, if any.
    callback: Option<OutcomeCallback>,
    /// Feeds the streams; bounded, so a stream nobody reads costs nothing
    /// but its buffer.
    streams: broadcast::Sender<Outcome>,
}

impl Reporter {
    pub fn new(callback: Option<OutcomeCallback>, buffer: usize) -> Self {
        let (streams, _) = broadcast::channel(buffer.max(1));
        Self { counters: Counters::default(), callback, streams }
    }

    /// Counts and publishes one final outcome.
    pub fn resolve(&self, outcome: Outcome) {
        self.counters.resolve(&outcome.status);
        if let Status::Failed { reason } | Status::Dropped { reason } = &outcome.status {
            tracing::debug!(message_id = %outcome.message_id, status = outcome.status.as_str(), reason, "Event not delivered");
        }
        if let Some(callback) = &self.callback {
            // A panicking callback must not take the worker (and with it
            // every queued event) down.
            let call = std::panic::AssertUnwindSafe(|| callback(&outcome));
            if std::panic::catch_unwind(call).is_err() {
                tracing::error!(message_id = %outcome.message_id, "The outcome callback panicked");
            }
        }
        if self.streams.receiver_count() > 0 {
            // An error only means every stream was dropped meanwhile.
            let _ = self.streams.send(outcome);
        }
    }

    /// A new stream of outcomes from now on.
    pub fn subscribe(&self) -> OutcomeStream {
        OutcomeStream { inner: Box::pin(stream(self.streams.subscribe())) }
    }

    /// Counts retries of `events` events.
    pub fn retried(&self, events: usize) {
        self.counters.retried.fetch_add(events as u64, Relaxed);
    }
}

/// An item of an [`OutcomeStream`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutcomeEvent {
    /// One event's outcome.
    Outcome(Outcome),
    /// The stream fell behind by this many outcomes, which it will not see
    /// (the counters still have them).
    Lagged(u64),
}

/// Outcomes as a [`futures::Stream`], from [`crate::Client::outcomes`]. Ends
/// once every clone of the client is dropped and its worker has stopped.
pub struct OutcomeStream {
    /// The receiver turned into a stream.
    inner: Pin<Box<dyn Stream<Item = OutcomeEvent> + Send>>,
}

impl std::fmt::Debug for OutcomeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutcomeStream")
    }
}

fn stream(receiver: broadcast::Receiver<Outcome>) -> impl Stream<Item = OutcomeEvent> + Send {
    futures::stream::unfold(receiver, |mut receiver| async move {
        match receiver.recv().await {
            Ok(outcome) => Some((OutcomeEvent::Outcome(outcome), receiver)),
            Err(broadcast::error::RecvError::Lagged(n)) => Some((OutcomeEvent::Lagged(n), receiver)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    })
}

impl Stream for OutcomeStream {
    type Item = OutcomeEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
