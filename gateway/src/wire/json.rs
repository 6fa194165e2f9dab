//! Strict JSON for hostile input. A byte scan runs first and refuses, before
//! any allocation, documents nested too deep or holding strings or numbers
//! too long, and integers no 64-bit type holds; then a parser that refuses
//! duplicate keys and non-finite numbers builds the value. Each refusal has
//! its own error code.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use smallvec::SmallVec;

use super::WireError;
use super::json_errors::{self as errors, Strictness};
use crate::compact;

/// Longest number literal accepted; longer ones cannot be represented
/// faithfully by any consumer anyway.
pub const MAX_NUMBER_CHARS: usize = 40;

/// The parser-level limits, from configuration.
#[derive(Debug, Clone, Copy)]
pub struct JsonLimits {
    /// Deepest nesting of objects and arrays.
    pub max_depth: usize,
    /// Longest string (key or value) in bytes once decoded (UTF-8): `\n`
    /// counts one byte, `\u00e9` two, as they will be stored.
    pub max_string_bytes: usize,
}

impl crate::config::LimitsConfig {
    /// The parser-level part (defined here so that `config` needs nothing of `wire`).
    pub fn json(&self) -> JsonLimits {
        JsonLimits { max_depth: self.max_json_depth, max_string_bytes: self.max_string_bytes }
    }
}

/// Parses `body` as one JSON value under `limits`.
pub fn parse(body: &[u8], limits: JsonLimits) -> Result<Value, WireError> {
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        Err(e) => return Err(WireError::InvalidUtf8(e.valid_up_to())),
    };
    scan(body, limits)?;
    // The scan capped nesting at `max_depth`, which configuration keeps
    // under serde_json's own recursion limit of 128. Read from the text,
    // checked once above, so serde_json does not check each string again.
    let refusal = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = StrictValue(&refusal, 0).deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    parsed.map_err(|error| errors::classify(body, &error, refusal.take()))
}

