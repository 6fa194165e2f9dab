//! The command line, parsed by clap: every command reads its typed fields,
//! and each default lives once, here, where `--help` shows it.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::protocol::Protocol;

/// `loadtest COMMAND [--flags]`.
#[derive(Debug, Parser)]
#[command(name = "loadtest", about = "Open-loop load generator and benchmark harness for the gateway")]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// An HTTP server answering every request (optionally after a delay): the ceiling the gateway is compared with.
    Ceiling(CeilingArgs),
    /// One open-loop run against a URL; prints a summary line.
    Run(RunArgs),
    /// The whole benchmark suite; writes the report to --out.
    Suite(SuiteArgs),
    /// The cost curves; prints the "Cost curves" section.
    Curves(CurvesArgs),
    /// Writes the generated `bench` domain (many event types) for the cost curves.
    BenchCatalog(BenchCatalogArgs),
    /// Prints an HS256 JWT for the benchmark's JWT variant, valid for a day.
    Token(TokenArgs),
    /// Holds bodies that announce the largest size and stall (h2c streams and
    /// HTTP/1.1 connections); prints the gateway's peak memory.
    StalledBodies(StalledArgs),
    /// Live-view viewers in one process: each reads `/live/stream` and
    /// counts its events; prints how many each received.
    Watch(WatchArgs),
}

/// `loadtest watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// The gateway's address (plain HTTP/1.1).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// The stream's path and query.
    #[arg(long, default_value = "/live/stream")]
    pub path: String,
    /// The operator token (sent as `Authorization: Bearer`).
    #[arg(long)]
    pub token: String,
    /// How many viewers (one connection each).
    #[arg(long, default_value_t = 5)]
    pub viewers: usize,
    /// How long each viewer reads before it hangs up.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
}

/// `loadtest stalled-bodies`.
#[derive(Debug, clap::Args)]
pub struct StalledArgs {
    /// The gateway's address (plain HTTP: h2c and HTTP/1.1).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// The gateway's pid, whose VmHWM is read.
    #[arg(long)]
    pub gateway_pid: u32,
    /// Streams opened on one h2c connection.
    #[arg(long, default_value_t = 3000)]
    pub h2_streams: usize,
    /// HTTP/1.1 connections, one stalled body each.
    #[arg(long, default_value_t = 1000)]
    pub h1_connections: usize,
    /// The `Content-Length` each body announces (the gateway's `limits.max_body_bytes`).
    #[arg(long, default_value_t = 524_288)]
    pub declared: usize,
    /// Seconds the bodies are held before memory is read (below `server.body_timeout_ms`).
    #[arg(long, default_value_t = 3.0)]
    pub hold_secs: f64,
}

/// `loadtest ceiling`.
#[derive(Debug, clap::Args)]
pub struct CeilingArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub listen: String,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Delay before each answer, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
}

/// `loadtest run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The endpoint, e.g. http://127.0.0.1:8080/v1/batch.
    #[arg(long)]
    pub url: String,
    /// Requests per second (open loop).
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    /// How long to send.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Events per request.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Gzip the bodies.
    #[arg(long)]
    pub gzip: bool,
    /// Distinct user ids.
    #[arg(long, default_value_t = 10_000)]
    pub users: u64,
    /// The catalog whose examples are sent.
    #[arg(long, default_value = "schemas")]
    pub catalog: PathBuf,
    /// A bearer token instead of the write key.
    #[arg(long)]
    pub bearer: Option<String>,
    /// The write key (PostHog's `api_key`, GA4's `api_secret`).
    #[arg(long, default_value = "demo-write-key")]
    pub key: String,
    /// The request's protocol: its batched body, endpoint and credentials
    /// (a `--url` without a path gets the protocol's endpoint).
    #[arg(long, value_enum, default_value_t = Protocol::Segment)]
    pub protocol: Protocol,
    /// Snowplow's app id (`aid`), naming the source.
    #[arg(long, default_value = "demo-web")]
    pub app_id: String,
    /// Only the catalog events every protocol can express, so protocols are
    /// compared on the same events.
    #[arg(long)]
    pub shared_events: bool,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 10)]
    pub timeout_secs: u64,
}

