//! `loadtest stalled-bodies` (issue 28, item 1): many request bodies that
//! announce the largest `Content-Length` and stall after ten bytes, over
//! one h2c connection (as many streams) and over HTTP/1.1 connections (one
//! body each), held while the gateway's peak resident memory (VmHWM) is
//! read. No credentials are sent: the body is read before authentication.
//! `scripts/bench-stalled-bodies` starts the gateway and runs this.

use std::time::Duration;

use actix_web::web::Bytes;
use anyhow::Context;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::args::StalledArgs;
use crate::memory::rss_kib;

/// What a stalled client sends of its body.
const OPENING: &[u8] = b"{\"batch\":[";

/// Holds the stalled bodies `args` asks for, then prints the gateway's
/// memory and how many bodies it refused at once.
pub async fn stalled_bodies(args: &StalledArgs) -> anyhow::Result<()> {
    let (_, before) = rss_kib(args.gateway_pid)?;
    let mut h2_held = None;
    if args.h2_streams > 0 {
        h2_held = Some(h2_streams(&args.addr, args.h2_streams, args.declared).await?);
    }
    let mut h1_held = Vec::with_capacity(args.h1_connections);
    for _ in 0..args.h1_connections {
        let mut stream = TcpStream::connect(&args.addr).await.context("connect (HTTP/1.1)")?;
        let head = format!(
            "POST /v1/batch HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            args.declared
        );
        stream.write_all(&[head.as_bytes(), OPENING].concat()).await?;
        h1_held.push(stream);
    }
    // The gateway's workers take the bytes when they get to them.
    tokio::time::sleep(Duration::from_secs_f64(args.hold_secs)).await;
    let (now, peak) = rss_kib(args.gateway_pid)?;
    let unfinished = unfinished_body_bytes(&args.addr).await;
    let refused = match h2_held {
        Some((_, _, ref mut answers)) => refused_streams(answers).await,
        None => 0,
    };
    println!(
        "stalled bodies: {} h2c streams on one connection ({refused} answered at once), {} HTTP/1.1 connections, \
         {} bytes announced each: gateway peak RSS {} MiB (at start {} MiB, now {} MiB); eventgw_unfinished_body_bytes \
         {unfinished}",
        args.h2_streams,
        args.h1_connections,
        args.declared,
        peak / 1024,
        before / 1024,
        now / 1024,
    );
    drop((h2_held, h1_held));
    Ok(())
}

type Answers = Vec<h2::client::ResponseFuture>;

/// One h2c connection with `count` streams, each announcing `declared`
/// bytes and sending [`OPENING`]; what must stay alive to hold them.
async fn h2_streams(
    addr: &str,
    count: usize,
    declared: usize,
) -> anyhow::Result<(tokio::task::JoinHandle<()>, Vec<h2::SendStream<Bytes>>, Answers)> {
    let tcp = TcpStream::connect(addr).await.context("connect (h2c)")?;
    let (mut client, connection) = h2::client::handshake(tcp).await.context("h2c handshake")?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let (mut streams, mut answers) = (Vec::with_capacity(count), Vec::with_capacity(count));
    for _ in 0..count {
        client = client.ready().await.context("h2c stream")?;
        let request = http::Request::post(format!("http://{addr}/v1/batch"))
            .header("content-type", "application/json")
            .header("content-length", declared)
            .body(())?;
        let (answer, mut stream) = client.send_request(request, false)?;
        stream.send_data(Bytes::from_static(OPENING), false)?;
        streams.push(stream);
        answers.push(answer);
    }
    Ok((driver, streams, answers))
}

/// Streams the gateway already answered (refused) while the rest stall.
async fn refused_streams(answers: &mut Answers) -> usize {
    let mut refused = 0;
    for answer in answers.iter_mut() {
        let ready = futures::FutureExt::now_or_never(&mut *answer);
        refused += usize::from(ready.is_some());
    }
    refused
}

/// `eventgw_unfinished_body_bytes` from `/metrics` ("absent" before issue 28).
async fn unfinished_body_bytes(addr: &str) -> String {
    let text = async { reqwest::get(format!("http://{addr}/metrics")).await?.text().await };
    let text = text.await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("eventgw_unfinished_body_bytes "))
        .map_or_else(|| "absent".to_owned(), |v| v.trim().to_owned())
}
