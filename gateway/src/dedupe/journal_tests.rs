use std::time::{Duration, Instant};

use super::*;
use crate::dedupe::memory::MemoryStore;
use crate::dedupe::{Claim, Store as _};

const HOUR_MS: u64 = 3_600_000;
const NOW: u64 = 1_800_000_000_000;
/// Bytes before a frame's payload.
const HEADER: usize = ID_LOG.head();

fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eventgw-journal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn ids(prefix: &str, n: usize, token: u64) -> Vec<Reservation> {
    (0..n)
        .map(|i| Reservation {
            id: EventId { source: "web".into(), message_id: format!("{prefix}-{i}") },
            fingerprint: 9,
            token,
            topic: "web.tracking".into(),
        })
        .collect()
}

/// Opens the log at `now_ms`; returns it, what it found, and the confirmed ids read back.
fn open(dir: &Path, now_ms: u64) -> (Journal, Replay, Vec<String>) {
    let mut confirmed = Vec::new();
    let (journal, replay) = Journal::open(dir, 24 * HOUR_MS, HOUR_MS, 1000, now_ms, |_, ids| {
        confirmed.extend(ids.iter().map(|(id, _)| id.message_id.clone()));
    })
    .expect("opens");
    (journal, replay, confirmed)
}

fn in_doubt(replay: &Replay) -> Vec<String> {
    let mut ids: Vec<String> = replay.in_doubt.iter().map(|d| d.id.message_id.clone()).collect();
    ids.sort();
    ids
}

#[test]
fn confirmed_ids_come_back_and_unsettled_reservations_are_in_doubt() {
    let dir = dir("roundtrip");
    let (mut j, replay, confirmed) = open(&dir, NOW);
    assert_eq!((replay.records, confirmed.len()), (0, 0));
    let (stored, cut, failed) = (ids("stored", 3, 1), ids("cut", 2, 2), ids("failed", 2, 3));
    j.append(Kind::Reserved, NOW, &stored);
    j.append(Kind::Reserved, NOW, &cut);
    j.append(Kind::Reserved, NOW, &failed);
    j.append(Kind::Confirmed, NOW + 5, &stored);
    j.append(Kind::Released, NOW + 5, &failed);
    drop(j);
    let (_, replay, confirmed) = open(&dir, NOW + 10);
    assert_eq!(confirmed, vec!["stored-0", "stored-1", "stored-2"]);
    assert_eq!(in_doubt(&replay), vec!["cut-0", "cut-1"]);
    assert_eq!(replay.in_doubt[0].topic, "web.tracking");
    assert_eq!((replay.records, replay.skipped_bytes), (5, 0));
}

#[test]
fn a_release_by_another_token_does_not_settle_a_reservation_but_the_in_doubt_token_does() {
    let dir = dir("tokens");
    let (mut j, _, _) = open(&dir, NOW);
    j.append(Kind::Reserved, NOW, &ids("a", 1, 5));
    j.append(Kind::Released, NOW, &ids("a", 1, 6));
    j.append(Kind::Reserved, NOW, &ids("b", 1, 7));
    j.append(Kind::Released, NOW, &ids("b", 1, 0));
    drop(j);
    let (_, replay, _) = open(&dir, NOW);
    assert_eq!(in_doubt(&replay), vec!["a-0"]);
}

#[test]
fn a_torn_tail_is_skipped_and_what_came_before_is_kept() {
    let dir = dir("torn");
    let (mut j, _, _) = open(&dir, NOW);
    j.append(Kind::Confirmed, NOW, &ids("whole", 2, 1));
    j.append(Kind::Confirmed, NOW, &ids("torn", 2, 1));
    drop(j);
    let (_, _, path) = list(&dir).expect("list").pop().expect("a file");
    let bytes = std::fs::read(&path).expect("read");
    std::fs::write(&path, &bytes[..bytes.len() - 3]).expect("truncate");
    let (_, replay, confirmed) = open(&dir, NOW);
    assert_eq!(confirmed, vec!["whole-0", "whole-1"]);
    assert!(replay.skipped_bytes > 0, "the torn frame was counted");
}

#[test]
fn a_damaged_frame_is_skipped_and_the_frames_after_it_are_read() {
    let dir = dir("damaged");
    let (mut j, _, _) = open(&dir, NOW);
    for name in ["first", "second", "third"] {
        j.append(Kind::Confirmed, NOW, &ids(name, 1, 1));
    }
    drop(j);
    let (_, _, path) = list(&dir).expect("list").pop().expect("a file");
    let mut bytes = std::fs::read(&path).expect("read");
    let len = |at: usize| {
        HEADER + usize::try_from(u32::from_le_bytes(bytes[at + 1..at + 5].try_into().expect("4"))).expect("len")
    };
    let first = len(0);
    let second = len(first);
    bytes[first + HEADER + 3] ^= 0xFF; // inside the second frame's payload
    std::fs::write(&path, &bytes).expect("write");
    let (_, replay, confirmed) = open(&dir, NOW);
    assert_eq!(confirmed, vec!["first-0", "third-0"]);
    assert_eq!(replay.skipped_bytes, second as u64, "exactly the second frame");
}