/// Checks nesting depth, string length and number length in one pass over
/// the bytes, without building anything.
fn scan(body: &[u8], limits: JsonLimits) -> Result<(), WireError> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'{' | b'[' => {
                depth += 1;
                if depth > limits.max_depth {
                    return Err(WireError::TooDeep { limit: limits.max_depth });
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let (end, decoded) = string_end(body, i + 1);
                if decoded > limits.max_string_bytes {
                    return Err(WireError::StringTooLong { limit: limits.max_string_bytes });
                }
                i = end;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i + 1 < body.len() && matches!(body[i + 1], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                    i += 1;
                }
                check_number(&body[start..=i])?;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Where the string starting at `start` (after its quote) ends (its closing
/// quote, or the end of the body) and its length once decoded, in bytes.
fn string_end(body: &[u8], start: usize) -> (usize, usize) {
    let (mut i, mut decoded) = (start, 0usize);
    while i < body.len() && body[i] != b'"' {
        if body[i] != b'\\' {
            // This byte and the run after it that holds no quote, backslash
            // or control character (checked eight bytes at a time).
            let next = compact::plain_until(body, i + 1);
            decoded += next - i;
            i = next;
            continue;
        }
        match body.get(i + 1) {
            Some(b'u') => {
                let code = body.get(i + 2..i + 6).and_then(|h| std::str::from_utf8(h).ok());
                decoded += match code.and_then(|h| u32::from_str_radix(h, 16).ok()) {
                    // Each half of a surrogate pair stands for two of the
                    // four bytes of its character; a lone half is refused by
                    // the parser.
                    Some(0xD800..=0xDFFF) => 2,
                    Some(c) => char::from_u32(c).map_or(1, char::len_utf8),
                    None => 1,
                };
                i += 6;
            }
            _ => {
                i += 2;
                decoded += 1;
            }
        }
    }
    (i, decoded)
}

/// Refuses number literals too long to be faithful, and integers beyond 64
/// bits: without this they would silently become floats (`9…9` stored as
/// `1e40`). Such numbers belong in strings.
fn check_number(literal: &[u8]) -> Result<(), WireError> {
    if literal.len() > MAX_NUMBER_CHARS {
        return Err(WireError::NumberOutOfRange(format!(
            "a number literal is longer than {MAX_NUMBER_CHARS} characters"
        )));
    }
    if literal.iter().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        return Ok(());
    }
    let text = std::str::from_utf8(literal).unwrap_or_default();
    let digits = text.strip_prefix('-').unwrap_or(text);
    let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    // Not a well-formed integer at all: the parser reports what is wrong.
    if !integer || text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok() {
        return Ok(());
    }
    Err(WireError::NumberOutOfRange(format!(
        "the integer {text} does not fit in 64 bits (from {} to {}); send it as a string",
        i64::MIN,
        u64::MAX
    )))
}

/// Builds a `serde_json::Value`, refusing duplicate object keys and
/// non-finite numbers; why it refused is left in the cell, so the error is
/// classified without reading serde_json's message. The second field is
/// the nesting depth of the value it reads (0 for the document).
#[derive(Clone, Copy)]
struct StrictValue<'a>(&'a Cell<Option<Strictness>>, u8);

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v).map(Value::Number).ok_or_else(|| {
            self.0.set(Some(Strictness::NotFinite));
            E::custom("number not finite")
        })
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element_seed(self.deeper())? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        // Small objects (most of an event's) are gathered on the stack and
        // moved into a map of their exact size: no growth, no rehash, and a
        // duplicate is found by comparing a handful of keys.
        let mut small: SmallVec<[(String, Value); SMALL_OBJECT]> = SmallVec::new();
        while let Some(key) = map.next_key::<String>()? {
            if small.iter().any(|(taken, _)| *taken == key) {
                return Err(self.duplicate(&key));
            }
            let value = map.next_value_seed(self.deeper())?;
            small.push((key, value));
            if small.len() == SMALL_OBJECT {
                let mut object = Map::with_capacity(2 * SMALL_OBJECT + self.room());
                object.extend(small.drain(..));
                return self.rest_of_map(map, object);
            }
        }
        let mut object = Map::with_capacity(small.len() + self.room());
        object.extend(small);
        Ok(Value::Object(object))
    }
}

/// Objects with up to this many keys are gathered on the stack first.
const SMALL_OBJECT: usize = 12;

/// Room left in the objects that can be events for the entries admission
/// adds, so that adding them neither moves the map's entries nor rebuilds
/// its table: `receivedAt` and `originalTimestamp` (the corrected
/// `timestamp` takes the place of the removed one), and two of `context`,
/// `messageId` and `userId` when the client sent none.
const ENRICHMENT_ROOM: usize = 4;

/// The deepest an event can be: the document itself, or an element of an
/// array in it (`{"batch": [event, ...]}`).
const EVENT_DEPTH: u8 = 2;

