//! The event's time: the device's `timestamp` (or `originalTimestamp`, which
//! RudderStack SDKs send instead), corrected for the device's clock skew
//! (`receivedAt − sentAt`) within a documented bound, and always written
//! back as RFC 3339.

use chrono::{DateTime, Datelike, SecondsFormat, TimeDelta, Timelike, Utc};
use serde_json::Value;

use crate::compact;

/// Largest clock skew corrected: 24 hours. A device clock further off than
/// that is more likely a bad `sentAt` than a bad clock, and correcting by it
/// would move events by days (or, unbounded, out of the four-digit years
/// RFC 3339 can write). Beyond it the device's timestamp is kept and the
/// record says so ([`CORRECTION_HEADER`] = [`SKEW_EXCEEDED`]).
pub const MAX_CLOCK_SKEW_SECS: i64 = 24 * 60 * 60;

/// Record header present when the timestamp could not be corrected.
pub const CORRECTION_HEADER: &str = "timestamp-correction";
/// The skew was beyond [`MAX_CLOCK_SKEW_SECS`]; `timestamp` is the device's.
pub const SKEW_EXCEEDED: &str = "clock-skew-exceeded";
/// `sentAt` was not an ISO 8601 date-time; `timestamp` is the device's.
pub const INVALID_SENT_AT: &str = "invalid-sent-at";

/// The event's time and, when it could not be corrected, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTime {
    /// The time written as `timestamp`.
    pub timestamp: DateTime<Utc>,
    /// [`SKEW_EXCEEDED`] or [`INVALID_SENT_AT`], for the record header.
    pub flag: Option<&'static str>,
}

