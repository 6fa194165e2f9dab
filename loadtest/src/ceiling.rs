//! The HTTP ceiling: a minimal actix-web server that reads the same
//! requests as the gateway and answers 200 without doing anything else. The
//! gateway's throughput is reported as a fraction of this one's, measured
//! in the same run on the same machine.
//!
//! A request may ask to be held before its answer (`?hold_ms=15`): the
//! gateway holds each request until Kafka acknowledges it, and a server
//! that holds its answers as long pays for it too (more connections open,
//! each request's state cold when it is answered), so the single-event
//! floor is measured both ways (`scripts/bench-floor`).

use std::net::TcpListener;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};

/// Starts the ceiling server on `listener` with `workers` threads; every
/// answer waits `delay` first (zero for the ceiling, a known delay for the
/// generator's own test).
pub fn serve(listener: TcpListener, workers: usize, delay: Duration) -> std::io::Result<Server> {
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::PayloadConfig::new(64 << 20))
            .app_data(web::Data::new(delay))
            .route("/v1/batch", web::post().to(answer))
    })
    .workers(workers)
    .backlog(4096)
    .max_connections(100_000)
    .listen(listener)?
    .run();
    Ok(server)
}

/// Longest hold a request may ask for.
const MAX_HOLD: Duration = Duration::from_secs(10);

/// The hold a query string asks for (`hold_ms=N`, at most [`MAX_HOLD`]);
/// `None` when it asks for none or its value is not a number.
pub fn hold(query: &str) -> Option<Duration> {
    let ms = query.split('&').find_map(|pair| pair.strip_prefix("hold_ms="))?;
    Some(Duration::from_millis(ms.parse().ok()?).min(MAX_HOLD))
}

async fn answer(request: HttpRequest, body: web::Bytes, delay: web::Data<Duration>) -> HttpResponse {
    let delay = hold(request.query_string()).unwrap_or(**delay);
    if !delay.is_zero() {
        actix_web::rt::time::sleep(delay).await;
    }
    std::hint::black_box(body.len());
    HttpResponse::Ok().content_type("application/json").body(r#"{"accepted":1,"invalid":0,"rejected":0,"events":[]}"#)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_is_read_from_the_query_and_capped() {
        assert_eq!(hold("hold_ms=15"), Some(Duration::from_millis(15)));
        assert_eq!(hold("a=1&hold_ms=0&b=2"), Some(Duration::ZERO));
        assert_eq!(hold("hold_ms=999999"), Some(MAX_HOLD));
        assert_eq!(hold("hold_ms=soon"), None);
        assert_eq!(hold("xhold_ms=5"), None);
        assert_eq!(hold(""), None);
    }
}
