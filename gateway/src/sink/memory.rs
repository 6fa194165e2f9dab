//! An in-memory sink for unit tests of the request path: it keeps what it
//! was given and can be told to fail.

use std::sync::Mutex;

use futures::future::{BoxFuture, FutureExt};

use actix_web::web::Bytes;

use super::{Delivered, OutRecord, Sink, SinkError};

/// Stores records in a vector; `fail_with` makes every send fail.
#[derive(Debug, Default)]
pub struct MemorySink {
    records: Mutex<Vec<OutRecord>>,
    fail_with: Mutex<Option<SinkError>>,
    depth: std::sync::atomic::AtomicI64,
}

impl MemorySink {
    /// Every record sent so far.
    pub fn records(&self) -> Vec<OutRecord> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Pretends `depth` records are waiting for Kafka.
    pub fn set_queue_depth(&self, depth: i64) {
        self.depth.store(depth, std::sync::atomic::Ordering::Relaxed);
    }

    /// Makes later sends fail with `error` (or succeed again with `None`).
    pub fn fail_with(&self, error: Option<SinkError>) {
        if let Ok(mut slot) = self.fail_with.lock() {
            *slot = error;
        }
    }
}

impl Sink for MemorySink {
    fn send_all(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        let failure = self.fail_with.lock().ok().and_then(|f| f.clone());
        let results = match failure {
            Some(error) => records.iter().map(|_| Err(error.clone())).collect(),
            None => {
                let mut stored = self.records.lock().expect("memory sink lock is never poisoned");
                records
                    .into_iter()
                    .map(|record| {
                        stored.push(record);
                        Ok(Delivered { partition: 0, offset: stored.len() as i64 - 1 })
                    })
                    .collect()
            }
        };
        async move { results }.boxed()
    }

    /// The record sent at `offset` (this sink numbers every record sent,
    /// whatever its topic, in partition 0); the failure set by
    /// [`MemorySink::fail_with`], as Kafka not answering.
    fn read_back(&self, topic: &str, partition: i32, offset: i64) -> BoxFuture<'static, Result<Option<Bytes>, String>> {
        if let Some(error) = self.fail_with.lock().ok().and_then(|f| f.clone()) {
            return futures::future::ready(Err(error.to_string())).boxed();
        }
        let records = self.records.lock().expect("memory sink lock is never poisoned");
        let found = usize::try_from(offset)
            .ok()
            .and_then(|i| records.get(i))
            .filter(|r| partition == 0 && r.topic == topic)
            .map(|r| r.payload.clone());
        futures::future::ready(Ok(found)).boxed()
    }

    fn check_ready(&self) -> BoxFuture<'static, Result<(), String>> {
        let failure = self.fail_with.lock().ok().and_then(|f| f.clone());
        async move { failure.map_or(Ok(()), |e| Err(e.to_string())) }.boxed()
    }

    fn queue_depth(&self) -> i64 {
        self.depth.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn flush(&self, _timeout: std::time::Duration) -> Result<(), String> {
        Ok(())
    }
}