/// `loadtest suite`.
#[derive(Debug, clap::Args)]
pub struct SuiteArgs {
    /// The gateway's base URL.
    #[arg(long)]
    pub gateway: String,
    /// The ceiling server's base URL.
    #[arg(long)]
    pub ceiling: String,
    /// Kafka bootstrap servers.
    #[arg(long)]
    pub brokers: String,
    /// Where the report goes.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub out: PathBuf,
    /// Seconds per run.
    #[arg(long, default_value_t = 4.0)]
    pub seconds: f64,
    /// Rounds of the target measurements (maxima, CPU, p99); each row of
    /// the targets table gives their median and spread.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// The p99 bound of a sustained rate, in ms.
    #[arg(long, default_value_t = 100.0)]
    pub p99_ms: f64,
    /// The catalog whose examples are sent.
    #[arg(long, default_value = "schemas")]
    pub catalog: PathBuf,
    /// The write key.
    #[arg(long, default_value = "demo-write-key")]
    pub key: String,
    /// A bearer token: adds the JWT variant (an empty one too).
    #[arg(long)]
    pub bearer: Option<String>,
    /// The gateway's pid, for CPU and memory figures (absent or 0: not measured).
    #[arg(long)]
    pub gateway_pid: Option<u32>,
    /// The broker's pid, for CPU figures and the Kafka stall (absent or 0: not measured).
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// The HTTP ceiling server's pid: its CPU per request at the gateway's
    /// single-event maximum is the cost of HTTP alone (absent or 0: not measured).
    #[arg(long)]
    pub ceiling_pid: Option<u32>,
    /// Idle connections held open.
    #[arg(long, default_value_t = 10_000)]
    pub connections: usize,
}

/// `loadtest curves`.
#[derive(Debug, clap::Args)]
pub struct CurvesArgs {
    /// The gateway's base URL.
    #[arg(long)]
    pub gateway: String,
    /// The catalog the gateway serves (with the `bench` domain).
    #[arg(long)]
    pub catalog: PathBuf,
    /// The gateway's pid, for CPU figures (needed: the curves are CPU per event).
    // Optional for clap and checked in `curves` so a missing pid exits with 1,
    // not with clap's usage code 2.
    #[arg(long)]
    pub gateway_pid: Option<u32>,
    /// Seconds per run.
    #[arg(long, default_value_t = 4.0)]
    pub seconds: f64,
    /// Runs per point.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Events per second sent.
    #[arg(long, default_value_t = 8000.0)]
    pub events_per_sec: f64,
    /// Only this curve (absent or empty: all; `scripts/bench-curves` passes an empty one).
    #[arg(long)]
    pub only: Option<String>,
    /// The write key.
    #[arg(long, default_value = "bench-write-key")]
    pub key: String,
}

/// `loadtest bench-catalog`.
#[derive(Debug, clap::Args)]
pub struct BenchCatalogArgs {
    /// The catalog directory to write the domain into.
    #[arg(long)]
    pub out: PathBuf,
    /// Event types (1..=1000).
    #[arg(long, default_value_t = 200)]
    pub types: usize,
}

