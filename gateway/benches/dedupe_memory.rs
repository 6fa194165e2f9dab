//! Memory and speed of the embedded dedupe store, printed: bytes per
//! million ids (canonical UUIDs, kept as 16 bytes, and other ids, kept as
//! text) as the growth of the process's resident memory (the workspace
//! forbids `unsafe`, so no counting allocator) and as the store's own
//! count of table and text bytes, and nanoseconds per reserve + confirm;
//! then the same with the id log on disk (`[dedupe] path`): its bytes per
//! id, the cost per reserve + confirm with its writes, and the time to read
//! it back on start-up. `cargo bench -p eventgw --bench dedupe_memory` measures 1 M ids;
//! under `cargo test` it runs 10 000 only, to prove it still works.

use std::time::{Duration, Instant};

use gateway::dedupe::{EventId, MemoryStore, Reservation, Store as _};

fn ids(n: usize, uuid: bool) -> Vec<Reservation> {
    (0..n)
        .map(|i| {
            let message_id = if uuid {
                uuid::Uuid::from_u128(0x0190_c5a8_0000_7000_8000_0000_0000_0000 | i as u128).to_string()
            } else {
                format!("lt-{i}-{}", uuid::Uuid::from_u128(i as u128).simple())
            };
            Reservation {
                id: EventId { source: "demo".into(), message_id },
                fingerprint: 7,
                token: 1,
                topic: "web.tracking".into(),
            }
        })
        .collect()
}

fn main() {
    let default = if std::env::args().any(|a| a == "--bench") { 1_000_000 } else { 10_000 };
    let n = std::env::var("DEDUPE_BENCH_IDS").ok().and_then(|n| n.parse().ok()).unwrap_or(default);
    for (label, uuid) in [("canonical UUID ids", true), ("other ids (`lt-<n>-<32 hex>`)", false)] {
        let batch = ids(n, uuid);
        let before = rss_kib();
        let store = MemoryStore::new(Duration::from_secs(86_400), 10_000_000, Duration::from_secs(20));
        let started = Instant::now();
        for chunk in batch.chunks(100) {
            store.reserve_at(chunk, Instant::now());
            store.confirm_at(chunk, Instant::now());
        }
        let ns = started.elapsed().as_nanos() as f64 / n as f64;
        let counted = store.approximate_bytes() as f64 / n as f64;
        let rss = (rss_kib().saturating_sub(before) * 1024) as f64 / n as f64;
        println!(
            "{label}: {n} ids; resident memory grew {rss:.0} bytes per id ({:.0} MiB per million); \
             the store counts {counted:.0} bytes per id; {ns:.0} ns per reserve + confirm",
            rss * 1e6 / (1024.0 * 1024.0)
        );
        drop(store);
    }
    id_log(n);
}

/// The id log: one reservation and one confirmation record per request of
/// 100 ids (what the gateway writes for a batch of 100), then a restart.
fn id_log(n: usize) {
    let dir = std::env::temp_dir().join(format!("eventgw-bench-id-log-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let batch = ids(n, true);
    let (day, ttl) = (Duration::from_secs(86_400), Duration::from_secs(20));
    let (store, _) = MemoryStore::open(day, 10_000_000, ttl, &dir).expect("id log opens");
    let started = Instant::now();
    for chunk in batch.chunks(100) {
        store.reserve_at(chunk, Instant::now());
        store.confirm_at(chunk, Instant::now());
    }
    let ns = started.elapsed().as_nanos() as f64 / n as f64;
    drop(store);
    let bytes: u64 =
        std::fs::read_dir(&dir).expect("id log dir").filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum();
    let before = rss_kib();
    let started = Instant::now();
    let (store, in_doubt) = MemoryStore::open(day, 10_000_000, ttl, &dir).expect("id log reopens");
    let reload = started.elapsed();
    let rss = (rss_kib().saturating_sub(before) * 1024) as f64 / n as f64;
    assert_eq!((store.held(), in_doubt.len()), (Some(n), 0), "every id read back, none in doubt");
    println!(
        "id log (canonical UUID ids, requests of 100): {n} ids; {:.0} bytes on disk per id ({:.0} MiB per million); \
         {ns:.0} ns per reserve + confirm with its writes; read back on start-up in {:.2} s ({:.0} ns per id), \
         resident memory after it {rss:.0} bytes per id",
        bytes as f64 / n as f64,
        bytes as f64 * 1e6 / n as f64 / (1024.0 * 1024.0),
        reload.as_secs_f64(),
        reload.as_nanos() as f64 / n as f64
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}
