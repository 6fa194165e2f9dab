//! `gateway dead-letter inspect|replay`: recovery from the dead-letter
//! topic (docs/recovery.md). `inspect` counts what the topic holds in a
//! time range; `replay` re-validates each dead-lettered event against the
//! catalog as it is now, through the request path's own
//! [`crate::pipeline::Admission`] with the source's settings, and produces
//! those that now pass to their domain topic, each exactly once across
//! reruns and crashes (`recovered.rs` says how).
//!
//! One file per step: `range.rs` (the `--from/--to` window), `letters.rs`
//! (reading and parsing the dead-letter records), `recheck.rs` (the
//! verdict of the current catalog), `recovered.rs` (what earlier runs
//! already stored), `replay.rs` (producing), `report.rs` (progress and
//! summary), `textfile.rs` (the summary for node_exporter, `--metrics-file`).

mod letters;
mod range;
mod recheck;
mod recovered;
mod replay;
mod report;
mod textfile;

use std::path::PathBuf;
use std::time::Duration;

pub use self::letters::{Letter, Unreadable, parse_letter};
pub use self::range::{TimeRange, parse_time_arg};
pub use self::report::Summary;
use crate::config::Config;

/// The one record header a recovered event carries beyond the gateway's
/// own: `<dead-letter topic>/<partition>/<offset>` of the record it came from.
pub const RECOVERED_FROM: &str = "recovered-from";

/// Set to a number of milliseconds, `replay` waits that long after each
/// produced record (and produces one at a time): lets tests kill it half-way.
pub const THROTTLE_ENV: &str = "EVENTGW_RECOVER_THROTTLE_MS";

/// A `gateway dead-letter` command (parsed by clap in `main.rs`).
#[derive(Debug, Clone, clap::Subcommand)]
pub enum DeadLetterCommand {
    /// Count the dead-lettered records of a time range by source, event, version and reason.
    Inspect(Selection),
    /// Re-validate against the current catalog and produce those that now pass, exactly once.
    Replay {
        /// Which records.
        #[command(flatten)]
        selection: Selection,
        /// Show what would move and why; produce nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also write the run's counts to this file (Prometheus text format, replaced atomically) for
        /// node_exporter's textfile collector; written when the run fails part-way too.
        #[arg(long, value_name = "PATH", conflicts_with = "dry_run")]
        metrics_file: Option<PathBuf>,
    },
}

/// Which dead-letter records a command looks at.
#[derive(Debug, Clone, clap::Args)]
pub struct Selection {
    /// Start of the range (record timestamps): RFC 3339, or a span back from now such as `2h`, `30m`, `7d`.
    #[arg(long, default_value = "24h")]
    pub from: String,
    /// End of the range (exclusive): RFC 3339, a span back from now, or `now`.
    #[arg(long, default_value = "now")]
    pub to: String,
    /// Only this source's records (a configured source id).
    #[arg(long)]
    pub source: Option<String>,
    /// Only this event name (`event`, or `Page Viewed` / `Screen Viewed`).
    #[arg(long)]
    pub event: Option<String>,
    /// Only this dead-letter reason code (e.g. `schema_violation`).
    #[arg(long)]
    pub reason: Option<String>,
}

/// Why a command refused to run: each with a stable code, printed first.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// `--source` names no configured source.
    #[error("unknown_source: no source `{0}` in the configuration")]
    UnknownSource(String),
    /// `--from`/`--to` cannot be read.
    #[error("invalid_time: `{0}` is neither RFC 3339 (2026-12-05T14:00:00Z) nor a span such as 2h, 30m, 7d")]
    InvalidTime(String),
    /// The range holds no time.
    #[error("empty_range: --from {from} is not before --to {to}")]
    EmptyRange {
        /// The start as read.
        from: String,
        /// The end as read.
        to: String,
    },
    /// Kafka could not be read or written.
    #[error("kafka_unavailable: {0}")]
    Kafka(String),
    /// The state (catalog, sources) could not be built.
    #[error("bad_configuration: {0}")]
    Startup(String),
}

impl RecoverError {
    /// The stable machine code (the text before the colon).
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownSource(_) => "unknown_source",
            Self::InvalidTime(_) => "invalid_time",
            Self::EmptyRange { .. } => "empty_range",
            Self::Kafka(_) => "kafka_unavailable",
            Self::Startup(_) => "bad_configuration",
        }
    }
}

/// Runs a `gateway dead-letter` command against the Kafka and catalog of `config`.
pub fn main(command: DeadLetterCommand, config: Config) -> anyhow::Result<()> {
    let throttle = std::env::var(THROTTLE_ENV).ok().and_then(|v| v.parse().ok()).map(Duration::from_millis);
    let summary = match command {
        DeadLetterCommand::Inspect(selection) => replay::inspect(config, &selection)?,
        DeadLetterCommand::Replay { selection, dry_run, metrics_file } => {
            let command = if dry_run { "replay --dry-run" } else { "replay" };
            let mut summary = Summary { command, ..Summary::default() };
            let result = replay::replay(config, &selection, dry_run, throttle, &mut summary);
            if let Some(path) = metrics_file {
                // A failed write is reported, but never hides the run's own error.
                match (textfile::write(&path, &summary, result.is_ok()), &result) {
                    (Err(e), Ok(())) => anyhow::bail!("metrics_file: {}: {e}", path.display()),
                    (Err(e), Err(_)) => eprintln!("metrics_file: {}: {e}", path.display()),
                    (Ok(()), _) => {}
                }
            }
            result?;
            Some(summary)
        }
    };
    if let Some(summary) = summary {
        println!("{summary}");
    }
    Ok(())
}
