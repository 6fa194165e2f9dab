//! Reads a request body without ever holding more than the limit: a
//! declared `Content-Length` over the limit is refused before reading, and a
//! chunked body is cut off the moment it passes the limit.

use actix_web::HttpRequest;
use actix_web::http::header::CONTENT_LENGTH;
use actix_web::web::{Bytes, BytesMut, Payload};
use futures::StreamExt;

use crate::error::ApiError;

/// The whole body, at most `limit` bytes.
pub async fn read_body(req: &HttpRequest, mut payload: Payload, limit: usize) -> Result<Bytes, ApiError> {
    let declared =
        req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err(ApiError::BodyTooLarge { limit });
    }
    let mut body = BytesMut::with_capacity(declared.unwrap_or(0).min(limit));
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| ApiError::BodyRead(e.to_string()))?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError::BodyTooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}
