//! The live events view: each answered event, as stored (privacy actions
//! applied), published to whoever watches `/live/stream` or `gateway tail`.
//!
//! One bounded channel per watched source, plus one for "all sources": a
//! ring of the latest events shared by its viewers, each with its own
//! place in it, woken once per published request.
//! The ingest path asks [`LiveHub::capture`] after admission: with no viewer
//! anywhere that is one atomic load and nothing else is built. A viewer that
//! falls behind skips the oldest events of its channel (the channel never
//! grows, the producer never waits) and is told how many it skipped.
//!
//! Frames carry what a row shows, not the stored record: a viewer opens
//! one by its id (`GET /live/events/{id}`), read back from Kafka where
//! [`Opened`] noted it (a few words per row, up to `live.recent_mib`).
//! Five viewers of every event then cost five small frames per event, not
//! five copies of it. A row is rendered as it is published and dropped but
//! for what the viewers' filters read of it ([`Row`]), which is freed as
//! soon as every channel moved past it.

pub mod event;
pub mod filter;
pub mod page;
pub mod sse;
pub mod tail;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use prometheus::{IntCounter, IntGauge, Registry};
use tokio::sync::watch;

pub use event::{Capture, LiveEvent, Published, Row};
pub use filter::Filter;

/// The channel name of viewers of every source.
const ALL: &str = "";

/// Most stored records read back from Kafka at once for viewers opening
/// rows (each read is a consumer of its own): more at once answer `503
/// live_event_unreadable`, so a flood of opens holds four consumers, not
/// one per request.
pub const READ_BACKS: usize = 4;

/// A mutex's data even if a holder panicked (nothing here is left half
/// written by a panic: every change is one push or pop).
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One channel: the latest events of a source (or of all), numbered, up
/// to `capacity`, shared by every viewer of it. A publish appends a
/// request's events and wakes each viewer once, however many events it
/// holds; a viewer takes everything it has not seen in one go. Events are
/// kept, dropped and handed out a request ([`Published`]) at a time.
struct Channel {
    /// The requests kept, oldest first.
    ring: Mutex<Ring>,
    /// The number the next event will get: changed once per publish, which
    /// wakes the viewers (a `watch` wakes each once, however many changes
    /// it missed).
    tick: watch::Sender<u64>,
    /// Viewers of this channel now.
    viewers: AtomicUsize,
    /// Set on shutdown: every viewer's stream ends.
    closed: AtomicBool,
}

/// The kept requests of a [`Channel`]: at most `capacity` events, whole
/// requests only (the newest is kept whole even when it alone holds more).
struct Ring {
    /// Oldest first.
    requests: VecDeque<Arc<Published>>,
    /// The number of the first event of `requests[0]`.
    first: u64,
    /// The events in `requests`.
    events: usize,
    /// Most events kept.
    capacity: usize,
}

impl Ring {
    /// The number the next event gets.
    fn next(&self) -> u64 {
        self.first + self.events as u64
    }
}

impl Channel {
    fn new(capacity: usize) -> Self {
        Self {
            ring: Mutex::new(Ring { requests: VecDeque::new(), first: 0, events: 0, capacity }),
            tick: watch::Sender::new(0),
            viewers: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// Appends a request's events, dropping the oldest requests beyond the
    /// capacity, and wakes the viewers once. Never waits for a viewer.
    fn publish(&self, request: &Arc<Published>) {
        let next = {
            let mut ring = locked(&self.ring);
            ring.events += request.len();
            ring.requests.push_back(Arc::clone(request));
            while ring.events > ring.capacity && ring.requests.len() > 1 {
                if let Some(old) = ring.requests.pop_front() {
                    ring.events -= old.len();
                    ring.first += old.len() as u64;
                }
            }
            ring.next()
        };
        self.tick.send_replace(next);
    }

    /// Ends every viewer's stream.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.tick.send_modify(|_| {});
    }
}

/// Every live channel, its viewers and its metrics.
pub struct LiveHub {
    /// Events a channel keeps for its slowest viewer (`live.buffer_events`).
    capacity: usize,
    /// Viewers now, of every channel: the free check of the ingest path.
    viewers: AtomicUsize,
    /// Channels by source id (`ALL` for every source), made by the first
    /// viewer of each; emptied on shutdown so every stream ends.
    channels: RwLock<HashMap<String, Arc<Channel>>>,
    /// `eventgw_live_viewers`.
    viewers_gauge: IntGauge,
    /// `eventgw_live_skipped_events_total`: events slow viewers never saw.
    skipped: IntCounter,
    /// Where the most recent published rows' records are, for a viewer to
    /// open one.
    opened: Mutex<Opened>,
    /// Read-backs of stored records under way ([`READ_BACKS`] at most).
    reading: tokio::sync::Semaphore,
}

/// Where the stored record of a published row is, for a viewer opening
/// it (`GET /live/events/{id}`): all the view keeps of a row once its
/// channels moved on, so rows stay openable long after their frames are
/// gone, and keeping them churns no memory (a few words each, in one ring).
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// Nothing a viewer can open: nothing was stored, or the record is not
    /// a JSON object (a framed domain's).
    Nothing,
    /// Kafka holds it: read back from this topic, partition and offset.
    Kafka {
        /// Shared with the rows of the request that went there.
        topic: Arc<str>,
        /// Its partition.
        partition: i32,
        /// Its offset in the partition.
        offset: i64,
    },
    /// Kafka does not hold it yet (spooled): its bytes as stored, kept here.
    Kept(actix_web::web::Bytes),
}

