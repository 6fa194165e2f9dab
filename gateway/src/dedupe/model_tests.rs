//! A model test: for random interleavings of sends, client retries,
//! concurrent retries, failed produces (503s) and store failures, dedupe
//! never drops a distinct event as a duplicate, every event answered 200
//! is stored, and (when the store refuses rather than letting events
//! through unchecked) no id is ever stored twice.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use proptest::prelude::*;

use super::*;
use crate::sink::{Delivered, MemorySink, Sink, SinkError, Stored};

/// The memory store, made to fail on demand.
struct FlakyStore {
    inner: MemoryStore,
    reserve_fails: AtomicBool,
    settle_fails: AtomicBool,
}

fn down<T: Send + 'static>() -> BoxFuture<'static, Result<T, StoreError>> {
    async { Err(StoreError("store down".into())) }.boxed()
}

impl Store for FlakyStore {
    fn reserve(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<Vec<Claim>, StoreError>> {
        if self.reserve_fails.load(Ordering::SeqCst) { down() } else { self.inner.reserve(ids) }
    }
    fn confirm(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>> {
        if self.settle_fails.load(Ordering::SeqCst) { down() } else { self.inner.confirm(ids) }
    }
    fn release(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>> {
        if self.settle_fails.load(Ordering::SeqCst) { down() } else { self.inner.release(ids) }
    }
    fn extend(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<usize, StoreError>> {
        if self.settle_fails.load(Ordering::SeqCst) { down() } else { self.inner.extend(ids) }
    }
    fn check(&self) -> BoxFuture<'static, Result<(), StoreError>> {
        self.inner.check()
    }
    fn pending_ttl(&self) -> Duration {
        self.inner.pending_ttl()
    }
}

/// A memory sink that yields before answering, so concurrent requests
/// interleave between reserve and settle.
struct SlowSink(Arc<MemorySink>);

impl Sink for SlowSink {
    fn send_all(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
        let sent = self.0.send_all(records);
        async move {
            tokio::task::yield_now().await;
            sent.await
        }
        .boxed()
    }
    fn check_ready(&self) -> BoxFuture<'static, Result<(), String>> {
        self.0.check_ready()
    }
    fn queue_depth(&self) -> i64 {
        0
    }
    fn flush(&self, _timeout: Duration) -> Result<(), String> {
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum StoreFault {
    None,
    Reserve,
    Settle,
}

#[derive(Debug, Clone)]
enum Op {
    /// A request with these events (a client's send or retry).
    Send { events: Vec<usize>, sink_fails: bool, fault: StoreFault },
    /// Two requests of the same event at once (a retry while the first is in flight).
    Race { event: usize, sink_fails: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let fault = prop_oneof![6 => Just(StoreFault::None), 1 => Just(StoreFault::Reserve), 1 => Just(StoreFault::Settle)];
    prop_oneof![
        4 => (prop::collection::vec(0..6usize, 1..4), prop::bool::weighted(0.25), fault)
            .prop_map(|(mut events, sink_fails, fault)| {
                // The pipeline never hands the sink one id twice in a request.
                events.sort_unstable();
                events.dedup();
                Op::Send { events, sink_fails, fault }
            }),
        1 => (0..6usize, prop::bool::weighted(0.25)).prop_map(|(event, sink_fails)| Op::Race { event, sink_fails }),
    ]
}

fn record(event: usize) -> OutRecord {
    OutRecord {
        topic: "web.tracking".into(),
        key: format!("user-{event}"),
        payload: b"{}".to_vec().into(),
        headers: vec![("event-id", format!("m-{event}").into()), ("source", "web".into())],
    }
}

fn stored_counts(sink: &MemorySink) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for r in sink.records() {
        let id = r.headers.iter().find(|(n, _)| *n == "event-id").map(|(_, v)| v.to_string()).unwrap_or_default();
        *counts.entry(id).or_insert(0) += 1;
    }
    counts
}

fn run(ops: Vec<Op>, policy: OnStoreError) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async move {
        let memory = Arc::new(MemorySink::default());
        let store = Arc::new(FlakyStore {
            inner: MemoryStore::new(Duration::from_secs(3600), 1000, Duration::from_secs(600)),
            reserve_fails: AtomicBool::new(false),
            settle_fails: AtomicBool::new(false),
        });
        let sink = DedupeSink::new(Arc::new(SlowSink(Arc::clone(&memory))), store.clone(), policy);
        let deadline = Duration::from_secs(5);
        let mut unchecked = false;
        let mut acked = [false; 6];
        for op in ops {
            let before = stored_counts(&memory);
            let answers: Vec<(usize, Result<Stored, SinkError>)> = match op {
                Op::Send { events, sink_fails, fault } => {
                    memory.fail_with(sink_fails.then(|| SinkError::Unavailable("broker down".into())));
                    store.reserve_fails.store(fault == StoreFault::Reserve, Ordering::SeqCst);
                    store.settle_fails.store(fault == StoreFault::Settle, Ordering::SeqCst);
                    unchecked |= fault == StoreFault::Reserve && policy == OnStoreError::Produce;
                    let records = events.iter().map(|e| record(*e)).collect();
                    events.into_iter().zip(sink.store_all(records, deadline).await).collect()
                }
                Op::Race { event, sink_fails } => {
                    memory.fail_with(sink_fails.then(|| SinkError::Unavailable("broker down".into())));
                    store.reserve_fails.store(false, Ordering::SeqCst);
                    store.settle_fails.store(false, Ordering::SeqCst);
                    let (a, b) = futures::join!(
                        sink.store_all(vec![record(event)], deadline),
                        sink.store_all(vec![record(event)], deadline)
                    );
                    a.into_iter().chain(b).map(|r| (event, r)).collect()
                }
            };
            let after = stored_counts(&memory);
            for (event, answer) in answers {
                let id = format!("m-{event}");
                match answer {
                    Ok(Stored::Duplicate) => prop_assert!(
                        before.get(&id).copied().unwrap_or(0) >= 1,
                        "{id} answered duplicate but was never stored"
                    ),
                    Ok(_) => prop_assert!(after.get(&id).copied().unwrap_or(0) >= 1, "{id} answered 200, not stored"),
                    Err(_) => {}
                }
                acked[event] |= answer.is_ok();
            }
            for (event, acked) in acked.iter().enumerate() {
                let count = after.get(&format!("m-{event}")).copied().unwrap_or(0);
                prop_assert!(!acked || count >= 1, "m-{event} was acknowledged and is missing");
                if !unchecked {
                    prop_assert!(count <= 1, "m-{event} stored {count} times");
                }
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn refusing_when_the_store_fails_never_drops_nor_doubles(ops in prop::collection::vec(op(), 1..40)) {
        run(ops, OnStoreError::Unavailable)?;
    }

    #[test]
    fn producing_when_the_store_fails_never_drops(ops in prop::collection::vec(op(), 1..40)) {
        run(ops, OnStoreError::Produce)?;
    }
}

/// The control: the same checks see a drop when the sink confirms ids
/// whose produce failed (a bug dedupe must not have).
#[test]
fn the_model_catches_a_store_that_confirms_failed_produces() {
    struct Liar(MemoryStore);
    impl Store for Liar {
        fn reserve(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<Vec<Claim>, StoreError>> {
            self.0.reserve(ids)
        }
        fn confirm(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>> {
            self.0.confirm(ids)
        }
        fn release(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>> {
            self.0.confirm(ids)
        }
        fn extend(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<usize, StoreError>> {
            self.0.extend(ids)
        }
        fn check(&self) -> BoxFuture<'static, Result<(), StoreError>> {
            self.0.check()
        }
        fn pending_ttl(&self) -> Duration {
            self.0.pending_ttl()
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let memory = Arc::new(MemorySink::default());
        let store = Arc::new(Liar(MemoryStore::new(Duration::from_secs(60), 100, Duration::from_secs(60))));
        let sink = DedupeSink::new(Arc::new(SlowSink(Arc::clone(&memory))), store, OnStoreError::Unavailable);
        memory.fail_with(Some(SinkError::Unavailable("broker down".into())));
        assert!(sink.store_all(vec![record(1)], Duration::from_secs(1)).await[0].is_err());
        memory.fail_with(None);
        let retry = sink.store_all(vec![record(1)], Duration::from_secs(1)).await;
        assert_eq!(retry, vec![Ok(Stored::Duplicate)], "the liar drops the retry");
        assert!(memory.records().is_empty(), "and the event is lost: what the model test rules out");
    });
}

/// A retry that arrives while the first request is in flight is answered
/// 503 (`retry`), not `duplicate`: the first may still fail.
#[test]
fn a_retry_racing_its_first_request_is_told_to_retry() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let memory = Arc::new(MemorySink::default());
        let store = Arc::new(MemoryStore::new(Duration::from_secs(60), 100, Duration::from_secs(60)));
        let sink = DedupeSink::new(Arc::new(SlowSink(Arc::clone(&memory))), store, OnStoreError::Unavailable);
        let deadline = Duration::from_secs(1);
        let (first, retry) =
            futures::join!(sink.store_all(vec![record(1)], deadline), sink.store_all(vec![record(1)], deadline));
        assert!(matches!(first[0], Ok(Stored::Kafka(_))), "{first:?}");
        assert_eq!(retry, vec![Err(SinkError::Unavailable(super::sink::PENDING.into()))]);
        assert_eq!(sink.metrics().pending.get(), 1);
        let later = sink.store_all(vec![record(1)], deadline).await;
        assert_eq!(later, vec![Ok(Stored::Duplicate)]);
        assert_eq!(memory.records().len(), 1);
    });
}

/// A conflicting event under a stored id is still a duplicate, and counted.
#[test]
fn a_different_event_under_a_stored_id_is_a_counted_duplicate() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let memory = Arc::new(MemorySink::default());
        let store = Arc::new(MemoryStore::new(Duration::from_secs(60), 100, Duration::from_secs(60)));
        let sink = DedupeSink::new(memory.clone(), store, OnStoreError::Unavailable);
        let deadline = Duration::from_secs(1);
        sink.store_all(vec![record(1)], deadline).await;
        let mut other = record(1);
        other.key = "someone-else".into();
        assert_eq!(sink.store_all(vec![other], deadline).await, vec![Ok(Stored::Duplicate)]);
        assert_eq!(sink.store_all(vec![record(1)], deadline).await, vec![Ok(Stored::Duplicate)]);
        assert_eq!((sink.metrics().duplicates.get(), sink.metrics().conflicts.get()), (2, 1));
        assert_eq!(memory.records().len(), 1);
    });
}

/// A request in flight whose extensions fail tries again within
/// `EXTEND_RETRY`, not a whole period later; reservations a retry took
/// over meanwhile are counted once, however often the store reports them.
#[test]
fn failed_extensions_are_retried_soon_and_lost_leases_counted_once() {
    struct Scripted {
        inner: MemoryStore,
        answers: std::sync::Mutex<std::collections::VecDeque<Result<usize, StoreError>>>,
        calls: std::sync::atomic::AtomicUsize,
    }
    impl Store for Scripted {
        fn reserve(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<Vec<Claim>, StoreError>> {
            self.inner.reserve(ids)
        }
        fn confirm(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>> {
            self.inner.confirm(ids)
        }
        fn release(&self, ids: Vec<Reservation>) -> BoxFuture<'static, Result<(), StoreError>> {
            self.inner.release(ids)
        }
        fn extend(&self, _ids: Vec<Reservation>) -> BoxFuture<'static, Result<usize, StoreError>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let answer = self.answers.lock().expect("answers").pop_front().unwrap_or(Ok(2));
            async move { answer }.boxed()
        }
        fn check(&self) -> BoxFuture<'static, Result<(), StoreError>> {
            self.inner.check()
        }
        fn pending_ttl(&self) -> Duration {
            self.inner.pending_ttl()
        }
    }
    /// Answers after 1.6 s: a produce in flight across several extensions.
    struct Late(Arc<MemorySink>);
    impl Sink for Late {
        fn send_all(&self, records: Vec<OutRecord>) -> BoxFuture<'static, Vec<Result<Delivered, SinkError>>> {
            let sent = self.0.send_all(records);
            async move {
                tokio::time::sleep(Duration::from_millis(1600)).await;
                sent.await
            }
            .boxed()
        }
        fn check_ready(&self) -> BoxFuture<'static, Result<(), String>> {
            self.0.check_ready()
        }
        fn queue_depth(&self) -> i64 {
            0
        }
        fn flush(&self, _timeout: Duration) -> Result<(), String> {
            Ok(())
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let memory = Arc::new(MemorySink::default());
        // A 6 s lease: an extension is due every second.
        let down = || Err(StoreError("Redis did not answer".into()));
        let store = Arc::new(Scripted {
            inner: MemoryStore::new(Duration::from_secs(60), 100, Duration::from_secs(6)),
            answers: std::sync::Mutex::new([down(), down(), Ok(2)].into_iter().collect()),
            calls: std::sync::atomic::AtomicUsize::new(0),
        });
        let sink = DedupeSink::new(Arc::new(Late(Arc::clone(&memory))), store.clone(), OnStoreError::Unavailable);
        let stored = sink.store_all(vec![record(1), record(2)], Duration::from_secs(5)).await;
        assert!(stored.iter().all(|s| matches!(s, Ok(Stored::Kafka(_)))), "{stored:?}");
        // At 1 s (fails), 1.25 s (fails), 1.5 s (2 lost), then once more after the produce settled.
        assert_eq!(store.calls.load(Ordering::SeqCst), 4, "extensions");
        assert_eq!(sink.metrics().leases_lost.get(), 2, "each lost reservation counted once");
        assert_eq!(sink.metrics().store_errors.with_label_values(&["extend"]).get(), 2);
    });
}
