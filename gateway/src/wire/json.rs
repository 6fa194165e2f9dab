//! Strict JSON for hostile input. A byte scan runs first and refuses, before
//! any allocation, documents nested too deep or holding strings or numbers
//! too long; then a parser that refuses duplicate keys and non-finite
//! numbers builds the value. Each refusal has its own error code.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::error::ApiError;

/// Longest number literal accepted; longer ones cannot be represented
/// faithfully by any consumer anyway.
pub const MAX_NUMBER_CHARS: usize = 40;

/// The parser-level limits, from configuration.
#[derive(Debug, Clone, Copy)]
pub struct JsonLimits {
    /// Deepest nesting of objects and arrays.
    pub max_depth: usize,
    /// Longest string (key or value) in bytes, as written (escapes count).
    pub max_string_bytes: usize,
}

/// Parses `body` as one JSON value under `limits`.
pub fn parse(body: &[u8], limits: JsonLimits) -> Result<Value, ApiError> {
    if let Err(e) = std::str::from_utf8(body) {
        return Err(ApiError::InvalidUtf8(e.valid_up_to()));
    }
    scan(body, limits)?;
    // The scan capped nesting at `max_depth`, which configuration keeps
    // under serde_json's own recursion limit of 128.
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = StrictValue.deserialize(&mut de).and_then(|v| de.end().map(|()| v)).map_err(classify)?;
    Ok(value)
}

fn classify(error: serde_json::Error) -> ApiError {
    let text = error.to_string();
    if text.contains("duplicate key") {
        ApiError::DuplicateKey(text)
    } else if text.contains("surrogate") || text.contains("unicode code point") || text.contains("hex escape") {
        ApiError::InvalidUnicodeEscape(text)
    } else if text.contains("number out of range") || text.contains("not finite") {
        ApiError::NumberOutOfRange(text)
    } else {
        ApiError::MalformedJson(text)
    }
}

/// Checks nesting depth, string length and number length in one pass over
/// the bytes, without building anything.
fn scan(body: &[u8], limits: JsonLimits) -> Result<(), ApiError> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'{' | b'[' => {
                depth += 1;
                if depth > limits.max_depth {
                    return Err(ApiError::TooDeep { limit: limits.max_depth });
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let start = i + 1;
                i = start;
                while i < body.len() && body[i] != b'"' {
                    i += if body[i] == b'\\' { 2 } else { 1 };
                }
                if i.min(body.len()) - start > limits.max_string_bytes {
                    return Err(ApiError::StringTooLong { limit: limits.max_string_bytes });
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i + 1 < body.len() && matches!(body[i + 1], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                    i += 1;
                }
                if i + 1 - start > MAX_NUMBER_CHARS {
                    return Err(ApiError::NumberOutOfRange(format!(
                        "a number literal is longer than {MAX_NUMBER_CHARS} characters"
                    )));
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Builds a `serde_json::Value`, refusing duplicate object keys.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
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
        Number::from_f64(v).map(Value::Number).ok_or_else(|| E::custom("number not finite"))
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
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(A::Error::custom(format!("duplicate key `{key}`")));
            }
            let value = map.next_value_seed(StrictValue)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: JsonLimits = JsonLimits { max_depth: 4, max_string_bytes: 8 };

    fn code(body: &str) -> &'static str {
        parse(body.as_bytes(), LIMITS).expect_err("refused").code()
    }

    fn wide_code(body: &str) -> &'static str {
        parse(body.as_bytes(), JsonLimits { max_depth: 4, max_string_bytes: 64 }).expect_err("refused").code()
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
    fn hostile_documents_get_their_own_codes() {
        assert_eq!(code(r#"{"a":1,"a":2}"#), "duplicate_key");
        assert_eq!(code(r#"{"a":"\ud800"}"#), "invalid_unicode_escape");
        assert_eq!(code(r#"{"a":"\udc00"}"#), "invalid_unicode_escape");
        assert_eq!(wide_code(r#"{"a":"\ud800\u0041"}"#), "invalid_unicode_escape");
        let wide = JsonLimits { max_depth: 4, max_string_bytes: 64 };
        assert!(parse(br#"{"a":"\ud83d\ude00"}"#, wide).is_ok(), "a surrogate pair is fine");
        assert_eq!(code(r#"{"a":1e400}"#), "number_out_of_range");
        assert_eq!(code(&format!(r#"{{"a":{}}}"#, "9".repeat(41))), "number_out_of_range");
        assert!(parse(format!(r#"{{"a":{}}}"#, "9".repeat(40)).as_bytes(), LIMITS).is_ok());
        assert_eq!(parse(b"{\"a\":\"\xff\"}", LIMITS).expect_err("utf8").code(), "invalid_utf8");
        assert_eq!(code(r#"{"a":1} x"#), "malformed_json");
    }
}
