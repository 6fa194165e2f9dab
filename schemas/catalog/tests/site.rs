//! The catalog site as `eventgw-catalog schemas docs` writes it (and the
//! gateway serves it, see `gateway/tests/catalog_page.rs`): the page
//! documents the shipped catalog, its `catalog.json` compiles back into the
//! same catalog, the WebAssembly files get their content types, and the
//! site holds nothing but the rendered files. The tool's `schemas check`,
//! `diff` and `docs` as a user runs them.
#![allow(missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;

use eventgw_catalog::site::{Site, WASM_FILES};
use eventgw_schemas::Catalog;
use eventgw_schemas::loader::load_catalog;

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("schemas/catalog has a parent").to_path_buf()
}

/// A wasm directory holding stand-ins for the wasm-bindgen output.
fn fake_wasm() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eventgw-catalog-site-wasm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    for name in WASM_FILES {
        std::fs::write(dir.join(name), b"stand-in").expect("write");
    }
    dir
}

#[test]
fn renders_the_page_its_sources_and_the_checker_and_nothing_else() {
    let dir = schemas_dir();
    let catalog = load_catalog(&dir).expect("shipped catalog");
    let site = Site::render(&catalog, &dir, Some(&fake_wasm()));
    assert!(site.has_checker());

    let html = String::from_utf8(site.get("index.html").expect("page").body.to_vec()).expect("utf-8");
    for needle in ["<h1>Event catalog</h1>", "billing.payments", "payments", "Payment Captured", "properties.order_id"]
    {
        assert!(html.contains(needle), "page lacks {needle}");
    }
    assert!(!html.contains(&dir.display().to_string()), "the server's paths are not published");

    let json = site.get("catalog.json").expect("sources");
    assert_eq!(json.content_type, "application/json");
    let sources: Vec<eventgw_schemas::DomainSource> = serde_json::from_slice(&json.body).expect("JSON");
    assert_eq!(sources.iter().find(|s| s.spec.domain == "web").map(|s| s.origin.as_str()), Some("web/catalog.toml"));
    assert_eq!(Catalog::compile(sources).expect("compiles").events().len(), catalog.events().len());

    let wasm = site.get("wasm/eventgw_schemas_wasm_bg.wasm").expect("checker");
    assert_eq!(wasm.content_type, "application/wasm");
    for path in ["../Cargo.toml", "web/catalog.toml", "nope"] {
        assert!(site.get(path).is_none(), "{path}");
    }
}

#[test]
fn without_a_wasm_build_the_page_still_renders_and_says_so() {
    let dir = schemas_dir();
    let catalog = load_catalog(&dir).expect("shipped catalog");
    let site = Site::render(&catalog, &dir, Some(Path::new("/nonexistent")));
    assert!(!site.has_checker());
    assert!(site.get("index.html").is_some() && site.get("wasm/eventgw_schemas_wasm.js").is_none());
}

#[test]
fn the_tool_checks_diffs_and_writes_docs() {
    let tool = env!("CARGO_BIN_EXE_eventgw-catalog");
    let run = |args: &[&str]| {
        let out = Command::new(tool).args(args).current_dir(schemas_dir().join("..")).output().expect("run");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, text) = run(&["schemas", "check"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("ok    Page Viewed v1 -> v2 (backward)") && text.contains("10 events in 5 domains"),
        "{text}"
    );

    // v1 after v2: the optional fields disappear, which is fine both ways.
    let (code, text) = run(&["schemas", "diff", "schemas/web/page_viewed/2.json", "schemas/web/page_viewed/1.json"]);
    assert_eq!((code, text.as_str()), (Some(0), "backward: compatible, forward: compatible, full: compatible\n"));
    let tmp = std::env::temp_dir().join(format!("eventgw-diff-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("mkdir");
    let old = tmp.join("old.json");
    let new = tmp.join("new.json");
    std::fs::write(&old, r#"{"properties": {"method": {"enum": ["card", "wallet"]}}}"#).expect("write");
    std::fs::write(&new, r#"{"properties": {"method": {"enum": ["card"]}}, "required": ["method"]}"#).expect("write");
    let (old, new) = (old.display().to_string(), new.display().to_string());
    let (code, text) = run(&["schemas", "diff", &old, &new]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("breaks backward: `method`: enum value \"wallet\" removed"), "{text}");
    assert!(text.contains("breaks backward: the event: new required field `method`"), "{text}");
    assert!(text.contains("backward: BREAKS, forward: compatible"), "{text}");
    assert_eq!(run(&["schemas", "diff", &old, &new, "--mode", "forward"]).0, Some(0));

    let out = tmp.join("site");
    let (code, text) = run(&["schemas", "docs", "--out", &out.display().to_string(), "--wasm", "/nonexistent"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("WITHOUT the in-browser checker"), "{text}");
    assert!(std::fs::read_to_string(out.join("index.html")).expect("index").contains("Lead Status Changed"));
    let _ = std::fs::remove_dir_all(&tmp);
}