/// Parses an ISO 8601 date-time as the SDKs write it: RFC 3339 with any
/// fraction (Java's and Go's nanoseconds) and any offset (Go's and Python's
/// local `+01:00`), also `+0100` without the colon and a space for the `T`.
pub fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .or_else(|_| DateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f%z"))
        .or_else(|_| DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f%z"))
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The event's corrected time. `batch_sent_at` is the batch's `sentAt`; an
/// event's own `sentAt` wins. A `timestamp` that is not a date-time is the
/// event's error (it is dead-lettered); a `sentAt` that is not one only
/// stops the correction, whichever level it came from, and is flagged.
pub fn event_time(event: &Value, batch_sent_at: Option<&str>, received: DateTime<Utc>) -> Result<EventTime, String> {
    let (field, value) = match (compact::field(event, "timestamp"), compact::field(event, "originalTimestamp")) {
        (Some(value), _) => ("timestamp", value),
        (None, Some(value)) => ("originalTimestamp", value),
        (None, None) => return Ok(EventTime { timestamp: received, flag: None }),
    };
    let device = value
        .as_str()
        .and_then(parse_time)
        .ok_or_else(|| format!("`{field}` is not an ISO 8601 date-time: {}", abbreviated(value)))?;
    let sent_at = match compact::field(event, "sentAt") {
        Some(Value::String(text)) => Some(parse_time(text)),
        Some(_) => Some(None),
        None => batch_sent_at.map(parse_time),
    };
    Ok(match sent_at {
        None => EventTime { timestamp: device, flag: None },
        Some(None) => EventTime { timestamp: device, flag: Some(INVALID_SENT_AT) },
        Some(Some(sent)) => corrected(device, received - sent),
    })
}

fn corrected(device: DateTime<Utc>, skew: TimeDelta) -> EventTime {
    let exceeded = EventTime { timestamp: device, flag: Some(SKEW_EXCEEDED) };
    if skew.num_seconds().abs() > MAX_CLOCK_SKEW_SECS {
        return exceeded;
    }
    match device.checked_add_signed(skew) {
        Some(t) if (0..=9999).contains(&t.year()) => EventTime { timestamp: t, flag: None },
        _ => exceeded,
    }
}

/// RFC 3339 with milliseconds and `Z`, the format of every time we write.
/// Years outside 0000–9999 (which RFC 3339 cannot write) never reach it:
/// parsed times have four-digit years and corrections stay within them.
///
/// Written by hand into one allocation of its exact size: it is written
/// for every event (its `timestamp`) and every request (`received-at`),
/// and chrono's formatter went through `fmt` and grew its string (about
/// 700 instructions a time, 2% of a batched event's own work).
pub fn format_time(t: DateTime<Utc>) -> String {
    let (year, nanos) = (t.year(), t.timestamp_subsec_nanos());
    if !(0..=9999).contains(&year) {
        return t.to_rfc3339_opts(SecondsFormat::Millis, true);
    }
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut n: u32| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    put(0, 4, year.unsigned_abs());
    put(5, 2, t.month());
    put(8, 2, t.day());
    put(11, 2, t.hour());
    put(14, 2, t.minute());
    // A leap second (chrono's nanoseconds past 1e9) is written as :60.
    put(17, 2, t.second() + u32::from(nanos >= 1_000_000_000));
    put(20, 3, nanos % 1_000_000_000 / 1_000_000);
    // ASCII digits and separators only, so valid UTF-8: copied once (the
    // lossy conversion walked its chunks, about 180 instructions a time).
    String::from_utf8(out.to_vec()).unwrap_or_default()
}

/// A client value for an error message, cut short.
fn abbreviated(value: &Value) -> String {
    let mut text = value.to_string();
    if text.len() > 64 {
        let mut cut = 64;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(text: &str) -> DateTime<Utc> {
        parse_time(text).unwrap_or_else(|| panic!("{text} parses"))
    }

    fn time(event: Value, batch: Option<&str>, received: &str) -> Result<EventTime, String> {
        event_time(&event, batch, at(received))
    }

    #[test]
    fn sdk_time_formats_parse_to_the_same_instant() {
        let instant = at("2026-12-02T10:00:00.123Z");
        for text in [
            "2026-12-02T10:00:00.123Z",         // analytics-next, Swift, Java's Date adapter
            "2026-12-02T10:00:00.123000000Z",   // Java Instant.toString, Go RFC3339Nano
            "2026-12-02T11:00:00.123+01:00",    // Go and Python with a local offset
            "2026-12-02T10:00:00.123000+00:00", // Python isoformat()
            "2026-12-02T11:00:00.123+0100",     // offsets without the colon
            "2026-12-02 10:00:00.123Z",         // a space for the T
            "2026-12-02t10:00:00.123z",         // lower case
        ] {
            assert_eq!(parse_time(text), Some(instant), "{text}");
        }
        assert_eq!(parse_time("2026-12-02T10:00:00.123456789Z").map(|t| t.timestamp_subsec_nanos()), Some(123_456_789));
        for bad in ["yesterday", "5", "", "2026-13-01T00:00:00Z", "+12025-12-01T00:00:00Z"] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn skew_within_the_bound_is_corrected() {
        let t =
            time(json!({"timestamp": "2026-06-01T12:59:55Z"}), Some("2026-06-01T13:00:00Z"), "2026-06-01T12:00:00Z");
        assert_eq!(t, Ok(EventTime { timestamp: at("2026-06-01T11:59:55Z"), flag: None }));
        let t =
            time(json!({"timestamp": "2026-06-02T11:59:00Z"}), Some("2026-06-02T12:00:00Z"), "2026-06-01T12:00:00Z");
        assert_eq!(t, Ok(EventTime { timestamp: at("2026-06-01T11:59:00Z"), flag: None }), "exactly 24 h");
    }

    #[test]
    fn skew_beyond_the_bound_keeps_the_device_time_and_flags_it() {
        let t =
            time(json!({"timestamp": "9999-12-31T23:59:59Z"}), Some("0001-01-01T00:00:00Z"), "2026-12-01T00:00:00Z");
        assert_eq!(t, Ok(EventTime { timestamp: at("9999-12-31T23:59:59Z"), flag: Some(SKEW_EXCEEDED) }));
        assert_eq!(format_time(t.expect("time").timestamp), "9999-12-31T23:59:59.000Z");
        let t =
            time(json!({"timestamp": "2026-06-02T12:00:01Z"}), Some("2026-06-02T12:00:01Z"), "2026-06-01T12:00:00Z");
        assert_eq!(t.expect("time").flag, Some(SKEW_EXCEEDED), "one second past 24 h");
        // Within the bound, but the correction would leave four-digit years.
        let t =
            time(json!({"timestamp": "9999-12-31T23:00:00Z"}), Some("2026-06-01T10:00:00Z"), "2026-06-01T12:00:00Z");
        assert_eq!(t.expect("time").flag, Some(SKEW_EXCEEDED));
    }

    #[test]
    fn an_unparsable_sent_at_is_flagged_wherever_it_comes_from() {
        let device = at("2026-06-01T11:00:00Z");
        let expect = Ok(EventTime { timestamp: device, flag: Some(INVALID_SENT_AT) });
        let received = "2026-06-01T12:00:00Z";
        assert_eq!(time(json!({"timestamp": "2026-06-01T11:00:00Z"}), Some("yesterday"), received), expect);
        assert_eq!(time(json!({"timestamp": "2026-06-01T11:00:00Z"}), Some("5"), received), expect);
        assert_eq!(time(json!({"timestamp": "2026-06-01T11:00:00Z", "sentAt": 5}), None, received), expect);
        let own = json!({"timestamp": "2026-06-01T11:00:00Z", "sentAt": "yesterday"});
        assert_eq!(time(own, Some("2026-06-01T12:00:00Z"), received), expect, "the event's own sentAt wins");
    }

    #[test]
    fn original_timestamp_stands_in_for_timestamp() {
        let rudder = json!({"originalTimestamp": "2026-06-01T12:59:55.000Z", "sentAt": "2026-06-01T13:00:00.000Z"});
        let t = time(rudder, None, "2026-06-01T12:00:00Z").expect("time");
        assert_eq!(t.timestamp, at("2026-06-01T11:59:55Z"));
        let none = time(json!({}), Some("2026-06-01T13:00:00Z"), "2026-06-01T12:00:00Z").expect("time");
        assert_eq!(none.timestamp, at("2026-06-01T12:00:00Z"), "no device time: received");
        assert!(time(json!({"timestamp": "soon"}), None, "2026-06-01T12:00:00Z").is_err());
        assert!(time(json!({"timestamp": 5}), None, "2026-06-01T12:00:00Z").is_err());
    }

    proptest::proptest! {
        #[test]
        fn a_time_is_written_as_chrono_writes_it(
            seconds in 0i64..253_402_300_800, // 0000-01-01 to 9999-12-31, from the epoch back and on
            nanos in 0u32..2_000_000_000,     // past 1e9: a leap second, where chrono allows one
            before_epoch in proptest::bool::ANY,
        ) {
            let seconds = if before_epoch { -seconds.min(62_167_219_200) } else { seconds };
            let t = DateTime::from_timestamp(seconds, nanos).or_else(|| DateTime::from_timestamp(seconds, nanos % 1_000_000_000));
            if let Some(t) = t.filter(|t| (0..=9999).contains(&t.year())) {
                proptest::prop_assert_eq!(format_time(t), t.to_rfc3339_opts(SecondsFormat::Millis, true));
            }
        }
    }

    #[test]
    fn a_leap_second_and_the_edges_of_the_years_are_written_as_chrono_writes_them() {
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
            .and_then(|d| d.and_hms_milli_opt(23, 59, 59, 1_500))
            .expect("a leap second")
            .and_utc();
        for t in [leap, at("0000-01-01T00:00:00Z"), at("9999-12-31T23:59:59.999Z"), at("2026-12-07T15:04:05.006Z")] {
            assert_eq!(format_time(t), t.to_rfc3339_opts(SecondsFormat::Millis, true));
        }
        assert_eq!(format_time(leap), "2016-12-31T23:59:60.500Z");
    }
}
