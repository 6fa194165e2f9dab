//! The checker: reads every topic back and judges the whole history. No
//! acknowledged event lost; no event stored twice; for each key, an event
//! acknowledged before another was first sent is stored before it, as
//! docs/spool.md promises it: an event answered `accepted` (in Kafka)
//! before any other of its key, an event answered `spooled` before the
//! others that went through the same gateway (each gateway's spool keeps
//! its own order; across gateways a spooled event can be overtaken by a
//! later one sent direct through another); an event first answered
//! `duplicate` orders nothing and is ordered only after events that were in
//! Kafka when answered (an earlier attempt stored it, maybe in another
//! gateway's spool or direct through another gateway); every
//! answer consistent with what is stored (a definite refusal, 4xx, never
//! stored; `503` and no answer may be either: the README says "on 503
//! nothing may be assumed").

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::history::{Fault, Log, Request};
use crate::faults_harness::blocking;

/// Where one copy of an event is stored.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Copy {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// Every stored copy of the run's ids, and how long the cluster took to settle.
pub async fn read_back(brokers: &str, run_id: &str) -> (HashMap<String, Vec<Copy>>, Duration) {
    let (brokers, run_id) = (brokers.to_owned(), run_id.to_owned());
    blocking(move || {
        let cfg = crate::common::config(&brokers);
        let catalog = eventgw_schemas::loader::load_catalog(&cfg.catalog.dir).expect("catalog");
        let topics: Vec<String> = gateway::topics::wanted(&catalog, &cfg.kafka).into_iter().map(|(t, _)| t).collect();
        let settled = crate::common::wait_settled(&brokers, &topics, Duration::from_secs(180));
        let mut stored: HashMap<String, Vec<Copy>> = HashMap::new();
        for topic in &topics {
            for r in crate::common::read_topic(&brokers, topic) {
                if let Some(id) = r.headers.get("event-id").filter(|id| id.starts_with(&run_id)) {
                    let copy = Copy { topic: topic.clone(), partition: r.partition, offset: r.offset };
                    stored.entry(id.clone()).or_default().push(copy);
                }
            }
        }
        (stored, settled)
    })
    .await
}

/// One id's story: its key, when first sent, when first acknowledged.
#[derive(Debug, Clone, Default)]
struct Story {
    key: String,
    first_sent: f64,
    acked: Option<f64>,
    outcome: String,
    /// The gateway that acknowledged it.
    via: String,
    last_status: u16,
    attempts: u32,
}

#[derive(Debug, Default)]
pub struct Verdict {
    pub sent: usize,
    pub acked: usize,
    pub spooled: usize,
    pub answered_duplicate: usize,
    pub lost: Vec<String>,
    pub duplicated: Vec<String>,
    pub order_violations: Vec<String>,
    /// Never answered 200 and stored, by the last answer (503 / no answer: allowed).
    pub unacked_stored: BTreeMap<String, usize>,
    pub unacked_absent: usize,
    /// Stored after a definite refusal (4xx): inconsistent.
    pub refused_stored: Vec<String>,
    /// 200 outcomes other than accepted, spooled, duplicate.
    pub odd_outcomes: BTreeMap<String, usize>,
    pub foreign: usize,
    /// For each lost or duplicated id: its requests and the faults around it.
    pub diagnoses: Vec<String>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.acked > 0
            && self.lost.is_empty()
            && self.duplicated.is_empty()
            && self.order_violations.is_empty()
            && self.refused_stored.is_empty()
            && self.odd_outcomes.is_empty()
            && self.foreign == 0
    }
}

fn stories(requests: &[Request]) -> HashMap<String, Story> {
    let mut out: HashMap<String, Story> = HashMap::new();
    for r in requests {
        for (k, id) in r.ids.iter().enumerate() {
            let s = out.entry(id.clone()).or_insert_with(|| Story {
                key: r.key.clone(),
                first_sent: r.start,
                ..Story::default()
            });
            s.attempts += 1;
            s.first_sent = s.first_sent.min(r.start);
            if s.acked.is_none() {
                s.last_status = r.status;
            }
            if r.ok() && s.acked.is_none() {
                s.acked = Some(r.end);
                s.outcome = r.outcomes.get(k).cloned().unwrap_or_else(|| "?".into());
                s.via = r.via.clone();
            }
        }
    }
    out
}

/// One acknowledged event of a key.
#[derive(Debug, Clone)]
struct Acked {
    /// When it was answered 200.
    at: f64,
    /// When it was first sent.
    sent: f64,
    partition: i32,
    offset: i64,
    id: String,
    /// Answered `spooled`: ordered only before events through the same gateway.
    spooled: bool,
    /// Answered `duplicate`: where the first copy waits is unknown.
    duplicate: bool,
    via: String,
}

