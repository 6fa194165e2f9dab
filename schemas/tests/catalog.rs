//! The shipped catalog loads, routes and checks as documented, and broken
//! catalogs are refused with an error naming the file at fault.

use std::fs;
use std::path::{Path, PathBuf};

use eventgw_schemas::loader::load_catalog;
use eventgw_schemas::{Catalog, Violation};
use serde_json::json;

fn shipped() -> Catalog {
    load_catalog(Path::new(env!("CARGO_MANIFEST_DIR"))).expect("the shipped catalog compiles")
}

#[test]
fn shipped_catalog_routes_each_domain_to_its_topic() {
    let catalog = shipped();
    let route = |name: &str| {
        let e = catalog.event(name).unwrap_or_else(|| panic!("{name} is in the catalog"));
        (e.domain.as_str().to_owned(), e.topic.as_str().to_owned())
    };
    assert_eq!(route("Page Viewed"), ("web".into(), "web.tracking".into()));
    assert_eq!(route("Form Submitted"), ("web".into(), "web.tracking".into()));
    assert_eq!(route("Email Opened"), ("marketing".into(), "marketing.campaign.events".into()));
    assert_eq!(route("Lead Status Changed"), ("crm".into(), "crm.leads".into()));
    assert_eq!(route("Payment Captured"), ("billing".into(), "billing.payments".into()));
    assert_eq!(catalog.events().len(), 10);
    assert_eq!(route("Screen Viewed"), ("app".into(), "app.tracking".into()));
    assert!(catalog.event("page viewed").is_none(), "names are exact");
}

#[test]
fn newest_version_is_the_default_and_older_ones_stay_valid() {
    let catalog = shipped();
    let page = catalog.event("Page Viewed").expect("Page Viewed");
    let v2_only = json!({"type": "page", "anonymousId": "a1",
        "properties": {"url": "https://shop.example/x", "path": "/x", "search": "q=1"}});
    let (schema, key) = page.check(&v2_only, None).expect("valid under v2");
    assert_eq!((schema.version, key.as_str()), (2, "a1"));
    let (schema, _) = page.check(&v2_only, Some(1)).expect("v1 ignores unknown properties");
    assert_eq!(schema.version, 1);
    let bad_search = json!({"type": "page", "anonymousId": "a1",
        "properties": {"url": "https://shop.example/x", "path": "/x", "search": 7}});
    assert!(page.check(&bad_search, Some(1)).is_ok(), "v1 has no `search` field");
    assert!(matches!(page.check(&bad_search, None), Err(Violation::Schema(_))));
    assert_eq!(page.check(&v2_only, Some(3)).err(), Some(Violation::UnknownVersion { requested: 3, latest: 2 }));
}

#[test]
fn violations_point_at_the_offending_field() {
    let catalog = shipped();
    let order = catalog.event("Order Completed").expect("Order Completed");
    let event = json!({"type": "track", "userId": "u1",
        "properties": {"order_id": "o-1", "total": -5, "currency": "EUR"}});
    let Err(Violation::Schema(errors)) = order.check(&event, None) else { panic!("negative total must fail") };
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "/properties/total");
}

#[test]
fn billing_is_keyed_by_order_and_web_falls_back_to_anonymous_id() {
    let catalog = shipped();
    let payment = json!({"type": "track", "userId": "u1",
        "properties": {"order_id": "o-9", "payment_id": "p-1", "amount": 10, "currency": "EUR"}});
    let (_, key) = catalog.event("Payment Captured").expect("event").check(&payment, None).expect("valid");
    assert_eq!(key, "o-9");
    let click = json!({"type": "track", "anonymousId": "anon-7", "properties": {"href": "https://a.example/"}});
    let (_, key) = catalog.event("Link Clicked").expect("event").check(&click, None).expect("valid");
    assert_eq!(key, "anon-7");
}

/// A copy of the shipped catalog in a fresh directory, to break on purpose.
fn scratch_copy(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eventgw-catalog-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    copy_dir(Path::new(env!("CARGO_MANIFEST_DIR")), &dir);
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read_dir") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name").to_string_lossy().into_owned();
        if ["src", "tests", "target"].contains(&name.as_str()) {
            continue;
        }
        if path.is_dir() {
            copy_dir(&path, &to.join(&name));
        } else {
            fs::copy(&path, to.join(&name)).expect("copy");
        }
    }
}

fn refused(name: &str, breakage: impl FnOnce(&Path)) -> (PathBuf, String) {
    let dir = scratch_copy(name);
    breakage(&dir);
    let err = load_catalog(&dir).expect_err("a broken catalog is refused");
    let _ = fs::remove_dir_all(&dir);
    (dir, err.to_string())
}

#[test]
fn refuses_invalid_json_naming_the_file() {
    let (dir, err) = refused("json", |d| fs::write(d.join("web/link_clicked/1.json"), "{ nope").expect("write"));
    let file = dir.join("web/link_clicked/1.json").display().to_string();
    assert!(err.starts_with(&file) && err.contains("not valid JSON"), "{err}");
}

#[test]
fn refuses_an_invalid_json_schema() {
    let (_, err) = refused("schema", |d| {
        fs::write(d.join("crm/lead_status_changed/1.json"), r#"{"type": "objekt"}"#).expect("write")
    });
    assert!(err.contains("crm/lead_status_changed/1.json") && err.contains("not a valid JSON Schema"), "{err}");
}

#[test]
fn refuses_a_bad_catalog_file() {
    let (_, err) = refused("toml", |d| {
        let path = d.join("billing/catalog.toml");
        let text = fs::read_to_string(&path).expect("read").replace("topic = ", "topik = ");
        fs::write(path, text).expect("write")
    });
    assert!(err.contains("billing/catalog.toml") && err.contains("topik"), "{err}");
}

#[test]
fn refuses_a_gap_in_versions_and_a_missing_schema() {
    let (_, err) = refused("gap", |d| {
        fs::rename(d.join("web/page_viewed/2.json"), d.join("web/page_viewed/3.json")).expect("rename")
    });
    assert!(err.contains("web/catalog.toml") && err.contains("no gaps"), "{err}");
    let (_, err) = refused("missing", |d| fs::remove_dir_all(d.join("billing/order_completed")).expect("rm"));
    assert!(err.contains("billing/order_completed") && err.contains("cannot read"), "{err}");
}

#[test]
fn refuses_duplicate_event_names_across_domains() {
    let (_, err) = refused("dup", |d| {
        let path = d.join("crm/catalog.toml");
        let text = fs::read_to_string(&path).expect("read").replace("Lead Status Changed", "Order Completed");
        fs::write(path, text).expect("write")
    });
    assert!(err.contains("Order Completed") && err.contains("already defined"), "{err}");
}

#[test]
fn every_version_has_a_valid_example_and_bad_examples_are_refused() {
    let catalog = shipped();
    for event in catalog.events() {
        for schema in event.versions() {
            assert!(!schema.examples.is_empty(), "{} v{} has no example", event.name, schema.version);
            for example in &schema.examples {
                assert!(schema.validate(example).is_ok());
            }
        }
    }
    let (_, err) = refused("example", |d| {
        let path = d.join("billing/payment_captured/1.json");
        let text = fs::read_to_string(&path).expect("read").replace("\"pay-555\"", "555");
        fs::write(path, text).expect("write")
    });
    assert!(err.contains("payment_captured/1.json") && err.contains("example 0 breaks its own schema"), "{err}");
}
