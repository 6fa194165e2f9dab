//! The one ingest path every tracker protocol shares: [`arrive`] before the
//! body is read, [`ingest`] once the protocol's decoder has made the
//! canonical batch and its principal is known. A handler is
//! `arrive` → its own decode → [`authenticate::principal`] → `ingest`;
//! adding a protocol is one decoder and one route, never a new stage order.

use actix_web::HttpRequest;

use super::answer::BatchAnswer;
use super::produce::Fate;
use super::{Request, admit, answer, authenticate, charge, produce};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::sink::Stored;
use crate::state::AppState;
use crate::wire::BatchRequest;

/// What every protocol does before the body, cheapest refusal first: the
/// producer's capacity, then the request's context, the client's
/// lock-out, its per-IP request quota and the `Authorization` header.
pub async fn arrive<'s>(
    req: &HttpRequest,
    state: &'s AppState,
    endpoint: &'static str,
) -> Result<Request<'s>, ApiError> {
    charge::capacity(state)?;
    let mut request = Request::new(req, state, endpoint);
    authenticate::not_locked_out(&request)?;
    charge::request(&request)?;
    authenticate::header(&mut request, req.headers()).await?;
    Ok(request)
}

/// The rest of the path, whatever the protocol: `batch`'s events charged to
/// the quotas, admitted, produced, and answered (counted in the metrics),
/// then shown in the live view as stored, if anyone watches (the only place
/// it is fed; unwatched, [`crate::live::LiveHub::capture`] is one atomic load).
pub async fn ingest(
    request: &Request<'_>,
    principal: &Principal,
    batch: BatchRequest,
) -> Result<BatchAnswer, ApiError> {
    charge::events(request, principal, batch.events.len())?;
    let mut planned = admit::events(request, principal, batch)?;
    let config = &request.state.config;
    // A record is stored without Kafka acknowledging it only by the spool
    // or by dedupe (a duplicate): otherwise the view keeps no record's bytes.
    let keep = (config.spool.enabled && principal.source.spool) || config.dedupe.enabled;
    let live = request.state.live.capture(
        &principal.source.id,
        keep,
        planned.iter_mut().map(|p| {
            let shown = p.shown.take();
            (p.verdict.record(), shown)
        }),
    );
    let produced = produce::records(request, planned, principal.source.spool).await?;
    let stored: Vec<Option<Stored>> = match live {
        Some(_) => produced.iter().map(|p| if let Fate::Stored(s) = p.fate { Some(s) } else { None }).collect(),
        None => Vec::new(),
    };
    let answer = answer::events(request, produced);
    if let Some(capture) = live {
        let time = (request.state.clock)().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        request.state.live.publish(&principal.source.id, capture.finish(&time, &answer.events, &stored));
    }
    Ok(answer)
}

#[cfg(test)]
#[path = "ingest_tests.rs"]
mod tests;
