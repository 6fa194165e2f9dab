//! The catalog site as the gateway serves it at `/catalog` (rendered by the
//! catalog tool's crate, whose own tests check the page and the tool): the
//! page documents the shipped catalog, its `catalog.json` compiles back into
//! the same catalog, the WebAssembly files get their content types, and
//! nothing outside the rendered files can be fetched.
#![allow(missing_docs)]

use std::path::{Path, PathBuf};

use actix_web::App;
use actix_web::http::{StatusCode, header};
use actix_web::test as web_test;
use eventgw_catalog::site::WASM_FILES;
use eventgw_schemas::Catalog;
use eventgw_schemas::loader::load_catalog;
use gateway::catalog_page::{Site, scope};

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas")
}

/// A wasm directory holding stand-ins for the wasm-bindgen output.
fn fake_wasm() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eventgw-site-wasm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    for name in WASM_FILES {
        std::fs::write(dir.join(name), b"stand-in").expect("write");
    }
    dir
}

#[actix_rt::test]
async fn serves_the_page_its_sources_and_the_checker_and_nothing_else() {
    let dir = schemas_dir();
    let catalog = load_catalog(&dir).expect("shipped catalog");
    let site = Site::render(&catalog, &dir, Some(&fake_wasm()));
    assert!(site.has_checker());
    let app = web_test::init_service(App::new().service(scope(site))).await;

    let res = web_test::call_service(&app, web_test::TestRequest::get().uri("/catalog").to_request()).await;
    assert_eq!(res.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(res.headers().get(header::LOCATION).and_then(|v| v.to_str().ok()), Some("/catalog/"));

    let res = web_test::call_service(&app, web_test::TestRequest::get().uri("/catalog/").to_request()).await;
    assert_eq!(res.status(), StatusCode::OK);
    let html = String::from_utf8(web_test::read_body(res).await.to_vec()).expect("utf-8");
    for needle in ["<h1>Event catalog</h1>", "billing.payments", "payments", "Payment Captured", "properties.order_id"]
    {
        assert!(html.contains(needle), "page lacks {needle}");
    }
    assert!(!html.contains(&dir.display().to_string()), "the server's paths are not published");
    // The trackers' events mapped to `Page Viewed` (schemas/mappings/*.toml) are on its article.
    let start = html.find("data-event=\"Page Viewed\"").expect("Page Viewed's article");
    let page_viewed = &html[start..start + html[start..].find("</article>").expect("article ends")];
    for needle in ["PostHog <code>$pageview</code>", "GA4 <code>page_view</code>", "Snowplow <code>pv</code>"] {
        assert!(page_viewed.contains(needle), "Page Viewed lacks {needle}");
    }
    assert!(html.contains("id=\"mapping-posthog\"") && html.contains("<code>mappings/ga4.toml</code>"));

    let req = web_test::TestRequest::get().uri("/catalog/catalog.json").to_request();
    let sources: Vec<eventgw_schemas::DomainSource> = web_test::call_and_read_body_json(&app, req).await;
    assert_eq!(sources.iter().find(|s| s.spec.domain == "web").map(|s| s.origin.as_str()), Some("web/catalog.toml"));
    assert_eq!(Catalog::compile(sources).expect("compiles").events().len(), catalog.events().len());

    let req = web_test::TestRequest::get().uri("/catalog/wasm/eventgw_schemas_wasm_bg.wasm").to_request();
    let res = web_test::call_service(&app, req).await;
    assert_eq!(res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()), Some("application/wasm"));

    for path in ["/catalog/../Cargo.toml", "/catalog/%2e%2e/Cargo.toml", "/catalog/web/catalog.toml", "/catalog/nope"] {
        let res = web_test::call_service(&app, web_test::TestRequest::get().uri(path).to_request()).await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
    }
}
