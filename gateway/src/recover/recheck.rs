//! The verdict of the catalog as it is now on one dead-lettered event,
//! decided by the request path's own [`Admission::admit`] with the
//! source's settings from the configuration: no second validator. What the
//! original request knew and the dead-letter record does not keep is
//! stated here and in docs/recovery.md: the client's address and user
//! agent (the event's own `context` is what enrichment sees), and the
//! batch's `sentAt` (an event's own `sentAt` is kept).

use std::borrow::Cow;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::letters::{Envelope, Letter};
use super::{RECOVERED_FROM, RecoverError};
use crate::auth::{AuthMethod, Source};
use crate::config::Config;
use crate::enrichment::client::Client;
use crate::enrichment::request::EdgeRequest;
use crate::pipeline::{self, Admission, Verdict};
use crate::sink::{MemorySink, OutRecord};
use crate::state::AppState;

/// What the current catalog says of one dead-lettered event.
#[derive(Debug)]
pub enum Recheck {
    /// It passes: this record goes to its domain topic.
    Pass(OutRecord),
    /// It still fails (or cannot be checked): a stable code and words.
    Fail {
        /// The stable code (the pipeline's, or one of this module's).
        code: String,
        /// Why, in words.
        message: String,
    },
}

/// The gateway's state as `gateway serve` builds it from the same
/// configuration, with a memory sink (nothing is produced through it).
pub struct Checker {
    state: AppState,
}

impl Checker {
    /// Loads the catalog and sources of `config` (dedupe off: the recovered
    /// records are deduplicated by `recovered.rs`, not by the request path's store).
    pub fn new(mut config: Config) -> Result<Self, RecoverError> {
        config.dedupe.enabled = false;
        let state =
            AppState::new(config, Arc::new(MemorySink::default())).map_err(|e| RecoverError::Startup(e.to_string()))?;
        if state.config.registry.is_some() {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            let runtime = runtime.map_err(|e| RecoverError::Startup(e.to_string()))?;
            runtime.block_on(state.load_schema_ids()).map_err(|e| RecoverError::Startup(e.to_string()))?;
        }
        Ok(Self { state })
    }

    /// The configuration the state was built from.
    pub fn config(&self) -> &Config {
        &self.state.config
    }

    /// The configured source `id`.
    pub fn source(&self, id: &str) -> Option<Arc<Source>> {
        self.state.auth.load().source(id)
    }

    /// The verdict on `letter`'s event (`envelope`), under its original
    /// `messageId`, receipt time, authentication and protocol. A passing
    /// record carries the `recovered-from` header.
    pub fn check(&self, letter: &Letter, envelope: &Envelope) -> Recheck {
        let fail = |code: &str, message: String| Recheck::Fail { code: code.to_owned(), message };
        let Some(source) = self.source(&envelope.source) else {
            return fail("source_not_configured", format!("source `{}` is no longer configured", envelope.source));
        };
        let Some(received_at) = pipeline::parse_time(&envelope.received_at) else {
            return fail("invalid_received_at", format!("`receivedAt` {:?} is not a time", envelope.received_at));
        };
        let mut event = envelope.event.clone();
        if let Some(map) = event.as_object_mut() {
            map.insert("messageId".into(), Value::String(envelope.message_id.clone()));
        }
        let client = Client::default();
        let auth_method = match letter.header("auth") {
            Some("jwt") => AuthMethod::Jwt,
            Some("app-id") => AuthMethod::AppId,
            _ => AuthMethod::WriteKey,
        };
        // Under a JWT the event's `userId` is the token's subject (the
        // pipeline wrote it); keeping it as the subject keeps the alias
        // check as strict as it was, never looser (no other vouched ids).
        let subject = (auth_method == AuthMethod::Jwt)
            .then(|| event.get("userId").and_then(Value::as_str).map(str::to_owned))
            .flatten();
        let admission =
            self.admission(&source, &client, received_at, envelope, auth_method, subject.as_deref(), letter);
        if matches!(admission.edge.scrub(&event), Cow::Owned(_)) {
            // The dead-letter copy holds the protected values: protecting
            // them again would store a hash of a hash.
            let message = "the dead-letter copy has its personal fields or IP already protected by the source's \
                           privacy policy; recovering it would protect them twice";
            return fail("protected_copy", message.into());
        }
        match admission.admit(event).verdict {
            Verdict::Accept(mut record) => {
                record.headers.push((RECOVERED_FROM, position(self.config(), letter).into()));
                Recheck::Pass(record)
            }
            Verdict::DeadLetter { code, message, errors, .. } if !errors.is_empty() => {
                let errors: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.path, e.message)).collect();
                fail(code.as_str(), format!("{message} ({})", errors.join("; ")))
            }
            Verdict::DeadLetter { code, message, .. } | Verdict::Reject { code, message } => {
                fail(code.as_str(), message)
            }
            Verdict::Duplicate { .. } => fail("duplicate", "a duplicate within one event".into()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn admission<'a>(
        &'a self,
        source: &'a Source,
        client: &'a Client,
        received_at: DateTime<Utc>,
        envelope: &Envelope,
        auth_method: AuthMethod,
        subject: Option<&'a str>,
        letter: &Letter,
    ) -> Admission<'a> {
        let state = &self.state;
        let edge = EdgeRequest::new(&state.edge, &state.catalog, &source.id, client, received_at.timestamp());
        Admission {
            catalog: &state.catalog,
            source,
            kafka: &state.config.kafka,
            received_at,
            received_at_text: envelope.received_at.as_str().into(),
            sent_at: None,
            auth_method,
            protocol: protocol(letter.header("protocol")),
            subject,
            vouched: &[],
            client,
            clients: &state.clients,
            max_event_bytes: state.config.limits.max_event_bytes,
            schema_ids: state.schema_ids.load_full(),
            edge,
            shown: None,
        }
    }
}

/// `<dead-letter topic>/<partition>/<offset>` of `letter`.
pub fn position(config: &Config, letter: &Letter) -> String {
    format!("{}/{}/{}", config.kafka.dead_letter_topic, letter.partition, letter.offset)
}

/// The `protocol` header's value as the pipeline's static name.
fn protocol(header: Option<&str>) -> &'static str {
    use crate::wire::{ga4, posthog, snowplow};
    match header {
        Some(ga4::PROTOCOL) => ga4::PROTOCOL,
        Some(posthog::PROTOCOL) => posthog::PROTOCOL,
        Some(snowplow::PROTOCOL) => snowplow::PROTOCOL,
        _ => crate::wire::SEGMENT,
    }
}
