//! Compact JSON of `serde_json` values: written and counted byte for byte
//! as `serde_json::to_writer` writes them, and read by key without hashing.
//!
//! Written without its serializer: every record is written once and every
//! event counted once, and `serde_json` escapes strings one byte at a time
//! through a `Serializer` and an `io::Write` per piece. Here a string's
//! bytes are checked eight at a time and copied in runs, which is most of
//! the difference (a record is mostly strings that need no escape).
//!
//! Read by key: [`entry`], [`entry_mut`] and [`field`] are the catalog's
//! (`eventgw_schemas::lookup`), which reads small maps without hashing.

use serde_json::{Map, Number, Value};

pub use eventgw_schemas::lookup::{entry, entry_mut, field};

/// Appends `value` as compact JSON.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(out, number),
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

/// Appends `map` as a compact JSON object.
pub fn write_object(out: &mut Vec<u8>, map: &Map<String, Value>) {
    out.push(b'{');
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, key);
        out.push(b':');
        write_value(out, value);
    }
    out.push(b'}');
}

/// Appends `text` as a JSON string, quoted and escaped.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut run = 0;
    loop {
        let at = plain_until(bytes, run);
        out.extend_from_slice(&bytes[run..at]);
        let Some(&byte) = bytes.get(at) else { break };
        out.extend_from_slice(escape_of(byte));
        run = at + 1;
    }
    out.push(b'"');
}

/// Appends `n` in decimal, as JSON writes an unsigned integer.
pub fn write_uint(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Length of `value` as compact JSON.
pub fn value_len(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(number) => number_len(number),
        Value::String(text) => str_len(text),
        // Brackets, and a comma between items.
        Value::Array(items) => 2 + items.len().saturating_sub(1) + items.iter().map(value_len).sum::<usize>(),
        Value::Object(map) => object_len(map),
    }
}

/// Length of `map` as a compact JSON object.
pub fn object_len(map: &Map<String, Value>) -> usize {
    // Braces, a comma between entries and a colon in each.
    let punctuation = 2 + map.len().saturating_sub(1) + map.len();
    punctuation + map.iter().map(|(key, value)| str_len(key) + value_len(value)).sum::<usize>()
}

/// Length of `text` as a JSON string, quotes and escapes included.
pub fn str_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    // Each escape stands for one byte.
    bytes.len() + 2 + escapes(bytes).map(|(_, escape)| escape.len().saturating_sub(1)).sum::<usize>()
}

/// A number as serde_json writes it (integers in decimal, floats in its
/// shortest form, a non-finite one as `null`): numbers are few in events,
/// and this keeps their text serde_json's by construction.
fn write_number(out: &mut Vec<u8>, number: &Number) {
    // Writing into a vector cannot fail.
    let _ = serde_json::to_writer(out, number);
}

/// Length of a number as serde_json writes it, counted without keeping the text.
fn number_len(number: &Number) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Counting cannot fail.
    let _ = serde_json::to_writer(&mut counter, number);
    counter.0
}

