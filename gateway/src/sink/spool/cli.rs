//! `gateway spool status|inspect|replay [--config FILE]`: for an operator
//! who needs to see or drain a spool by hand (e.g. a volume moved to
//! another machine). `status` and `inspect` only read, so they work while
//! a gateway runs; `replay` takes the spool's lock, so it refuses then.

use anyhow::Context;

use super::checkpoint;
use super::store::{LOCK_FILE, recover, segment_files};
use super::{SpoolSink, reader};
use crate::config::Config;
use crate::sink::{KafkaSink, Sink};

/// A `gateway spool` command (parsed by clap in `main.rs`).
#[derive(Debug, Clone, clap::Subcommand)]
pub enum SpoolCommand {
    /// What the spool holds: records, bytes, segments, oldest record, damage.
    Status,
    /// Every segment: its records and damaged spans.
    Inspect {
        /// One line per record.
        #[arg(long)]
        records: bool,
    },
    /// Produce everything the spool holds to Kafka, then exit (not while a gateway uses it).
    Replay,
}

/// Runs a `gateway spool` command on the spool of `config`.
pub fn main(command: SpoolCommand, config: &Config) -> anyhow::Result<()> {
    match command {
        SpoolCommand::Status => status(config),
        SpoolCommand::Inspect { records } => inspect(config, records),
        SpoolCommand::Replay => replay(config),
    }
}

fn status(config: &Config) -> anyhow::Result<()> {
    let dir = &config.spool.dir;
    let recovered = recover(dir)?;
    let records: usize = recovered.records.iter().map(|(_, n)| n).sum();
    let oldest = recovered.index.groups.front().map(|(_, at)| super::store::now_ms().saturating_sub(*at) / 1000);
    let status = serde_json::json!({
        "dir": dir.display().to_string(),
        "enabled": config.spool.enabled,
        "records": records,
        "bytes": recovered.index.bytes(),
        "segments": recovered.index.segments.len(),
        "oldestAgeSecs": oldest,
        "damagedSpans": recovered.damage.len(),
        "replayCheckpoint": checkpoint::read(dir).replayed,
        "inUse": in_use(dir),
    });
    println!("{}", serde_json::to_string_pretty(&status)?);
    Ok(())
}

/// True when a gateway process holds the spool's lock.
fn in_use(dir: &std::path::Path) -> bool {
    std::fs::File::open(dir.join(LOCK_FILE)).is_ok_and(|f| f.try_lock_shared().is_err())
}

fn inspect(config: &Config, each_record: bool) -> anyhow::Result<()> {
    let dir = &config.spool.dir;
    let checkpoint = checkpoint::read(dir).replayed;
    println!("spool {} (replayed below seq {checkpoint})", dir.display());
    for (_, path) in segment_files(dir)? {
        let (mut count, mut first, mut last, mut listing) = (0, None, None, Vec::new());
        let (len, damage) = reader::read_segment(&path, |r| {
            count += 1;
            first.get_or_insert(r.seq);
            last = Some(r.seq);
            if each_record {
                let id = r.headers.iter().find(|(k, _)| k == "event-id").map_or("-", |(_, v)| v.as_str());
                let state = if r.seq < checkpoint { "replayed" } else { "pending" };
                let bytes = r.payload.len();
                listing.push(format!(
                    "  seq {} {state} topic={} key={} event-id={id} bytes={bytes}",
                    r.seq, r.topic, r.key
                ));
            }
        })
        .with_context(|| format!("cannot read {}", path.display()))?;
        let seqs = first.zip(last).map(|(a, b)| format!("seq {a}..={b}"));
        println!(
            "{}: {len} bytes, {count} records ({}), {} damaged span(s)",
            path.display(),
            seqs.unwrap_or_else(|| "none".into()),
            damage.len()
        );
        for d in &damage {
            let kind = if d.torn_tail { "torn tail" } else { "checksum failure" };
            println!("  damaged: {kind} at offset {}, {} bytes skipped", d.offset, d.len);
        }
        for line in listing {
            println!("{line}");
        }
    }
    Ok(())
}

fn replay(config: &Config) -> anyhow::Result<()> {
    let kafka = KafkaSink::with_message_timeout(&config.kafka, config.spool.delivery_timeout_ms)?;
    let sink = SpoolSink::open_idle(&config.spool, kafka.clone())?;
    let replayer = sink.replayer(&config.spool);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let produced = runtime.block_on(replayer.drain()).map_err(anyhow::Error::msg)?;
    kafka.flush(std::time::Duration::from_secs(30)).map_err(anyhow::Error::msg)?;
    println!("replayed {produced} record(s) to Kafka; the spool is empty");
    Ok(())
}
