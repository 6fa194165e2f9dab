//! A gateway configuration with enrichment and privacy on: a geo database
//! the test builds (see `mmdb.rs`), a copy of the catalog whose `Form
//! Submitted` declares a purpose and personal fields, a suppression list
//! and a user-key directory, all in a fresh temporary directory.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use gateway::config::{Config, SourceConfig};

use super::mmdb;

/// The HMAC key of the test configuration.
pub const HASH_KEY: &str = "test-hash-key-of-at-least-32-bytes!!";

/// Where one test's files live.
pub struct EdgeFiles {
    pub dir: PathBuf,
    pub suppression: PathBuf,
    pub keys: PathBuf,
}

/// Writes the geo database, the catalog copy and an empty suppression list.
pub fn files() -> EdgeFiles {
    let dir = std::env::temp_dir().join(format!("eventgw-edge-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("geo.mmdb"), mmdb::test_database()).expect("geo database");
    copy_catalog(&repo_root().join("schemas"), &dir.join("catalog"));
    let suppression = dir.join("suppressed.txt");
    std::fs::write(&suppression, "# erased users\n").expect("suppression list");
    EdgeFiles { keys: dir.join("keys"), suppression, dir }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("parent").to_path_buf()
}

/// Copies every domain of the catalog, then declares in `web`: `Form
/// Submitted` serves `marketing` (rollout enforce) with three personal
/// fields, and `Link Clicked` serves `analytics` under rollout `warn`.
fn copy_catalog(from: &Path, to: &Path) {
    for domain in std::fs::read_dir(from).expect("schemas dir").flatten() {
        let path = domain.path();
        if !path.join("catalog.toml").exists() {
            continue;
        }
        copy_dir(&path, &to.join(domain.file_name()));
    }
    let file = to.join("web/catalog.toml");
    let mut table: toml::Table = std::fs::read_to_string(&file).expect("web catalog").parse().expect("toml");
    let events = table.get_mut("events").and_then(toml::Value::as_table_mut).expect("events");
    let form = events.get_mut("Form Submitted").and_then(toml::Value::as_table_mut).expect("Form Submitted");
    form.insert("purpose".into(), "marketing".into());
    let personal: toml::Table = r#"
        "properties.email" = "hash"
        "properties.phone" = "redact"
        "properties.full_name" = "encrypt"
    "#
    .parse()
    .expect("personal");
    form.insert("personal".into(), toml::Value::Table(personal));
    let link = events.get_mut("Link Clicked").and_then(toml::Value::as_table_mut).expect("Link Clicked");
    link.insert("purpose".into(), "analytics".into());
    link.insert("rollout".into(), "warn".into());
    std::fs::write(&file, toml::to_string(&table).expect("serialise")).expect("write catalog");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// The dev configuration against `brokers`, with `files` wired in: geo,
/// hash key, user keys, suppression list; sources unchanged.
pub fn config(brokers: &str, files: &EdgeFiles) -> Config {
    let env = vec![("EVENTGW__KAFKA__BROKERS".to_owned(), brokers.to_owned())];
    let path = repo_root().join("gateway/config/dev.toml");
    let mut config = Config::load_with_env(&path, env.into_iter()).expect("dev config loads");
    config.catalog.dir = files.dir.join("catalog");
    config.geo =
        Some(serde_json::from_value(serde_json::json!({"database": files.dir.join("geo.mmdb")})).expect("geo"));
    config.privacy.hash_key = Some(HASH_KEY.into());
    config.privacy.user_keys_dir = Some(files.keys.clone());
    config.privacy.suppression_file = Some(files.suppression.clone());
    config
}

/// A copy of the `demo` source under another id and write key, for a
/// second policy in the same gateway.
pub fn extra_source(config: &Config, id: &str, write_key: &str) -> SourceConfig {
    let mut source = config.sources.iter().find(|s| s.id == "demo").expect("demo source").clone();
    source.id = id.into();
    source.write_key = Some(write_key.into());
    // App ids name one source each.
    source.snowplow_app_ids.clear();
    source
}
