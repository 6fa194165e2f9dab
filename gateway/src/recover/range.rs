//! The `--from/--to` window: RFC 3339 instants or spans back from now
//! (`90s`, `30m`, `2h`, `7d`), compared with the records' Kafka timestamps.

use chrono::{DateTime, Utc};

use super::RecoverError;

/// A half-open window `[from_ms, to_ms)` of record timestamps, in
/// milliseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    /// First millisecond in the window.
    pub from_ms: i64,
    /// First millisecond after it.
    pub to_ms: i64,
}

impl TimeRange {
    /// The window of `--from` and `--to` read at `now`; refuses an empty or
    /// reversed one.
    pub fn parse(from: &str, to: &str, now: DateTime<Utc>) -> Result<Self, RecoverError> {
        let (start, end) = (parse_time_arg(from, now)?, parse_time_arg(to, now)?);
        if start >= end {
            return Err(RecoverError::EmptyRange { from: from.to_owned(), to: to.to_owned() });
        }
        Ok(Self { from_ms: start.timestamp_millis(), to_ms: end.timestamp_millis() })
    }

    /// Whether a record stamped `at_ms` is in the window.
    pub fn contains(&self, at_ms: i64) -> bool {
        (self.from_ms..self.to_ms).contains(&at_ms)
    }
}

/// One end of the window: `now`, an RFC 3339 instant, or a span back from
/// `now` (a whole number and one of `s`, `m`, `h`, `d`).
pub fn parse_time_arg(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, RecoverError> {
    let text = text.trim();
    if text == "now" {
        return Ok(now);
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    let invalid = || RecoverError::InvalidTime(text.to_owned());
    let unit_at = text.len().checked_sub(1).filter(|at| *at > 0).ok_or_else(invalid)?;
    if !text.is_char_boundary(unit_at) {
        return Err(invalid());
    }
    let (number, unit) = text.split_at(unit_at);
    let number: i64 = number.parse().map_err(|_| invalid())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(invalid()),
    };
    let span = number.checked_mul(seconds).filter(|s| *s >= 0).ok_or_else(invalid)?;
    let span = chrono::TimeDelta::try_seconds(span).ok_or_else(invalid)?;
    now.checked_sub_signed(span).ok_or_else(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-05T14:00:00Z").expect("time").with_timezone(&Utc)
    }

    #[test]
    fn spans_count_back_from_now() {
        assert_eq!(parse_time_arg("2h", now()).expect("2h").to_rfc3339(), "2026-12-05T12:00:00+00:00");
        assert_eq!(parse_time_arg("30m", now()).expect("30m").to_rfc3339(), "2026-12-05T13:30:00+00:00");
        assert_eq!(parse_time_arg("1d", now()).expect("1d").to_rfc3339(), "2026-12-04T14:00:00+00:00");
        assert_eq!(parse_time_arg("now", now()).expect("now"), now());
        let at = parse_time_arg("2026-12-05T15:00:00+01:00", now()).expect("rfc 3339");
        assert_eq!(at, now());
    }

    #[test]
    fn bad_times_have_a_code() {
        for bad in ["", "h", "2", "2w", "-2h", "yesterday", "2é", "99999999999999999d"] {
            let error = parse_time_arg(bad, now()).expect_err(bad);
            assert_eq!(error.code(), "invalid_time", "{bad}");
        }
    }

    #[test]
    fn empty_and_reversed_ranges_are_refused() {
        assert_eq!(TimeRange::parse("1h", "2h", now()).expect_err("reversed").code(), "empty_range");
        assert_eq!(TimeRange::parse("1h", "1h", now()).expect_err("empty").code(), "empty_range");
        let range = TimeRange::parse("2h", "now", now()).expect("range");
        assert!(range.contains(now().timestamp_millis() - 1));
        assert!(!range.contains(now().timestamp_millis()), "the end is exclusive");
    }
}
