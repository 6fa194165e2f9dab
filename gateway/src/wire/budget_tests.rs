use super::*;

const MAX: usize = 512 * 1024;

#[test]
fn a_body_announcing_the_limit_holds_only_a_first_buffer_for_ten_bytes() {
    let budget = BodyBudget::new(usize::MAX);
    let mut body = BodyBuffer::new(&budget, Some(MAX), MAX);
    assert_eq!((body.charged(), budget.held()), (0, 0), "nothing before the first byte");
    body.push(b"{\"batch\":[").expect("room");
    assert_eq!(body.charged(), FIRST_BUFFER_BYTES);
    assert_eq!(budget.held(), FIRST_BUFFER_BYTES, "not the announced {MAX}");
}

#[test]
fn the_buffer_doubles_with_what_arrived_and_ends_at_the_announced_length() {
    let budget = BodyBudget::new(usize::MAX);
    let declared = 100_000;
    let mut body = BodyBuffer::new(&budget, Some(declared), MAX);
    let mut charges = Vec::new();
    for _ in 0..10 {
        body.push(&[b' '; 10_000]).expect("room");
        charges.push(body.charged());
    }
    assert_eq!(charges, [16384, 32768, 32768, 65536, 65536, 65536, 100_000, 100_000, 100_000, 100_000]);
    let bytes = body.finish();
    assert_eq!(bytes.len(), declared);
    assert_eq!(budget.held(), 0, "a finished body gives its charge back");
}

#[test]
fn a_small_announced_body_gets_one_exact_buffer() {
    let budget = BodyBudget::new(usize::MAX);
    let mut body = BodyBuffer::new(&budget, Some(300), MAX);
    body.push(&[b' '; 100]).expect("room");
    assert_eq!(body.charged(), 300);
}

#[test]
fn a_chunked_body_grows_to_its_limit_and_not_one_byte_past() {
    let budget = BodyBudget::new(usize::MAX);
    let mut body = BodyBuffer::new(&budget, None, 40_000);
    body.push(&[b' '; 39_999]).expect("room");
    body.push(b" ").expect("exactly the limit");
    assert_eq!(body.charged(), 40_000);
    assert_eq!(body.push(b" "), Err(Refused::TooLarge));
}

#[test]
fn the_budget_takes_bodies_up_to_exactly_its_limit_and_refuses_one_byte_past() {
    let budget = BodyBudget::new(3 * FIRST_BUFFER_BYTES);
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut body = BodyBuffer::new(&budget, Some(MAX), MAX);
        body.push(b"{").expect("room");
        held.push(body);
    }
    assert_eq!(budget.held(), budget.limit(), "exactly at the limit");
    let mut one_more = BodyBuffer::new(&budget, Some(1), MAX);
    assert_eq!(one_more.push(b"{"), Err(Refused::BudgetFull), "one byte past");
    drop(one_more);
    assert_eq!(budget.held(), budget.limit(), "a refused body charged nothing");
    held.pop();
    let mut next = BodyBuffer::new(&budget, Some(1), MAX);
    next.push(b"{").expect("room again once a body is gone");
    drop((held, next));
    assert_eq!(budget.held(), 0);
}

#[test]
fn a_body_that_cannot_grow_keeps_what_it_had_until_dropped() {
    let budget = BodyBudget::new(FIRST_BUFFER_BYTES + 1000);
    let mut body = BodyBuffer::new(&budget, None, MAX);
    body.push(&[b' '; FIRST_BUFFER_BYTES]).expect("room");
    assert_eq!(body.push(b" "), Err(Refused::BudgetFull), "doubling needs 16 KiB more");
    assert_eq!(budget.held(), FIRST_BUFFER_BYTES);
    drop(body);
    assert_eq!(budget.held(), 0);
}

#[test]
fn stream_slots_are_given_back_when_dropped() {
    let slots = StreamSlots::new(2);
    let (a, b) = (slots.acquire().expect("first"), slots.acquire().expect("second"));
    assert!(slots.acquire().is_none(), "a third past the limit of 2");
    drop(a);
    let c = slots.acquire().expect("room again");
    drop((b, c));
    assert_eq!(slots.open.load(Ordering::Relaxed), 0);
}
