//! Wires the endpoints into an actix-web server on a listener the caller
//! bound, so tests bind port 0 and run the real server.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::{App, HttpResponse, HttpServer, web};

use crate::AppState;
use crate::api;
use crate::error::ErrorBody;

/// Starts serving on `listener`. The returned server runs when awaited (or
/// spawned); its handle stops it gracefully, draining in-flight requests.
pub fn serve(state: Arc<AppState>, listener: TcpListener) -> std::io::Result<Server> {
    let workers = match state.config.server.workers {
        0 => std::thread::available_parallelism().map_or(2, usize::from),
        n => n,
    };
    let shutdown = state.config.server.shutdown_timeout_secs;
    let data = web::Data::from(state);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/v1/batch", web::post().to(api::batch::batch))
            .route("/healthz", web::get().to(api::health::healthz))
            .route("/readyz", web::get().to(api::health::readyz))
            .default_service(web::to(not_found))
    })
    .workers(workers)
    .shutdown_timeout(shutdown)
    .client_request_timeout(Duration::from_secs(10))
    .listen(listener)?
    .run();
    Ok(server)
}

async fn not_found() -> HttpResponse {
    HttpResponse::NotFound()
        .json(ErrorBody { code: "not_found", message: "no such endpoint; see the README for the API".into() })
}
