//! Wires the endpoints into an actix-web server on a listener the caller
//! bound, so tests bind port 0 and run the real server. Connection limits
//! and slow-client timeouts are set here; CORS, the request-head limit and
//! request metrics are one middleware around every endpoint, which also
//! caps the requests in flight on one HTTP/2 connection. The listener
//! speaks HTTP/1.1 and HTTP/2 with prior knowledge (h2c), told apart by the
//! first bytes; over TLS, both, chosen by ALPN (see [`crate::tls`]).

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{Server, ServerHandle, Service, ServiceRequest, ServiceResponse};
use actix_web::http::{Method, Version, header};
use actix_web::{App, HttpMessage, HttpResponse, HttpServer, ResponseError, web};
use futures::future::{FutureExt, LocalBoxFuture, ready};

use crate::api;
use crate::auth::Authenticated;
use crate::cors;
use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;
use crate::tls::CertificateStore;

/// Starts serving on `listener`, over HTTPS when `[server.tls]` is set. The
/// returned server runs when awaited (or spawned); its handle stops it
/// gracefully, draining in-flight requests. It does not watch signals:
/// the caller decides when to stop, through [`drain`].
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
    api::routes::check_aliases(&s.path_aliases).map_err(std::io::Error::other)?;
    let workers = match s.workers {
        0 => std::thread::available_parallelism().map_or(2, usize::from),
        n => n,
    };
    let (shutdown, max_connections) = (s.shutdown_timeout_secs, s.max_connections);
    let max_streams = s.max_streams_per_connection;
    let header_timeout = Duration::from_millis(s.header_timeout_ms);
    let keep_alive = Duration::from_secs(s.keep_alive_secs);
    let site = eventgw_catalog::site::Site::for_catalog(&state.catalog, &state.config.catalog.dir);
    let live = state.config.live.enabled;
    let data = web::Data::from(state);
    let server = HttpServer::new(move || {
        App::new().app_data(data.clone()).wrap_fn(edge).configure(|app| routes(app, site.clone(), live))
    })
    .workers(workers)
    .max_connections(max_connections)
    .shutdown_timeout(shutdown)
    .client_request_timeout(header_timeout)
    .client_disconnect_timeout(Duration::from_secs(1))
    .keep_alive(keep_alive)
    .on_connect(move |_, connection| {
        connection.insert(crate::wire::StreamSlots::new(max_streams));
    })
    // Signals start a drain (see `drain`), not actix's immediate stop.
    .disable_signals();
    let server = match tls {
        Some(store) => server.listen_rustls_0_23(listener, store.server_config())?,
        // Plain HTTP also speaks HTTP/2 with prior knowledge (h2c).
        None => server.listen_auto_h2c(listener)?,
    };
    Ok(server.run())
}

/// Stops `server` in the order load balancers need: `/readyz` answers `503
/// draining` (and `eventgw_ready` drops to 0) at once while every other
/// request is still served for `server.drain_grace_secs`, or until `skip`
/// resolves (a second signal); then the listener closes and in-flight
/// requests get `server.shutdown_timeout_secs` to finish. Returns once the
/// server stopped; flushing the producer is the caller's.
pub async fn drain(state: &AppState, server: &ServerHandle, skip: impl std::future::Future<Output = ()>) {
    state.draining.store(true, std::sync::atomic::Ordering::Relaxed);
    state.metrics.ready.set(0);
    state.live.close();
    let grace = Duration::from_secs(state.config.server.drain_grace_secs);
    if !grace.is_zero() {
        tracing::info!(grace_secs = grace.as_secs(), "Draining: /readyz answers 503, requests still served");
        let sleep = actix_web::rt::time::sleep(grace);
        futures::pin_mut!(sleep, skip);
        if let futures::future::Either::Right(_) = futures::future::select(sleep, skip).await {
            tracing::info!("Second signal: drain grace cut short");
        }
    }
    tracing::info!("Closing the listener; in-flight requests finish");
    server.stop(true).await;
}

/// Serves `req` as a request to `target` (`server.path_aliases`), before
/// routing, so everything after sees the target path; the query is kept.
fn alias(req: &mut ServiceRequest, target: &str) {
    let uri = match req.uri().query() {
        Some(query) => format!("{target}?{query}"),
        None => target.to_owned(),
    };
    if let Ok(uri) = uri.parse::<actix_web::http::Uri>() {
        req.match_info_mut().get_mut().update(&uri);
        req.head_mut().uri = uri;
    }
}

