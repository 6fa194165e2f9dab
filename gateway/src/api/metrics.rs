//! `GET /metrics` in the Prometheus text format.

use actix_web::{HttpResponse, web};

use crate::state::AppState;

/// Renders every metric; the producer queue depth, its high-water mark,
/// readiness (the same answer as `/readyz`, never waiting on Kafka) and the
/// spool are read at scrape time.
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    state.metrics.queue_depth.set(state.sink.queue_depth());
    let high_water = state.config.kafka.backpressure_threshold();
    state.metrics.queue_high_water.set(i64::try_from(high_water).unwrap_or(i64::MAX));
    let ready = !state.is_draining() && state.sink.check_ready().await.is_ok();
    state.metrics.ready.set(i64::from(ready));
    if let Some(spool) = state.sink.spool_status() {
        state.metrics.spool.observe(&spool);
    }
    HttpResponse::Ok().content_type("text/plain; version=0.0.4; charset=utf-8").body(state.metrics.render())
}
