//! `GET /v1/pixel.gif?writeKey=KEY&data=BASE64URL(JSON event)`: for email
//! opens and clients without JavaScript. It always answers a 1x1 GIF that
//! no cache keeps; the status tells what happened (200 once the event, valid
//! or dead-lettered, is in Kafka) and `X-Eventgw-Error` names any error code.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE, EXPIRES, PRAGMA};
use actix_web::{HttpRequest, HttpResponse, web};

use crate::error::ApiError;
use crate::stages::ingest::{arrive, ingest};
use crate::stages::{authenticate, decode};
use crate::state::AppState;

/// The smallest transparent 1x1 GIF (43 bytes).
pub const GIF: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff,
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02,
    0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// `GET /v1/pixel.gif`.
pub async fn pixel(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    match track(&req, &state).await {
        Ok(()) => gif(HttpResponse::Ok()),
        Err(error) => {
            let mut answer = error.answer();
            answer.insert_header(("x-eventgw-error", error.code().as_str()));
            gif(answer)
        }
    }
}

async fn track(req: &HttpRequest, state: &AppState) -> Result<(), ApiError> {
    let request = arrive(req, state, "pixel").await?;
    let batch = decode::pixel(req.query_string(), state)?;
    let principal = authenticate::principal(&request, req, batch.write_key.as_deref())?;
    ingest(&request, &principal, batch).await?;
    Ok(())
}

pub(crate) fn gif(mut builder: actix_web::HttpResponseBuilder) -> HttpResponse {
    builder
        .insert_header((CONTENT_TYPE, "image/gif"))
        .insert_header((CACHE_CONTROL, "no-cache, no-store, must-revalidate, private, max-age=0"))
        .insert_header((PRAGMA, "no-cache"))
        .insert_header((EXPIRES, "0"))
        .body(GIF)
}
