//! The soak: the nemesis set-up without faults, a steady batched load for a
//! long time, and every 10 s each gateway's resident memory, open
//! descriptors, spool bytes and producer queue, and the shared dedupe
//! store's size: `soak.tsv` (scripts/nemesis.d/soak.gp draws it).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use serde_json::json;

use super::REDIS_PORT;
use crate::faults_harness::gateway_process::GatewayProcess;
use crate::faults_harness::sleep;

/// One gateway's figures at one moment.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub rss_mib: f64,
    pub fds: usize,
    pub spool_bytes: f64,
    pub queue: f64,
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

pub async fn sample(client: &reqwest::Client, gw: &GatewayProcess) -> Sample {
    let pid = gw.pid();
    let text = match client.get(format!("{}/metrics", gw.url)).send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    Sample {
        rss_mib: rss_mib(pid),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).map(Iterator::count).unwrap_or(0),
        spool_bytes: metric(&text, "eventgw_spool_bytes"),
        queue: metric(&text, "eventgw_producer_queue_depth"),
    }
}

/// Keys in the shared dedupe store (Redis `DBSIZE`).
pub fn dedupe_keys() -> Option<u64> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", REDIS_PORT)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"DBSIZE\r\n").ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().strip_prefix(':')?.parse().ok()
}

/// Open-loop batched load: `rate` events/s in batches of 50 over `workers`
/// connections; returns answers by status.
pub async fn load(url: &str, rate: u64, run_for: Duration, run_id: &str) -> BTreeMap<String, usize> {
    let workers = 8u64;
    let every = Duration::from_secs_f64(50.0 * workers as f64 / rate.max(1) as f64);
    let client = reqwest::Client::builder().timeout(Duration::from_secs(8)).build().expect("client");
    let stop = Instant::now() + run_for;
    let tasks = (0..workers).map(|w| {
        let (client, url, run_id) = (client.clone(), url.to_owned(), run_id.to_owned());
        async move {
            let mut answers: BTreeMap<String, usize> = BTreeMap::new();
            let mut next = Instant::now() + every.mul_f64(w as f64 / workers as f64);
            let mut seq = 0u64;
            while Instant::now() < stop {
                sleep(next.saturating_duration_since(Instant::now())).await;
                next += every;
                let batch: Vec<_> = (0..50)
                    .map(|k| {
                        json!({"type": "track", "event": "Link Clicked", "userId": format!("user-{}", (seq + k) % 64),
                        "messageId": format!("{run_id}-w{w}-b{seq}-e{k}"), "properties": {"href": "https://shop.example/"}})
                    })
                    .collect();
                seq += 1;
                let answer = client
                    .post(format!("{url}/v1/batch"))
                    .basic_auth("demo-write-key", Some(""))
                    .json(&json!({ "batch": batch }))
                    .send()
                    .await;
                let key = answer.map_or_else(|_| "no answer".to_owned(), |r| r.status().as_u16().to_string());
                *answers.entry(key).or_default() += 1;
            }
            answers
        }
    });
    let mut all = BTreeMap::new();
    for a in futures::future::join_all(tasks).await {
        for (k, n) in a {
            *all.entry(k).or_default() += n;
        }
    }
    all
}

/// Samples every gateway every 10 s until `run_for` passed; the TSV text.
pub async fn sampler(gateways: &[GatewayProcess], run_for: Duration) -> String {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().expect("client");
    let started = Instant::now();
    let mut tsv = String::from("# second\tgateway\trss_mib\tfds\tspool_bytes\tproducer_queue\tdedupe_keys\n");
    loop {
        let keys = crate::faults_harness::blocking(dedupe_keys).await.map_or(-1, |k| k as i64);
        for (i, gw) in gateways.iter().enumerate() {
            let s = sample(&client, gw).await;
            let _ = writeln!(
                tsv,
                "{}\t{}\t{:.1}\t{}\t{:.0}\t{:.0}\t{keys}",
                started.elapsed().as_secs(),
                i + 1,
                s.rss_mib,
                s.fds,
                s.spool_bytes,
                s.queue
            );
        }
        if started.elapsed() >= run_for {
            return tsv;
        }
        sleep(Duration::from_secs(10)).await;
    }
}
