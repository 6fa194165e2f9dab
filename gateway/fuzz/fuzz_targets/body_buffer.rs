//! Raw bytes as a body's limit, announced length, budget and chunks as
//! they arrive (issue 28, item 1): never a panic; the buffer holds at most
//! twice what arrived (or a first buffer) and never more than the limit;
//! the budget is never passed; what arrived comes back whole; every charge
//! is given back.
#![no_main]

use gateway::wire::{BodyBudget, BodyBuffer, FIRST_BUFFER_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<6>() else { return };
    let word = |i: usize| usize::from(u16::from_le_bytes([head[i], head[i + 1]]));
    let limit = word(0) + 1;
    let declared = (word(2) <= limit).then(|| word(2));
    let budget = BodyBudget::new(word(4) * 4);
    let mut body = BodyBuffer::new(&budget, declared, limit);
    let mut arrived = Vec::new();
    // Each chunk is a length byte and that many bytes.
    let mut rest = rest;
    while let Some((&len, tail)) = rest.split_first() {
        let chunk = &tail[..usize::from(len).min(tail.len())];
        rest = &tail[chunk.len()..];
        if body.push(chunk).is_ok() {
            arrived.extend_from_slice(chunk);
        }
        assert_eq!(budget.held(), body.charged());
        assert!(budget.held() <= budget.limit() && body.charged() <= limit);
        assert!(body.charged() <= (2 * arrived.len()).max(FIRST_BUFFER_BYTES));
    }
    assert_eq!(body.finish(), arrived);
    assert_eq!(budget.held(), 0);
});
