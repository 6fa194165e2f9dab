//! The load generator and benchmark harness.
//!
//!   loadtest ceiling --listen 127.0.0.1:8090 [--workers 2] [--delay-ms 0]
//!   loadtest run --url URL --rate R --seconds S [--batch N] [--gzip] [--key K | --bearer T]
//!   loadtest suite --gateway URL --ceiling URL --brokers B --out BENCHMARKS.md [...]
//!   loadtest bench-catalog --out DIR [--types 200]   (the generated `bench` domain)
//!   loadtest curves --gateway URL --catalog DIR --gateway-pid PID [--runs 3] [--seconds 4]
//!                   [--events-per-sec 8000] [--only CURVE]   (prints the "Cost curves" section)
//!
//! Every run is open-loop, bounded in requests and time, loopback only.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use eventgw_loadtest::args::Args;
use eventgw_loadtest::generator::{self, Auth, RunConfig};
use eventgw_loadtest::{bench_catalog, ceiling, client, curves, suite, workload};

fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let (command, rest) =
        argv.split_first().context("usage: loadtest ceiling|run|suite|curves|bench-catalog|token [--flags]")?;
    let args = Args::parse(rest)?;
    match command.as_str() {
        "ceiling" => ceiling_server(&args),
        "run" => runtime()?.block_on(single_run(&args)),
        "suite" => runtime()?.block_on(suite::suite(&args)),
        "curves" => runtime()?.block_on(curves::curves(&args)),
        "bench-catalog" => bench_catalog::write(&PathBuf::from(args.required("out")?), args.get("types", 200)?),
        "token" => token(&args),
        other => anyhow::bail!("unknown command `{other}`; use ceiling, run, suite, curves, bench-catalog or token"),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?)
}

fn ceiling_server(args: &Args) -> anyhow::Result<()> {
    let listen: String = args.get("listen", "127.0.0.1:8090".to_owned())?;
    let workers: usize = args.get("workers", 2)?;
    let delay = Duration::from_millis(args.get("delay-ms", 0)?);
    let listener = TcpListener::bind(&listen).with_context(|| format!("cannot listen on {listen}"))?;
    eprintln!("HTTP ceiling server on {listen} ({workers} workers)");
    actix_web::rt::System::new().block_on(async move { ceiling::serve(listener, workers, delay)?.await })?;
    Ok(())
}

async fn single_run(args: &Args) -> anyhow::Result<()> {
    let catalog: PathBuf = args.get("catalog", PathBuf::from("schemas"))?;
    let workload = workload::Workload::from_catalog(
        &catalog,
        args.get("batch", 1)?,
        args.flag("gzip"),
        args.get("users", 10_000)?,
    )?;
    let auth = match args.get("bearer", String::new())? {
        token if !token.is_empty() => Auth::Bearer(token),
        _ => Auth::WriteKey(args.get("key", "demo-write-key".to_owned())?),
    };
    let config = RunConfig {
        url: args.required("url")?,
        rate: args.get("rate", 100.0)?,
        duration: Duration::from_secs_f64(args.get("seconds", 5.0)?),
        auth,
        timeout: Duration::from_secs(args.get("timeout-secs", 10)?),
    };
    let result = generator::run(&client()?, &config, Arc::new(workload), Instant::now()).await;
    println!("{}", suite::summary(&format!("{} rps", config.rate), &result));
    Ok(())
}

/// Prints an HS256 JWT for the benchmark's JWT variant, valid for a day.
fn token(args: &Args) -> anyhow::Result<()> {
    let now = jsonwebtoken::get_current_timestamp();
    let claims = serde_json::json!({"iss": args.required("issuer")?, "sub": "loadtest", "aud": "eventgw",
        "exp": now + 86_400, "nbf": now - 60});
    let key = jsonwebtoken::EncodingKey::from_secret(args.required("secret")?.as_bytes())?;
    println!("{}", jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key)?);
    Ok(())
}
