//! HAProxy in front of several gateways, through scripts/haproxy: start
//! and stop it, ask its runtime API what it thinks of each gateway, and
//! read its access log back (which gateway got each request, and when), so
//! a scenario can prove where the balancer sent traffic.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{blocking, sleep};

#[derive(Debug, Clone)]
pub struct Balancer {
    pub instance: String,
    /// The frontend; stats on +1, runtime API on +2.
    pub port: u16,
    /// The gateways' ports, named gw1, gw2, ... in this order.
    pub backends: Vec<u16>,
    /// HAProxy's `retry-on` (see scripts/haproxy for what is safe for a POST).
    pub retry_on: String,
}

/// One request as the balancer's access log tells it.
#[derive(Debug, Clone)]
pub struct Routed {
    /// When the balancer sent the request to the server (Unix seconds).
    pub sent_at: f64,
    /// `gw1`, `gw2`, ... or `<NOSRV>` when no server was available.
    pub server: String,
    pub status: i32,
    /// HAProxy's retry count (`+N` when the request was redispatched).
    pub retries: String,
    pub path: String,
}

/// Wall-clock time as Unix seconds, comparable with the access log's.
pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default()
}

impl Balancer {
    pub fn new(instance: &str, port: u16, backends: &[u16], retry_on: &str) -> Self {
        Self { instance: instance.into(), port, backends: backends.to_vec(), retry_on: retry_on.into() }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn script(&self, arg: &str) -> bool {
        let backends: Vec<String> = self.backends.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        Command::new(crate::common::repo_root().join("scripts/haproxy"))
            .arg(arg)
            .env("HAPROXY_INSTANCE", &self.instance)
            .env("HAPROXY_PORT", self.port.to_string())
            .env("HAPROXY_BACKENDS", backends.join(","))
            .env("HAPROXY_RETRY_ON", &self.retry_on)
            .status()
            .expect("scripts/haproxy runs")
            .success()
    }

    /// Starts it (a running instance is restarted: a fresh access log
    /// position is what [`Balancer::access_log`] reads from anyway).
    pub async fn start(&self) {
        let me = self.clone();
        assert!(blocking(move || me.script("start")).await, "haproxy {} starts", self.instance);
    }

    pub async fn stop(&self) {
        let me = self.clone();
        blocking(move || me.script("stop")).await;
    }

    fn log_path(&self) -> std::path::PathBuf {
        let state = std::env::var_os("EVENTGW_STATE")
            .map_or_else(|| crate::common::repo_root().join(".cache"), std::path::PathBuf::from);
        state.join("haproxy").join(&self.instance).join("haproxy.log")
    }

    /// One runtime API command's answer.
    fn admin(&self, command: &str) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port + 2))?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        stream.write_all(format!("{command}\n").as_bytes())?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer)
    }

    /// Sets a server's administrative state through the runtime API:
    /// `drain` (no new requests, open ones finish) or `ready`.
    pub async fn set_state(&self, server: &str, state: &str) {
        let (me, command) = (self.clone(), format!("set server gateways/{server} state {state}"));
        let answer = blocking(move || me.admin(&command)).await.expect("haproxy runtime API");
        assert!(answer.trim().is_empty(), "haproxy refused `{state}` for {server}: {answer}");
    }

    /// Requests open on `server` right now (`scur` of `show stat`).
    pub fn sessions(&self, server: &str) -> Option<u64> {
        let stat = self.admin("show stat").ok()?;
        let line = stat.lines().find(|l| l.starts_with(&format!("gateways,{server},")))?;
        line.split(',').nth(4)?.parse().ok()
    }

    /// Waits until `server` has no open request; returns whether it got there.
    pub async fn wait_idle(&self, server: &str, limit: Duration) -> bool {
        let started = std::time::Instant::now();
        while started.elapsed() < limit {
            let (me, name) = (self.clone(), server.to_owned());
            if blocking(move || me.sessions(&name)).await == Some(0) {
                return true;
            }
            sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// Each server's operational state: `gw1` → up (true) or not.
    pub fn servers_up(&self) -> Vec<(String, bool)> {
        let answer = self.admin("show servers state gateways").unwrap_or_default();
        answer
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                // be_id be_name srv_id srv_name srv_addr srv_op_state (2 = running) srv_admin_state ...
                (f.len() > 6).then(|| (f[3].to_owned(), f[5] == "2" && f[6] == "0"))
            })
            .collect()
    }

    pub fn is_up(&self, server: &str) -> bool {
        self.servers_up().iter().any(|(s, up)| s == server && *up)
    }

    /// Polls until `server` is up (`want`) or not, and returns when it saw so.
    pub async fn wait_state(&self, server: &str, want: bool, limit: Duration) -> f64 {
        let started = std::time::Instant::now();
        loop {
            let me = self.clone();
            let name = server.to_owned();
            if blocking(move || me.is_up(&name)).await == want {
                return unix_now();
            }
            assert!(started.elapsed() < limit, "haproxy did not see {server} {} within {limit:?}", state(want));
            sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every request of the access log.
    pub fn access_log(&self) -> Vec<Routed> {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        text.lines().filter_map(parse_line).collect()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}

fn state(up: bool) -> &'static str {
    if up { "up" } else { "down" }
}

/// `%Ts.%ms %Th %Ti %TR %Tw %Tc %Ta %b/%s %ST %rc %tsc %HM %HP` (scripts/haproxy).
fn parse_line(line: &str) -> Option<Routed> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 13 {
        return None;
    }
    let accepted: f64 = f[0].parse().ok()?;
    let ms = |s: &str| s.parse::<f64>().ok().filter(|v| *v > 0.0).unwrap_or(0.0);
    let before_server: f64 = f[1..6].iter().map(|s| ms(s)).sum();
    let (_, server) = f[7].split_once('/')?;
    Some(Routed {
        sent_at: accepted + before_server / 1000.0,
        server: server.to_owned(),
        status: f[8].parse().ok()?,
        retries: f[9].to_owned(),
        path: f[12].to_owned(),
    })
}
