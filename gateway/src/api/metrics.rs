//! `GET /metrics` in the Prometheus text format.

use actix_web::{HttpResponse, web};

use crate::AppState;

/// Renders every metric; the producer queue depth is read at scrape time.
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    state.metrics.queue_depth.set(state.sink.queue_depth());
    HttpResponse::Ok().content_type("text/plain; version=0.0.4; charset=utf-8").body(state.metrics.render())
}
