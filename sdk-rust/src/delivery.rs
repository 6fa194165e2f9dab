//! Delivering one batch: build the body (gzipped), send it, read each
//! event's outcome, and retry what may be retried: transport errors, 408,
//! 429 and 5xx, with exponential backoff and jitter, or exactly the
//! `Retry-After` the gateway asked for. Every attempt sends the same events
//! with the same `messageId`s; only `sentAt` is new. A batch the gateway
//! finds too large (413) is split in halves instead of failing.

use std::io::Write as _;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use serde::Deserialize;

use crate::auth::Credentials;
use crate::outcome::Status;
use crate::reporter::Reporter;
use crate::transport::{Auth, Request, Response, Transport};

/// When and how often to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per batch, the first included; then its events fail.
    pub max_attempts: u32,
    /// The first backoff; each retry doubles it…
    pub initial_backoff: Duration,
    /// …up to this. The wait is drawn uniformly from its upper half (jitter),
    /// so clients that failed together do not retry together.
    pub max_backoff: Duration,
    /// A `Retry-After` beyond this is cut to it, so a misconfigured server
    /// cannot park the client for a day.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(300),
        }
    }
}

/// Everything a delivery needs, shared by all of them.
pub(crate) struct Sender {
    pub transport: Arc<dyn Transport>,
    pub credentials: Credentials,
    pub retry: RetryPolicy,
    pub gzip: bool,
    pub reporter: Arc<Reporter>,
    /// Jitter source: a splitmix64 counter, seeded per client.
    pub jitter: AtomicU64,
}

/// What one range of a batch came to.
enum Verdict {
    Settled(Vec<Status>),
    Retry { after: Option<Duration>, reason: String },
    TooLarge { code: String, message: String },
    Unauthorized { code: String, message: String },
}

impl Sender {
    /// Delivers `events` (compact JSON each) and returns each one's status,
    /// in order. Never gives up early: only attempts running out (or the
    /// worker dropping this future at the shutdown deadline) ends it.
    pub async fn deliver(self: Arc<Self>, events: Arc<Vec<Vec<u8>>>) -> Vec<Status> {
        let mut results: Vec<Option<Status>> = vec![None; events.len()];
        let mut pending: Vec<Range<usize>> = Vec::with_capacity(8);
        pending.push(0..events.len());
        while let Some(range) = pending.pop() {
            let statuses = match self.send_range(&events[range.clone()]).await {
                Ok(statuses) => statuses,
                Err((code, _)) if range.len() > 1 => {
                    tracing::info!(code, events = range.len(), "Batch too large for the gateway; splitting it");
                    let mid = range.start + range.len() / 2;
                    pending.push(mid..range.end);
                    pending.push(range.start..mid);
                    continue;
                }
                Err((code, message)) => vec![Status::Rejected { code, message }],
            };
            for (slot, status) in results[range].iter_mut().zip(statuses) {
                *slot = Some(status);
            }
        }
        results
            .into_iter()
            .map(|s| s.unwrap_or_else(|| Status::Failed { reason: "the gateway's answer omitted this event".into() }))
            .collect()
    }

    /// Sends one range until it settles; `Err` is a 413 (split it).
    async fn send_range(&self, events: &[Vec<u8>]) -> Result<Vec<Status>, (String, String)> {
        let mut attempt = 0;
        let mut refreshed = false;
        loop {
            attempt += 1;
            let verdict = match self.attempt(events).await {
                Ok(response) => classify(&response, events.len()),
                Err(reason) => Verdict::Retry { after: None, reason },
            };
            let (after, reason) = match verdict {
                Verdict::Settled(statuses) => return Ok(statuses),
                Verdict::TooLarge { code, message } => return Err((code, message)),
                Verdict::Unauthorized { code, message } => match &self.credentials {
                    // A token may have expired early or been revoked: one
                    // fresh token, at once, before believing the 401.
                    Credentials::Token(provider) if !refreshed => {
                        refreshed = true;
                        provider.invalidate();
                        (Some(Duration::ZERO), format!("401 {code}"))
                    }
                    _ => return Ok(vec![Status::Rejected { code, message }; events.len()]),
                },
                Verdict::Retry { after, reason } => (after, reason),
            };
            if attempt >= self.retry.max_attempts {
                let reason = format!("gave up after {attempt} attempts; last error: {reason}");
                return Ok(vec![Status::Failed { reason }; events.len()]);
            }
            let delay = after.map_or_else(|| self.backoff(attempt), |d| d.min(self.retry.max_retry_after));
            tracing::warn!(
                attempt,
                events = events.len(),
                delay_ms = delay.as_millis() as u64,
                reason,
                "Batch not delivered; retrying"
            );
            self.reporter.retried(events.len());
            tokio::time::sleep(delay).await;
        }
    }

