//! What a run tells its operator: one line per event that moves (dry run)
//! or still fails, a progress line on a terminal, and the summary line.
//! The CLI is its own process, so its count of recovered events is in the
//! summary (and its `Dead-letter replay finished` log line) and, with
//! `--metrics-file`, in a file for node_exporter (`textfile.rs`), not in a
//! running gateway's `/metrics` (docs/recovery.md, "Metrics").

use std::collections::BTreeMap;
use std::fmt;
use std::io::{IsTerminal, Write};

/// The counts of one `inspect` or `replay`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Which command (`inspect`, `replay`, `replay --dry-run`).
    pub command: &'static str,
    /// Dead-letter records read in the range.
    pub read: u64,
    /// Left out by `--source`, `--event` or `--reason`.
    pub filtered_out: u64,
    /// Produced to their domain topic (or, dry run, that would be).
    pub recovered: u64,
    /// Still failing against the current catalog.
    pub still_failing: u64,
    /// Already stored by an earlier run (or by a client's retry).
    pub already_recovered: u64,
    /// Unreadable records, by position, with their code.
    pub unreadable: Vec<(String, &'static str)>,
    /// Recovered events by (source, event name): labels of the metrics
    /// file, bounded by the configured sources and the catalog's events.
    pub recovered_by: BTreeMap<(String, String), u64>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let moved = if self.command == "replay --dry-run" { "would recover" } else { "recovered" };
        if self.command == "inspect" {
            let counted = self.read - self.filtered_out - self.unreadable.len() as u64;
            write!(
                f,
                "inspect: read {}, counted {counted}, skipped as unreadable {}",
                self.read,
                self.unreadable.len()
            )?;
        } else {
            write!(
                f,
                "{}: read {}, {moved} {}, still failing {}, skipped as already recovered {}, skipped as unreadable {}",
                self.command,
                self.read,
                self.recovered,
                self.still_failing,
                self.already_recovered,
                self.unreadable.len()
            )?;
        }
        if self.filtered_out > 0 {
            write!(f, ", filtered out {}", self.filtered_out)?;
        }
        let named: Vec<String> = self.unreadable.iter().map(|(at, code)| format!("{at} {code}")).collect();
        if !named.is_empty() {
            write!(f, " ({})", named.join(", "))?;
        }
        Ok(())
    }
}

/// Counts by a label, printed sorted.
#[derive(Debug, Default)]
pub struct Tally(BTreeMap<String, u64>);

impl Tally {
    /// One more of `label`.
    pub fn add(&mut self, label: String) {
        *self.0.entry(label).or_default() += 1;
    }

    /// `title` and one indented `count label` line each, largest first.
    pub fn print(&self, title: &str) {
        println!("{title}:");
        let mut rows: Vec<(&String, &u64)> = self.0.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (label, count) in rows {
            println!("  {count:>8}  {label}");
        }
    }
}

/// `done/total` on stderr, rewritten in place, only when stderr is a terminal.
pub struct Progress {
    total: u64,
    shown: bool,
}

impl Progress {
    /// Progress over `total` steps.
    pub fn new(total: u64) -> Self {
        Self { total, shown: std::io::stderr().is_terminal() }
    }

    /// `done` steps are done.
    pub fn at(&self, done: u64) {
        if self.shown && (done.is_multiple_of(25) || done == self.total) {
            let mut err = std::io::stderr();
            let _ = write!(err, "\rrecovering {done}/{}", self.total);
            let _ = err.flush();
        }
    }

    /// Ends the line.
    pub fn finish(&self) {
        if self.shown {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_count_and_each_unreadable_record() {
        let summary = Summary {
            command: "replay",
            read: 5,
            recovered: 2,
            still_failing: 1,
            already_recovered: 1,
            unreadable: vec![("eventgw.dead-letter/0/7".into(), "not_json")],
            ..Summary::default()
        };
        assert_eq!(
            summary.to_string(),
            "replay: read 5, recovered 2, still failing 1, skipped as already recovered 1, skipped as unreadable 1 \
             (eventgw.dead-letter/0/7 not_json)"
        );
        let dry = Summary { command: "replay --dry-run", ..summary.clone() };
        assert!(dry.to_string().contains("would recover 2"), "{dry}");
        let inspect = Summary { command: "inspect", read: 5, filtered_out: 1, ..summary };
        assert!(inspect.to_string().starts_with("inspect: read 5, counted 3, skipped as unreadable 1, filtered out 1"));
    }
}
