//! `gateway [serve|topics|check-config|healthcheck|spool|keys|dead-letter|tail] [--config FILE]`: reads the
//! arguments and the configuration, sets up logging, binds the listener
//! and hands over to [`gateway::run`].

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use gateway::config::Config;
use gateway::sink::spool::cli::SpoolCommand;
use gateway::tls::CertificateStore;
use gateway::{AppState, topics};

/// Every request allocates and frees many small objects across worker
/// threads; mimalloc measured markedly faster than glibc's malloc here
/// (malloc and free were a fifth of the gateway's CPU profile). Its
/// `override` feature (gateway/Cargo.toml) also serves librdkafka's C
/// allocations: each record's headers and message are allocated on a
/// request's thread and freed on librdkafka's, which kept glibc in its slow
/// path (`_int_malloc` alone was 10% of the gateway at batch saturation).
/// Wrapped to count the bytes in use ([`gateway::heap`]).
#[global_allocator]
static ALLOCATOR: Counted = Counted(mimalloc::MiMalloc);

/// mimalloc, telling [`gateway::heap`] what it hands out and takes back.
struct Counted(mimalloc::MiMalloc);

// The one `unsafe` of the gateway: a global allocator is an unsafe trait.
// Every call is passed to mimalloc unchanged; the counting is safe code.
#[allow(unsafe_code)]
// SAFETY: each method forwards its arguments to mimalloc's own
// implementation of the same method, so this allocator keeps every
// guarantee mimalloc gives; counting reads only sizes.
unsafe impl std::alloc::GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees for `layout` are passed on.
        let ptr = unsafe { self.0.alloc(layout) };
        if !ptr.is_null() {
            gateway::heap::allocated(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let ptr = unsafe { self.0.alloc_zeroed(layout) };
        if !ptr.is_null() {
            gateway::heap::allocated(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from this allocator with `layout` (the caller's guarantee).
        unsafe { self.0.dealloc(ptr, layout) };
        gateway::heap::freed(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's guarantees for `ptr`, `layout` and `new_size` are passed on.
        let moved = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            gateway::heap::freed(layout.size());
            gateway::heap::allocated(new_size);
        }
        moved
    }
}

/// The command line. Argument parsing is clap's: the binary's code is only
/// what each command does.
#[derive(Debug, clap::Parser)]
#[command(
    name = "gateway",
    about = "The event-tracking ingestion gateway",
    after_help = "The config file defaults to $EVENTGW_CONFIG; every key can be overridden \
                  with EVENTGW__SECTION__KEY=value."
)]
struct Cli {
    /// The configuration file (TOML).
    #[arg(short, long, global = true, value_name = "FILE", env = "EVENTGW_CONFIG")]
    config: Option<PathBuf>,
    /// What to do; `serve` when none is named.
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Clone, clap::Subcommand)]
enum Command {
    /// Run the HTTP gateway (the default).
    Serve,
    /// Create the catalog's and the gateway's topics where missing.
    Topics,
    /// Load the configuration and the catalog, then exit.
    CheckConfig,
    /// Exit 0 when the gateway of this configuration answers `/healthz`
    /// (a container's health check: the image needs no curl).
    Healthcheck,
    /// Status, inspect or replay of the local spool.
    #[command(subcommand)]
    Spool(SpoolCommand),
    /// Rotate, erase with or decrypt with the user keys of `encrypt` fields.
    #[command(subcommand)]
    Keys(gateway::privacy::keys_cli::KeysCommand),
    /// Inspect the dead-letter topic, or replay what the current catalog now accepts (docs/recovery.md).
    #[command(subcommand)]
    DeadLetter(gateway::recover::DeadLetterCommand),
    /// Print the live events of a running gateway (its `/live/stream`).
    Tail(TailArgs),
}

