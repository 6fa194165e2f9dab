//! Serves the catalog site at `/catalog`, rendered once at start-up
//! ([`Site::for_catalog`], the catalog tool's renderer) from the catalog the
//! gateway loaded, so the page always documents exactly the contract being
//! enforced. The WebAssembly checker is taken from the catalog directory's
//! `wasm/pkg/`, where `scripts/build-wasm` puts it.

use actix_web::http::header;
use actix_web::{HttpResponse, Scope, web};

pub use eventgw_catalog::site::Site;

/// The `/catalog` routes: `/catalog` redirects to `/catalog/` (so the page's
/// relative links resolve), which is the page; `/catalog/{file}` its files.
pub fn scope(site: Site) -> Scope {
    web::scope("/catalog")
        .app_data(web::Data::new(site))
        .route("", web::get().to(redirect))
        .route("/{file:.*}", web::get().to(file))
}

async fn redirect() -> HttpResponse {
    HttpResponse::PermanentRedirect().insert_header((header::LOCATION, "/catalog/")).finish()
}

async fn file(site: web::Data<Site>, path: web::Path<String>) -> HttpResponse {
    let name = match path.as_str() {
        "" => "index.html",
        other => other,
    };
    // Only names the site rendered are served: no file system lookup, so
    // no path can escape it.
    match site.get(name) {
        Some(file) => HttpResponse::Ok()
            .insert_header((header::CONTENT_TYPE, file.content_type))
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
            .body(file.body.clone()),
        None => HttpResponse::NotFound()
            .json(serde_json::json!({"code": "not_found", "message": "no such file in the catalog site"})),
    }
}