    /// One HTTP request.
    async fn attempt(&self, events: &[Vec<u8>]) -> Result<Response, String> {
        let auth = match &self.credentials {
            Credentials::WriteKey(key) => Auth::WriteKey(key.clone()),
            Credentials::Token(provider) => Auth::Bearer(provider.token().await.map_err(|e| e.to_string())?),
        };
        let body = body(events, chrono::Utc::now(), self.gzip).map_err(|e| format!("cannot build the body: {e}"))?;
        self.reporter.counters.requests.fetch_add(1, Relaxed);
        self.transport.send(Request { body, gzip: self.gzip, auth }).await
    }

    /// The wait before retry number `attempt` (1-based): exponential, capped,
    /// drawn from the upper half of the step.
    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(31));
        let step = self.retry.initial_backoff.saturating_mul(factor).min(self.retry.max_backoff);
        let unit = (splitmix(self.jitter.fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed)) >> 11) as f64 / (1u64 << 53) as f64;
        step / 2 + step.mul_f64(unit / 2.0)
    }
}

fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `{"batch":[…],"sentAt":"…"}`, assembled from the already-encoded events.
pub(crate) fn body(events: &[Vec<u8>], sent_at: chrono::DateTime<chrono::Utc>, gzip: bool) -> std::io::Result<Bytes> {
    let sent_at = sent_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let size = events.iter().map(|e| e.len() + 1).sum::<usize>() + sent_at.len() + 24;
    let mut plain = Vec::with_capacity(size);
    plain.extend_from_slice(b"{\"batch\":[");
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            plain.push(b',');
        }
        plain.extend_from_slice(event);
    }
    plain.extend_from_slice(b"],\"sentAt\":\"");
    plain.extend_from_slice(sent_at.as_bytes());
    plain.extend_from_slice(b"\"}");
    if !gzip {
        return Ok(plain.into());
    }
    let mut encoder = GzEncoder::new(Vec::with_capacity(size / 4), Compression::fast());
    encoder.write_all(&plain)?;
    Ok(encoder.finish()?.into())
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    events: Vec<AnswerEvent>,
    code: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct AnswerEvent {
    index: usize,
    status: String,
    topic: Option<String>,
    code: Option<String>,
    message: Option<String>,
}

fn classify(response: &Response, count: usize) -> Verdict {
    let answer: Option<Answer> = serde_json::from_slice(&response.body).ok();
    let code = answer.as_ref().and_then(|a| a.code.clone()).unwrap_or_else(|| format!("http_{}", response.status));
    let message = answer.as_ref().and_then(|a| a.message.clone()).unwrap_or_default();
    match response.status {
        200 => Verdict::Settled(per_event(answer, count, false)),
        422 => Verdict::Settled(per_event(answer, count, true)),
        408 | 429 | 500..=599 => {
            Verdict::Retry { after: response.retry_after, reason: format!("{} {code}", response.status) }
        }
        413 => Verdict::TooLarge { code, message },
        401 => Verdict::Unauthorized { code, message },
        _ => Verdict::Settled(vec![Status::Rejected { code, message }; count]),
    }
}

/// Each event's status from a 200 (or a strict source's 422, where nothing
/// was produced, so even would-be-accepted events are rejected).
fn per_event(answer: Option<Answer>, count: usize, refused: bool) -> Vec<Status> {
    let mut statuses: Vec<Option<Status>> = vec![None; count];
    let events = answer.map(|a| a.events).unwrap_or_default();
    for event in events {
        let Some(slot) = statuses.get_mut(event.index) else { continue };
        let code = event.code.unwrap_or_default();
        let message = event.message.unwrap_or_default();
        *slot = Some(match event.status.as_str() {
            _ if refused && code.is_empty() => Status::Rejected {
                code: "batch_rejected".into(),
                message: "refused with the rest of its batch (strict source)".into(),
            },
            // `spooled`: fsynced in the gateway's spool, replayed to its
            // topic; `duplicate`: its `messageId` is already stored (a retry
            // whose first answer was lost). Either way it is kept, once.
            "accepted" | "spooled" if !refused => Status::Accepted { topic: event.topic },
            "duplicate" if !refused => Status::Accepted { topic: None },
            "invalid" if !refused => Status::Invalid { topic: event.topic, code, message },
            _ => Status::Rejected { code, message },
        });
    }
    statuses
        .into_iter()
        .map(|s| {
            s.unwrap_or_else(|| Status::Failed {
                reason: "the gateway answered without this event's outcome; it may or may not be in Kafka".into(),
            })
        })
        .collect()
}
