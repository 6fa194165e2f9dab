//! The history of a run: every request (when, which client, which ids,
//! what came back) and every fault (when it started and healed), kept in
//! memory for the checker and written as JSON lines for anyone to re-check.

use std::cell::RefCell;
use std::io::Write as _;
use std::path::Path;
use std::rc::Rc;

use serde_json::json;

/// Wall-clock time as Unix seconds (the test process's clock, never faked).
pub fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Sends each batch once and never retries (`navigator.sendBeacon`).
    Beacon,
    /// Retries a batch with the same `messageId`s until it is answered 200.
    Sdk,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Beacon => "beacon",
            Self::Sdk => "sdk",
        }
    }
}

/// One HTTP request and its answer.
#[derive(Debug, Clone)]
pub struct Request {
    pub client: String,
    pub kind: Kind,
    /// The partition key (`userId`) every event of the batch carries.
    pub key: String,
    pub attempt: u32,
    pub ids: Vec<String>,
    pub start: f64,
    pub end: f64,
    /// HTTP status, 0 when no answer came (refused, reset, timed out).
    pub status: u16,
    /// The error body's `code` (the gateway's or the balancer's), if any.
    pub code: String,
    /// Per event on a 200: `accepted`, `spooled`, `duplicate`, ...
    pub outcomes: Vec<String>,
    /// The gateway that answered (HAProxy's `X-Served-By`), empty if none did.
    pub via: String,
}

impl Request {
    pub fn ok(&self) -> bool {
        self.status == 200
    }
}

/// One injected fault.
#[derive(Debug, Clone)]
pub struct Fault {
    pub kind: &'static str,
    pub target: String,
    pub start: f64,
    pub end: f64,
}

#[derive(Debug, Default)]
pub struct Log {
    pub requests: Vec<Request>,
    pub faults: Vec<Fault>,
}

/// Shared by every client and fault lane of the run (one thread).
#[derive(Debug, Clone, Default)]
pub struct History(pub Rc<RefCell<Log>>);

impl History {
    pub fn request(&self, r: Request) {
        self.0.borrow_mut().requests.push(r);
    }

    pub fn fault(&self, f: Fault) {
        eprintln!(
            "nemesis: fault {} on {} from {:.1} to {:.1} ({:.1} s)",
            f.kind,
            f.target,
            f.start,
            f.end,
            f.end - f.start
        );
        self.0.borrow_mut().faults.push(f);
    }

    /// Writes `requests.jsonl` and `faults.jsonl` into `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let log = self.0.borrow();
        let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("requests.jsonl"))?);
        for r in &log.requests {
            let line = json!({"client": r.client, "kind": r.kind.name(), "key": r.key, "attempt": r.attempt,
                "ids": r.ids, "start": r.start, "end": r.end, "status": r.status, "code": r.code,
                "outcomes": r.outcomes, "via": r.via});
            writeln!(out, "{line}")?;
        }
        out.flush()?;
        let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("faults.jsonl"))?);
        for f in &log.faults {
            writeln!(out, "{}", json!({"kind": f.kind, "target": f.target, "start": f.start, "end": f.end}))?;
        }
        out.flush()
    }
}
