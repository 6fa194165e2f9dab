use std::path::{Path, PathBuf};

use eventgw_schemas::loader::load_catalog;

use super::*;

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn shipped() -> Catalog {
    load_catalog(&schemas_dir()).expect("shipped catalog")
}

/// A directory of its own (tests run in parallel) holding `x.toml`.
fn mapping_dir(test: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eventgw-mapcheck-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("x.toml"), text).expect("write");
    dir
}

/// The one finding of checking `text` against `catalog`.
fn only_finding(test: &str, catalog: &Catalog, text: &str) -> Finding {
    let dir = mapping_dir(test, text);
    let report = check_dir(Some(catalog), &dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(report.findings.len(), 1, "{:#?}", report.findings);
    let finding = report.findings.into_iter().next().expect("one");
    assert!(finding.file.ends_with("x.toml"), "{finding}");
    finding
}

#[test]
fn the_shipped_mappings_pass() {
    let report = check_dir(Some(&shipped()), &schemas_dir().join(crate::mapping::MAPPINGS_DIR));
    assert_eq!(report.files, 3);
    assert_eq!(report.rules, 19, "posthog 8, ga4 5, snowplow 6");
    let errors: Vec<String> =
        report.findings.iter().filter(|f| f.severity == Severity::Error).map(ToString::to_string).collect();
    assert!(errors.is_empty() && report.ok(), "{errors:#?}");
}

#[test]
fn an_unknown_event_is_an_error_naming_file_rule_and_event() {
    let text = "[events.purchase]\nevent = \"Order Completd\"\n";
    let finding = only_finding("event", &shipped(), text);
    assert_eq!((finding.code, finding.severity), (UNKNOWN_EVENT, Severity::Error));
    assert_eq!(finding.rule, "events.\"purchase\"");
    assert!(finding.message.contains("`Order Completd` does not exist"), "{finding}");
}

#[test]
fn a_tracker_name_that_is_no_catalog_event_is_only_a_warning() {
    let finding = only_finding("implicit", &shipped(), "[events.login]\n");
    assert_eq!((finding.code, finding.severity), (UNKNOWN_EVENT, Severity::Warning));
    // Unless it pins a version: that can only mean a catalog event.
    let finding = only_finding("implicit-pinned", &shipped(), "[events.login]\nversion = 1\n");
    assert_eq!((finding.code, finding.severity), (UNKNOWN_EVENT, Severity::Error));
}

#[test]
fn an_unknown_version_is_an_error() {
    let text = "[events.pv]\nevent = \"Page Viewed\"\nversion = 3\n";
    let finding = only_finding("version", &shipped(), text);
    assert_eq!((finding.code, finding.severity), (UNKNOWN_VERSION, Severity::Error));
    assert!(finding.message.contains("no version 3 (newest is 2)"), "{finding}");
    // A pinned version that exists passes; 0 is refused by the loader itself.
    let dir = mapping_dir("version-ok", "[events.pv]\nevent = \"Page Viewed\"\nversion = 1\n");
    assert!(check_dir(Some(&shipped()), &dir).findings.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
    let finding = only_finding("version-0", &shipped(), "[events.pv]\nevent = \"Page Viewed\"\nversion = 0\n");
    assert_eq!((finding.code, finding.severity), (UNKNOWN_VERSION, Severity::Error));
}

#[test]
fn a_bad_call_is_an_error() {
    let finding = only_finding("call", &shipped(), "[events.a]\ncall = \"shout\"\n");
    assert_eq!((finding.code, finding.severity), (BAD_CALL, Severity::Error));
    assert_eq!(finding.rule, "events.a.call");
    let text = "[events.a]\ncall = \"identify\"\nevent = \"Link Clicked\"\n";
    let finding = only_finding("call-event", &shipped(), text);
    assert_eq!((finding.code, finding.severity), (BAD_CALL, Severity::Error));
    let finding = only_finding("syntax", &shipped(), "[events.a\n");
    assert_eq!((finding.code, finding.rule.as_str()), (INVALID, "-"));
}

#[test]
fn a_rename_target_the_schema_does_not_declare_warns_when_open_and_fails_when_closed() {
    let text = "[events.click]\nevent = \"Link Clicked\"\nrename = { link_url = \"hreff\", link_text = \"text\" }\n";
    let finding = only_finding("rename-open", &shipped(), text);
    assert_eq!((finding.code, finding.severity), (UNKNOWN_PROPERTY, Severity::Warning));
    assert!(finding.message.contains("`link_url` to `hreff`, which `Link Clicked` v1 does not declare"), "{finding}");

    let closed = closed_link_clicked();
    let finding = only_finding("rename-closed", &closed, text);
    assert_eq!((finding.code, finding.severity), (UNKNOWN_PROPERTY, Severity::Error));
    assert!(finding.message.contains("additionalProperties: false"), "{finding}");
    // A page call's `name` is the call's own field, not a property.
    let finding = only_finding(
        "rename-page",
        &shipped(),
        "[events.pv]\ncall = \"page\"\nrename = { t = \"name\", u = \"urll\" }\n",
    );
    assert!(finding.message.contains("`u` to `urll`"), "{finding}");
}

/// The shipped `web` domain with `Link Clicked` closed to undeclared properties.
fn closed_link_clicked() -> Catalog {
    let root = std::env::temp_dir().join(format!("eventgw-mapcheck-closed-{}", std::process::id()));
    let web = schemas_dir().join("web");
    for entry in walk(&web) {
        let to = root.join("web").join(entry.strip_prefix(&web).expect("under web"));
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        std::fs::copy(&entry, &to).expect("copy");
    }
    let file = root.join("web/link_clicked/1.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("json");
    doc["properties"]["properties"]["additionalProperties"] = Value::Bool(false);
    std::fs::write(&file, serde_json::to_vec(&doc).expect("json")).expect("write");
    let catalog = load_catalog(&root).expect("closed catalog");
    let _ = std::fs::remove_dir_all(&root);
    catalog
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for path in std::fs::read_dir(dir).expect("read_dir").filter_map(Result::ok).map(|e| e.path()) {
        if path.is_dir() { files.extend(walk(&path)) } else { files.push(path) }
    }
    files
}