/// `gateway tail`: which gateway, with which operator token, which events.
#[derive(Debug, Clone, clap::Args)]
struct TailArgs {
    /// The gateway's base URL; defaults to the configuration's listener.
    #[arg(long)]
    url: Option<String>,
    /// The operator token (`live.token`); defaults to the configuration's.
    /// Prefer the environment over the command line, which `ps` shows.
    #[arg(long, env = "EVENTGW_LIVE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Only this source's events.
    #[arg(long)]
    source: Option<String>,
    /// Only these statuses, comma-separated (`invalid,rejected`).
    #[arg(long)]
    status: Option<String>,
    /// Only this event name.
    #[arg(long)]
    event: Option<String>,
    /// Only this `userId` or `anonymousId` (as stored).
    #[arg(long)]
    user: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let cli = <Cli as clap::Parser>::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,librdkafka=warn".into()),
        )
        .init();
    if let Some(Command::Tail(args)) = cli.command {
        return tail(args, cli.config.as_deref());
    }
    let path = cli.config.context("no configuration: pass --config FILE or set EVENTGW_CONFIG (see --help)")?;
    let config = Config::load(&path)?;
    let command = cli.command.unwrap_or(Command::Serve);
    if let Command::Spool(spool) = command {
        return gateway::sink::spool::cli::main(spool, &config);
    }
    if let Command::Keys(keys) = command {
        return gateway::privacy::keys_cli::main(keys, &config);
    }
    if let Command::DeadLetter(dead_letter) = command {
        return gateway::recover::main(dead_letter, config);
    }
    if let Command::Healthcheck = command {
        return healthcheck(config.server.listen, config.server.tls.is_some());
    }
    let runtime = actix_web::rt::System::new();
    runtime.block_on(command_for(command, config))
}

async fn command_for(command: Command, config: Config) -> anyhow::Result<()> {
    match command {
        Command::CheckConfig => {
            config.server.tls.as_ref().map(CertificateStore::load).transpose()?;
            gateway::api::routes::check_aliases(&config.server.path_aliases).map_err(anyhow::Error::msg)?;
            let state = AppState::with_kafka(config)?;
            println!("configuration and catalog are valid: {} events", state.catalog.events().len());
            Ok(())
        }
        Command::Topics => {
            let state = AppState::with_kafka(config)?;
            let created = topics::ensure_all(&state.catalog, &state.config).await?;
            println!("created {} topic(s): {}", created.len(), created.join(", "));
            Ok(())
        }
        Command::Serve
        | Command::Spool(_)
        | Command::Keys(_)
        | Command::DeadLetter(_)
        | Command::Healthcheck
        | Command::Tail(_) => {
            let listen = config.server.listen;
            let listener = TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
            let signals = gateway::run::os_signals().context("cannot listen for signals")?;
            Ok(gateway::run(config, listener, signals).await?)
        }
    }
}

/// `gateway tail`: URL and token from the arguments, else from the
/// configuration file when one is given.
fn tail(args: TailArgs, config: Option<&std::path::Path>) -> anyhow::Result<()> {
    let config = match (&args.url, &args.token, config) {
        (Some(_), Some(_), _) | (_, _, None) => None,
        (_, _, Some(path)) => Some(Config::load(path)?),
    };
    let url = args
        .url
        .or_else(|| config.as_ref().map(|c| format!("http://{}", c.server.listen)))
        .context("no gateway: pass --url or --config")?;
    let token = args
        .token
        .or_else(|| config.as_ref().map(|c| c.live.token.clone()))
        .context("no operator token: pass --token, set EVENTGW_LIVE_TOKEN or --config")?;
    let filter = gateway::live::Filter { source: args.source, status: args.status, event: args.event, user: args.user };
    let runtime = actix_web::rt::System::new();
    Ok(runtime.block_on(gateway::live::tail::run(gateway::live::tail::TailRequest { url, token, filter }))?)
}

/// How long the health check waits for each step: under the probe timeouts
/// of the image (3 s) and the chart.
const HEALTHCHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /healthz` on the configured listener (its loopback address when it
/// listens on every address). With TLS it only checks that the listener
/// accepts a connection: liveness is "the process serves", and a TLS
/// client here would cost the image more than it proves.
fn healthcheck(listen: SocketAddr, tls: bool) -> anyhow::Result<()> {
    let mut addr = listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() { [127, 0, 0, 1].into() } else { std::net::Ipv6Addr::LOCALHOST.into() });
    }
    let mut stream = TcpStream::connect_timeout(&addr, HEALTHCHECK_TIMEOUT)
        .with_context(|| format!("unhealthy: nothing accepts connections on {addr}"))?;
    if tls {
        println!("healthy: {addr} accepts connections (TLS: the connection only)");
        return Ok(());
    }
    stream.set_read_timeout(Some(HEALTHCHECK_TIMEOUT))?;
    stream.set_write_timeout(Some(HEALTHCHECK_TIMEOUT))?;
    stream.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())?;
    let mut head = [0_u8; 64];
    let read = stream.read(&mut head).with_context(|| format!("unhealthy: {addr} did not answer /healthz"))?;
    let status = String::from_utf8_lossy(&head[..read]);
    let status = status.lines().next().unwrap_or_default();
    anyhow::ensure!(status.split(' ').nth(1) == Some("200"), "unhealthy: /healthz answered {status:?}");
    println!("healthy: {addr} /healthz answered 200");
    Ok(())
}
