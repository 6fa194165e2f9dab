//! Reads every topic back and accounts for each id: answered 200 and
//! missing (lost, must be 0), stored more than once (each must come from a
//! client retry of the same `messageId`), answered otherwise and stored or
//! not (both allowed). Writes the scenario's section of RELIABILITY.md.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::blocking;
use super::load::{Answer, BatchLog};

/// What the read-back found: every record of the run by `event-id`, and
/// how long the cluster took to settle before it could be read.
#[derive(Debug, Default)]
pub struct Stored {
    pub ids: HashMap<String, usize>,
    pub settled_in: Duration,
}

/// How long the harness waits for every partition to have a leader in its
/// ISR before it declares the cluster broken (a restarted node's log
/// recovery and catch-up take seconds, not minutes).
const SETTLE_DEADLINE: Duration = Duration::from_secs(120);

/// Waits until the cluster settled (every partition of every topic the
/// gateway writes has a leader in its ISR), then reads each topic back.
pub async fn read_back(brokers: &str, run_id: &str) -> Stored {
    let (brokers, run_id) = (brokers.to_owned(), run_id.to_owned());
    blocking(move || {
        let cfg = crate::common::config(&brokers);
        let catalog = eventgw_schemas::loader::load_catalog(&cfg.catalog.dir).expect("catalog");
        let topics: Vec<String> = gateway::topics::wanted(&catalog, &cfg.kafka).into_iter().map(|(t, _)| t).collect();
        let settled_in = crate::common::wait_settled(&brokers, &topics, SETTLE_DEADLINE);
        let mut ids = HashMap::new();
        for topic in &topics {
            for record in crate::common::read_topic(&brokers, topic) {
                if let Some(id) = record.headers.get("event-id").filter(|id| id.starts_with(&run_id)) {
                    *ids.entry(id.clone()).or_insert(0) += 1;
                }
            }
        }
        Stored { ids, settled_in }
    })
    .await
}

#[derive(Debug, Default)]
pub struct Reconciliation {
    pub scenario: String,
    pub injected: String,
    pub requests: BTreeMap<String, usize>,
    pub events_sent: usize,
    pub acked: usize,
    pub lost: Vec<String>,
    /// For each lost id, its batch's attempts (start offset from the first
    /// attempt of the run, duration, answer): what a diagnosis needs first.
    pub lost_attempts: Vec<String>,
    /// Ids stored more than once, with how many extra copies.
    pub duplicates: usize,
    pub extra_copies: usize,
    /// Duplicates whose batch was sent only once: the producer itself duplicated.
    pub unexplained_duplicates: Vec<String>,
    /// Duplicates of a batch sent once, in a run where librdkafka timed out
    /// in-flight produce requests: see [`Reconciliation::explain_by_gateway_log`].
    pub producer_duplicates: Vec<String>,
    /// Ids a retry's 200 answered `duplicate` (dedupe: not stored again).
    pub answered_duplicate: usize,
    /// Ids answered `duplicate` that are not in Kafka: dedupe dropped a
    /// distinct event (must be 0; they are also counted as lost).
    pub duplicate_missing: Vec<String>,
    pub unacked_present: usize,
    pub unacked_absent: usize,
    /// Stored ids this run never sent.
    pub foreign: usize,
    /// From the end of the fault to the first 200 after it.
    pub recovery: Option<Duration>,
    /// The longest stretch with no 200 answer at all.
    pub longest_gap: Duration,
    pub peak_rss: String,
    /// From the start of the read-back until every partition had a leader in its ISR.
    pub settled_in: Duration,
    pub notes: Vec<String>,
    /// Requests not answered 200, by reason (status, code, message), where
    /// the client recorded one (the spool's beacon clients do).
    pub refused: BTreeMap<String, usize>,
    /// Events answered `spooled`, where the client counted them.
    pub spooled: usize,
}

pub fn reconcile(
    scenario: &str,
    injected: &str,
    logs: &[BatchLog],
    stored: &Stored,
    healed_at: Option<Instant>,
) -> Reconciliation {
    let mut r = Reconciliation {
        scenario: scenario.into(),
        injected: injected.into(),
        settled_in: stored.settled_in,
        ..Default::default()
    };
    let stored = &stored.ids;
    let mut sent = HashMap::new();
    let mut oks = Vec::new();
    for log in logs {
        for a in &log.attempts {
            let key = match a.answer {
                Answer::Status(s) => s.to_string(),
                Answer::NoAnswer => "no answer".into(),
            };
            *r.requests.entry(key).or_insert(0) += 1;
            if a.answer == Answer::Status(200) {
                oks.push(a.ended);
            }
        }
        for id in &log.ids {
            sent.insert(id.as_str(), log);
            r.events_sent += 1;
            let copies = stored.get(id).copied().unwrap_or(0);
            if log.acked() {
                r.acked += 1;
                if copies == 0 {
                    r.lost.push(id.clone());
                    r.lost_attempts.push(format!("{id}: {:?}", log.attempts));
                }
            } else if copies == 0 {
                r.unacked_absent += 1;
            } else {
                r.unacked_present += 1;
            }
            if copies > 1 {
                r.duplicates += 1;
                r.extra_copies += copies - 1;
                if log.attempts.len() < 2 {
                    r.unexplained_duplicates.push(id.clone());
                }
            }
        }
    }
    for log in logs {
        for id in &log.duplicates {
            r.answered_duplicate += 1;
            if stored.get(id).copied().unwrap_or(0) == 0 {
                r.duplicate_missing.push(id.clone());
            }
        }
    }
    r.foreign = stored.keys().filter(|id| !sent.contains_key(id.as_str())).count();
    oks.sort();
    r.longest_gap = oks.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default();
    r.recovery = healed_at.and_then(|h| oks.iter().find(|t| **t > h).map(|t| *t - h));
    r
}