/// Around every endpoint: answers CORS preflights, grants CORS per source
/// on answers, refuses over-long request heads, holds HTTP/2 stream slots,
/// and counts requests by endpoint, status and error code.
pub fn edge<S>(
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
    let mut req = req;
    if let Some(target) = state.config.server.path_aliases.get(req.path()) {
        alias(&mut req, target);
    }
    let origin = req.headers().get(header::ORIGIN).cloned();
    let endpoint = api::routes::label(req.path()).unwrap_or("other");
    let credentialed = api::routes::credentialed(req.path());
    let head_limit = state.config.server.max_header_bytes;
    if head_bytes(&req) > head_limit {
        let answer = ApiError::HeadersTooLarge { limit: head_limit }.error_response();
        count(&state, endpoint, &answer);
        return ready(Ok(req.into_response(answer))).boxed_local();
    }
    if req.method() == Method::OPTIONS {
        let answer = if api::routes::cross_origin(req.path()) {
            let mut answer =
                preflight(&state, origin.as_ref(), req.headers().get(header::ACCESS_CONTROL_REQUEST_HEADERS));
            if credentialed {
                cors::allow_credentials(answer.headers_mut());
            }
            answer
        } else {
            not_found_answer()
        };
        count(&state, endpoint, &answer);
        return ready(Ok(req.into_response(answer))).boxed_local();
    }
    // One slot per HTTP/2 stream, held until its answer is written.
    let slots = req.conn_data::<crate::wire::StreamSlots>().filter(|_| req.version() == Version::HTTP_2);
    let slot = match slots.map(|slots| slots.acquire().ok_or(slots.limit())) {
        Some(Err(limit)) => {
            let retry_after = state.config.server.retry_after_secs;
            let answer = ApiError::TooManyStreams { limit, retry_after }.error_response();
            count(&state, endpoint, &answer);
            return ready(Ok(req.into_response(answer))).boxed_local();
        }
        Some(Ok(slot)) => Some(slot),
        None => None,
    };
    let call = service.call(req);
    async move {
        let mut response = call.await?;
        let unread = response.request().extensions_mut().remove::<crate::wire::UnreadBody>();
        if unread.is_some() || slot.is_some() {
            response = response.map_body(|_, body| BoxBody::new(HoldingBody { body, _held: (unread, slot) }));
        }
        if let Some(origin) = origin {
            let origin = origin.to_str().unwrap_or_default();
            let authenticated = response.request().extensions().get::<Authenticated>().cloned();
            let allowed = match authenticated {
                Some(Authenticated(source)) => source.origins.grant_for(origin),
                None => state.auth.load().preflight_origins.grant_for(origin),
            };
            match allowed {
                Some(allowed) => {
                    cors::grant(response.headers_mut(), allowed);
                    if credentialed {
                        cors::allow_credentials(response.headers_mut());
                    }
                }
                None => cors::vary_origin(response.headers_mut()),
            }
        }
        count(&state, endpoint, response.response());
        Ok(response)
    }
    .boxed_local()
}

fn preflight(
    state: &AppState,
    origin: Option<&header::HeaderValue>,
    requested: Option<&header::HeaderValue>,
) -> HttpResponse {
    let Some(origin) = origin else {
        return HttpResponse::NoContent().insert_header((header::ALLOW, "POST, GET, OPTIONS")).finish();
    };
    let text = origin.to_str().unwrap_or_default();
    match state.auth.load().preflight_origins.grant_for(text) {
        Some(allowed) => cors::preflight(allowed, requested),
        None => ApiError::OriginNotAllowed(text.chars().take(256).collect()).error_response(),
    }
}

/// Bytes of the request head as sent (names, values, separators), for
/// `server.max_header_bytes`.
fn head_bytes(req: &ServiceRequest) -> usize {
    let line = req.method().as_str().len() + target_len(req.uri()) + 12;
    line + req.headers().iter().map(|(name, value)| name.as_str().len() + value.len() + 4).sum::<usize>()
}

/// `uri.to_string().len()`, counted from its parts without writing it out
/// (an allocation per request, for a length).
fn target_len(uri: &actix_web::http::Uri) -> usize {
    let scheme = uri.scheme_str().map_or(0, |s| s.len() + "://".len());
    let authority = uri.authority().map_or(0, |a| a.as_str().len());
    // As `Display`: an asterisk-form target with an authority has no path.
    let path = if uri.authority().is_some() && uri.path() == "*" { 0 } else { uri.path().len() };
    scheme + authority + path + uri.query().map_or(0, |q| q.len() + 1)
}

#[cfg(test)]
#[test]
fn a_request_target_is_counted_as_it_is_written() {
    for target in ["/v1/batch", "/v1/t?writeKey=abc&x=%20", "https://gw.example:8443/v1/p?q", "http://h", "*", "/"] {
        let uri: actix_web::http::Uri = target.parse().expect("uri");
        assert_eq!(target_len(&uri), uri.to_string().len(), "{target}");
    }
}

fn count(state: &AppState, endpoint: &str, response: &HttpResponse) {
    state.metrics.requests.with_label_values(&[endpoint, response.status().as_str()]).inc();
    if let Some(ErrorCode(code)) = response.extensions().get::<ErrorCode>() {
        state.metrics.rejected_requests.with_label_values(&[code.as_str()]).inc();
    }
}