impl Record {
    /// Bytes this takes in the opened-rows ring: its slot, and a kept
    /// record's buffer (the sink's, shared: counted as the allocation that
    /// holds it, built with room for 1 KiB and grown by doubling).
    fn weight(&self) -> usize {
        std::mem::size_of::<Self>()
            + match self {
                Self::Kept(bytes) => bytes.len().max(1024).next_power_of_two(),
                _ => 0,
            }
    }
}

/// Where the records of the most recent published rows are, oldest first,
/// numbered without gaps, up to a weight in bytes (at least the newest is
/// always kept).
struct Opened {
    /// `records[i]` is row `first + i`'s.
    records: VecDeque<Record>,
    /// The id of `records[0]`.
    first: u64,
    /// The weight of `records` ([`Record::weight`]).
    bytes: usize,
    /// Most bytes kept.
    limit: usize,
}

impl Opened {
    /// Numbers `event` and notes where its record is.
    fn keep(&mut self, event: &mut LiveEvent) {
        if self.records.capacity() == 0 {
            // Room for as many slots as the limit can hold, taken once (pages
            // are touched only as slots are first written): a ring that grew
            // by doubling would copy itself into fresh pages while the
            // gateway is busy, and fresh pages are what the kernel zeroes.
            self.records.reserve_exact(self.limit / std::mem::size_of::<Record>() + 1);
        }
        event.id = self.first + self.records.len() as u64;
        let record = event.record();
        self.bytes += record.weight();
        self.records.push_back(record);
    }

    /// Drops the oldest records beyond the limit (at least the newest is
    /// kept).
    fn trim(&mut self) {
        while self.bytes > self.limit && self.records.len() > 1 {
            if let Some(old) = self.records.pop_front() {
                self.bytes -= old.weight();
                self.first += 1;
            }
        }
    }

    /// Where row `id`'s record is, while it is kept.
    fn get(&self, id: u64) -> Option<Record> {
        let index = usize::try_from(id.checked_sub(self.first)?).ok()?;
        self.records.get(index).cloned()
    }
}

