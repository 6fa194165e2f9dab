//! The request path, one module per stage. Every ingestion handler
//! (`api/batch.rs`, `api/pixel.rs`) is the same path, [`ingest`]'s two
//! halves around its protocol's decoder:
//!
//! 1. [`ingest::arrive`], before the body: [`charge::capacity`] (refused
//!    with 503 while the producer queue is above its high-water mark,
//!    before any work), then [`authenticate::not_locked_out`],
//!    [`charge::request`] (the per-IP request quota) and
//!    [`authenticate::header`];
//! 2. the protocol's decoder ([`decode`]): bytes → the canonical batch,
//!    within every configured limit;
//! 3. [`authenticate::principal`]: every credential of the request → one
//!    principal;
//! 4. [`ingest::ingest`], the same for every protocol:
//!    [`charge::events`] (the events charged to the quotas, all or
//!    nothing), [`admit`] (each event validated, enriched and routed, the
//!    per-event steps in [`crate::pipeline`]; a strict source's batch
//!    refused whole), [`produce`] (every record handed to the sink at once,
//!    each event back with its fate there) and [`answer`] (each event's
//!    outcome rendered from its verdict and fate, counted in the metrics).
//!
//! A stage takes the [`Request`] built once when the request arrives, and
//! returns an [`ApiError`] (the one place statuses are decided) or what the
//! next stage needs.

pub mod admit;
pub mod answer;
pub mod authenticate;
pub mod charge;
pub mod decode;
pub mod ingest;
pub mod produce;

use std::sync::Arc;

use actix_web::HttpRequest;

use crate::auth::{AuthState, Principal};
use crate::enrichment::client::Client;
#[cfg(doc)]
use crate::error::ApiError;
use crate::state::AppState;

/// What every stage of one request shares, built once when it arrives.
pub struct Request<'s> {
    /// The gateway's state.
    pub state: &'s AppState,
    /// The `endpoint` label of the request's metrics (`batch`, `track`, ...,
    /// `pixel`).
    pub endpoint: &'static str,
    /// Who is calling (address after trusted proxies, full and as
    /// reported; user agent; client hints), resolved once here: quotas,
    /// lock-out, enrichment and the IP policy all read this one.
    pub client: Client,
    /// The authentication state this request uses from start to end, even
    /// if a reload swaps in another meanwhile.
    pub auth: Arc<AuthState>,
    /// The principal of the `Authorization` header, once
    /// [`authenticate::header`] found one.
    pub header: Option<Principal>,
}

impl<'s> Request<'s> {
    /// The context of `req`, arriving at `endpoint`.
    pub fn new(req: &HttpRequest, state: &'s AppState, endpoint: &'static str) -> Self {
        Self::from_client(state, endpoint, state.clients.resolve(req))
    }

    /// The context of a request from `client`, already resolved: for
    /// benchmarks and tests that choose the client.
    pub fn from_client(state: &'s AppState, endpoint: &'static str, client: Client) -> Self {
        Self { state, endpoint, client, auth: state.auth.load_full(), header: None }
    }

    /// Counts a failed authentication against the client's address (see
    /// `quotas.auth_failures`).
    fn failed_authentication(&self) {
        self.auth.quotas.record_auth_failure(self.client.ip);
    }
}

/// The dev configuration's gateway over a [`crate::sink::MemorySink`], for
/// the stages' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;

    use crate::config::Config;
    use crate::sink::MemorySink;
    use crate::state::AppState;

    /// The dev configuration, changed by `edit`, and its sink.
    pub fn state(edit: impl FnOnce(&mut Config)) -> (AppState, Arc<MemorySink>) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/dev.toml");
        let mut config = Config::load_with_env(&path, std::iter::empty()).expect("dev config");
        edit(&mut config);
        let sink = Arc::new(MemorySink::default());
        let state = AppState::new(config, Arc::clone(&sink) as Arc<dyn crate::sink::Sink>).expect("state");
        (state, sink)
    }

    /// `Basic` credentials of `key`.
    pub fn basic(key: &str) -> String {
        use base64::Engine;
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{key}:")))
    }
}
