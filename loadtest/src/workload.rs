//! Realistic request bodies: the catalog's example events (page views,
//! clicks, email opens, lead changes, payments, ...) with fresh ids, many
//! distinct users, and the intended send time carried in the event so a
//! consumer can measure end-to-end latency.

use std::io::Write;
use std::path::Path;

use eventgw_schemas::KeyPath;

use crate::protocol::{Credentials, Protocol};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Value, json};

/// The property that carries the intended send time, nanoseconds since the
/// run's start; consumers read it back for end-to-end latency.
pub const INTENDED_FIELD: &str = "loadtest_intended_ns";

/// How requests are shaped.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Events per request; 1 posts to `/v1/track`-style single calls via `/v1/batch` of one.
    pub batch: usize,
    /// Gzip every body.
    pub gzip: bool,
    /// Distinct users to spread events over.
    pub users: u64,
    examples: Vec<Value>,
    /// Where the gateway sends each example's events (from the catalog;
    /// empty for a workload built from bare examples).
    routes: Vec<(String, KeyPath)>,
    /// The body's protocol (Segment's batch unless [`Workload::speaking`] says otherwise).
    pub protocol: Protocol,
    /// What the protocol's requests carry to name the source.
    pub credentials: Credentials,
}

impl Workload {
    /// Loads the catalog's examples (every event, newest version).
    pub fn from_catalog(dir: &Path, batch: usize, gzip: bool, users: u64) -> anyhow::Result<Self> {
        let catalog = eventgw_schemas::loader::load_catalog(dir)?;
        let (examples, routes): (Vec<Value>, Vec<(String, KeyPath)>) = catalog
            .events()
            .iter()
            .filter_map(|e| e.latest().examples.first().map(|x| (x.clone(), (e.topic.to_string(), e.key.clone()))))
            .unzip();
        let mut workload = Self::from_examples(examples, batch, gzip, users)?;
        workload.routes = routes;
        Ok(workload)
    }

    /// A workload cycling through `examples` (each a track, page, ... event).
    pub fn from_examples(examples: Vec<Value>, batch: usize, gzip: bool, users: u64) -> anyhow::Result<Self> {
        anyhow::ensure!(!examples.is_empty(), "a workload needs at least one example event");
        Ok(Self {
            batch: batch.max(1),
            gzip,
            users: users.max(1),
            examples,
            routes: Vec::new(),
            protocol: Protocol::Segment,
            credentials: Credentials::default(),
        })
    }

    /// The same events in `protocol`'s batched body, keeping only the
    /// examples it can express (`shared`: only those every protocol can,
    /// so protocols are compared on the same catalog events).
    pub fn speaking(mut self, protocol: Protocol, credentials: Credentials, shared: bool) -> anyhow::Result<Self> {
        let probe = |example: &Value, p: Protocol| {
            let mut event = example.clone();
            event["messageId"] = json!(format!("lt-0-{}", uuid::Uuid::new_v4().simple()));
            p.event(&event, &credentials).is_some()
        };
        let keep: Vec<bool> = self
            .examples
            .iter()
            .map(|e| if shared { Protocol::ALL.iter().all(|p| probe(e, *p)) } else { probe(e, protocol) })
            .collect();
        let mut flags = keep.iter();
        self.examples.retain(|_| flags.next().copied().unwrap_or(false));
        if !self.routes.is_empty() {
            let mut flags = keep.iter();
            self.routes.retain(|_| flags.next().copied().unwrap_or(false));
        }
        anyhow::ensure!(!self.examples.is_empty(), "no catalog example can be sent as {protocol:?}");
        self.protocol = protocol;
        self.credentials = credentials;
        Ok(self)
    }

    /// Pads every example with a `properties.padding` string so each event
    /// is about `bytes` long as compact JSON, as sent (ids and the intended
    /// time included). Examples already that long are left as they are.
    pub fn padded_to(mut self, bytes: usize) -> Self {
        const ENTRY: usize = r#","padding":"""#.len();
        for n in 0..self.examples.len() {
            // A full-length id and time, so the estimate is not short.
            let size = serde_json::to_vec(&self.event(n as u64 + 1_000_000_000, u64::MAX / 2)).map_or(0, |v| v.len());
            if size + ENTRY < bytes {
                let filler = "x".repeat(bytes - size - ENTRY);
                if let Some(props) = self.examples[n].get_mut("properties").and_then(Value::as_object_mut) {
                    props.insert("padding".into(), Value::String(filler));
                } else {
                    self.examples[n]["properties"] = json!({ "padding": filler });
                }
            }
        }
        self
    }

    /// The domain topic and partition key the gateway gives event number
    /// `n` (`event` as [`Workload::event`] made it); `None` when the
    /// workload does not come from a catalog or the event has no key.
    pub fn destination(&self, n: u64, event: &Value) -> Option<(&str, String)> {
        let (topic, key) = self.routes.get((n % self.examples.len() as u64) as usize)?;
        Some((topic, key.extract(event)?))
    }

    /// How many distinct examples the workload cycles through.
    pub fn kinds(&self) -> usize {
        self.examples.len()
    }

    /// The body of request number `seq`, intended to go out at `intended_ns`.
    pub fn body(&self, seq: u64, intended_ns: u64) -> Vec<u8> {
        let events: Vec<Value> =
            (0..self.batch as u64).map(|i| self.event(seq * self.batch as u64 + i, intended_ns)).collect();
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let body = self.protocol.body(&events, &self.credentials, now_ms).to_string().into_bytes();
        if self.gzip { gzip(&body) } else { body }
    }

    /// Event number `n`: an example with a unique `messageId`, one of
    /// `users` users, and the intended send time.
    pub fn event(&self, n: u64, intended_ns: u64) -> Value {
        let mut event = self.examples[(n % self.examples.len() as u64) as usize].clone();
        event["messageId"] = json!(format!("lt-{n}-{}", uuid::Uuid::new_v4().simple()));
        let user = format!("user-{}", n.wrapping_mul(2_654_435_761) % self.users);
        if event.get("userId").is_some() {
            event["userId"] = json!(user);
        } else {
            event["anonymousId"] = json!(user);
        }
        if let Some(props) = event.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert(INTENDED_FIELD.into(), json!(intended_ns));
        } else {
            event["properties"] = json!({INTENDED_FIELD: intended_ns});
        }
        event
    }
}

/// Gzip at the default level, as browsers and SDKs send.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(data.len() / 3), Compression::default());
    let _ = encoder.write_all(data);
    encoder.finish().unwrap_or_default()
}
