//! Fuzzing that keeps running: the hostile requests of `gateway/tests/corpus/`
//! (header and body abuse, auth and CORS games, stalls, huge numbers, odd
//! ids...), each replayed byte for byte over a raw TCP connection to the
//! real gateway, as stored and in seeded body mutations. Whatever each
//! answer is, it must be a JSON body with a stable code (or the pixel's
//! GIF), never a 5xx, never a hang; and every record read back from Kafka
//! must be one an answer promised (accepted or dead-lettered, on that topic),
//! every promised one present. Writes the "bad input" section of
//! RELIABILITY.md (scripts/faults assembles it). Needs a broker (KAFKA_BROKERS).
//! The file format is in `corpus_harness/request.rs`.

mod common;
mod corpus_harness;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use corpus_harness::reply::{Outcome, send, send_stalled};
use corpus_harness::report::{Tally, write_report};
use corpus_harness::request::{CorpusEntry, load_corpus};

/// Seeded body mutations per corpus entry (byte flips, truncations, hostile bytes).
const MUTATIONS_PER_ENTRY: usize = 12;
/// No request may take longer than this to be answered or closed: the
/// body timeout (1 s here) plus Kafka's acknowledgement, with room to spare.
const BOUND: Duration = Duration::from_secs(15);

#[actix_web::test]
async fn every_hostile_request_gets_a_coded_answer_no_5xx_no_hang_and_only_promised_records() {
    if common::without_kafka() {
        return;
    }
    let corpus = load_corpus(&common::repo_root().join("gateway/tests/corpus"));
    assert!(corpus.len() >= 40, "the corpus holds {} files", corpus.len());
    let mut cfg = common::config(&common::brokers());
    // Short slow-client timeouts keep the stall cases quick; each auth case
    // is judged on its own, not behind the lock-out of the ones before it.
    cfg.server.body_timeout_ms = 1000;
    cfg.server.header_timeout_ms = 1000;
    cfg.quotas.auth_failures = None;
    let gw = common::TestGateway::start(cfg).await;
    let addr = gw.url.trim_start_matches("http://").to_owned();
    let run = format!("fz{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let (tally, promised) =
        actix_web::rt::task::spawn_blocking(move || replay(&corpus, &addr, &run)).await.expect("replay");
    let brokers = common::brokers();
    let topics = common::all_topics(&gw.state);
    let stored = actix_web::rt::task::spawn_blocking(move || {
        let mut stored: HashMap<(String, String), usize> = HashMap::new();
        for topic in &topics {
            for record in common::read_topic(&brokers, topic) {
                let id = record.headers.get("event-id").cloned().unwrap_or_default();
                *stored.entry((id, record.topic)).or_insert(0) += 1;
            }
        }
        stored
    })
    .await
    .expect("read back");
    let mut tally = tally;
    tally.reconcile(&promised, &stored);
    write_report(&tally);
    eprintln!("{}", tally.markdown());
    tally.assert_invariants();
    gw.stop().await;
}

/// Sends every entry and its mutations; returns what was answered and the
/// records the answers promised, by (messageId, topic).
fn replay(corpus: &[CorpusEntry], addr: &str, run: &str) -> (Tally, BTreeMap<(String, String), usize>) {
    let mut tally = Tally::default();
    let mut promised = BTreeMap::new();
    for (i, entry) in corpus.iter().enumerate() {
        let variants = if entry.mutable() { MUTATIONS_PER_ENTRY } else { 0 };
        for v in 0..=variants {
            let request = entry.build(&format!("{run}-{i}-{v}"), (v > 0).then_some((i * 1000 + v) as u64));
            let outcome = match entry.stall_after {
                Some(after) => send_stalled(addr, &request, after, BOUND),
                None => send(addr, &request, BOUND),
            };
            for (id, topic) in outcome.promises(entry, &request) {
                *promised.entry((id, topic)).or_insert(0) += 1;
            }
            tally.record(entry, v > 0, &outcome);
            if let Outcome::Answered(a) = &outcome
                && a.status >= 500
            {
                eprintln!("5xx for {} (variant {v}): {} {}", entry.name, a.status, String::from_utf8_lossy(&a.body));
            }
        }
    }
    (tally, promised)
}
