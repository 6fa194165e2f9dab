//! Wires the endpoints into an actix-web server on a listener the caller
//! bound, so tests bind port 0 and run the real server. Connection limits
//! and slow-client timeouts are set here; CORS and request metrics are one
//! middleware around every endpoint.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::body::BoxBody;
use actix_web::dev::{Server, Service, ServiceRequest, ServiceResponse};
use actix_web::http::{Method, header};
use actix_web::{App, HttpMessage, HttpResponse, HttpServer, ResponseError, web};
use futures::future::{FutureExt, LocalBoxFuture, ready};

use crate::AppState;
use crate::api;
use crate::auth::Authenticated;
use crate::cors;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::tls::CertificateStore;

/// Starts serving on `listener`, over HTTPS when `[server.tls]` is set. The
/// returned server runs when awaited (or spawned); its handle stops it
/// gracefully, draining in-flight requests.
pub fn serve(state: Arc<AppState>, listener: TcpListener) -> std::io::Result<Server> {
    let tls =
        state.config.server.tls.as_ref().map(CertificateStore::load).transpose().map_err(std::io::Error::other)?;
    serve_with_tls(state, listener, tls.map(Arc::new))
}

/// As [`serve`], with the certificate store the caller keeps (main reloads
/// it on SIGHUP); `None` serves plain HTTP.
pub fn serve_with_tls(
    state: Arc<AppState>,
    listener: TcpListener,
    tls: Option<Arc<CertificateStore>>,
) -> std::io::Result<Server> {
    let s = &state.config.server;
    let workers = match s.workers {
        0 => std::thread::available_parallelism().map_or(2, usize::from),
        n => n,
    };
    let (shutdown, max_connections) = (s.shutdown_timeout_secs, s.max_connections);
    let header_timeout = Duration::from_millis(s.header_timeout_ms);
    let keep_alive = Duration::from_secs(s.keep_alive_secs);
    actix_web::rt::spawn(clean_quotas(Arc::clone(&state)));
    let site = crate::contracts::site::Site::for_catalog(&state.catalog, &state.config.catalog.dir);
    let data = web::Data::from(state);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .wrap_fn(edge)
            .route("/v1/batch", web::post().to(api::batch::batch))
            .route("/v1/pixel.gif", web::get().to(api::pixel::pixel))
            .route("/v1/{kind:track|page|screen|identify|group|alias}", web::post().to(api::batch::single))
            .route("/healthz", web::get().to(api::health::healthz))
            .route("/readyz", web::get().to(api::health::readyz))
            .route("/metrics", web::get().to(api::metrics::metrics))
            .service(crate::contracts::site::scope(site.clone()))
            .default_service(web::to(not_found))
    })
    .workers(workers)
    .max_connections(max_connections)
    .shutdown_timeout(shutdown)
    .client_request_timeout(header_timeout)
    .client_disconnect_timeout(Duration::from_secs(1))
    .keep_alive(keep_alive);
    let server = match tls {
        Some(store) => server.listen_rustls_0_23(listener, store.server_config())?,
        None => server.listen(listener)?,
    };
    Ok(server.run())
}

/// Answers CORS preflights, grants CORS per source on answers, and counts
/// requests by endpoint, status and error code.
fn edge<S>(
    req: ServiceRequest,
    service: &S,
) -> LocalBoxFuture<'static, Result<ServiceResponse<BoxBody>, actix_web::Error>>
where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>,
    S::Future: 'static,
{
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        return service.call(req).boxed_local();
    };
    let origin = req.headers().get(header::ORIGIN).cloned();
    let endpoint = endpoint_label(&req);
    if req.method() == Method::OPTIONS {
        let answer = preflight(&state, origin.as_ref());
        count(&state, endpoint, &answer);
        return ready(Ok(req.into_response(answer))).boxed_local();
    }
    let call = service.call(req);
    async move {
        let mut response = call.await?;
        if let Some(origin) = origin {
            let authenticated = response.request().extensions().get::<Authenticated>().cloned();
            let allowed = match authenticated {
                Some(Authenticated(source)) => source.origins.allows(origin.to_str().unwrap_or_default()),
                None => state.auth.load().preflight_origins.allows(origin.to_str().unwrap_or_default()),
            };
            if allowed {
                cors::grant(response.headers_mut(), &origin);
            } else {
                cors::vary_origin(response.headers_mut());
            }
        }
        count(&state, endpoint, response.response());
        Ok(response)
    }
    .boxed_local()
}

fn preflight(state: &AppState, origin: Option<&header::HeaderValue>) -> HttpResponse {
    match origin {
        Some(origin) if state.auth.load().preflight_origins.allows(origin.to_str().unwrap_or_default()) => {
            cors::preflight(origin)
        }
        Some(origin) => ApiError::OriginNotAllowed(origin.to_str().unwrap_or("?").to_owned()).error_response(),
        None => HttpResponse::NoContent().insert_header((header::ALLOW, "POST, GET, OPTIONS")).finish(),
    }
}

/// The path of a matched route (a fixed set), or `other`.
fn endpoint_label(req: &ServiceRequest) -> &'static str {
    const KNOWN: [&str; 11] = [
        "/v1/batch",
        "/v1/pixel.gif",
        "/v1/track",
        "/v1/page",
        "/v1/screen",
        "/v1/identify",
        "/v1/group",
        "/v1/alias",
        "/healthz",
        "/readyz",
        "/metrics",
    ];
    let path = req.path();
    if path == "/catalog" || path.starts_with("/catalog/") {
        return "/catalog";
    }
    KNOWN.iter().find(|k| **k == path).copied().unwrap_or("other")
}

fn count(state: &AppState, endpoint: &str, response: &HttpResponse) {
    state.metrics.requests.with_label_values(&[endpoint, response.status().as_str()]).inc();
    if let Some(ErrorCode(code)) = response.extensions().get::<ErrorCode>() {
        state.metrics.rejected_requests.with_label_values(&[code]).inc();
    }
}

async fn not_found() -> HttpResponse {
    HttpResponse::NotFound()
        .json(ErrorBody { code: "not_found", message: "no such endpoint; see the README for the API".into() })
}

/// Drops idle limiter state now and then, so memory stays bounded however
/// many distinct sources, subjects and addresses appear. Ends with the server.
async fn clean_quotas(state: Arc<AppState>) {
    let every = Duration::from_secs(state.config.quotas.cleanup_interval_secs.max(1));
    let weak = Arc::downgrade(&state);
    drop(state);
    loop {
        actix_web::rt::time::sleep(every).await;
        let Some(state) = weak.upgrade() else { return };
        let remaining = state.auth.load().quotas.cleanup();
        tracing::debug!(remaining, "Quota state cleaned");
    }
}
