//! Gateway memory under stress: resident memory read from /proc while many
//! keep-alive connections are held open.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Current and peak resident memory of `pid`, in KiB.
pub fn rss_kib(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok((field("VmRSS:"), field("VmHWM:")))
}

/// Opens `count` connections to `addr`, makes one keep-alive request on
/// each, and returns them open. Connections that fail are counted, not fatal.
pub async fn hold_connections(addr: &str, count: usize) -> (Vec<TcpStream>, usize) {
    let mut open = Vec::with_capacity(count);
    let mut failed = 0;
    for chunk in (0..count).collect::<Vec<_>>().chunks(500) {
        let attempts = chunk.iter().map(|_| async {
            let mut stream = TcpStream::connect(addr).await.ok()?;
            let request = "GET /healthz HTTP/1.1\r\nHost: gateway\r\nConnection: keep-alive\r\n\r\n";
            stream.write_all(request.as_bytes()).await.ok()?;
            let mut buffer = [0u8; 512];
            tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer)).await.ok()?.ok()?;
            Some(stream)
        });
        for result in futures::future::join_all(attempts).await {
            match result {
                Some(stream) => open.push(stream),
                None => failed += 1,
            }
        }
    }
    (open, failed)
}

/// CPU time (user + system) `pid` has used so far, in seconds; `None` when
/// /proc cannot tell.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; fields are counted after its ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / clock_ticks_per_second())
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().ok())
        .unwrap_or(100.0)
}
