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
        text.contains("ok    Page Viewed v1 -> v2 (backward)")
            && text.contains("10 events in 5 domains")
            && text.contains("mappings: 19 rules in 3 files checked"),
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

/// The article of catalog event `name` on the page.
fn article<'a>(html: &'a str, name: &str) -> &'a str {
    let start = html.find(&format!("data-event=\"{name}\"")).unwrap_or_else(|| panic!("no article of {name}"));
    let end = html[start..].find("</article>").expect("article ends") + start;
    &html[start..end]
}

#[test]
fn the_page_shows_each_events_tracker_events_and_every_protocols_rules() {
    let dir = schemas_dir();
    let catalog = load_catalog(&dir).expect("shipped catalog");
    let site = Site::render(&catalog, &dir, None);
    let html = String::from_utf8(site.get("index.html").expect("page").body.to_vec()).expect("utf-8");
    let page_viewed = article(&html, "Page Viewed");
    for needle in [
        "<dt>Tracker events</dt>",
        "PostHog <code>$pageview</code>",
        "GA4 <code>page_view</code>",
        "Snowplow <code>pv</code>",
    ] {
        assert!(page_viewed.contains(needle), "Page Viewed lacks {needle}: {page_viewed}");
    }
    let link = article(&html, "Link Clicked");
    for needle in [
        "PostHog <code>link_clicked</code>",
        "GA4 <code>click</code>",
        "Snowplow <code>iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-*-*</code>",
    ] {
        assert!(link.contains(needle), "Link Clicked lacks {needle}: {link}");
    }
    // An event no rule names has no such term.
    assert!(!article(&html, "Lead Status Changed").contains("Tracker events"));

    assert!(html.contains("<a href=\"#mappings\">tracker mappings</a>"));
    // Not counted as domains or events by the page's Chromium test (schemas/site-test).
    assert_eq!(html.matches("<section class=\"domain\"").count(), 5);
    assert_eq!(html.matches("<article class=\"event\"").count(), 10);
    for protocol in ["posthog", "ga4", "snowplow"] {
        assert!(html.contains(&format!("id=\"mapping-{protocol}\"")), "no {protocol} section");
        assert!(html.contains(&format!("<code>mappings/{protocol}.toml</code>")), "no {protocol} file");
    }
    let row = "<tr><td><code>purchase</code></td><td>track</td><td><a href=\"#event-order_completed\">Order Completed</a>\
               </td><td>newest</td><td><code>transaction_id</code> → <code>order_id</code>, <code>value</code> → \
               <code>total</code></td></tr>";
    assert!(html.contains(row), "GA4's purchase rule");
    assert!(html.contains("<td><code>$identify</code></td><td>identify</td><td>none (the call itself)</td>"));
}

#[test]
fn schemas_check_fails_on_a_bad_mapping_naming_file_rule_and_code() {
    // The shipped domains, and a mapping directory of our own.
    let root = std::env::temp_dir().join(format!("eventgw-catalog-mapcheck-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for entry in std::fs::read_dir(schemas_dir()).expect("read_dir").filter_map(Result::ok) {
        let path = entry.path();
        if path.join("catalog.toml").is_file() || path.ends_with("mappings") {
            copy_tree(&path, &root.join(entry.file_name()));
        }
    }
    let bad =
        "[events.purchase]\nevent = \"Order Completd\"\n\n[events.click]\nevent = \"Link Clicked\"\nversion = 9\n";
    std::fs::write(root.join("mappings/ga4.toml"), bad).expect("write");
    let tool = env!("CARGO_BIN_EXE_eventgw-catalog");
    let out = Command::new(tool).args(["schemas", "check", &root.display().to_string()]).output().expect("run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{text}");
    let file = root.join("mappings/ga4.toml").display().to_string();
    let lines = [
        format!("FAIL  mapping_unknown_version {file} events.\"click\": `Link Clicked` has no version 9 (newest is 1)"),
        format!(
            "FAIL  mapping_unknown_event {file} events.\"purchase\": catalog event `Order Completd` does not exist"
        ),
    ];
    for line in &lines {
        assert!(text.contains(line.as_str()), "lacks {line}: {text}");
    }
    // The same directory with the shipped mapping back passes: the failure was the mapping.
    std::fs::copy(schemas_dir().join("mappings/ga4.toml"), root.join("mappings/ga4.toml")).expect("copy");
    let out = Command::new(tool).args(["schemas", "check", &root.display().to_string()]).output().expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let _ = std::fs::remove_dir_all(&root);
}

/// Copies the directory `from` to `to`, recursively.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for path in std::fs::read_dir(from).expect("read_dir").filter_map(Result::ok).map(|e| e.path()) {
        let target = to.join(path.file_name().expect("name"));
        if path.is_dir() { copy_tree(&path, &target) } else { std::fs::copy(&path, &target).map(drop).expect("copy") }
    }
}

/// `schemas check --mappings-base`: the shipped mappings against
/// themselves pass; a copy whose GA4 `purchase` rule is removed and whose
/// `click` points elsewhere fails with both rules named; a base that
/// cannot be read is an error, not a pass.
#[test]
fn schemas_check_compares_the_mappings_with_a_base() {
    let root = std::env::temp_dir().join(format!("eventgw-mapping-base-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for entry in std::fs::read_dir(schemas_dir()).expect("read_dir").filter_map(Result::ok) {
        let path = entry.path();
        if path.join("catalog.toml").is_file() || path.ends_with("mappings") {
            copy_tree(&path, &root.join(entry.file_name()));
        }
    }
    let base = schemas_dir().join("mappings").display().to_string();
    let tool = env!("CARGO_BIN_EXE_eventgw-catalog");
    let check = |base: &str| {
        let out = Command::new(tool)
            .args(["schemas", "check", &root.display().to_string(), "--mappings-base", base])
            .output()
            .expect("run");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    };
    let (code, text) = check(&base);
    assert_eq!(code, Some(0), "unchanged mappings pass: {text}");
    let shipped = std::fs::read_to_string(schemas_dir().join("mappings/ga4.toml")).expect("read");
    let changed = shipped
        .replace("[events.purchase]\nevent = \"Order Completed\"", "[events.refund]\nevent = \"Order Completed\"")
        .replace("[events.click]\nevent = \"Link Clicked\"", "[events.click]\nevent = \"Form Submitted\"");
    assert_ne!(changed, shipped, "the shipped ga4.toml has the rules this test changes");
    std::fs::write(root.join("mappings/ga4.toml"), changed).expect("write");
    let (code, text) = check(&base);
    assert_eq!(code, Some(1), "{text}");
    let file = root.join("mappings/ga4.toml").display().to_string();
    for line in [
        format!("FAIL  mapping_rule_removed {file} events.\"purchase\": the base maps it to `Order Completed`"),
        format!(
            "FAIL  mapping_rule_repointed {file} events.\"click\": the base maps it to `Link Clicked`, now `Form Submitted`"
        ),
    ] {
        assert!(text.contains(line.as_str()), "lacks {line}: {text}");
    }
    let (code, text) = check(&root.join("no-such-dir").display().to_string());
    assert_ne!(code, Some(0), "a base that cannot be read fails: {text}");
    let _ = std::fs::remove_dir_all(&root);
}
