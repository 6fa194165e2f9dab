//! Raw bytes through the strict JSON parser and the batch decoder, with the
//! shipped default limits: never a panic; whatever parses stayed within the
//! depth limit and decodes to at most `max_batch_events` events.
#![no_main]

use gateway::config::LimitsConfig;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fuzz_target!(|body: &[u8]| {
    let limits = LimitsConfig::default();
    let Ok(value) = gateway::wire::parse(body, limits.json()) else { return };
    assert!(depth(&value) <= limits.max_json_depth, "the depth limit let a deeper document through");
    if let Ok(batch) = gateway::wire::decode_batch(value.clone(), &limits) {
        assert!(batch.events.len() <= limits.max_batch_events, "the batch-length limit let a longer batch through");
    }
    for kind in ["track", "identify", "alias"] {
        let _ = gateway::wire::decode_single(value.clone(), kind);
    }
});