pub fn check(log: &Log, stored: &HashMap<String, Vec<Copy>>, t0: f64) -> Verdict {
    let stories = stories(&log.requests);
    let mut v = Verdict { sent: stories.len(), ..Verdict::default() };
    let mut by_key: HashMap<(String, String), Vec<Acked>> = HashMap::new();
    for (id, s) in &stories {
        let copies = stored.get(id).map_or(&[][..], Vec::as_slice);
        if copies.len() > 1 {
            v.duplicated.push(id.clone());
        }
        match s.acked {
            Some(at) => {
                v.acked += 1;
                match s.outcome.as_str() {
                    "accepted" => {}
                    "spooled" => v.spooled += 1,
                    "duplicate" => v.answered_duplicate += 1,
                    other => *v.odd_outcomes.entry(other.to_owned()).or_default() += 1,
                }
                if let Some(c) = copies.first() {
                    by_key.entry((c.topic.clone(), s.key.clone())).or_default().push(Acked {
                        at,
                        sent: s.first_sent,
                        partition: c.partition,
                        offset: c.offset,
                        id: id.clone(),
                        spooled: s.outcome == "spooled",
                        duplicate: s.outcome == "duplicate",
                        via: s.via.clone(),
                    });
                } else {
                    v.lost.push(id.clone());
                }
            }
            None if copies.is_empty() => v.unacked_absent += 1,
            None => {
                let last = match s.last_status {
                    0 => "no answer".to_owned(),
                    n => n.to_string(),
                };
                if (400..500).contains(&s.last_status) {
                    v.refused_stored.push(id.clone());
                }
                *v.unacked_stored.entry(last).or_default() += 1;
            }
        }
    }
    v.foreign = stored.keys().filter(|id| !stories.contains_key(*id)).count();
    for ((topic, key), events) in &mut by_key {
        v.order_violations.extend(order(topic, key, events));
    }
    v.lost.sort();
    v.duplicated.sort();
    for id in v.lost.iter().chain(&v.duplicated).take(40) {
        v.diagnoses.push(diagnose(id, log, stored, t0));
    }
    v
}

/// Pairs (A, B) of one key where A was acknowledged before B was first sent
/// (and A was in Kafka when answered, or B went through A's gateway and was
/// not first answered `duplicate`) yet B
/// is stored first (or on another partition).
fn order(topic: &str, key: &str, events: &mut [Acked]) -> Vec<String> {
    events.sort_by(|a, b| a.at.total_cmp(&b.at));
    // Running maxima of (partition, offset) in acknowledgement order: over the
    // events in Kafka when answered, and per gateway over the spooled ones.
    type Best = Option<(i32, i64, String)>;
    let raise = |best: &Best, e: &Acked| -> Best {
        match best {
            Some(b) if (b.0, b.1) >= (e.partition, e.offset) => best.clone(),
            _ => Some((e.partition, e.offset, e.id.clone())),
        }
    };
    let mut direct: Vec<Best> = Vec::with_capacity(events.len() + 1);
    let mut spooled: HashMap<&str, Vec<Best>> = HashMap::new();
    let gateways: Vec<&str> = events.iter().filter(|e| e.spooled).map(|e| e.via.as_str()).collect();
    for gw in gateways {
        spooled.entry(gw).or_insert_with(|| vec![None]);
    }
    direct.push(None);
    for e in events.iter() {
        let last = direct.last().cloned().flatten();
        direct.push(if e.spooled || e.duplicate { last } else { raise(&last, e) });
        for (gw, best) in &mut spooled {
            let last = best.last().cloned().flatten();
            best.push(if e.spooled && e.via == *gw { raise(&last, e) } else { last });
        }
    }
    let mut out = Vec::new();
    for e in events.iter() {
        let before = events.partition_point(|a| a.at < e.sent);
        // An event first answered `duplicate` was stored by an earlier
        // attempt, maybe direct through another gateway (answered 503 there):
        // the gateway that answered `duplicate` does not order it.
        let through_same = if e.duplicate { None } else { spooled.get(e.via.as_str()).and_then(|b| b[before].clone()) };
        for (p, o, id) in [direct[before].clone(), through_same].into_iter().flatten() {
            if p != e.partition || o > e.offset {
                out.push(format!(
                    "{topic} key {key}: {} at {}/{} stored before {id} at {p}/{o}, acked earlier",
                    e.id, e.partition, e.offset
                ));
            }
        }
    }
    out
}

fn diagnose(id: &str, log: &Log, stored: &HashMap<String, Vec<Copy>>, t0: f64) -> String {
    let tries: Vec<&Request> = log.requests.iter().filter(|r| r.ids.iter().any(|x| x == id)).collect();
    let (from, to) = tries.iter().fold((f64::MAX, 0f64), |(a, b), r| (a.min(r.start), b.max(r.end)));
    let attempts: Vec<String> = tries
        .iter()
        .map(|r| {
            let k = r.ids.iter().position(|x| x == id).unwrap_or(0);
            let outcome = r.outcomes.get(k).map_or(String::new(), |o| format!(" {o}"));
            format!("#{} {:.1}-{:.1} s {}{} {}", r.attempt, r.start - t0, r.end - t0, r.status, outcome, r.code)
        })
        .collect();
    let near: Vec<String> = log
        .faults
        .iter()
        .filter(|f: &&Fault| f.start <= to + 10.0 && f.end >= from - 10.0)
        .map(|f| format!("{} {} {:.1}-{:.1} s", f.kind, f.target, f.start - t0, f.end - t0))
        .collect();
    let copies: Vec<String> =
        stored.get(id).into_iter().flatten().map(|c| format!("{}/{}@{}", c.topic, c.partition, c.offset)).collect();
    format!(
        "`{id}` (client {}): attempts [{}]; stored [{}]; faults within 10 s: [{}]",
        tries.first().map_or("?", |r| r.client.as_str()),
        attempts.join("; "),
        copies.join(", "),
        near.join("; ")
    )
}
