//! Which refusal a serde_json error is, decided from what serde_json states
//! (its [`Category`], line and column) and the gateway's own reading of the
//! bytes before that position, never from its message text, which may change
//! with any serde_json release.
//!
//! Everything before the position of a syntax error is well-formed JSON
//! (serde_json reads left to right), so the first lone surrogate escape or
//! out-of-range number found there is what serde_json stopped at.

use serde_json::error::Category;

use super::WireError;

/// Why the strict value builder (`json::StrictValue`) refused, recorded as
/// it refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strictness {
    /// An object repeats a key.
    DuplicateKey,
    /// A number that is not finite.
    NotFinite,
}

/// What the gateway finds before a syntax error's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// A `\u` escape that is half of a surrogate pair.
    LoneSurrogate,
    /// A well-formed number no `f64` holds.
    OutOfRange,
}

/// The refusal of `error`, raised parsing `body`; `strict` is what the
/// strict builder recorded, if it refused.
pub(super) fn classify(body: &[u8], error: &serde_json::Error, strict: Option<Strictness>) -> WireError {
    let text = error.to_string();
    match (strict, error.classify()) {
        (Some(Strictness::DuplicateKey), _) => WireError::DuplicateKey(text),
        (Some(Strictness::NotFinite), _) => WireError::NumberOutOfRange(text),
        (None, Category::Syntax) => match defect_before(body, offset(body, error.line(), error.column())) {
            Some(Defect::LoneSurrogate) => WireError::InvalidUnicodeEscape(text),
            Some(Defect::OutOfRange) => WireError::NumberOutOfRange(text),
            None => WireError::MalformedJson(text),
        },
        (None, Category::Eof | Category::Data | Category::Io) => WireError::MalformedJson(text),
    }
}

/// The byte offset of serde_json's `line` (from 1) and `column` (bytes
/// into the line).
fn offset(body: &[u8], line: usize, column: usize) -> usize {
    let start = if line <= 1 {
        0
    } else {
        body.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(line - 2).map_or(body.len(), |(i, _)| i + 1)
    };
    start.saturating_add(column).min(body.len())
}

/// The first defect starting before `end`, reading strings and numbers as
/// serde_json does.
fn defect_before(body: &[u8], end: usize) -> Option<Defect> {
    let (mut i, mut in_string) = (0, false);
    while i < end {
        match (in_string, body[i]) {
            (true, b'"') | (false, b'"') => {
                in_string = !in_string;
                i += 1;
            }
            (true, b'\\') if body.get(i + 1) == Some(&b'u') => match unicode_escape(body, i) {
                Ok(next) => i = next,
                Err(defect) => return Some(defect),
            },
            (true, b'\\') => i += 2,
            (false, b'-' | b'0'..=b'9') => {
                let (literal_end, well_formed) = number_end(body, i);
                if well_formed && serde_json::from_slice::<f64>(&body[i..literal_end]).is_err() {
                    return Some(Defect::OutOfRange);
                }
                i = literal_end;
            }
            _ => i += 1,
        }
    }
    None
}

/// Where the `\u` escape at `start` (and the trailing half of a pair) ends,
/// or [`Defect::LoneSurrogate`] where serde_json refuses it as a syntax
/// error. Escapes that are cut short or not hex are serde_json's own
/// `malformed_json` (not a defect): reading stops there.
fn unicode_escape(body: &[u8], start: usize) -> Result<usize, Defect> {
    let after = start + 6;
    match hex(body, start + 2) {
        Some(0xDC00..=0xDFFF) => Err(Defect::LoneSurrogate),
        Some(0xD800..=0xDBFF) => match (body.get(after), body.get(after + 1)) {
            (None, _) | (Some(b'\\'), None) => Ok(body.len()),
            (Some(b'\\'), Some(b'u')) => match hex(body, after + 2) {
                Some(0xDC00..=0xDFFF) => Ok(after + 6),
                Some(_) => Err(Defect::LoneSurrogate),
                None => Ok(body.len()),
            },
            _ => Err(Defect::LoneSurrogate),
        },
        Some(_) => Ok(after),
        None => Ok(body.len()),
    }
}

/// The four hex digits at `at`, if there are four.
fn hex(body: &[u8], at: usize) -> Option<u16> {
    let digits = body.get(at..at + 4)?;
    if !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u16::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// Where the number starting at `start` ends, and whether it is well formed
/// (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`).
fn number_end(body: &[u8], start: usize) -> (usize, bool) {
    let digits = |from: usize| from + body[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut i = start + usize::from(body[start] == b'-');
    let mut well_formed = match body.get(i) {
        Some(b'0') => {
            i += 1;
            true
        }
        Some(b'1'..=b'9') => {
            i = digits(i);
            true
        }
        _ => false,
    };
    if body.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        well_formed &= end > i + 1;
        i = end;
    }
    if matches!(body.get(i), Some(b'e' | b'E')) {
        let sign = i + 1 + usize::from(matches!(body.get(i + 1), Some(b'+' | b'-')));
        let end = digits(sign);
        well_formed &= end > sign;
        i = end;
    }
    (i.max(start + 1), well_formed)
}

#[cfg(test)]
#[path = "json_errors_tests.rs"]
mod tests;
