//! The HTTP ceiling: a minimal actix-web server that reads the same
//! requests as the gateway and answers 200 without doing anything else. The
//! gateway's throughput is reported as a fraction of this one's, measured
//! in the same run on the same machine.

use std::net::TcpListener;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::{App, HttpResponse, HttpServer, web};

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

async fn answer(body: web::Bytes, delay: web::Data<Duration>) -> HttpResponse {
    if !delay.is_zero() {
        actix_web::rt::time::sleep(**delay).await;
    }
    std::hint::black_box(body.len());
    HttpResponse::Ok().content_type("application/json").body(r#"{"accepted":1,"invalid":0,"rejected":0,"events":[]}"#)
}
