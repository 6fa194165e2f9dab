//! How another tracker's events become catalog events: one file per
//! protocol beside the catalog, `<catalog.dir>/mappings/<protocol>.toml`,
//! read at start-up (and on reload) with the rest of the configuration.
//! The key of a rule is what the protocol names an event by: PostHog's
//! event name (`$pageview`), Snowplow's self-describing schema URI
//! (`iglu:com.acme/checkout_started/jsonschema/1-0-0`), GA4's event name
//! (`purchase`).
//! An event no rule names keeps its own name as a `track` call, so it meets
//! the catalog (and the source's `unknown_events` rule) like any other.
//!
//! It lives in the catalog tool's crate, not the gateway's, so that the
//! gateway (at start-up), `schemas check` ([`check`]) and the catalog site
//! read the files with this one loader.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

pub mod base;
pub mod check;

/// The directory under the catalog that holds the mapping files.
pub const MAPPINGS_DIR: &str = "mappings";

/// Every protocol's mapping, by protocol name (the file's stem).
#[derive(Debug, Clone, Default)]
pub struct TrackerMappings {
    /// `posthog` → its rules.
    pub protocols: BTreeMap<String, TrackerMapping>,
}

impl TrackerMappings {
    /// The rules of `protocol`; none when it has no file.
    pub fn of(&self, protocol: &str) -> &TrackerMapping {
        static NONE: std::sync::OnceLock<TrackerMapping> = std::sync::OnceLock::new();
        self.protocols.get(protocol).unwrap_or_else(|| NONE.get_or_init(TrackerMapping::default))
    }
}

/// One protocol's rules.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackerMapping {
    /// The rule of each event the protocol names.
    #[serde(default)]
    pub events: BTreeMap<String, EventRule>,
}

/// What one tracker event becomes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventRule {
    /// The canonical call it becomes (`track` unless said).
    #[serde(default)]
    pub call: Call,
    /// The catalog event of a `track` call; the tracker's name when unset.
    #[serde(default)]
    pub event: Option<String>,
    /// The catalog version the event is pinned to (`context.schemaVersion`);
    /// the newest when unset.
    #[serde(default)]
    pub version: Option<u32>,
    /// Property renames, tracker name → catalog name, applied before
    /// validation (`"$current_url" = "url"`).
    #[serde(default)]
    pub rename: BTreeMap<String, String>,
}

/// The canonical calls (Segment's spec) a tracker event can become.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Call {
    /// A named event.
    #[default]
    Track,
    /// A page view (`Page Viewed`).
    Page,
    /// A screen view (`Screen Viewed`).
    Screen,
    /// Traits of a user.
    Identify,
    /// Traits of a group, and the user's membership.
    Group,
    /// A second id of the same user.
    Alias,
}

impl Call {
    /// The call's `type` on the canonical event.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Track => "track",
            Self::Page => "page",
            Self::Screen => "screen",
            Self::Identify => "identify",
            Self::Group => "group",
            Self::Alias => "alias",
        }
    }
}

/// Why a mapping file was refused: the file, the key in it, the problem,
/// and a stable code ([`check::BAD_CALL`] or [`check::INVALID`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingRefusal {
    /// The file, as its path was given.
    pub file: String,
    /// The key in it (`events."$pageview".call`), `-` for the whole file.
    pub key: String,
    /// What is wrong.
    pub problem: String,
    /// The code `schemas check` prints for it.
    pub code: &'static str,
}

/// The `<dir>/*.toml` files, sorted; no directory is none.
pub fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

/// The protocol a mapping file is for: its stem (`posthog`).
pub fn protocol(file: &Path) -> String {
    file.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned()
}

/// Reads every `<dir>/*.toml`; no directory is no mappings. The first
/// refused file refuses them all.
pub fn load_dir(dir: &Path) -> Result<TrackerMappings, MappingRefusal> {
    let mut mappings = TrackerMappings::default();
    for file in files(dir) {
        let mapping = load_file(&file)?;
        mappings.protocols.insert(protocol(&file), mapping);
    }
    Ok(mappings)
}