#[test]
fn one_process_per_directory() {
    let dir = dir("lock");
    let (_held, _, _) = open(&dir, NOW);
    let second = Journal::open(&dir, HOUR_MS, HOUR_MS, 10, NOW, |_, _| {});
    assert!(second.is_err_and(|e| e.0.contains("locked by another gateway process")));
}

#[test]
fn files_are_cut_by_time_and_ids_and_deleted_once_older_than_the_window() {
    let dir = dir("rotate");
    let (mut j, _, _) = open(&dir, NOW);
    j.append(Kind::Confirmed, NOW, &ids("a", 1000, 1));
    j.append(Kind::Confirmed, NOW + 1, &ids("b", 1, 1)); // the first file holds 1000: cut
    assert_eq!(j.files(), 2);
    j.append(Kind::Confirmed, NOW + HOUR_MS + 1, &ids("c", 1, 1)); // an hour on: cut
    assert_eq!(j.files(), 3);
    // A window after "b" was written, the two files up to it are deleted.
    j.append(Kind::Confirmed, NOW + 25 * HOUR_MS + 2, &ids("d", 1, 1));
    assert_eq!(j.files(), 2);
    assert_eq!(list(&dir).expect("list").len(), 2);
    drop(j);
    let (_, _, confirmed) = open(&dir, NOW + 25 * HOUR_MS + 3);
    assert_eq!(confirmed, vec!["d-0"], "c is older than the window");
}

#[test]
fn the_memory_store_survives_a_crash_and_holds_ids_in_doubt_until_settled() {
    let dir = dir("store");
    let day = Duration::from_secs(86_400);
    let ttl = Duration::from_secs(20);
    let (store, doubt) = MemoryStore::open(day, 1000, ttl, &dir).expect("opens");
    assert!(doubt.is_empty());
    let (stored, cut, failed) = (ids("stored", 2, 1), ids("cut", 2, 2), ids("failed", 1, 3));
    let now = Instant::now();
    for batch in [&stored, &cut, &failed] {
        assert_eq!(store.reserve_at(batch, now), vec![Claim::New; batch.len()]);
    }
    store.confirm_at(&stored, now);
    store.release_now(&failed);
    drop(store); // the process dies: "cut" never settled
    let (store, doubt) = MemoryStore::open(day, 1000, ttl, &dir).expect("reopens");
    assert_eq!(store.held(), Some(2));
    let retry = |prefix: &str, n: usize| store.reserve_at(&ids(prefix, n, 9), Instant::now());
    assert_eq!(retry("stored", 2), vec![Claim::Stored(9); 2], "a retry of a stored id is a duplicate");
    assert_eq!(retry("cut", 2), vec![Claim::Pending; 2], "a retry of an id in doubt waits");
    assert_eq!(retry("failed", 1), vec![Claim::New], "a retry of a released id is produced");
    store.release_now(&ids("failed", 1, 9));
    assert_eq!(doubt.len(), 2);
    let (found, missing) = doubt.split_at(1);
    store.settle_in_doubt(found, missing);
    assert_eq!(retry("cut", 2), vec![Claim::Stored(9), Claim::New], "found in Kafka: duplicate; missing: produced");
    drop(store);
    // Settled in the log too: nothing is in doubt after the next restart.
    let (_, doubt) = MemoryStore::open(day, 1000, ttl, &dir).expect("reopens");
    assert_eq!(
        doubt.iter().map(|d| d.id.message_id.as_str()).collect::<Vec<_>>(),
        vec!["cut-1"],
        "only the retry reserved above"
    );
}

/// A file laid out by hand as the id log wrote it before the storage
/// module existed (no header; magic byte, length, CRC-32, payload): read.
#[test]
fn a_file_of_the_previous_version_still_reads() {
    let dir = dir("previous");
    std::fs::create_dir_all(&dir).expect("dir");
    let mut payload = vec![b'C'];
    payload.extend_from_slice(&NOW.to_le_bytes());
    payload.extend_from_slice(&1u64.to_le_bytes());
    payload.extend_from_slice(&1u32.to_le_bytes());
    payload.extend_from_slice(&9u32.to_le_bytes());
    for text in ["web", "old-0", ""] {
        payload.extend_from_slice(&(text.len() as u16).to_le_bytes());
        payload.extend_from_slice(text.as_bytes());
    }
    let mut old = vec![0xE7];
    old.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    old.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    old.extend_from_slice(&payload);
    let mut ours = Vec::new();
    encode(&mut ours, Kind::Confirmed, NOW, &ids("old", 1, 1));
    assert_eq!(ours, old, "the same bytes as before");
    std::fs::write(segment_path(&dir, 1, NOW), &old).expect("write");
    let (_, replay, confirmed) = open(&dir, NOW + 1);
    assert_eq!((confirmed, replay.skipped_bytes), (vec!["old-0".to_owned()], 0));
}
