//! What a run leaves behind: `summary.md` (the figures RELIABILITY.md
//! shows), `timeline.tsv` (per second: requests, errors, p99 answer time,
//! acknowledged events) and `faults.tsv` (one band per fault), which
//! scripts/nemesis.d/timeline.gp draws as `timeline.png`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::checker::Verdict;
use super::history::Log;

pub fn summary(log: &Log, v: &Verdict, seed: u64, minutes: f64, settled_secs: f64) -> String {
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    for r in &log.requests {
        let key = if r.status == 0 { "no answer".to_owned() } else { format!("{} {}", r.status, r.code) };
        *by_status.entry(key.trim().to_owned()).or_default() += 1;
    }
    let mut by_kind: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
    for f in &log.faults {
        let e = by_kind.entry(f.kind).or_default();
        e.0 += 1;
        e.1 += f.end - f.start;
    }
    let join = |m: &BTreeMap<String, usize>| {
        if m.is_empty() {
            "none".to_owned()
        } else {
            m.iter().map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join(", ")
        }
    };
    let mut s = String::new();
    let verdict = if v.passed() { "PASS" } else { "FAIL" };
    let _ = writeln!(s, "### Nemesis run: seed {seed}, {minutes} min — {verdict}\n");
    let _ = writeln!(s, "Reproduce: `scripts/nemesis --seed {seed} --minutes {minutes}`\n");
    let _ = writeln!(s, "| measure | value |\n| --- | --- |");
    let _ = writeln!(s, "| requests | {} |", log.requests.len());
    let _ = writeln!(s, "| requests by answer | {} |", join(&by_status));
    let _ = writeln!(s, "| events sent (unique ids) | {} |", v.sent);
    let _ = writeln!(
        s,
        "| acknowledged (200) | {} (spooled {}, answered `duplicate` {}) |",
        v.acked, v.spooled, v.answered_duplicate
    );
    let _ = writeln!(s, "| **acknowledged and lost** | **{}** |", v.lost.len());
    let _ = writeln!(s, "| **stored more than once** | **{}** |", v.duplicated.len());
    let _ = writeln!(s, "| **per-key order violations** | **{}** |", v.order_violations.len());
    let _ = writeln!(s, "| never acknowledged, stored (by last answer; allowed) | {} |", join(&v.unacked_stored));
    let _ = writeln!(s, "| never acknowledged, absent | {} |", v.unacked_absent);
    let _ = writeln!(s, "| **stored after a 4xx refusal** | **{}** |", v.refused_stored.len());
    let _ = writeln!(s, "| **unexpected 200 outcomes** | **{}** |", join(&v.odd_outcomes));
    let _ = writeln!(s, "| stored, never sent | {} |", v.foreign);
    let faults: Vec<String> = by_kind.iter().map(|(k, (n, secs))| format!("{k}: {n} ({secs:.0} s)")).collect();
    let _ = writeln!(s, "| faults injected (count, total time) | {} |", faults.join(", "));
    let _ = writeln!(s, "| cluster settled before the read-back | {settled_secs:.1} s |");
    if !v.diagnoses.is_empty() {
        let _ = writeln!(s, "\nLost or duplicated ids (times from the run's start):\n");
        for d in &v.diagnoses {
            let _ = writeln!(s, "- {d}");
        }
    }
    if !v.order_violations.is_empty() {
        let _ = writeln!(s, "\nOrder violations (first 20):\n");
        for o in v.order_violations.iter().take(20) {
            let _ = writeln!(s, "- {o}");
        }
    }
    s
}

/// Per-second rows from `t0`: requests ended, 200s, others, error rate,
/// p99 answer time (ms), events acknowledged.
pub fn write_timeline(log: &Log, t0: f64, dir: &Path) -> std::io::Result<()> {
    let mut buckets: BTreeMap<i64, (usize, usize, usize, Vec<f64>)> = BTreeMap::new();
    for r in &log.requests {
        let b = buckets.entry((r.end - t0).floor() as i64).or_default();
        b.0 += 1;
        if r.ok() {
            b.1 += 1;
            b.2 += r.ids.len();
        }
        b.3.push((r.end - r.start) * 1000.0);
    }
    let mut t = String::from("# second\trequests\tok\terror_rate\tp99_ms\tacked_events\n");
    for (sec, (n, ok, events, mut lat)) in buckets {
        lat.sort_by(f64::total_cmp);
        let p99 = lat[((lat.len() as f64 * 0.99).ceil() as usize).clamp(1, lat.len()) - 1];
        let rate = (n - ok) as f64 / n as f64;
        let _ = writeln!(t, "{sec}\t{n}\t{ok}\t{rate:.4}\t{p99:.1}\t{events}");
    }
    std::fs::write(dir.join("timeline.tsv"), t)?;
    let lanes = ["broker", "gateway", "net", "redis", "disk", "clock"];
    let mut f = String::from("# lane\tstart\tend\tkind\ttarget\n");
    for fault in &log.faults {
        let lane =
            lanes.iter().position(|l| fault.kind.starts_with(l) || fault.kind == "leader-move" && *l == "broker");
        let _ = writeln!(
            f,
            "{}\t{:.1}\t{:.1}\t{}\t{}",
            lane.unwrap_or(0),
            fault.start - t0,
            (fault.end - t0).max(fault.start - t0 + 0.5),
            fault.kind,
            fault.target.replace(' ', "_")
        );
    }
    std::fs::write(dir.join("faults.tsv"), f)
}
