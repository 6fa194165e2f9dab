//! The load generator and benchmark harness.
//!
//!   loadtest ceiling --listen 127.0.0.1:8090 [--workers 2] [--delay-ms 0]
//!   loadtest run --url URL --rate R --seconds S [--batch N] [--gzip] [--key K | --bearer T]
//!                [--protocol segment|posthog|ga4|snowplow] [--app-id A] [--shared-events]
//!   loadtest token --secret S --issuer I   (an HS256 JWT for the JWT variant)
//!   loadtest suite --gateway URL --ceiling URL --brokers B --out BENCHMARKS.md [...]
//!   loadtest bench-catalog --out DIR [--types 200]   (the generated `bench` domain)
//!   loadtest curves --gateway URL --catalog DIR --gateway-pid PID [--runs 3] [--seconds 4]
//!                   [--events-per-sec 8000] [--only CURVE]   (prints the "Cost curves" section)
//!   loadtest stalled-bodies --addr HOST:PORT --gateway-pid PID [--h2-streams 3000] [--h1-connections 1000]
//!                   [--declared 524288] [--hold-secs 3]   (the gateway's peak memory under stalled bodies)
//!   loadtest watch --addr HOST:PORT --token T [--viewers 5] [--seconds 10]   (live-view viewers)
//!
//! Every run is open-loop, bounded in requests and time, loopback only.
//! `loadtest COMMAND --help` lists each command's flags.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use eventgw_loadtest::args::{CeilingArgs, Cli, Command, RunArgs, TokenArgs};
use eventgw_loadtest::generator::{self, Auth, RunConfig};
use eventgw_loadtest::protocol::Credentials;
use eventgw_loadtest::{bench_catalog, ceiling, client, curves, suite, workload};

/// The gateway's allocator (mimalloc, overriding C's `malloc` so that
/// librdkafka uses it too), for every process this binary runs: the load
/// generator, the HTTP ceiling's server and the Kafka ceiling's producer.
/// With glibc's `malloc` the generator took 0.86 of the machine's 2 cores
/// at the batched maximum (37% of its time in `malloc` and `free`), and the
/// ceilings ran on a slower allocator than the gateway they are compared
/// with; with mimalloc, 0.56.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // Usage errors exit with 2 and `--help` with 0, as clap does.
    match Cli::parse().command {
        Command::Ceiling(args) => ceiling_server(&args),
        Command::Run(args) => runtime()?.block_on(single_run(&args)),
        Command::Suite(args) => runtime()?.block_on(suite::suite(&args)),
        Command::Curves(args) => runtime()?.block_on(curves::curves(&args)),
        Command::BenchCatalog(args) => bench_catalog::write(&args.out, args.types),
        Command::Token(args) => token(&args),
        Command::StalledBodies(args) => runtime()?.block_on(eventgw_loadtest::stalled::stalled_bodies(&args)),
        Command::Watch(args) => runtime()?.block_on(eventgw_loadtest::watch::watch(&args)),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?)
}

fn ceiling_server(args: &CeilingArgs) -> anyhow::Result<()> {
    let (listen, workers) = (&args.listen, args.workers);
    let delay = Duration::from_millis(args.delay_ms);
    let listener = TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
    eprintln!("HTTP ceiling server on {listen} ({workers} workers)");
    actix_web::rt::System::new().block_on(async move { ceiling::serve(listener, workers, delay)?.await })?;
    Ok(())
}

async fn single_run(args: &RunArgs) -> anyhow::Result<()> {
    let credentials = Credentials { key: args.key.clone(), app_id: args.app_id.clone() };
    let workload = workload::Workload::from_catalog(&args.catalog, args.batch, args.gzip, args.users)?.speaking(
        args.protocol,
        credentials.clone(),
        args.shared_events,
    )?;
    let auth = match &args.bearer {
        Some(token) if !token.is_empty() => Auth::Bearer(token.clone()),
        _ => Auth::WriteKey(args.key.clone()),
    };
    let url = reqwest::Url::parse(&args.url).with_context(|| format!("--url {} is not a URL", args.url))?;
    let url = if url.path() == "/" && url.query().is_none() {
        args.protocol.endpoint(&args.url, &credentials)
    } else {
        args.url.clone()
    };
    let config = RunConfig {
        url,
        rate: args.rate,
        duration: Duration::from_secs_f64(args.seconds),
        auth,
        timeout: Duration::from_secs(args.timeout_secs),
    };
    let result = generator::run(&client()?, &config, Arc::new(workload), Instant::now()).await;
    println!("{}", suite::summary(&format!("{} rps", config.rate), &result));
    Ok(())
}

/// Prints an HS256 JWT for the benchmark's JWT variant, valid for a day.
fn token(args: &TokenArgs) -> anyhow::Result<()> {
    let now = jsonwebtoken::get_current_timestamp();
    let claims = serde_json::json!({"iss": args.issuer, "sub": "loadtest", "aud": "eventgw",
        "exp": now + 86_400, "nbf": now - 60});
    let key = jsonwebtoken::EncodingKey::from_secret(args.secret.as_bytes())?;
    println!("{}", jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key)?);
    Ok(())
}
