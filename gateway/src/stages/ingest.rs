//! The one ingest path every tracker protocol shares: [`arrive`] before the
//! body is read, [`ingest`] once the protocol's decoder has made the
//! canonical batch and its principal is known. A handler is
//! `arrive` → its own decode → [`authenticate::principal`] → `ingest`;
//! adding a protocol is one decoder and one route, never a new stage order.

use actix_web::HttpRequest;

use super::answer::BatchAnswer;
use super::{Request, admit, answer, authenticate, charge, produce};
use crate::auth::Principal;
use crate::error::ApiError;
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
/// the quotas, admitted, produced, and answered (counted in the metrics).
pub async fn ingest(
    request: &Request<'_>,
    principal: &Principal,
    batch: BatchRequest,
) -> Result<BatchAnswer, ApiError> {
    charge::events(request, principal, batch.events.len())?;
    let planned = admit::events(request, principal, batch)?;
    let produced = produce::records(request, planned, principal.source.spool).await?;
    Ok(answer::events(request, produced))
}

#[cfg(test)]
#[path = "ingest_tests.rs"]
mod tests;
