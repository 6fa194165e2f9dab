//! The shipped catalog loads, routes and checks as documented, and broken
//! catalogs are refused with an error naming the file at fault.

use std::fs;
use std::path::{Path, PathBuf};

use eventgw_schemas::loader::load_catalog;
use eventgw_schemas::loader::load_sources;
use eventgw_schemas::{Catalog, Compatibility, Rollout, Violation, compat};
use serde_json::json;

fn shipped() -> Catalog {
    load_catalog(Path::new(env!("CARGO_MANIFEST_DIR"))).expect("the shipped catalog compiles")
}

#[test]
fn shipped_catalog_routes_each_domain_to_its_topic() {
    let catalog = shipped();
    let route = |name: &str| {
        let e = catalog.event(name).unwrap_or_else(|| panic!("{name} is in the catalog"));
        (e.domain.as_str().to_owned(), e.topic.to_string())
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
        if ["src", "tests", "target", "wasm", "site-test", "node_modules"].contains(&name.as_str()) {
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

/// Page Viewed v3 that makes `title` required: breaks backward compatibility.
fn add_breaking_v3(dir: &Path) {
    let v2: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("web/page_viewed/2.json")).expect("read")).expect("json");
    let mut v3 = v2.clone();
    v3["properties"]["properties"]["required"] = json!(["url", "path", "title"]);
    v3["examples"][0]["properties"]["title"] = json!("Search");
    fs::write(dir.join("web/page_viewed/3.json"), v3.to_string()).expect("write");
}

#[test]
fn refuses_a_version_that_breaks_compatibility_naming_both_files() {
    let (dir, err) = refused("breaking", add_breaking_v3);
    let (v3, v2) = (dir.join("web/page_viewed/3.json"), dir.join("web/page_viewed/2.json"));
    assert!(err.starts_with(&v3.display().to_string()), "{err}");
    assert!(err.contains(&v2.display().to_string()), "{err}");
    assert!(err.contains("breaks backward compatibility") && err.contains("new required field `title`"), "{err}");
}

#[test]
fn compatibility_none_allows_the_same_change_and_rollout_is_read() {
    let dir = scratch_copy("none");
    add_breaking_v3(&dir);
    let path = dir.join("web/catalog.toml");
    let text = fs::read_to_string(&path)
        .expect("read")
        .replace("schema = \"page_viewed\"", "schema = \"page_viewed\"\ncompatibility = \"none\"\nrollout = \"warn\"");
    fs::write(path, text).expect("write");
    let catalog = load_catalog(&dir).expect("no check under `none`");
    let page = catalog.event("Page Viewed").expect("event");
    assert_eq!((page.latest().version, page.compatibility(), page.rollout()), (3, Compatibility::None, Rollout::Warn));
    let steps = compat::check_sources(&load_sources(&dir).expect("sources"));
    assert!(steps.iter().all(|s| s.problems.is_empty()), "none checks nothing");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn shipped_catalog_keeps_its_promises_and_defaults_apply() {
    let steps = compat::check_sources(&load_sources(Path::new(env!("CARGO_MANIFEST_DIR"))).expect("sources"));
    assert!(steps.iter().any(|s| s.event == "Page Viewed" && s.old.0 == 1 && s.new.0 == 2), "{steps:?}");
    for step in &steps {
        assert!(step.problems.is_empty(), "{} v{} -> v{}: {:?}", step.event, step.old.0, step.new.0, step.problems);
    }
    let catalog = shipped();
    let order = catalog.event("Order Completed").expect("event");
    assert_eq!((order.compatibility(), order.rollout()), (Compatibility::Backward, Rollout::Enforce));
}

#[test]
fn sources_round_trip_through_json_for_the_browser() {
    let catalog = shipped();
    let json = serde_json::to_string(catalog.sources()).expect("serialise");
    let again = Catalog::compile(serde_json::from_str(&json).expect("deserialise")).expect("compiles again");
    assert_eq!(again.events().len(), catalog.events().len());
    assert_eq!(again.domains()["billing"].owner, "payments");
}

#[test]
fn refuses_impossible_topic_settings() {
    let (_, err) = refused("settings", |d| {
        let path = d.join("crm/catalog.toml");
        let text = fs::read_to_string(&path)
            .expect("read")
            .replace("[topic_settings]\n", "[topic_settings]\nreplication_factor = 1\nmin_insync_replicas = 2\n");
        fs::write(path, text).expect("write")
    });
    assert!(err.contains("crm/catalog.toml") && err.contains("min_insync_replicas cannot exceed"), "{err}");
}

#[test]
fn observe_and_warn_waive_schema_violations_but_never_a_missing_key() {
    let dir = scratch_copy("rollout");
    let path = dir.join("billing/catalog.toml");
    let text = fs::read_to_string(&path).expect("read");
    let text = text.replace("schema = \"order_completed\"", "schema = \"order_completed\"\nrollout = \"warn\"");
    let text = text.replace("schema = \"payment_captured\"", "schema = \"payment_captured\"\nrollout = \"observe\"");
    fs::write(path, text).expect("write");
    let catalog = load_catalog(&dir).expect("compiles");
    let _ = fs::remove_dir_all(&dir);
    let bad =
        json!({"type": "track", "userId": "u1", "properties": {"order_id": "o-1", "total": -5, "currency": "EUR"}});
    let order = catalog.event("Order Completed").expect("event");
    assert_eq!(order.rollout(), Rollout::Warn);
    let checked = order.check_rollout(&bad, None).expect("warn waives the violation");
    assert_eq!((checked.key.as_str(), checked.schema.version), ("o-1", 1));
    assert_eq!(checked.waived.len(), 1);
    assert_eq!(checked.waived[0].path, "/properties/total");
    let payment = catalog.event("Payment Captured").expect("event");
    assert_eq!(payment.rollout(), Rollout::Observe);
    let unkeyed = json!({"type": "track", "userId": "u1", "properties": {"amount": "x"}});
    assert!(matches!(payment.check_rollout(&unkeyed, None), Err(Violation::MissingKey(_))));
    // The shipped catalog enforces: the same event is refused.
    let shipped = shipped();
    let enforced = shipped.event("Order Completed").expect("event");
    assert!(matches!(enforced.check_rollout(&bad, None), Err(Violation::Schema(_))));
    let good =
        json!({"type": "track", "userId": "u1", "properties": {"order_id": "o-1", "total": 5, "currency": "EUR"}});
    assert!(enforced.check_rollout(&good, None).expect("valid").waived.is_empty());
}
