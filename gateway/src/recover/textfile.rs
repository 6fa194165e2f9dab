//! `replay --metrics-file PATH`: the run's counts in Prometheus' text
//! exposition format, for node_exporter's textfile collector. The CLI is
//! its own process and adds nothing to a gateway's `/metrics`; this file is
//! how a replay's outcome reaches Prometheus (docs/recovery.md, "Metrics").
//!
//! The `_total` series are counters over every run that wrote this file:
//! each run reads the file's previous values back and adds its own, so
//! `increase()` works across runs (a missing or foreign file starts from
//! zero, which Prometheus reads as a counter reset). The `last_run` series
//! are gauges of the last run alone. The file is replaced atomically
//! (written beside it, fsync'd, renamed), so the collector never reads half
//! of it; the temporary name does not end in `.prom`, so the collector
//! ignores it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::Summary;

/// Outcomes by what a replay did with each dead-letter record.
const EVENTS: &str = "eventgw_recovery_events_total";
/// Recovered events by source and event name.
const RECOVERED: &str = "eventgw_recovery_recovered_events_total";

/// Every outcome label, always written (a zero is a fact too).
const OUTCOMES: [&str; 5] = ["recovered", "still_failing", "already_recovered", "unreadable", "filtered_out"];

/// `summary`'s counts by outcome label.
fn outcomes(summary: &Summary) -> [(&'static str, u64); 5] {
    let counts = [
        summary.recovered,
        summary.still_failing,
        summary.already_recovered,
        summary.unreadable.len() as u64,
        summary.filtered_out,
    ];
    std::array::from_fn(|i| (OUTCOMES[i], counts[i]))
}

/// A label value escaped as the exposition format requires.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The series text (name and labels) of one recovered (source, event).
fn recovered_series(source: &str, event: &str) -> String {
    format!("{RECOVERED}{{source=\"{}\",event=\"{}\"}}", escape(source), escape(event))
}

/// The counter series (name and labels) a previous run left in `text`, with
/// their values; anything else (comments, gauges, lines not ours) is ignored.
fn previous_counters(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter(|line| line.starts_with(EVENTS) || line.starts_with(RECOVERED))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse::<f64>().ok()? as u64))
        })
        .collect()
}

/// The file's text after a run with `summary`, which succeeded or not, at
/// `now_secs` (Unix time), on top of the counters of `previous` text.
pub fn render(summary: &Summary, success: bool, now_secs: f64, previous: &str) -> String {
    let mut counters = previous_counters(previous);
    for (outcome, n) in outcomes(summary) {
        *counters.entry(format!("{EVENTS}{{outcome=\"{outcome}\"}}")).or_default() += n;
    }
    for ((source, event), n) in &summary.recovered_by {
        *counters.entry(recovered_series(source, event)).or_default() += n;
    }
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, String)>| {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        for (series, value) in rows {
            out.push_str(&format!("{series} {value}\n"));
        }
    };
    let of = |name: &str| -> Vec<(String, String)> {
        counters
            .iter()
            .filter(|(s, _)| s.starts_with(&format!("{name}{{")))
            .map(|(s, v)| (s.clone(), v.to_string()))
            .collect()
    };
    family(
        EVENTS,
        "counter",
        "Dead-letter records by what gateway dead-letter replay did with them, over every run.",
        of(EVENTS),
    );
    family(
        RECOVERED,
        "counter",
        "Events gateway dead-letter replay produced to their domain topic, by source and event.",
        of(RECOVERED),
    );
    let last =
        outcomes(summary).map(|(o, n)| (format!("eventgw_recovery_last_run_events{{outcome=\"{o}\"}}"), n.to_string()));
    family(
        "eventgw_recovery_last_run_events",
        "gauge",
        "Dead-letter records by outcome in the last replay run.",
        last.to_vec(),
    );
    let stamp = vec![("eventgw_recovery_last_run_timestamp_seconds".to_owned(), format!("{now_secs:.3}"))];
    family(
        "eventgw_recovery_last_run_timestamp_seconds",
        "gauge",
        "When the last replay run ended (Unix time).",
        stamp,
    );
    let ok = vec![("eventgw_recovery_last_run_success".to_owned(), u8::from(success).to_string())];
    family(
        "eventgw_recovery_last_run_success",
        "gauge",
        "1 when the last replay run finished, 0 when it failed part-way.",
        ok,
    );
    out
}

/// Writes the file at `path` after a run: `render` on top of what the file
/// held, written to a temporary file beside it, fsync'd and renamed over it.
pub fn write(path: &Path, summary: &Summary, success: bool) -> std::io::Result<()> {
    let previous = std::fs::read_to_string(path).unwrap_or_default();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let text = render(summary, success, now.as_secs_f64(), &previous);
    let temporary = temporary_beside(path);
    let result = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// `.<name>.<pid>.tmp` in `path`'s directory: same file system (so the
/// rename is atomic), and not `*.prom`, so the collector skips it.
fn temporary_beside(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "metrics".into());
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

#[cfg(test)]
#[path = "textfile_tests.rs"]
mod tests;