impl StrictValue<'_> {
    /// The same, for a value nested one level deeper.
    fn deeper(self) -> Self {
        Self(self.0, self.1.saturating_add(1))
    }

    /// Room beyond its own entries for an object at this depth
    /// ([`ENRICHMENT_ROOM`] where it can be an event).
    fn room(self) -> usize {
        if self.1 <= EVENT_DEPTH { ENRICHMENT_ROOM } else { 0 }
    }

    /// Reads the rest of a large object into `object`, one hash per key:
    /// the vacant slot is held while the value is read.
    fn rest_of_map<'de, A: MapAccess<'de>>(
        self,
        mut map: A,
        mut object: Map<String, Value>,
    ) -> Result<Value, A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            let slot = match object.entry(key) {
                serde_json::map::Entry::Vacant(slot) => slot,
                serde_json::map::Entry::Occupied(taken) => return Err(self.duplicate(taken.key())),
            };
            slot.insert(map.next_value_seed(self.deeper())?);
        }
        Ok(Value::Object(object))
    }

    fn duplicate<E: serde::de::Error>(self, key: &str) -> E {
        self.0.set(Some(Strictness::DuplicateKey));
        E::custom(format!("duplicate key `{key}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: JsonLimits = JsonLimits { max_depth: 4, max_string_bytes: 8 };

    fn code(body: &str) -> &'static str {
        parse(body.as_bytes(), LIMITS).expect_err("refused").code().as_str()
    }

    fn wide_code(body: &str) -> &'static str {
        parse(body.as_bytes(), JsonLimits { max_depth: 4, max_string_bytes: 64 }).expect_err("refused").code().as_str()
    }

    #[test]
    fn depth_limit_is_exact() {
        assert!(parse(br#"{"a":[{"b":[1]}]}"#, LIMITS).is_ok(), "depth 4");
        assert_eq!(code(r#"{"a":[{"b":[[1]]}]}"#), "json_too_deep");
        assert!(parse(br#"{"a":"[[[[[[["}"#, LIMITS).is_ok(), "brackets in strings do not nest");
    }

    #[test]
    fn string_limit_is_exact_and_counts_keys() {
        assert!(parse(br#"{"k":"12345678"}"#, LIMITS).is_ok());
        assert_eq!(code(r#"{"k":"123456789"}"#), "string_too_long");
        assert_eq!(code(r#"{"123456789":1}"#), "string_too_long");
        assert!(parse(br#"{"k":"1234\"67"}"#, LIMITS).is_ok(), "escaped quotes do not end a string");
    }

    #[test]
    fn string_limit_counts_decoded_bytes() {
        assert!(parse(br#"{"k":"\n\n\n\n\n\n\n\n"}"#, LIMITS).is_ok(), "8 decoded bytes, 16 written");
        assert_eq!(code(r#"{"k":"\n\n\n\n\n\n\n\n\n"}"#), "string_too_long");
        assert!(parse(br#"{"k":"\u00e9\u00e9\u00e9\u00e9"}"#, LIMITS).is_ok(), "4 x 2 bytes");
        assert_eq!(code(r#"{"k":"\u00e9\u00e9\u00e9\u00e9x"}"#), "string_too_long");
        assert!(parse(br#"{"k":"\ud83d\ude00\u20ac\u0041"}"#, LIMITS).is_ok(), "4 + 3 + 1 bytes");
        assert_eq!(code(r#"{"k":"\ud83d\ude00\u20ac\u0041x"}"#), "string_too_long");
        assert!(parse("{\"k\":\"\u{e9}\u{e9}\u{e9}\u{e9}\"}".as_bytes(), LIMITS).is_ok(), "raw UTF-8 counts its bytes");
        assert_eq!(code("{\"k\":\"\u{e9}\u{e9}\u{e9}\u{e9}x\"}"), "string_too_long");
    }

    #[test]
    fn integers_beyond_64_bits_are_refused_and_64_bit_extremes_kept() {
        let wide = JsonLimits { max_depth: 4, max_string_bytes: 64 };
        for kept in ["18446744073709551615", "-9223372036854775808", "0", "-0", "1e30", "123456789012345678901234.5"] {
            let value = parse(format!(r#"{{"a":{kept}}}"#).as_bytes(), wide).unwrap_or_else(|e| panic!("{kept}: {e}"));
            assert!(value["a"].is_number(), "{kept}");
        }
        assert_eq!(parse(br#"{"a":18446744073709551615}"#, wide).expect("u64")["a"].as_u64(), Some(u64::MAX));
        for refused in ["18446744073709551616", "-9223372036854775809", &"9".repeat(40)] {
            assert_eq!(wide_code(&format!(r#"{{"a":{refused}}}"#)), "number_out_of_range", "{refused}");
        }
        assert_eq!(wide_code(r#"{"a":-}"#), "malformed_json");
        assert_eq!(wide_code(r#"{"a":01}"#), "malformed_json");
    }

    #[test]
    fn duplicates_are_found_in_small_and_large_objects_and_order_is_kept() {
        let wide = JsonLimits { max_depth: 4, max_string_bytes: 64 };
        for keys in [1, SMALL_OBJECT - 1, SMALL_OBJECT, SMALL_OBJECT + 1, 3 * SMALL_OBJECT] {
            let names: Vec<String> = (0..keys).map(|i| format!("k{}", keys - i)).collect();
            let body = format!("{{{}}}", names.iter().map(|k| format!("\"{k}\":1")).collect::<Vec<_>>().join(","));
            let value = parse(body.as_bytes(), wide).unwrap_or_else(|e| panic!("{keys} keys: {e}"));
            let order: Vec<&String> = value.as_object().expect("an object").keys().collect();
            assert_eq!(order, names.iter().collect::<Vec<_>>(), "{keys} keys keep their order");
            for twice in [0, keys - 1] {
                let again = format!("{{{},\"{}\":2}}", &body[1..body.len() - 1], names[twice]);
                let refused = parse(again.as_bytes(), wide).expect_err("a duplicate");
                assert_eq!(refused.code().as_str(), "duplicate_key", "{keys} keys, {} again", names[twice]);
            }
        }
    }

    #[test]
    fn the_deepest_configurable_nesting_parses_on_a_default_thread_stack() {
        // Each level holds a full stack-gathered object (`SMALL_OBJECT` keys).
        let limits = JsonLimits { max_depth: 120, max_string_bytes: 64 };
        let level: String = (0..SMALL_OBJECT - 1).map(|i| format!("\"k{i}\":{i},")).collect();
        let body = format!("{}1{}", format!("{{{level}\"deeper\":").repeat(119), "}".repeat(119));
        let parsed =
            std::thread::Builder::new().stack_size(2 << 20).spawn(move || parse(body.as_bytes(), limits).is_ok());
        assert!(parsed.expect("a thread").join().expect("no stack overflow"), "119 levels parse under a limit of 120");
    }

    #[test]
    fn hostile_documents_get_their_own_codes() {
        assert_eq!(code(r#"{"a":1,"a":2}"#), "duplicate_key");
        assert_eq!(code(r#"{"a":"\ud800"}"#), "invalid_unicode_escape");
        assert_eq!(code(r#"{"a":"\udc00"}"#), "invalid_unicode_escape");
        assert_eq!(wide_code(r#"{"a":"\ud800\u0041"}"#), "invalid_unicode_escape");
        let wide = JsonLimits { max_depth: 4, max_string_bytes: 64 };
        assert!(parse(br#"{"a":"\ud83d\ude00"}"#, wide).is_ok(), "a surrogate pair is fine");
        assert_eq!(code(r#"{"a":1e400}"#), "number_out_of_range");
        assert_eq!(code(&format!(r#"{{"a":{}}}"#, "9".repeat(41))), "number_out_of_range");
        // 40 characters is the limit; a 40-digit integer is refused for its
        // range (see below), so the literal at the limit is a decimal.
        assert!(parse(format!(r#"{{"a":{}.5}}"#, "9".repeat(38)).as_bytes(), LIMITS).is_ok());
        assert_eq!(parse(b"{\"a\":\"\xff\"}", LIMITS).expect_err("utf8").code(), "invalid_utf8");
        assert_eq!(code(r#"{"a":1} x"#), "malformed_json");
    }

    /// Text of any characters, and text crowded with what JSON escapes.
    fn any_text() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::prop_oneof![".{0,40}", r#"[\x00-\x1f"\\a-zé]{0,40}"#, proptest::prelude::any::<String>()]
    }

    proptest::proptest! {
        /// The scan measures a string as it will be stored, whatever it
        /// holds and wherever its escapes fall in the scan's eight-byte steps.
        #[test]
        fn the_string_limit_is_exact_for_any_text(text in any_text()) {
            let body = serde_json::json!({"k": text}).to_string();
            let exact = JsonLimits { max_depth: 4, max_string_bytes: text.len().max(1) };
            proptest::prop_assert!(parse(body.as_bytes(), exact).is_ok());
            if text.len() > 1 {
                let less = JsonLimits { max_string_bytes: text.len() - 1, ..exact };
                let refused = parse(body.as_bytes(), less).expect_err("one byte over");
                proptest::prop_assert_eq!(refused.code().as_str(), "string_too_long");
            }
        }
    }
}