/// Reads one mapping file and checks what types alone cannot.
pub fn load_file(file: &Path) -> Result<TrackerMapping, MappingRefusal> {
    let name = file.display().to_string();
    let fail =
        |key: &str, problem: String, code| MappingRefusal { file: name.clone(), key: key.to_owned(), problem, code };
    let text = std::fs::read_to_string(file).map_err(|e| fail("-", format!("cannot read: {e}"), check::INVALID))?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| fail("-", e.to_string(), check::INVALID))?;
    let mapping: TrackerMapping = serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let key = e.path().to_string();
        // An unknown call is the one type error with its own code.
        let code = if key.ends_with(".call") { check::BAD_CALL } else { check::INVALID };
        fail(&key, e.into_inner().to_string(), code)
    })?;
    mapping.check().map_err(|(key, problem, code)| fail(&key, problem, code))?;
    Ok(mapping)
}

impl TrackerMapping {
    fn check(&self) -> Result<(), (String, String, &'static str)> {
        for (name, rule) in &self.events {
            let key = |field: &str| format!("events.\"{name}\".{field}");
            if rule.call != Call::Track && (rule.event.is_some() || rule.version.is_some()) {
                let problem =
                    format!("only a track call names a catalog event and version, not a {}", rule.call.as_str());
                return Err((key("event"), problem, check::BAD_CALL));
            }
            if rule.event.as_deref().is_some_and(|e| e.trim().is_empty()) {
                return Err((key("event"), "must not be empty".into(), check::INVALID));
            }
            if rule.version == Some(0) {
                return Err((key("version"), "versions start at 1".into(), check::UNKNOWN_VERSION));
            }
            if let Some((from, _)) = rule.rename.iter().find(|(from, to)| from.is_empty() || to.is_empty()) {
                return Err((key("rename"), format!("`{from}`: names must not be empty"), check::INVALID));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir).expect("dir");
        std::fs::write(dir.join(name), text).expect("write");
    }

    #[test]
    fn the_shipped_mappings_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(MAPPINGS_DIR);
        let mappings = load_dir(&dir).expect("schemas/mappings loads");
        let posthog = mappings.of("posthog");
        assert_eq!(posthog.events["$pageview"].call, Call::Page);
        assert_eq!(posthog.events["$pageview"].rename["$current_url"], "url");
        let ga4 = mappings.of("ga4");
        assert_eq!(ga4.events["page_view"].call, Call::Page);
        assert_eq!(ga4.events["purchase"].event.as_deref(), Some("Order Completed"));
        let snowplow = mappings.of("snowplow");
        assert_eq!(snowplow.events["pv"].call, Call::Page);
        let link = &snowplow.events["iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-*-*"];
        assert_eq!(link.event.as_deref(), Some("Link Clicked"));
        assert!(mappings.of("no-such-protocol").events.is_empty());
    }

    #[test]
    fn a_bad_rule_names_its_file_and_key() {
        let dir = std::env::temp_dir().join(format!("eventgw-mapping-{}", std::process::id()));
        write(&dir, "x.toml", "[events.\"$pageview\"]\ncall = \"page\"\nevent = \"Page Viewed\"\n");
        let refusal = load_dir(&dir).expect_err("page with an event");
        assert!(refusal.file.ends_with("x.toml"), "{}", refusal.file);
        assert_eq!(refusal.key, "events.\"$pageview\".event");
        assert_eq!(refusal.code, check::BAD_CALL);
        write(&dir, "x.toml", "[events.a]\ncall = \"shout\"\n");
        let refusal = load_dir(&dir).expect_err("unknown call");
        assert!(refusal.key.starts_with("events.a"), "{refusal:?}");
        assert_eq!(refusal.code, check::BAD_CALL, "{refusal:?}");
        write(&dir, "x.toml", "[events.a]\nversion = 0\n");
        assert_eq!(load_dir(&dir).expect_err("version 0").key, "events.\"a\".version");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(load_dir(&dir).expect("no dir").protocols.is_empty());
    }
}
