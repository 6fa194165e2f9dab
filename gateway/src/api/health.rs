//! Liveness and readiness for load balancers and orchestrators.

use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

/// `GET /healthz`: the process answers.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// `GET /readyz`: Kafka takes writes (a recent acknowledgement, or the
/// latest metadata probe, made off the request path: this never waits on
/// Kafka, see `sink/kafka_probe.rs`) and the catalog is loaded
/// (it always is once the server runs: start-up refuses a broken catalog).
/// With the spool on, the gateway stays ready while Kafka is away and the
/// spool can take events, and says it is spooling (and how much it holds).
/// Once shutdown began it answers `503 draining`, whatever Kafka says.
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    if state.is_draining() {
        return Err(ApiError::Draining);
    }
    state.sink.check_ready().await.map_err(ApiError::NotReady)?;
    if let Some(reason) = state.sink.spool_status().and_then(|spool| spool.not_ready()) {
        return Err(ApiError::NotReady(reason));
    }
    state.edge.ready().map_err(ApiError::NotReady)?;
    let mut body = json!({"status": "ready", "events": state.catalog.events().len()});
    if let Some(spool) = state.sink.spool_status() {
        body["spooling"] = json!(spool.spooling);
        body["spool"] = json!(spool);
    }
    Ok(HttpResponse::Ok().json(body))
}
