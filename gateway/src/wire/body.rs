//! Reads a request body without ever holding more than the limits: a
//! declared `Content-Length` over the limit is refused before reading, a
//! streamed body is cut off the moment it passes the limit, a slow body is
//! cut off at its deadline, the buffer grows only as bytes arrive and
//! within the budget of all unfinished bodies (see [`super::budget`]), and
//! gzip is inflated only up to the decompressed-size cap.

use std::io::Read;
use std::time::Duration;

use actix_web::http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap};
use actix_web::web::{Bytes, Payload};
use flate2::read::MultiGzDecoder;
use futures::StreamExt;

use super::WireError;
use super::budget::{BodyBudget, BodyBuffer, Refused};

/// The first two bytes of every gzip stream. JSON never starts with them, so
/// a beacon (which cannot set `Content-Encoding`) may send gzip unannounced.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Media types accepted for JSON bodies: `text/plain` is what
/// `navigator.sendBeacon` sends and needs no CORS preflight. A gzip body
/// (announced or recognised by its magic bytes) is taken whatever its type
/// says, because SDKs label it loosely: RudderStack's Node SDK sends gzip
/// as `application/x-www-form-urlencoded`; what it inflates to must still
/// be JSON.
pub fn check_media_type(headers: &HeaderMap, gzip: bool) -> Result<(), WireError> {
    let Some(value) = headers.get(CONTENT_TYPE) else { return Ok(()) };
    let text = value.to_str().unwrap_or_default();
    let essence = text.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let json_like = essence == "application/json"
        || essence == "text/plain"
        || (essence.starts_with("application/") && essence.ends_with("+json"));
    if json_like || gzip { Ok(()) } else { Err(WireError::UnsupportedMediaType(essence)) }
}

/// The raw body, at most `limit` bytes, its buffer charged to `budget` as
/// it grows, within `deadline` (past it, or with the budget spent, a 503
/// telling the client to retry after `retry_after` seconds). Works the same
/// for `Content-Length` and chunked framing. A body refused part-way comes
/// back with its error as an [`UnreadBody`], which the caller keeps until
/// the answer is written.
pub async fn read_body(
    headers: &HeaderMap,
    payload: Payload,
    limit: usize,
    budget: &BodyBudget,
    deadline: Duration,
    retry_after: u64,
) -> Result<Bytes, (WireError, Option<UnreadBody>)> {
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err((WireError::BodyTooLarge { limit }, None));
    }
    // Nothing is reserved for the announced length: a client that announces
    // the limit and sends ten bytes holds a first buffer, not the limit.
    let body = BodyBuffer::new(budget, declared, limit);
    let mut payload = payload;
    let read = actix_web::rt::time::timeout(deadline, collect(&mut payload, body, retry_after))
        .await
        .unwrap_or(Err(WireError::BodyTimeout { seconds: deadline.as_secs_f64(), retry_after }));
    read.map_err(|error| (error, Some(UnreadBody(payload))))
}

/// The body stream of a request answered before its body was read to the
/// end. It must outlive the answer: actix keeps a connection to drain a
/// chunked body whose stream was dropped, and a body that stalls then
/// holds the connection for good; while the stream is alive, actix closes
/// the connection after the answer instead. The server's middleware moves
/// it from the request to the answer.
pub struct UnreadBody(pub Payload);

async fn collect(payload: &mut Payload, mut body: BodyBuffer<'_>, retry_after: u64) -> Result<Bytes, WireError> {
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| WireError::BodyRead(e.to_string()))?;
        body.push(&chunk).map_err(|refused| match refused {
            Refused::TooLarge => WireError::BodyTooLarge { limit: body.limit() },
            Refused::BudgetFull => WireError::BodyBufferFull { limit: body.budget_limit(), retry_after },
        })?;
    }
    Ok(body.finish())
}

/// Undoes `Content-Encoding: gzip` (or an unannounced gzip stream), holding
/// at most `max_decompressed + 1` bytes however much the stream would expand.
/// The second value says whether the body was gzip.
pub fn decode(headers: &HeaderMap, body: Bytes, max_decompressed: usize) -> Result<(Bytes, bool), WireError> {
    let encoding = headers
        .get(CONTENT_ENCODING)
        .map(|v| v.to_str().unwrap_or("?").trim().to_ascii_lowercase())
        .unwrap_or_default();
    let gzip = match encoding.as_str() {
        "gzip" | "x-gzip" => true,
        "" | "identity" => body.starts_with(&GZIP_MAGIC),
        other => return Err(WireError::UnsupportedEncoding(other.to_owned())),
    };
    if !gzip {
        return Ok((body, false));
    }
    Ok((gunzip(&body, max_decompressed)?, true))
}

/// Inflates `compressed`, refusing output over `max` bytes.
pub fn gunzip(compressed: &[u8], max: usize) -> Result<Bytes, WireError> {
    let mut out = Vec::with_capacity((compressed.len() * 4).min(max));
    MultiGzDecoder::new(compressed)
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| WireError::MalformedGzip(e.to_string()))?;
    if out.len() > max {
        return Err(WireError::DecompressedTooLarge { limit: max });
    }
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(data).expect("write");
        encoder.finish().expect("finish")
    }

    #[test]
    fn decompressed_limit_is_exact() {
        let data = vec![b'x'; 1000];
        assert_eq!(gunzip(&gzip(&data), 1000).expect("at the limit").len(), 1000);
        assert_eq!(gunzip(&gzip(&data), 999).expect_err("one past").code(), "decompressed_too_large");
    }

    #[test]
    fn a_bomb_is_refused_having_inflated_only_the_cap() {
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 128 << 10, "64 MiB of zeros compress to {} bytes", bomb.len());
        assert_eq!(gunzip(&bomb, 1 << 20).expect_err("bomb").code(), "decompressed_too_large");
    }

    #[test]
    fn broken_gzip_is_a_client_error() {
        let mut stream = gzip(b"{\"batch\": []}");
        stream.truncate(stream.len() - 6);
        assert_eq!(gunzip(&stream, 1000).expect_err("truncated").code(), "malformed_gzip");
    }
}
