//! Decode: bytes → a batch of events, within every configured limit (body,
//! decompressed size, JSON depth and strings, batch length). The pure
//! decoders are in [`crate::wire`]; this stage feeds them the request.

use std::collections::HashMap;
use std::time::Duration;

use actix_web::{HttpMessage, HttpRequest, web};
use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::Value;

use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::{self, BatchRequest, WireError};

pub use crate::wire::{decode_batch as batch, decode_single as single};

/// base64url with or without padding: mail tools differ.
const BASE64URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Reads, inflates and parses a JSON body within every configured limit.
/// What a refused body left unread is noted in the request's extensions, so
/// the connection is closed rather than reused.
pub async fn body(req: &HttpRequest, payload: web::Payload, state: &AppState) -> Result<Value, ApiError> {
    let (body, gzip) = inflated(req, payload, state).await?;
    wire::check_media_type(req.headers(), gzip)?;
    Ok(wire::parse(&body, state.config.limits.json())?)
}

/// Reads and inflates a body within the configured body and decompressed
/// limits, for a decoder that parses it itself; says whether it was gzip.
/// What a refused body left unread is noted as in [`body`].
pub async fn inflated(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
) -> Result<(web::Bytes, bool), ApiError> {
    let limits = &state.config.limits;
    let server = &state.config.server;
    let deadline = Duration::from_millis(server.body_timeout_ms);
    let headers = req.headers();
    let (limit, budget) = (limits.max_body_bytes, &state.bodies);
    let read = wire::read_body(headers, payload, limit, budget, deadline, server.retry_after_secs);
    let raw = read.await.map_err(|(error, unread)| {
        if let Some(unread) = unread {
            req.extensions_mut().insert(unread);
        }
        error
    })?;
    Ok(wire::decode(headers, raw, limits.max_decompressed_bytes)?)
}

/// The pixel's event: `data` in the query string, base64url JSON, a
/// `track` call.
pub fn pixel(query: &str, state: &AppState) -> Result<BatchRequest, ApiError> {
    let query = web::Query::<HashMap<String, String>>::from_query(query)
        .map_err(|e| ApiError::InvalidPixel(format!("the query string cannot be read: {e}")))?;
    let data = query.get("data").ok_or_else(|| ApiError::InvalidPixel("the pixel needs a `data` parameter".into()))?;
    if data.len() > state.config.limits.max_body_bytes {
        return Err(WireError::BodyTooLarge { limit: state.config.limits.max_body_bytes }.into());
    }
    let json =
        BASE64URL.decode(data.trim()).map_err(|e| ApiError::InvalidPixel(format!("`data` is not base64url: {e}")))?;
    let event = wire::parse(&json, state.config.limits.json())?;
    Ok(wire::decode_single(event, "track")?)
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
