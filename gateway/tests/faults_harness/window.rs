//! What the load saw while a fault was in place, checked against what the
//! product promises rather than against one way a client may happen to
//! experience the fault.
//!
//! - While the only broker is stopped, killed or cut off (or too few
//!   replicas are alive for `acks=all`), Kafka acknowledges nothing: no
//!   request *sent after the fault began* can be answered 200 with a newly
//!   stored event *before it ended*. A 200 whose every event is `duplicate`
//!   needs no Kafka and is allowed. Requests sent before the fault may be
//!   answered 200 inside it (Kafka acknowledged them first), and requests
//!   sent inside it may be answered 200 after it (their records waited in
//!   the producer). This is what proves the fault was really injected: a
//!   `SIGSTOP` that did not stop anything would show 200s inside.
//! - The gateway answers every request by its deadline
//!   (`server.request_timeout_ms`), with 503 when Kafka has not
//!   acknowledged. So a fault that outlasts the deadline by more than one
//!   turn of a client's loop forces a 503 inside it, whatever the timing of
//!   the freeze against the requests in flight. A shorter fault may or may
//!   not show one: whether a request waits it out is not promised, so
//!   nothing is asserted then (issue 35: a 6 s freeze against a 6 s
//!   deadline, every request waited it out and was answered 200).

use std::time::{Duration, Instant};

use super::REQUEST_TIMEOUT_MS;
use super::load::{Answer, BatchLog, Load};

/// Shortest fault that must show a 503: the request deadline, plus one
/// turn of a retrying user's loop (the pause between batches and the retry
/// back-off of [`Load::default`]), plus slack for a loaded machine's
/// scheduling. A user in flight when the fault begins is answered by its
/// deadline; one that is not sends within a turn of its loop, and that
/// request is answered 503 by its own deadline, inside the fault.
pub fn forces_503() -> Duration {
    let load = Load::default();
    Duration::from_millis(REQUEST_TIMEOUT_MS) + load.every + load.backoff + Duration::from_millis(2500)
}

/// A stretch of time during which a fault was certainly in place: `from`
/// is taken after the fault was injected, `to` before it was healed.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub from: Instant,
    pub to: Instant,
}

/// What the attempts of a run show about one [`Window`].
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// Attempts sent inside the window (the load kept running through it).
    pub sent: usize,
    /// Attempts sent inside the window and answered 200 with a newly
    /// stored event before it ended: impossible while Kafka cannot
    /// acknowledge (must be 0).
    pub acked: Vec<String>,
    /// Attempts answered 503 whose answer came inside the window.
    pub refused: usize,
}

impl Window {
    pub fn duration(&self) -> Duration {
        self.to.saturating_duration_since(self.from)
    }

    pub fn seen(&self, logs: &[BatchLog]) -> Seen {
        let mut seen = Seen::default();
        for log in logs {
            // A batch's 200 is its last attempt; it stored something new
            // unless every event was answered `duplicate`.
            let stored_new = log.duplicates.len() < log.ids.len();
            for a in &log.attempts {
                let sent_inside = a.started >= self.from && a.started <= self.to;
                seen.sent += usize::from(sent_inside);
                if sent_inside && a.ended <= self.to && a.answer == Answer::Status(200) && stored_new {
                    let at = a.started.duration_since(self.from).as_secs_f64();
                    seen.acked.push(format!("{} sent {at:.2} s into the fault", log.ids[0]));
                }
                if a.answer == Answer::Status(503) && a.ended >= self.from && a.ended <= self.to {
                    seen.refused += 1;
                }
            }
        }
        seen
    }

    /// Asserts that nothing sent during the fault was acknowledged during
    /// it, and that the load did send during it (else that would prove
    /// nothing). Returns what was seen, for the report.
    pub fn assert_nothing_acknowledged(&self, fault: &str, logs: &[BatchLog]) -> Seen {
        let seen = self.seen(logs);
        assert!(
            seen.sent > 0,
            "{fault}: no request was sent during the fault ({:?}), so it proves nothing",
            self.duration()
        );
        assert!(
            seen.acked.is_empty(),
            "{fault}: requests sent during the fault were answered 200 with new events before it ended, so Kafka \
             acknowledged them and the fault was not in place: {:?}",
            seen.acked
        );
        seen
    }

