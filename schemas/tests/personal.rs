//! Personal fields and the catalog's checker: a violation message never
//! quotes a personal field's value (issue 28 item 3), and a field that keys
//! the records (sent in clear as the Kafka key) cannot be declared personal.

use std::fs;
use std::path::{Path, PathBuf};

use eventgw_schemas::loader::load_catalog;
use eventgw_schemas::{Catalog, Violation, WITHHELD};
use serde_json::json;

/// The shipped `web` domain in a scratch directory, with `Link Clicked`
/// declaring `extra` (TOML lines) after its `schema` line.
fn web_with(name: &str, extra: &str) -> (PathBuf, Result<Catalog, String>) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("web");
    let dir = std::env::temp_dir().join(format!("eventgw-personal-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    copy(&from, &dir.join("web"));
    let file = dir.join("web/catalog.toml");
    let text = fs::read_to_string(&file).expect("catalog");
    let text = text.replace("schema = \"link_clicked\"", &format!("schema = \"link_clicked\"\n{extra}"));
    fs::write(&file, text).expect("write");
    let catalog = load_catalog(&dir).map_err(|e| e.to_string());
    (dir, catalog)
}

fn copy(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read_dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy(&entry.path(), &target)
        } else {
            fs::copy(entry.path(), target).map(drop).expect("copy")
        }
    }
}

#[test]
fn violations_of_personal_fields_name_the_rule_but_not_the_value() {
    let (dir, catalog) = web_with("withheld", r#"personal = { "properties.href" = "hash" }"#);
    let catalog = catalog.expect("compiles");
    let link = catalog.event("Link Clicked").expect("Link Clicked");
    let not_a_uri = json!({"type": "track", "userId": "u1", "properties": {"href": "mailto bob@example.com"}});
    let Err(Violation::Schema(errors)) = link.check(&not_a_uri, None) else { panic!("not a uri") };
    assert_eq!(errors[0].path, "/properties/href");
    assert_eq!(errors[0].message, format!("{WITHHELD} is not a \"uri\""));
    // A value holding the field (the root `anyOf`, with no user) is withheld too.
    let anonymous = json!({"type": "track", "properties": {"href": "mailto bob@example.com"}});
    let Err(Violation::Schema(errors)) = link.check(&anonymous, None) else { panic!("no user") };
    assert!(errors.iter().all(|e| !e.message.contains("bob@")), "{errors:?}");
    // Other fields keep the validator's full wording.
    let other = json!({"type": "track", "userId": "u1", "properties": {"href": "https://a.example/", "x": 1}});
    let shipped = load_catalog(Path::new(env!("CARGO_MANIFEST_DIR"))).expect("shipped");
    let plain = shipped.event("Link Clicked").expect("Link Clicked");
    let bad_user = json!({"type": "track", "userId": 7, "properties": {"href": "https://a.example/"}});
    let Err(Violation::Schema(errors)) = plain.check(&bad_user, None) else { panic!("numeric user") };
    assert!(errors.iter().any(|e| e.message.starts_with("7 is not of type")), "{errors:?}");
    assert!(link.check(&other, None).is_ok());
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn a_key_field_cannot_be_personal() {
    let (dir, catalog) = web_with("key", r#"personal = { "userId" = "hash" }"#);
    let error = catalog.expect_err("refused");
    assert!(error.contains("`userId` keys the event's records and cannot be personal"), "{error}");
    let _ = fs::remove_dir_all(dir);
}
