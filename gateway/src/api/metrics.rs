//! `GET /metrics` in the Prometheus text format.

use actix_web::{HttpResponse, web};

use crate::AppState;

/// Renders every metric; the producer queue depth and the spool are read at scrape time.
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    state.metrics.queue_depth.set(state.sink.queue_depth());
    if let Some(spool) = state.sink.spool_status() {
        state.metrics.spool.observe(&spool);
    }
    HttpResponse::Ok().content_type("text/plain; version=0.0.4; charset=utf-8").body(state.metrics.render())
}