/// `loadtest token`.
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// The HS256 secret.
    #[arg(long)]
    pub secret: String,
    /// The `iss` claim.
    #[arg(long)]
    pub issuer: String,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command, CurvesArgs, SuiteArgs};
    use crate::protocol::Protocol;

    fn parse(words: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("loadtest").chain(words.iter().copied()))
    }

    fn suite(extra: &[&str]) -> SuiteArgs {
        let words = ["suite", "--gateway", "http://g", "--ceiling", "http://c", "--brokers", "b:9092"];
        match parse(&[&words[..], extra].concat()).expect("parses").command {
            Command::Suite(args) => args,
            other => panic!("not suite: {other:?}"),
        }
    }

    fn curves(extra: &[&str]) -> CurvesArgs {
        let words = ["curves", "--gateway", "g", "--catalog", "c"];
        match parse(&[&words[..], extra].concat()).expect("parses").command {
            Command::Curves(args) => args,
            other => panic!("not curves: {other:?}"),
        }
    }

    #[test]
    fn suite_flags_are_typed_and_absent_ones_take_their_defaults() {
        let args = suite(&["--p99-ms", "50", "--gateway-pid", "42"]);
        assert_eq!(
            (args.gateway.as_str(), args.ceiling.as_str(), args.brokers.as_str()),
            ("http://g", "http://c", "b:9092")
        );
        assert_eq!(args.p99_ms, 50.0);
        assert_eq!(args.gateway_pid, Some(42));
        assert_eq!((args.broker_pid, args.bearer), (None, None));
        assert_eq!(args.seconds, 4.0);
        assert_eq!(args.out.to_str(), Some("BENCHMARKS.md"));
        assert_eq!(args.catalog.to_str(), Some("schemas"));
        assert_eq!((args.key.as_str(), args.connections), ("demo-write-key", 10_000));
        assert_eq!(suite(&[]).p99_ms, 100.0);
    }

    #[test]
    fn the_flags_scripts_bench_passes_parse() {
        let args = suite(&[
            "--catalog",
            "cat",
            "--out",
            "B.md",
            "--gateway-pid",
            "1",
            "--broker-pid",
            "2",
            "--bearer",
            "t",
            "--seconds",
            "2.5",
            "--p99-ms",
            "80",
            "--key",
            "k",
            "--connections",
            "5",
        ]);
        assert_eq!((args.catalog.to_str(), args.out.to_str()), (Some("cat"), Some("B.md")));
        assert_eq!((args.gateway_pid, args.broker_pid, args.bearer.as_deref()), (Some(1), Some(2), Some("t")));
        assert_eq!((args.seconds, args.p99_ms, args.key.as_str(), args.connections), (2.5, 80.0, "k", 5));
    }

    #[test]
    fn curves_flags_are_typed_with_defaults_and_take_an_empty_only() {
        let args = curves(&[]);
        assert_eq!((args.gateway.as_str(), args.catalog.to_str()), ("g", Some("c")));
        assert_eq!((args.gateway_pid, args.only), (None, None));
        assert_eq!((args.seconds, args.runs, args.events_per_sec), (4.0, 3, 8000.0));
        assert_eq!(args.key, "bench-write-key");
        // What `scripts/bench-curves` passes.
        let args = curves(&[
            "--gateway-pid",
            "7",
            "--key",
            "k",
            "--runs",
            "5",
            "--seconds",
            "1",
            "--events-per-sec",
            "100",
            "--only",
            "",
        ]);
        assert_eq!((args.gateway_pid, args.only.as_deref(), args.key.as_str()), (Some(7), Some(""), "k"));
        assert_eq!((args.runs, args.seconds, args.events_per_sec), (5, 1.0, 100.0));
    }

    #[test]
    fn run_flags_are_typed() {
        let Command::Run(run) = parse(&["run", "--url", "u", "--gzip", "--batch", "10"]).expect("parses").command
        else {
            panic!("not run")
        };
        assert!(run.gzip);
        assert_eq!((run.batch, run.rate, run.key.as_str()), (10, 100.0, "demo-write-key"));
        assert_eq!((run.protocol, run.app_id.as_str(), run.shared_events), (Protocol::Segment, "demo-web", false));
        let Command::Run(run) =
            parse(&["run", "--url", "u", "--protocol", "ga4", "--shared-events"]).expect("parses").command
        else {
            panic!("not run")
        };
        assert_eq!((run.protocol, run.shared_events), (Protocol::Ga4, true));
        assert!(parse(&["run", "--url", "u", "--protocol", "amplitude"]).is_err());
    }

    #[test]
    fn unknown_or_mistyped_flags_are_usage_errors() {
        assert!(parse(&["run", "--url", "u", "--bogus", "1"]).is_err());
        assert!(parse(&["run", "--url", "u", "--rate", "fast"]).is_err());
        assert!(parse(&["suite", "--gateway", "g"]).is_err());
        assert!(parse(&["curves", "--gateway", "g", "--catalog", "c", "--runs", "many"]).is_err());
        assert!(
            parse(&["suite", "--gateway", "g", "--ceiling", "c", "--brokers", "b", "--gateway-pid", "-1"]).is_err()
        );
        assert_eq!(parse(&["nope"]).err().map(|e| e.exit_code()), Some(2));
    }
}
