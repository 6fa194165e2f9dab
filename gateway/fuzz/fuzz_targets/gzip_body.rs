//! Raw bytes as a gzip body: never a panic, never more than the cap
//! inflated, and what inflates goes on through the JSON parser.
#![no_main]

use gateway::config::LimitsConfig;
use libfuzzer_sys::fuzz_target;

/// A small cap, so the fuzzer reaches the refusal with small inputs.
const CAP: usize = 64 * 1024;

fuzz_target!(|compressed: &[u8]| {
    let Ok(body) = gateway::wire::gunzip(compressed, CAP) else { return };
    assert!(body.len() <= CAP, "inflated {} bytes past the {CAP}-byte cap", body.len());
    let _ = gateway::wire::parse(&body, LimitsConfig::default().json());
});
