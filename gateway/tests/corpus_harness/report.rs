//! Counts what the corpus replay got back, checks the invariants (a coded
//! answer or the GIF, no 5xx, no hang, only promised records) and writes
//! the "bad input" section of RELIABILITY.md.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

use super::reply::{GIF_LEN, Outcome};
use super::request::CorpusEntry;

/// Per class of the corpus.
#[derive(Debug, Default)]
pub struct ClassTally {
    pub files: BTreeSet<String>,
    pub requests: usize,
    pub mutated: usize,
    /// "400", "closed", "hang"... with counts.
    pub answers: BTreeMap<String, usize>,
    pub codes: BTreeSet<String>,
}

#[derive(Debug, Default)]
pub struct Tally {
    pub classes: BTreeMap<String, ClassTally>,
    /// Invariant breaches, each with the file it came from.
    pub uncoded: Vec<String>,
    pub server_errors: Vec<String>,
    pub hangs: Vec<String>,
    pub unexpected_closes: Vec<String>,
    /// Answers the HTTP codec gave (files marked `# codec:`): a bare 4xx or a close.
    pub codec_refusals: usize,
    /// `503 body_timeout` with `Retry-After`: the documented answer to a
    /// client whose own body stalled (a status every SDK retries, where a
    /// 4xx would make most of them drop the batch). Not a server error.
    pub stall_retries: usize,
    pub slowest: Duration,
    /// Records read back that no answer promised, or more copies than promised.
    pub unpromised: Vec<String>,
    /// Records an answer promised that are not in Kafka.
    pub missing: Vec<String>,
    pub records: usize,
    pub promised: usize,
}

impl Tally {
    pub fn record(&mut self, entry: &CorpusEntry, mutated: bool, outcome: &Outcome) {
        let class = self.classes.entry(entry.class.clone()).or_default();
        class.files.insert(entry.name.clone());
        class.requests += 1;
        class.mutated += usize::from(mutated);
        let what = if mutated { format!("{} (mutated)", entry.name) } else { entry.name.clone() };
        let key = match outcome {
            Outcome::Hang => {
                self.hangs.push(what);
                "hang".to_owned()
            }
            Outcome::Closed(took) => {
                self.slowest = self.slowest.max(*took);
                if entry.codec.is_none() {
                    self.unexpected_closes.push(what);
                } else {
                    self.codec_refusals += 1;
                }
                "closed without an answer".to_owned()
            }
            Outcome::Answered(a) => {
                self.slowest = self.slowest.max(a.took);
                let stall_retry =
                    a.status == 503 && a.code().as_deref() == Some("body_timeout") && a.header("retry-after").is_some();
                if stall_retry {
                    self.stall_retries += 1;
                } else if a.status >= 500 {
                    self.server_errors.push(format!("{what}: {}", a.status));
                }
                let coded = if entry.expect_gif {
                    a.body.len() == GIF_LEN && a.body.starts_with(b"GIF8") && (a.status == 200 || a.code().is_some())
                } else if a.status == 204 {
                    a.body.is_empty()
                } else if a.status >= 400 {
                    a.code().is_some() && a.json().and_then(|j| j.get("message").cloned()).is_some()
                } else {
                    a.json().is_some_and(|j| j.is_object())
                };
                let bare_codec_answer = entry.codec.is_some() && (400..500).contains(&a.status) && a.body.is_empty();
                self.codec_refusals += usize::from(bare_codec_answer && !coded);
                if !coded && !bare_codec_answer {
                    let body = String::from_utf8_lossy(&a.body[..a.body.len().min(200)]).into_owned();
                    self.uncoded.push(format!("{what}: {} {body:?}", a.status));
                }
                if let Some(code) = a.code() {
                    class.codes.insert(code);
                }
                a.status.to_string()
            }
        };
        *class.answers.entry(key).or_insert(0) += 1;
    }

    /// Compares what the answers promised with what Kafka holds.
    pub fn reconcile(
        &mut self,
        promised: &BTreeMap<(String, String), usize>,
        stored: &HashMap<(String, String), usize>,
    ) {
        self.promised = promised.values().sum();
        self.records = stored.values().sum();
        let mut by_id: HashMap<&str, usize> = HashMap::new();
        for ((id, topic), n) in promised {
            if topic == "*" {
                *by_id.entry(id.as_str()).or_insert(0) += n;
            }
        }
        for ((id, topic), n) in stored {
            let allowed = promised.get(&(id.clone(), topic.clone())).copied().unwrap_or(0)
                + by_id.get(id.as_str()).copied().unwrap_or(0);
            if *n > allowed {
                self.unpromised.push(format!("{id} on {topic}: {n} stored, {allowed} promised"));
            }
        }
        for ((id, topic), n) in promised {
            let found = if topic == "*" {
                stored.iter().filter(|((i, _), _)| i == id).map(|(_, c)| *c).sum()
            } else {
                stored.get(&(id.clone(), topic.clone())).copied().unwrap_or(0)
            };
            if found < *n {
                self.missing.push(format!("{id} on {topic}: {found} stored, {n} promised"));
            }
        }
    }

