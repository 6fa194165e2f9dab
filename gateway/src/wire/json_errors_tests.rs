//! The classification agrees with what serde_json's messages say, on every
//! kind of defect and near misses of each; the message text is read here,
//! in the test, only to prove the classification never needed it.

use super::*;
use crate::wire::{JsonLimits, parse};

const WIDE: JsonLimits = JsonLimits { max_depth: 16, max_string_bytes: 1024 };

/// The code the old message-matching rule gave.
fn by_message(error: &WireError) -> &'static str {
    let text = error.to_string();
    if text.contains("duplicate key") {
        "duplicate_key"
    } else if text.contains("surrogate") || text.contains("unicode code point") || text.contains("hex escape") {
        "invalid_unicode_escape"
    } else if text.contains("number out of range") || text.contains("not finite") {
        "number_out_of_range"
    } else {
        "malformed_json"
    }
}

const CORPUS: &[(&str, &str)] = &[
    (r#"{"a":"\udc00"}"#, "invalid_unicode_escape"),
    (r#"{"a":"\ud800"}"#, "invalid_unicode_escape"),
    (r#"{"a":"\ud800x"}"#, "invalid_unicode_escape"),
    (r#"{"a":"\ud800\n"}"#, "invalid_unicode_escape"),
    (r#"{"a":"\ud800\u0041"}"#, "invalid_unicode_escape"),
    (r#"{"a":"\ud800\ud800"}"#, "invalid_unicode_escape"),
    (r#"{"\udfff":1}"#, "invalid_unicode_escape"),
    ("{\n\"a\":\n[\"ok\",\n\"\\ud83d\\ude00\", \"\\udc00\"]}", "invalid_unicode_escape"),
    (r#"{"a":"\ud800\u12G4"}"#, "malformed_json"),
    (r#"{"a":"\u12G4"}"#, "malformed_json"),
    (r#"{"a":"\ud800"#, "malformed_json"),
    (r#"{"a":"\ud800\"#, "malformed_json"),
    (r#"{"a":"\x"}"#, "malformed_json"),
    (r#"{"a" 1, "b":"\ud800"}"#, "malformed_json"),
    (r#"{"a" 1, "b":1e400}"#, "malformed_json"),
    (r#"{"a":1e400}"#, "number_out_of_range"),
    (r#"{"a":-1e400}"#, "number_out_of_range"),
    (r#"[1, 2.5e308]"#, "number_out_of_range"),
    (r#"[1e400-]"#, "number_out_of_range"),
    ("[\n1e99999999999]", "number_out_of_range"),
    (r#"[1e308, 01]"#, "malformed_json"),
    (r#"[1.]"#, "malformed_json"),
    (r#"[1e]"#, "malformed_json"),
    (r#"[-]"#, "malformed_json"),
    (r#"[1x]"#, "malformed_json"),
    (r#"{"a":1,"a":2}"#, "duplicate_key"),
    (r#"{"b":{"a":[1e300],"a":2}}"#, "duplicate_key"),
    (r#"{"a":1} x"#, "malformed_json"),
    (r#"{"a":"\ud83d\ude00"} x"#, "malformed_json"),
    (r#""#, "malformed_json"),
    (r#"{"a":tru}"#, "malformed_json"),
];

#[test]
fn codes_match_what_serde_json_says_without_reading_it() {
    for (body, want) in CORPUS {
        let error = parse(body.as_bytes(), WIDE).expect_err(body);
        assert_eq!(error.code(), *want, "{body}: {error}");
        assert_eq!(by_message(&error), *want, "the corpus itself is right: {body}: {error}");
    }
}

#[test]
fn offsets_follow_lines_and_columns() {
    let body = b"ab\ncd\n\nef";
    assert_eq!(offset(body, 1, 0), 0);
    assert_eq!(offset(body, 1, 2), 2);
    assert_eq!(offset(body, 2, 1), 4);
    assert_eq!(offset(body, 4, 2), 9);
    assert_eq!(offset(body, 9, 9), body.len(), "past the end is the end");
}

#[test]
fn numbers_are_read_by_the_json_grammar() {
    for (literal, well_formed) in
        [("0", true), ("-0.5e+3", true), ("12", true), ("1.", false), ("-", false), ("1e", false), ("1E-", false)]
    {
        let body = format!("{literal}]");
        assert_eq!(number_end(body.as_bytes(), 0), (literal.len(), well_formed), "{literal}");
    }
    assert_eq!(number_end(b"01", 0), (1, true), "a leading zero ends the number");
}
