//! `GET /v1/pixel.gif?writeKey=KEY&data=BASE64URL(JSON event)`: for email
//! opens and clients without JavaScript. It always answers a 1x1 GIF that
//! no cache keeps; the status tells what happened (200 once the event, valid
//! or dead-lettered, is in Kafka) and `X-Eventgw-Error` names any error code.

use std::collections::HashMap;

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE, EXPIRES, PRAGMA};
use actix_web::{HttpRequest, HttpResponse, web};
use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use crate::AppState;
use crate::api::ingest;
use crate::error::ApiError;
use crate::wire::{self, BatchRequest, WireError};

/// The smallest transparent 1x1 GIF (43 bytes).
pub const GIF: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff,
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02,
    0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// base64url with or without padding: mail tools differ.
const BASE64URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// `GET /v1/pixel.gif`.
pub async fn pixel(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    match track(&req, &state).await {
        Ok(()) => gif(HttpResponse::Ok()),
        Err(error) => {
            let mut answer = error.answer();
            answer.insert_header(("x-eventgw-error", error.code()));
            gif(answer)
        }
    }
}

async fn track(req: &HttpRequest, state: &AppState) -> Result<(), ApiError> {
    let gate = ingest::open(req, state).await?;
    let query = web::Query::<HashMap<String, String>>::from_query(req.query_string())
        .map_err(|e| ApiError::InvalidPixel(format!("the query string cannot be read: {e}")))?;
    let data = query.get("data").ok_or_else(|| ApiError::InvalidPixel("the pixel needs a `data` parameter".into()))?;
    if data.len() > state.config.limits.max_body_bytes {
        return Err(WireError::BodyTooLarge { limit: state.config.limits.max_body_bytes }.into());
    }
    let json =
        BASE64URL.decode(data.trim()).map_err(|e| ApiError::InvalidPixel(format!("`data` is not base64url: {e}")))?;
    let event = wire::parse(&json, state.config.limits.json())?;
    let request: BatchRequest = wire::decode_single(event, "track")?;
    let principal = ingest::authorize(req, &gate, &request)?;
    ingest::ingest(state, &gate, &principal, request, "pixel").await?;
    Ok(())
}

fn gif(mut builder: actix_web::HttpResponseBuilder) -> HttpResponse {
    builder
        .insert_header((CONTENT_TYPE, "image/gif"))
        .insert_header((CACHE_CONTROL, "no-cache, no-store, must-revalidate, private, max-age=0"))
        .insert_header((PRAGMA, "no-cache"))
        .insert_header((EXPIRES, "0"))
        .body(GIF)
}