impl Reconciliation {
    /// Explains duplicates of batches sent once when the gateway's log shows
    /// that librdkafka timed out in-flight produce requests. With
    /// idempotence, a message timing out makes librdkafka drain and bump the
    /// producer epoch and renumber what it resends (rdkafka_broker.c, "Message
    /// timeouts will lead to gaps..."); the request that timed out may still
    /// reach the broker later (a network that held its bytes), under the old
    /// epoch, which the broker cannot match against the new one: one send,
    /// two records, one 200. That is Kafka's idempotence without
    /// transactions (at-least-once; downstream deduplicates on `messageId`),
    /// not a gateway defect; without such a timeout in the log a duplicate
    /// of a batch sent once still fails the scenario.
    pub fn explain_by_gateway_log(&mut self, log: &str) {
        let timed_out: usize = log
            .match_indices("Timed out ")
            .filter_map(|(at, _)| log[at + 10..].split(' ').next()?.parse::<usize>().ok())
            .sum();
        if timed_out > 0 && !self.unexplained_duplicates.is_empty() {
            self.notes.push(format!(
                "{} ids of batches sent only once were stored twice: librdkafka timed out {timed_out} in-flight \
                 produce requests (its log says so), bumped the idempotent producer's epoch and resent them, \
                 while the network still delivered the original requests under the old epoch.",
                self.unexplained_duplicates.len()
            ));
            self.producer_duplicates = std::mem::take(&mut self.unexplained_duplicates);
        }
    }

    /// The assertions every scenario shares: nothing answered 200 is
    /// missing, every duplicate is a client retry, nothing foreign.
    pub fn assert_no_loss(&self) {
        eprintln!("{}", self.markdown());
        assert!(self.acked > 0, "{}: no batch was ever acknowledged", self.scenario);
        assert!(
            self.lost.is_empty(),
            "{}: {} acknowledged ids lost: {:?}\nattempts: {:#?}",
            self.scenario,
            self.lost.len(),
            self.lost,
            self.lost_attempts
        );
        assert!(
            self.unexplained_duplicates.is_empty(),
            "{}: duplicates without a client retry: {:?}",
            self.scenario,
            self.unexplained_duplicates
        );
        assert_eq!(self.foreign, 0, "{}: stored ids that were never sent", self.scenario);
        assert!(
            self.duplicate_missing.is_empty(),
            "{}: answered duplicate but not in Kafka: {:?}",
            self.scenario,
            self.duplicate_missing
        );
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let requests: Vec<String> = self.requests.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
        let _ = writeln!(s, "### {}\n\n{}\n", self.scenario, self.injected);
        let _ = writeln!(s, "| measure | value |\n| --- | --- |");
        let _ = writeln!(s, "| requests by answer | {} |", requests.join(", "));
        let _ = writeln!(s, "| events sent (unique ids) | {} |", self.events_sent);
        let _ = writeln!(s, "| answered 200 | {} |", self.acked);
        let _ = writeln!(s, "| **answered 200 and missing from Kafka (lost)** | **{}** |", self.lost.len());
        let _ = writeln!(
            s,
            "| ids stored more than once | {} ({} extra copies; {} without a client retry, of which {} after \
             in-flight requests timed out) |",
            self.duplicates,
            self.extra_copies,
            self.unexplained_duplicates.len() + self.producer_duplicates.len(),
            self.producer_duplicates.len()
        );
        let _ = writeln!(
            s,
            "| retried ids answered `duplicate` (dedupe: already stored, not stored again) | {} |",
            self.answered_duplicate
        );
        let _ = writeln!(
            s,
            "| never answered 200, present / absent | {} / {} |",
            self.unacked_present, self.unacked_absent
        );
        let recovery = self.recovery.map_or("-".into(), secs);
        let _ = writeln!(s, "| first 200 after the fault ended | {recovery} |");
        let _ = writeln!(s, "| longest stretch without a 200 | {} |", secs(self.longest_gap));
        let _ = writeln!(s, "| peak memory | {} |", self.peak_rss);
        let _ = writeln!(
            s,
            "| cluster settled before the read-back (every partition led, leader in its ISR) | {} |",
            secs(self.settled_in)
        );
        for note in &self.notes {
            let _ = writeln!(s, "\n{note}");
        }
        s
    }

    /// Writes the section for scripts/faults to assemble into RELIABILITY.md.
    pub fn write(&self, file: &str) {
        let dir = std::env::var("FAULTS_REPORT_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|_| crate::common::repo_root().join("target/faults-report"));
        std::fs::create_dir_all(&dir).expect("report dir");
        std::fs::write(dir.join(format!("{file}.md")), self.markdown()).expect("write report");
    }
}