impl LiveHub {
    /// A hub whose channels keep `capacity` events each (at least one),
    /// and whose viewers can open the most recent events up to
    /// `opened_bytes`.
    pub fn new(capacity: usize, opened_bytes: usize) -> Self {
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
            opened: Mutex::new(Opened { records: VecDeque::new(), first: 1, bytes: 0, limit: opened_bytes }),
            reading: tokio::sync::Semaphore::new(READ_BACKS),
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

    /// A new viewer of `source` (every source when `None`), from the next
    /// event on.
    pub fn watch(self: &Arc<Self>, source: Option<&str>) -> Viewer {
        let name = source.unwrap_or(ALL).to_owned();
        let mut channels = self.channels.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let channel = Arc::clone(channels.entry(name).or_insert_with(|| Arc::new(Channel::new(self.capacity))));
        drop(channels);
        channel.viewers.fetch_add(1, Ordering::Relaxed);
        self.viewers.fetch_add(1, Ordering::Relaxed);
        self.viewers_gauge.inc();
        let tick = channel.tick.subscribe();
        let cursor = locked(&channel.ring).next();
        Viewer { channel, tick, cursor, hub: Arc::clone(self) }
    }

    /// Sends `events` of `source` to its channel and to the all-sources
    /// channel, whichever has viewers: numbered, their records noted, each
    /// rendered and dropped but for its [`Row`] as it comes. Never waits
    /// for a viewer.
    pub fn publish(&self, source: &str, events: impl IntoIterator<Item = LiveEvent, IntoIter: ExactSizeIterator>) {
        let events = events.into_iter();
        let channels = self.channels.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let targets: Vec<Arc<Channel>> = [source, ALL]
            .iter()
            .filter_map(|name| channels.get(*name))
            .filter(|c| c.viewers.load(Ordering::Relaxed) > 0)
            .cloned()
            .collect();
        drop(channels);
        if targets.is_empty() || events.len() == 0 {
            return;
        }
        let request = {
            let mut opened = locked(&self.opened);
            let request = Published::new(events, |event| opened.keep(event));
            opened.trim();
            Arc::new(request)
        };
        for channel in &targets {
            channel.publish(&request);
        }
    }

    /// Where published row `id`'s record is, while the view still holds it.
    pub fn opened(&self, id: u64) -> Option<Record> {
        locked(&self.opened).get(id)
    }

    /// Leave to read one stored record back from Kafka, held until the
    /// permit drops; `None` while [`READ_BACKS`] reads are under way.
    pub fn reading(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.reading.try_acquire().ok()
    }

    /// Whether `source`'s events have a viewer (its own or all sources').
    pub fn watches(&self, source: &str) -> bool {
        if !self.is_watched() {
            return false;
        }
        let channels = self.channels.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        [source, ALL].iter().any(|name| channels.get(*name).is_some_and(|c| c.viewers.load(Ordering::Relaxed) > 0))
    }

    /// Ends every viewer's stream and drops every channel (on shutdown, so
    /// open streams do not hold the drain).
    pub fn close(&self) {
        let channels = std::mem::take(&mut *self.channels.write().unwrap_or_else(std::sync::PoisonError::into_inner));
        for channel in channels.values() {
            channel.close();
        }
    }

    /// Counts events a viewer skipped.
    fn skipped(&self, n: u64) {
        self.skipped.inc_by(n);
    }
}

/// One viewer's place in a channel; leaving (drop) is counted.
pub struct Viewer {
    /// The channel watched.
    channel: Arc<Channel>,
    /// Wakes this viewer when the channel has new events.
    tick: watch::Receiver<u64>,
    /// The number of the next event this viewer has not had.
    cursor: u64,
    /// For the counts.
    hub: Arc<LiveHub>,
}

/// What a viewer reads next.
#[derive(Debug)]
pub enum Next {
    /// Every request published since the last read, oldest first (at least
    /// one event).
    Events(Vec<Arc<Published>>),
    /// This many events were skipped: the viewer fell behind the channel's
    /// capacity. The events after them come with the next read.
    Skipped(u64),
    /// The gateway is shutting down.
    Closed,
}

impl Viewer {
    /// Waits for new events (or the news of skipped ones).
    pub async fn next(&mut self) -> Next {
        loop {
            if let Some(next) = self.try_next() {
                return next;
            }
            if self.tick.changed().await.is_err() {
                return Next::Closed;
            }
        }
    }

    /// New events if there are any now, without waiting.
    pub fn try_next(&mut self) -> Option<Next> {
        if self.channel.closed.load(Ordering::Acquire) {
            return Some(Next::Closed);
        }
        self.tick.borrow_and_update();
        let ring = locked(&self.channel.ring);
        if self.cursor < ring.first {
            let skipped = ring.first - self.cursor;
            self.cursor = ring.first;
            drop(ring);
            self.hub.skipped(skipped);
            return Some(Next::Skipped(skipped));
        }
        let next = ring.next();
        if self.cursor >= next {
            return None;
        }
        // The cursor is where a request starts (a viewer starts at the next
        // event, and after a skip at the first kept): the requests from it
        // on, found from the newest back.
        let (mut from, mut number) = (ring.requests.len(), next);
        while number > self.cursor && from > 0 {
            from -= 1;
            number -= ring.requests[from].len() as u64;
        }
        let requests: Vec<Arc<Published>> = ring.requests.range(from..).cloned().collect();
        self.cursor = next;
        Some(Next::Events(requests))
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        self.channel.viewers.fetch_sub(1, Ordering::Relaxed);
        self.hub.viewers.fetch_sub(1, Ordering::Relaxed);
        self.hub.viewers_gauge.dec();
    }
}

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
