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

/// The gateway's heap in use and its peak since start, in MiB, from
/// `eventgw_heap_bytes` and `eventgw_heap_peak_bytes` on `/metrics`: what
/// resident memory holds besides live data (the allocator keeps what it
/// held at its highest peak) shows as the difference. `None` from a
/// gateway without them.
pub async fn heap_mib(gateway: &str) -> Option<(f64, f64)> {
    let text = reqwest::get(format!("{gateway}/metrics")).await.ok()?.text().await.ok()?;
    heap_in(&text)
}

/// [`heap_mib`]'s figures from a `/metrics` text.
fn heap_in(text: &str) -> Option<(f64, f64)> {
    let read = |name: &str| -> Option<f64> {
        let value = text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))?;
        Some(value.trim().parse::<f64>().ok()? / (1024.0 * 1024.0))
    };
    Some((read("eventgw_heap_bytes")?, read("eventgw_heap_peak_bytes")?))
}

/// How [`heap_mib`]'s figures read in a report line.
pub fn heap_words(heap: Option<(f64, f64)>) -> String {
    heap.map_or_else(
        || "heap not reported".to_owned(),
        |(now, peak)| format!("heap in use {now:.1} MiB, its peak {peak:.1} MiB"),
    )
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
    use super::{heap_in, heap_words, thread_ticks};

    #[test]
    fn a_thread_stat_line_gives_its_name_and_ticks() {
        let line = "4242 (rdk:broker1) S 1 4200 4200 0 -1 4194368 10 0 0 0 17 5 0 0 20 0 12 0 100 0 0";
        assert_eq!(thread_ticks(line), Some(("rdk:broker1", 22)));
        let spaced = "7 (producer pollin) S 1 2 3 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0";
        assert_eq!(thread_ticks(spaced), Some(("producer pollin", 7)));
        assert_eq!(thread_ticks("garbage"), None);
    }

    #[test]
    fn the_heap_figures_are_read_by_their_exact_names() {
        let text = "# TYPE eventgw_heap_bytes gauge\neventgw_heap_bytes 3145728\n\
                    eventgw_heap_peak_bytes_other 1\neventgw_heap_peak_bytes 7340032\n";
        assert_eq!(heap_in(text), Some((3.0, 7.0)));
        assert_eq!(heap_in("eventgw_heap_bytes 1048576\n"), None, "both or neither");
        assert_eq!(heap_words(None), "heap not reported");
        assert_eq!(heap_words(Some((3.0, 7.0))), "heap in use 3.0 MiB, its peak 7.0 MiB");
    }
}
