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

/// CPU time (user + system), in seconds, of `pid`'s librdkafka threads
/// (`rdk:*`, and the polling thread of rdkafka's `ThreadedProducer`): what
/// producing costs inside the gateway, apart from its HTTP workers.
pub fn kafka_thread_seconds(pid: u32) -> Option<f64> {
    let mut ticks = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        if let Some((name, used)) = thread_ticks(&stat)
            && (name.starts_with("rdk:") || name.starts_with("producer poll"))
        {
            ticks += used;
        }
    }
    Some(ticks as f64 / clock_ticks_per_second())
}

/// A thread's name and its user + system ticks, from its `stat` line.
fn thread_ticks(stat: &str) -> Option<(&str, u64)> {
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some((name, fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?))
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().ok())
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::thread_ticks;

    #[test]
    fn a_thread_stat_line_gives_its_name_and_ticks() {
        let line = "4242 (rdk:broker1) S 1 4200 4200 0 -1 4194368 10 0 0 0 17 5 0 0 20 0 12 0 100 0 0";
        assert_eq!(thread_ticks(line), Some(("rdk:broker1", 22)));
        let spaced = "7 (producer pollin) S 1 2 3 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0";
        assert_eq!(thread_ticks(spaced), Some(("producer pollin", 7)));
        assert_eq!(thread_ticks("garbage"), None);
    }
}
