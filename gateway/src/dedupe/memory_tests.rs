use std::time::{Duration, Instant};

use super::*;
use crate::dedupe::EventId;

const HOUR: Duration = Duration::from_secs(3600);

fn id(source: &str, message_id: &str, token: u64) -> Reservation {
    Reservation {
        id: EventId { source: source.into(), message_id: message_id.into() },
        fingerprint: 7,
        token,
        topic: "web.tracking".into(),
    }
}

fn store(max_ids: usize) -> MemoryStore {
    MemoryStore::new(24 * HOUR, max_ids, Duration::from_secs(20))
}

#[test]
fn reserve_confirm_then_duplicate() {
    let s = store(1000);
    let now = Instant::now();
    let a = id("web", "0190c5a8-0000-7000-8000-000000000001", 1);
    assert_eq!(s.reserve_at(std::slice::from_ref(&a), now), vec![Claim::New]);
    assert_eq!(s.reserve_at(&[id("web", &a.id.message_id, 2)], now), vec![Claim::Pending]);
    s.confirm_at(std::slice::from_ref(&a), now);
    assert_eq!(s.reserve_at(&[id("web", &a.id.message_id, 3)], now), vec![Claim::Stored(7)]);
    assert_eq!(s.held(), Some(1));
}

#[test]
fn released_id_is_new_again_and_only_its_token_releases() {
    let s = store(1000);
    let now = Instant::now();
    let a = id("web", "m-1", 1);
    assert_eq!(s.reserve_at(std::slice::from_ref(&a), now), vec![Claim::New]);
    s.release_now(&[id("web", "m-1", 99)]);
    assert_eq!(s.reserve_at(&[id("web", "m-1", 2)], now), vec![Claim::Pending], "another token cannot release it");
    s.release_now(&[a]);
    assert_eq!(s.reserve_at(&[id("web", "m-1", 2)], now), vec![Claim::New]);
}

#[test]
fn ids_are_per_source_and_exact() {
    let s = store(1000);
    let now = Instant::now();
    let upper = "0190C5A8-0000-7000-8000-000000000001";
    let lower = upper.to_lowercase();
    let all = [id("web", &lower, 1), id("app", &lower, 1), id("web", upper, 1), id("web", &lower[..35], 1)];
    assert_eq!(s.reserve_at(&all, now), vec![Claim::New; 4]);
    s.confirm_at(&all, now);
    assert_eq!(s.held(), Some(4));
    assert_eq!(s.reserve_at(&[id("web", "0190c5a8-0000-7000-8000-000000000002", 2)], now), vec![Claim::New]);
}

#[test]
fn an_id_is_kept_for_the_whole_window_and_forgotten_after() {
    let s = store(1000);
    let start = Instant::now();
    let a = id("web", "m-1", 1);
    s.reserve_at(std::slice::from_ref(&a), start);
    s.confirm_at(std::slice::from_ref(&a), start);
    let last_moment = start + 24 * HOUR - Duration::from_secs(1);
    assert_eq!(s.reserve_at(&[id("web", "m-1", 2)], last_moment), vec![Claim::Stored(7)]);
    // At most one slice (window / 16 = 90 min) beyond the window.
    let past = start + 24 * HOUR + 90 * Duration::from_secs(60) + Duration::from_secs(1);
    assert_eq!(s.reserve_at(&[id("web", "m-1", 3)], past), vec![Claim::New]);
    assert_eq!(s.held(), Some(0));
}

#[test]
fn past_max_ids_the_oldest_slice_is_evicted_and_counted() {
    let max = 64; // slices of 4 ids
    let s = store(max);
    let now = Instant::now();
    let ids: Vec<_> = (0..=max).map(|n| id("web", &format!("m-{n}"), 1)).collect();
    for r in &ids {
        s.reserve_at(std::slice::from_ref(r), now);
        s.confirm_at(std::slice::from_ref(r), now);
    }
    assert_eq!(s.evicted(), 4);
    assert_eq!(s.held(), Some(max + 1 - 4));
    assert_eq!(s.reserve_at(&[id("web", "m-0", 2)], now), vec![Claim::New], "evicted early");
    assert_eq!(s.reserve_at(&[id("web", "m-4", 2)], now), vec![Claim::Stored(7)], "the next slice stays");
}

#[test]
fn a_lapsed_reservation_does_not_block_for_ever() {
    let s = store(1000);
    let now = Instant::now();
    s.reserve_at(&[id("web", "m-1", 1)], now);
    assert_eq!(s.reserve_at(&[id("web", "m-1", 2)], now + Duration::from_secs(21)), vec![Claim::New]);
}

#[test]
fn an_extended_reservation_outlives_its_ttl_and_only_its_token_extends() {
    let s = store(1000);
    let now = Instant::now();
    s.reserve_at(&[id("web", "m-1", 1)], now);
    assert_eq!(s.extend_at(&[id("web", "m-1", 2)], now + Duration::from_secs(15)), 1, "another token's: lost");
    assert_eq!(s.reserve_at(&[id("web", "m-1", 3)], now + Duration::from_secs(21)), vec![Claim::New], "not extended");
    let t = now + Duration::from_secs(100);
    s.reserve_at(&[id("web", "m-2", 1)], t);
    assert_eq!(s.extend_at(&[id("web", "m-2", 1)], t + Duration::from_secs(15)), 0, "its own: kept");
    assert_eq!(s.reserve_at(&[id("web", "m-2", 3)], t + Duration::from_secs(30)), vec![Claim::Pending]);
}
