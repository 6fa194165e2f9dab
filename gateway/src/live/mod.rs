//! The live events view: each answered event, as stored (privacy actions
//! applied), published to whoever watches `/live/stream` or `gateway tail`.
//!
//! One bounded broadcast channel per source, plus one for "all sources".
//! The ingest path asks [`LiveHub::capture`] after admission: with no viewer
//! anywhere that is one atomic load and nothing else is built. A viewer that
//! falls behind skips the oldest events of its channel (the channel never
//! grows, the producer never waits) and is told how many it skipped.

pub mod event;
pub mod filter;
pub mod page;
pub mod sse;
pub mod tail;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use prometheus::{IntCounter, IntGauge, Registry};
use tokio::sync::broadcast;

pub use event::{Capture, LiveEvent};
pub use filter::Filter;

/// The channel name of viewers of every source.
const ALL: &str = "";

/// A channel's sending side; events are shared, never copied per viewer.
type Sender = broadcast::Sender<Arc<LiveEvent>>;

/// Every live channel, its viewers and its metrics.
pub struct LiveHub {
    /// Events a channel keeps for its slowest viewer (`live.buffer_events`).
    capacity: usize,
    /// Viewers now, of every channel: the free check of the ingest path.
    viewers: AtomicUsize,
    /// Channels by source id (`ALL` for every source), made by the first
    /// viewer of each; emptied on shutdown so every stream ends.
    channels: RwLock<HashMap<String, Sender>>,
    /// `eventgw_live_viewers`.
    viewers_gauge: IntGauge,
    /// `eventgw_live_skipped_events_total`: events slow viewers never saw.
    skipped: IntCounter,
}

impl LiveHub {
    /// A hub whose channels keep `capacity` events each (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            viewers: AtomicUsize::new(0),
            channels: RwLock::new(HashMap::new()),
            viewers_gauge: IntGauge::new("eventgw_live_viewers", "Viewers of the live events view now")
                .expect("static gauge"),
            skipped: IntCounter::new(
                "eventgw_live_skipped_events_total",
                "Events the live view skipped for viewers that fell behind",
            )
            .expect("static counter"),
        }
    }

    /// Registers the viewers gauge and the skipped counter in `registry`.
    pub fn register(&self, registry: &Registry) {
        for metric in [
            Box::new(self.viewers_gauge.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(self.skipped.clone()),
        ] {
            if let Err(e) = registry.register(metric) {
                tracing::warn!(error = %e, "A live view metric could not be registered");
            }
        }
    }

    /// Whether anyone watches at all: one atomic load.
    pub fn is_watched(&self) -> bool {
        self.viewers.load(Ordering::Relaxed) > 0
    }

    /// A new viewer of `source` (every source when `None`).
    pub fn watch(self: &Arc<Self>, source: Option<&str>) -> Viewer {
        let name = source.unwrap_or(ALL).to_owned();
        let mut channels = self.channels.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let receiver = channels.entry(name).or_insert_with(|| broadcast::channel(self.capacity).0).subscribe();
        self.viewers.fetch_add(1, Ordering::Relaxed);
        self.viewers_gauge.inc();
        Viewer { receiver, hub: Arc::clone(self) }
    }

    /// Sends `events` of `source` to its channel and to the all-sources
    /// channel, whichever has viewers. Never waits.
    pub fn publish(&self, source: &str, events: Vec<LiveEvent>) {
        let channels = self.channels.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let targets: Vec<&Sender> =
            [source, ALL].iter().filter_map(|name| channels.get(*name)).filter(|s| s.receiver_count() > 0).collect();
        if targets.is_empty() {
            return;
        }
        for event in events {
            let event = Arc::new(event);
            for sender in &targets {
                // An error only says every viewer left meanwhile.
                let _ = sender.send(Arc::clone(&event));
            }
        }
    }

    /// Whether `source`'s events have a viewer (its own or all sources').
    pub fn watches(&self, source: &str) -> bool {
        if !self.is_watched() {
            return false;
        }
        let channels = self.channels.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        [source, ALL].iter().any(|name| channels.get(*name).is_some_and(|s| s.receiver_count() > 0))
    }

    /// Drops every channel: each viewer's stream ends (on shutdown, so
    /// open streams do not hold the drain).
    pub fn close(&self) {
        self.channels.write().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    /// Counts events a viewer skipped.
    fn skipped(&self, n: u64) {
        self.skipped.inc_by(n);
    }
}

/// One viewer's end of a channel; leaving (drop) is counted.
pub struct Viewer {
    /// The channel's receiving side.
    receiver: broadcast::Receiver<Arc<LiveEvent>>,
    /// For the counts.
    hub: Arc<LiveHub>,
}

/// What a viewer reads next.
#[derive(Debug)]
pub enum Next {
    /// The next event.
    Event(Arc<LiveEvent>),
    /// This many events were skipped: the viewer fell behind.
    Skipped(u64),
    /// The gateway is shutting down.
    Closed,
}

impl Viewer {
    /// Waits for the next event (or the news of skipped ones).
    pub async fn next(&mut self) -> Next {
        match self.receiver.recv().await {
            Ok(event) => Next::Event(event),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                self.hub.skipped(n);
                Next::Skipped(n)
            }
            Err(broadcast::error::RecvError::Closed) => Next::Closed,
        }
    }
}

impl Viewer {
    /// The next event if one is ready now, without waiting.
    pub fn try_next(&mut self) -> Option<Next> {
        match self.receiver.try_recv() {
            Ok(event) => Some(Next::Event(event)),
            Err(broadcast::error::TryRecvError::Lagged(n)) => {
                self.hub.skipped(n);
                Some(Next::Skipped(n))
            }
            Err(broadcast::error::TryRecvError::Closed) => Some(Next::Closed),
            Err(broadcast::error::TryRecvError::Empty) => None,
        }
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        self.hub.viewers.fetch_sub(1, Ordering::Relaxed);
        self.hub.viewers_gauge.dec();
    }
}

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