/// The first byte at or after `at` that a JSON string must escape (a
/// control character, `"` or `\`), or `bytes.len()`: where a string's
/// plain run ends, for writing it and for finding its end when reading.
///
/// Eight bytes at a time, the last few too: a string's tail of four to
/// seven bytes is read as two overlapping halves of a word, so the short
/// texts records are made of (keys, ids, names) are checked without a loop
/// over their bytes; only a tail under four bytes, or a word that holds a
/// byte to escape, is looked at byte by byte.
pub fn plain_until(bytes: &[u8], mut at: usize) -> usize {
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut eight = [0; 8];
        eight.copy_from_slice(chunk);
        let flagged = to_escape(u64::from_le_bytes(eight));
        if flagged != 0 {
            // The lowest flag is exact (a false one can only follow a true
            // one), and little-endian puts the first byte lowest.
            return at + (flagged.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    let rest = bytes.len().saturating_sub(at);
    if rest >= 4 {
        let (mut low, mut high) = ([0; 4], [0; 4]);
        low.copy_from_slice(&bytes[at..at + 4]);
        high.copy_from_slice(&bytes[bytes.len() - 4..]);
        let word = u64::from(u32::from_le_bytes(low)) | (u64::from(u32::from_le_bytes(high)) << 32);
        if to_escape(word) == 0 {
            return bytes.len();
        }
    }
    while let Some(&byte) = bytes.get(at) {
        if byte < 0x20 || byte == b'"' || byte == b'\\' {
            return at;
        }
        at += 1;
    }
    at
}

/// `word` with the high bit of each byte a JSON string must escape set (a
/// control character, `"` or `\`); 0 when none is. The lowest set bit is
/// exact; above it a byte may be flagged that needs no escape.
fn to_escape(word: u64) -> u64 {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    const SPACES: u64 = u64::from_le_bytes([0x20; 8]);
    const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
    // The bytes below `n` of `word`: a byte of 0x80 and above has its high
    // bit set in `word`, so `!word` clears it.
    let below = |word: u64, n: u64| word.wrapping_sub(n) & !word & HIGHS;
    below(word, SPACES) | below(word ^ QUOTES, ONES) | below(word ^ BACKSLASHES, ONES)
}

/// How serde_json escapes `byte` (one that [`plain_until`] stops at).
fn escape_of(byte: u8) -> &'static [u8] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // Every control character as `\u00XX`, built once.
    const CONTROLS: [[u8; 6]; 32] = {
        let mut all = [[0; 6]; 32];
        let mut byte = 0;
        while byte < 32 {
            all[byte] = [b'\\', b'u', b'0', b'0', HEX[byte >> 4], HEX[byte & 0xF]];
            byte += 1;
        }
        all
    };
    match byte {
        b'"' => b"\\\"",
        b'\\' => b"\\\\",
        0x08 => b"\\b",
        b'\t' => b"\\t",
        b'\n' => b"\\n",
        0x0C => b"\\f",
        b'\r' => b"\\r",
        _ => CONTROLS.get(usize::from(byte)).map_or(b"", |escape| escape.as_slice()),
    }
}

/// Where `bytes` (a string's) need escapes, and each one's text, in order.
fn escapes(bytes: &[u8]) -> impl Iterator<Item = (usize, &'static [u8])> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        at = plain_until(bytes, at);
        let &byte = bytes.get(at)?;
        at += 1;
        Some((at - 1, escape_of(byte)))
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// What serde_json writes for `value`, the text these functions must match.
    fn reference(value: &Value) -> Vec<u8> {
        serde_json::to_vec(value).expect("a Value serialises")
    }

    fn written(value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        write_value(&mut out, value);
        out
    }

    #[test]
    fn every_escape_and_number_is_written_as_serde_json_writes_it() {
        // Every byte below 0x20, the two that are always escaped, text that
        // needs none, escapes at each place of an eight-byte word, and
        // characters of two to four bytes.
        let controls: String = (0u8..0x20).map(char::from).collect();
        let placed: Vec<Value> =
            (0..17).map(|at| Value::String(format!("{}\"{}\\", "a".repeat(at), "é".repeat(at % 5)))).collect();
        let value = json!({
            "controls": controls,
            "quote\"and\\backslash": "a\"b\\c/d\u{7f}",
            "plain": "a page view from the pricing page, nothing to escape here",
            "wide": "naïve 日本 🎉 \u{2028}",
            "placed": placed,
            "numbers": [0, 1, -1, u64::MAX, i64::MIN, 1.0, -0.0, 0.1, 1e20, 1e-7, 123456.789, f64::MAX, f64::MIN_POSITIVE],
            "empty": {"array": [], "object": {}, "text": ""},
            "literals": [null, true, false],
        });
        assert_eq!(String::from_utf8(written(&value)).expect("utf-8"), value.to_string());
        assert_eq!(value_len(&value), reference(&value).len());
        for text in ["", "\"", "\\", "\u{1f}", "12345678\n", "1234567\t8"] {
            let mut out = Vec::new();
            write_str(&mut out, text);
            assert_eq!(out, reference(&json!(text)), "{text:?}");
            assert_eq!(str_len(text), out.len(), "{text:?}");
        }
    }

    #[test]
    fn a_field_is_found_by_order_in_small_maps_and_by_hash_in_large_ones() {
        use eventgw_schemas::lookup::SCANNED_ENTRIES;
        for size in [0, 1, SCANNED_ENTRIES, SCANNED_ENTRIES + 1, 3 * SCANNED_ENTRIES] {
            let map: Map<String, Value> = (0..size).map(|i| (format!("k{i}"), json!(i))).collect();
            let value = Value::Object(map.clone());
            for i in 0..size {
                let key = format!("k{i}");
                assert_eq!(entry(&map, &key), map.get(&key), "{size} entries, {key}");
                assert_eq!(entry_mut(&mut map.clone(), &key).cloned(), Some(json!(i)), "{size} entries, {key}");
                assert_eq!(field(&value, &key), Some(&json!(i)), "{size} entries, {key}");
            }
            for missing in ["k", "K0", "k00", ""] {
                assert_eq!(entry(&map, missing), None, "{size} entries, {missing}");
            }
        }
        assert_eq!(field(&json!([1, 2]), "0"), None, "not an object");
    }

    #[test]
    fn unsigned_integers_are_written_in_decimal() {
        for n in [0, 7, 9, 10, 99, 100, 101, 999, 1000, 1_000_000, 10u64.pow(19), u64::MAX] {
            let mut out = b"x".to_vec();
            write_uint(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes(), "after what is there");
        }
    }

    proptest! {
        #[test]
        fn any_unsigned_integer_is_written_as_rust_writes_it(n in any::<u64>(), small in 0u64..100_000) {
            for n in [n, small] {
                let mut out = Vec::new();
                write_uint(&mut out, n);
                prop_assert_eq!(out, n.to_string().into_bytes());
            }
        }
    }

    #[test]
    fn an_object_alone_is_written_and_counted_as_its_value() {
        let Value::Object(map) = json!({"type": "track", "event": "Signed Up", "properties": {"plan": "pro"}}) else {
            unreachable!("an object literal")
        };
        let mut out = Vec::new();
        write_object(&mut out, &map);
        assert_eq!(out, serde_json::to_vec(&map).expect("a map serialises"));
        assert_eq!(object_len(&map), out.len());
    }

    /// Any JSON value, with text of any characters (controls, quotes and
    /// backslashes among them) and numbers of every kind.
    fn any_json() -> impl Strategy<Value = Value> {
        let text = prop_oneof![".{0,40}", "[\\x00-\\x1f\"\\\\a-z]{0,20}", any::<String>()];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            text.clone().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((text.clone(), inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    /// Where a naive reading finds the first byte to escape from `at` on.
    fn first_to_escape(bytes: &[u8], at: usize) -> usize {
        (at..bytes.len()).find(|&i| bytes[i] < 0x20 || bytes[i] == b'"' || bytes[i] == b'\\').unwrap_or(bytes.len())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        // Words, overlapping tails and the byte loop each decide some
        // lengths and places: strings of 0 to 40 bytes, mostly plain, with
        // bytes to escape (and their neighbours 0x1f/0x20, 0x21/0x23, 0x5b/0x5d
        // and bytes of 0x80 and above, which borrows could mistake) anywhere.
        #[test]
        fn the_first_byte_to_escape_is_found_wherever_it_is(
            bytes in prop::collection::vec(
                prop_oneof![
                    6 => 0x61u8..0x7b,
                    1 => prop::sample::select(vec![0u8, 0x1f, 0x20, 0x21, b'"', 0x23, 0x5b, b'\\', 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff]),
                ],
                0..40,
            ),
            from in 0usize..41,
        ) {
            let at = from.min(bytes.len());
            prop_assert_eq!(plain_until(&bytes, at), first_to_escape(&bytes, at));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn any_value_is_written_and_counted_byte_for_byte_as_serde_json(value in any_json()) {
            let expected = reference(&value);
            prop_assert_eq!(written(&value), expected.clone());
            prop_assert_eq!(value_len(&value), expected.len());
        }
    }
}