    /// As [`Window::assert_nothing_acknowledged`], and the fault outlasted
    /// the request deadline ([`forces_503`]), so some request must have
    /// been answered 503 inside it.
    pub fn assert_refused_with_503(&self, fault: &str, logs: &[BatchLog]) -> Seen {
        assert!(
            self.duration() >= forces_503(),
            "{fault}: the scenario's fault lasted {:?}, shorter than {:?}: a 503 is not forced, do not assert one",
            self.duration(),
            forces_503()
        );
        let seen = self.assert_nothing_acknowledged(fault, logs);
        assert!(
            seen.refused > 0,
            "{fault}: {:?} without Kafka, longer than the request deadline, and no request was answered 503 in it",
            self.duration()
        );
        seen
    }
}

/// The sentence a report adds about a window.
pub fn note(fault: &str, window: &Window, seen: &Seen) -> String {
    format!(
        "While {fault} ({:.1} s, measured from after the injection to before the heal): {} requests sent, {} of \
         them answered 200 with a new event before it ended (must be 0: Kafka could not acknowledge), {} answers \
         503.",
        window.duration().as_secs_f64(),
        seen.sent,
        seen.acked.len(),
        seen.refused
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults_harness::load::Attempt;

    fn batch(id: &str, attempts: &[(u64, u64, Answer)], duplicates: usize, t0: Instant) -> BatchLog {
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        BatchLog {
            ids: (0..4).map(|k| format!("{id}-e{k}")).collect(),
            attempts: attempts.iter().map(|&(s, e, answer)| Attempt { started: at(s), ended: at(e), answer }).collect(),
            duplicates: (0..duplicates).map(|k| format!("{id}-e{k}")).collect(),
        }
    }

    /// Issue 35's run: a 6 s freeze, requests sent during it waited it out
    /// and were answered 200 after the resume, none 503. That keeps the
    /// promise: the window check passes, and no 503 is asserted for a
    /// fault shorter than the deadline.
    #[test]
    fn requests_that_wait_out_a_short_freeze_keep_the_promise() {
        let t0 = Instant::now();
        let w = Window { from: t0 + Duration::from_secs(5), to: t0 + Duration::from_secs(11) };
        let logs = vec![
            batch("before", &[(4_900, 11_100, Answer::Status(200))], 0, t0),
            batch("inside", &[(6_000, 11_050, Answer::Status(200))], 0, t0),
        ];
        let seen = w.assert_nothing_acknowledged("freeze", &logs);
        assert_eq!((seen.sent, seen.refused), (1, 0));
        let refused = std::panic::catch_unwind(|| w.assert_refused_with_503("freeze", &logs));
        assert!(refused.is_err(), "a 6 s fault does not force a 503, so asking for one is a setup error");
    }

    #[test]
    fn a_new_event_acknowledged_inside_the_fault_fails_the_check() {
        let t0 = Instant::now();
        let w = Window { from: t0 + Duration::from_secs(5), to: t0 + Duration::from_secs(15) };
        let logs = vec![batch("inside", &[(6_000, 6_020, Answer::Status(200))], 0, t0)];
        assert_eq!(w.seen(&logs).acked.len(), 1);
        let failed = std::panic::catch_unwind(|| w.assert_nothing_acknowledged("freeze", &logs));
        assert!(failed.is_err(), "a 200 with new events during the fault means the fault was not in place");
    }

    #[test]
    fn duplicates_and_answers_to_earlier_requests_are_not_acknowledgements_inside() {
        let t0 = Instant::now();
        let w = Window { from: t0 + Duration::from_secs(5), to: t0 + Duration::from_secs(15) };
        let logs = vec![
            // Every event already stored: answered from dedupe's store, no Kafka needed.
            batch("dup", &[(6_000, 6_010, Answer::Status(200))], 4, t0),
            // Sent before the fault: Kafka may have acknowledged it first.
            batch("early", &[(4_990, 5_100, Answer::Status(200))], 0, t0),
            // Refused inside, then stored after the heal.
            batch("retried", &[(6_000, 12_000, Answer::Status(503)), (12_250, 16_000, Answer::Status(200))], 0, t0),
        ];
        let seen = w.assert_refused_with_503("freeze", &logs);
        assert_eq!((seen.sent, seen.acked.len(), seen.refused), (3, 0, 1));
    }

    #[test]
    fn a_long_fault_without_a_503_inside_fails() {
        let t0 = Instant::now();
        let w = Window { from: t0 + Duration::from_secs(5), to: t0 + Duration::from_secs(15) };
        let logs = vec![batch("waited", &[(5_100, 15_500, Answer::Status(200))], 0, t0)];
        let failed = std::panic::catch_unwind(|| w.assert_refused_with_503("freeze", &logs));
        assert!(failed.is_err(), "a fault past the deadline answered by no 503 at all breaks the deadline promise");
    }
}
