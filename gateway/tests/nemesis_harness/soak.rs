//! The soak: the nemesis set-up without faults, a steady batched load for a
//! long time, and every 10 s each gateway's resident memory (and its
//! anonymous part and the heap's bytes in use), threads, open descriptors,
//! spool bytes and producer queue, and the shared dedupe store's size:
//! `soak.tsv`, written as it goes (scripts/nemesis.d/soak.gp draws it).

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
    /// The anonymous part of RSS (heap, stacks): what the allocator holds,
    /// as opposed to mapped files and shared memory.
    pub rss_anon_mib: f64,
    /// Heap bytes in use (`eventgw_heap_bytes`, counted by the allocator):
    /// what is live, where RSS also keeps what the allocator held at a peak.
    pub heap_mib: f64,
    /// The heap's high-water mark since start (`eventgw_heap_peak_bytes`):
    /// a step of RSS with a step of this is a new peak of live data.
    pub heap_peak_mib: f64,
    /// Threads of the process (each may get an allocator arena of its own).
    pub threads: f64,
    pub fds: usize,
    pub spool_bytes: f64,
    pub queue: f64,
}

/// A number field of `/proc/<pid>/status` (`VmRSS:`, `Threads:`), 0 if absent.
fn status_field(status: &str, field: &str) -> f64 {
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .unwrap_or(0.0)
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
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    Sample {
        rss_mib: status_field(&status, "VmRSS:") / 1024.0,
        rss_anon_mib: status_field(&status, "RssAnon:") / 1024.0,
        heap_mib: metric(&text, "eventgw_heap_bytes") / (1024.0 * 1024.0),
        heap_peak_mib: metric(&text, "eventgw_heap_peak_bytes") / (1024.0 * 1024.0),
        threads: status_field(&status, "Threads:"),
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

/// Connections of the soak's load. Each waits for its answer (about 60 ms
/// through three brokers with `acks=all` and a 20 ms linger), so it takes
/// this many to offer 36,000 events/s in batches of 50: 8 carried 6,700.
pub const WORKERS: u64 = 64;

/// Batched load: `rate` events/s in batches of 50 over [`WORKERS`]
/// connections, each sending on its schedule or, when an answer is late,
/// as soon as it comes; returns answers by status.
pub async fn load(url: &str, rate: u64, run_for: Duration, run_id: &str) -> BTreeMap<String, usize> {
    let workers = WORKERS;
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

/// Samples every gateway every 10 s until `run_for` passed; the TSV text,
/// also written to `file` after every round (a run cut short keeps its samples).
pub async fn sampler(gateways: &[GatewayProcess], run_for: Duration, file: &std::path::Path) -> String {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().expect("client");
    let started = Instant::now();
    let mut tsv = String::from(
        "# second\tgateway\trss_mib\tfds\tspool_bytes\tproducer_queue\tdedupe_keys\trss_anon_mib\tthreads\theap_mib\theap_peak_mib\n",
    );
    loop {
        let keys = crate::faults_harness::blocking(dedupe_keys).await.map_or(-1, |k| k as i64);
        for (i, gw) in gateways.iter().enumerate() {
            let s = sample(&client, gw).await;
            let _ = writeln!(
                tsv,
                "{}\t{}\t{:.1}\t{}\t{:.0}\t{:.0}\t{keys}\t{:.1}\t{:.0}\t{:.1}\t{:.1}",
                started.elapsed().as_secs(),
                i + 1,
                s.rss_mib,
                s.fds,
                s.spool_bytes,
                s.queue,
                s.rss_anon_mib,
                s.threads,
                s.heap_mib,
                s.heap_peak_mib
            );
        }
        let _ = std::fs::write(file, &tsv);
        if started.elapsed() >= run_for {
            return tsv;
        }
        sleep(Duration::from_secs(10)).await;
    }
}

/// The least-squares slope of `points` (seconds, value), per hour; `None`
/// for fewer than two points or no spread in time.
pub fn slope_per_hour(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    Some(sxy / sxx * 3600.0)
}

#[cfg(test)]
mod tests {
    use super::slope_per_hour;

    #[test]
    fn slope_of_a_line_and_of_a_flat_series() {
        let line: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i) * 10.0, 5.0 + f64::from(i))).collect();
        let per_hour = slope_per_hour(&line).expect("slope");
        assert!((per_hour - 360.0).abs() < 1e-9, "{per_hour}");
        let flat: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), 7.0)).collect();
        assert_eq!(slope_per_hour(&flat), Some(0.0));
        assert_eq!(slope_per_hour(&[(1.0, 2.0)]), None);
    }
}