    pub fn requests(&self) -> usize {
        self.classes.values().map(|c| c.requests).sum()
    }

    pub fn assert_invariants(&self) {
        assert!(self.hangs.is_empty(), "requests that hung: {:?}", self.hangs);
        assert!(self.server_errors.is_empty(), "5xx answers: {:?}", self.server_errors);
        assert!(self.uncoded.is_empty(), "answers without a JSON body and code (or the GIF): {:?}", self.uncoded);
        assert!(self.unexpected_closes.is_empty(), "closed without an answer: {:?}", self.unexpected_closes);
        assert!(self.unpromised.is_empty(), "records no answer promised: {:?}", self.unpromised);
        assert!(self.missing.is_empty(), "promised records missing from Kafka: {:?}", self.missing);
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let files: usize = self.classes.values().map(|c| c.files.len()).sum();
        let mutated: usize = self.classes.values().map(|c| c.mutated).sum();
        let _ = writeln!(
            s,
            "## Bad input\n\n`gateway/tests/corpus_replay.rs` (run by `scripts/test` and by `scripts/faults`, which \
             wrote this section) replays the {files} hostile requests stored in `gateway/tests/corpus/` byte for \
             byte over raw TCP to the real gateway (short slow-client timeouts: body and head 1 s; the auth \
             lock-out off so each auth case is judged alone), each as stored and, where it has a complete body, \
             in seeded mutations of that body ({mutated} in all): {} requests. Then every topic is read back.\n",
            self.requests()
        );
        let _ =
            writeln!(s, "| class | files | requests (mutated) | answers | codes |\n| --- | --- | --- | --- | --- |");
        for (name, c) in &self.classes {
            let answers: Vec<String> = c.answers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            let codes: Vec<String> = c.codes.iter().map(|c| format!("`{c}`")).collect();
            let _ = writeln!(
                s,
                "| {name} | {} | {} ({}) | {} | {} |",
                c.files.len(),
                c.requests,
                c.mutated,
                answers.join(", "),
                codes.join(" ")
            );
        }
        let _ = writeln!(s, "\n| invariant | count |\n| --- | --- |");
        let rows = [
            ("answers without a JSON body and stable code (or, for the pixel, the GIF)", self.uncoded.len()),
            ("**5xx answers** (other than the stalled-body retry below)", self.server_errors.len()),
            ("`503 body_timeout` with `Retry-After` to a client whose own body stalled", self.stall_retries),
            ("**hangs** (no answer and no close within 15 s)", self.hangs.len()),
            ("closed without an answer, outside the HTTP codec's refusals", self.unexpected_closes.len()),
            ("**records in Kafka that no answer promised**", self.unpromised.len()),
            ("records an answer promised that are missing", self.missing.len()),
        ];
        for (what, n) in rows {
            let _ = writeln!(s, "| {what} | {n} |");
        }
        let _ = writeln!(
            s,
            "\nRecords read back: {} (promised: {}). Slowest answer or close: {:.1} s.\n\nHTTP framing that \
             actix's HTTP/1 codec refuses before the gateway's code runs (a NUL or control byte or an obsolete fold \
             in a header, a negative `Content-Length`, `Content-Length` with `chunked`, a bad chunk size, the \
             HTTP/2 preface, a head past its size limit, a head that does not arrive in time) is answered by the \
             codec itself with a bare 400, 408 or 431 and no JSON body, or closed: {} such answers here, from the \
             files marked `# codec:`; they are still held to no 5xx and no hang, and nothing of them reaches Kafka. \
             The corpus's format and placeholders are described in `gateway/tests/corpus_harness/request.rs`; add \
             a file there for every new hostile request found.",
            self.records,
            self.promised,
            self.slowest.as_secs_f64(),
            self.codec_refusals
        );
        s
    }
}

/// Writes the section where scripts/faults picks it up.
pub fn write_report(tally: &Tally) {
    let dir = std::env::var("FAULTS_REPORT_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| crate::common::repo_root().join("target/faults-report"));
    std::fs::create_dir_all(&dir).expect("report dir");
    std::fs::write(dir.join("bad-input.md"), tally.markdown()).expect("write report");
}