/// Every endpoint (the app the server runs, around [`edge`]); public so
/// benchmarks can drive the same app in process.
pub fn routes(app: &mut web::ServiceConfig, site: eventgw_catalog::site::Site, live: bool) {
    use api::routes as r;
    // One resource per path. actix matches a resource of several paths
    // with a regex set even when each is a plain path, and one `{kind}`
    // pattern with a regex: 1.3 µs of every single-event request's 17 µs
    // in process (benches/request.rs, perf). A plain path is a string
    // comparison.
    each(app, &r::BATCH, |p| only(POST, p, api::batch::batch));
    each(app, &r::BEACON, |p| only(POST, p, api::batch::batch));
    each(app, &r::SINGLE, |p| only(POST, p, api::batch::single));
    each(app, &["/v1/pixel.gif"], |p| only(GET, p, api::pixel::pixel));
    each(app, &r::SEGMENT_SETTINGS, |p| only(GET, p, api::settings::segment));
    each(app, &r::SOURCE_CONFIG, |p| only(GET, p, api::settings::source_config));
    each(app, &r::POSTHOG_CAPTURE, |p| only(POST_GET, p, api::posthog::capture));
    each(app, &r::POSTHOG_FLAGS, |p| only(POST_GET, p, api::posthog::flags));
    each(app, &r::POSTHOG_CONFIG_JS, |p| only(GET, p, api::posthog::config_js));
    each(app, &r::POSTHOG_CONFIG, |p| only(GET, p, api::posthog::config));
    each(app, &r::POSTHOG_STATIC, |p| only(GET, p, api::posthog::extension));
    each(app, &r::GA4_COLLECT, |p| only(POST, p, api::ga4::collect));
    each(app, &r::GA4_DEBUG, |p| only(POST, p, api::ga4::debug));
    each(app, &r::SNOWPLOW_TP2, |p| only(POST, p, api::snowplow::tp2));
    each(app, &r::SNOWPLOW_PIXEL, |p| only(GET, p, api::snowplow::pixel));
    each(app, &["/healthz"], |p| only(GET, p, api::health::healthz));
    each(app, &["/readyz"], |p| only(GET, p, api::health::readyz));
    each(app, &["/metrics"], |p| only(GET, p, api::metrics::metrics));
    app.service(crate::catalog_page::scope(site));
    live_routes(app, live);
    app.default_service(web::to(not_found));
}

/// Registers `resource` of each of `paths`, in order.
fn each(app: &mut web::ServiceConfig, paths: &[&str], resource: impl Fn(&str) -> actix_web::Resource) {
    for path in paths {
        app.service(resource(path));
    }
}

/// The live view's page and stream, when `live.enabled`; otherwise their
/// paths are `404 not_found` like any other.
fn live_routes(app: &mut web::ServiceConfig, enabled: bool) {
    if enabled {
        each(app, &["/live", "/live/"], |p| only(GET, p, api::live::page));
        app.service(only(GET, "/live/stream", api::live::stream));
        app.service(only(GET, "/live/events/{id}", api::live::opened));
    }
}

/// The methods of a resource that takes POST.
const POST: &[Method] = &[Method::POST];
/// The methods of a resource that takes GET.
const GET: &[Method] = &[Method::GET];
/// The methods of a resource that takes both (PostHog's capture and flags).
const POST_GET: &[Method] = &[Method::POST, Method::GET];

/// A resource whose requests of `methods` `handler` serves; another method
/// gets `405 method_not_allowed` as JSON (its `Allow` naming `methods`)
/// rather than actix's empty answer. actix's own method guards
/// (`web::post()`) also note each method they check in the request's
/// extensions, for a `405` this answers itself: an extension map, a vector
/// and a box made and freed per request for nothing (2% of the gateway's
/// CPU per single-event request, `perf`).
fn only<F, Args>(methods: &'static [Method], path: &str, handler: F) -> actix_web::Resource
where
    F: actix_web::Handler<Args>,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    web::resource(path).default_service(web::to(move || method_not_allowed(methods))).route(
        web::route().guard(actix_web::guard::fn_guard(move |ctx| methods.contains(&ctx.head().method))).to(handler),
    )
}

async fn method_not_allowed(allowed: &'static [Method]) -> HttpResponse {
    ApiError::MethodNotAllowed(allowed).error_response()
}

async fn not_found() -> HttpResponse {
    not_found_answer()
}

fn not_found_answer() -> HttpResponse {
    ApiError::NotFound.error_response()
}

/// An answer's body that keeps the request's unread body stream alive
/// until the answer is written: actix then closes the connection instead
/// of draining a chunked body that may never end (see [`crate::wire::UnreadBody`]).
/// It also holds the request's HTTP/2 stream slot until then.
struct HoldingBody {
    body: BoxBody,
    _held: (Option<crate::wire::UnreadBody>, Option<crate::wire::StreamSlot>),
}

impl MessageBody for HoldingBody {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<actix_web::web::Bytes, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_next(cx)
    }
}
