//! The pixel's query decodes to one `track` event, or to the code that says
//! what is wrong with it.

use base64::Engine;

use super::*;
use crate::stages::testing::state;

fn data(json: &str) -> String {
    format!("data={}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json))
}

#[test]
fn a_pixel_carries_one_track_event() {
    let (state, _) = state(|_| {});
    let batch = pixel(&data(r#"{"event":"Email Opened","userId":"u","writeKey":"k"}"#), &state).expect("decodes");
    assert_eq!(batch.events.len(), 1);
    assert_eq!(batch.events[0]["type"], "track");
    assert_eq!(batch.write_key.as_deref(), Some("k"));
}

#[test]
fn a_bad_pixel_says_why() {
    let (state, _) = state(|c| c.limits.max_body_bytes = 64);
    for (query, want) in [
        (String::new(), "invalid_pixel"),
        ("data=%%%".to_owned(), "invalid_pixel"),
        ("data=!!".to_owned(), "invalid_pixel"),
        (data("[1"), "malformed_json"),
        (data("[1]"), "invalid_body"),
        (format!("data={}", "A".repeat(65)), "body_too_large"),
    ] {
        assert_eq!(pixel(&query, &state).expect_err(&query).code(), want, "{query}");
    }
    assert!(pixel("data=e30", &state).is_ok(), "an empty object (base64url `e30`) is an event");
}
