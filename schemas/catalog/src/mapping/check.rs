//! The mapping files as a contract, for `schemas check`: each file must load
//! (with the gateway's own loader, [`super::load_file`]), every catalog
//! event and pinned version a rule names must exist, and every rename must
//! land on a property the target schema declares. A mapping that points at
//! nothing would otherwise only show up as dead letters in production.

use std::fmt;
use std::path::Path;

use eventgw_schemas::{Catalog, EventSchema};
use serde_json::Value;

use super::{Call, EventRule, TrackerMapping};

/// The file does not parse, or a rule is malformed (an empty name).
pub const INVALID: &str = "mapping_invalid";
/// A call that is not one of track, page, screen, identify, group, alias,
/// or a non-track call that names a catalog event or version.
pub const BAD_CALL: &str = "mapping_bad_call";
/// The catalog event a rule names does not exist.
pub const UNKNOWN_EVENT: &str = "mapping_unknown_event";
/// The version a rule pins does not exist (or is 0).
pub const UNKNOWN_VERSION: &str = "mapping_unknown_version";
/// A rename's target is not a property the target schema declares.
pub const UNKNOWN_PROPERTY: &str = "mapping_unknown_property";

/// Whether a finding fails the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Fails `schemas check` (exit 1).
    Error,
    /// Printed, but the events still pass the gateway: worth a look.
    Warning,
}

/// One problem with one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// A stable code, one of this module's constants.
    pub code: &'static str,
    /// Whether it fails the check.
    pub severity: Severity,
    /// The mapping file, as its path was given.
    pub file: String,
    /// The rule's key in the file (`events."purchase"`), `-` for the file.
    pub rule: String,
    /// What is missing, in words.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}: {}", self.code, self.file, self.rule, self.message)
    }
}

/// What checking a mapping directory found.
#[derive(Debug, Default)]
pub struct MappingReport {
    /// How many files were read.
    pub files: usize,
    /// How many rules the readable files hold.
    pub rules: usize,
    /// Every problem, file by file in name order.
    pub findings: Vec<Finding>,
}

impl MappingReport {
    /// Whether no finding is an error.
    pub fn ok(&self) -> bool {
        self.findings.iter().all(|f| f.severity == Severity::Warning)
    }
}

/// Checks every `<dir>/*.toml`. Without a catalog (it did not compile) only
/// that each file loads is checked.
pub fn check_dir(catalog: Option<&Catalog>, dir: &Path) -> MappingReport {
    let mut report = MappingReport::default();
    for path in super::files(dir) {
        report.files += 1;
        let file = path.display().to_string();
        match super::load_file(&path) {
            Ok(mapping) => {
                report.rules += mapping.events.len();
                if let Some(catalog) = catalog {
                    report.findings.extend(check_mapping(catalog, &file, &mapping));
                }
            }
            Err(refusal) => report.findings.push(Finding {
                code: refusal.code,
                severity: Severity::Error,
                file,
                rule: refusal.key,
                message: refusal.problem,
            }),
        }
    }
    report
}

/// The catalog event a rule's events are checked against: a page call's
/// `Page Viewed`, a screen call's `Screen Viewed` (as the gateway routes
/// them), a track call's `event` or else the tracker's own name; identify,
/// group and alias calls have no catalog event.
pub fn target<'a>(key: &'a str, rule: &'a EventRule) -> Option<&'a str> {
    match rule.call {
        Call::Track => Some(rule.event.as_deref().unwrap_or(key)),
        Call::Page => Some("Page Viewed"),
        Call::Screen => Some("Screen Viewed"),
        Call::Identify | Call::Group | Call::Alias => None,
    }
}

/// Checks one loaded mapping against the catalog.
pub fn check_mapping(catalog: &Catalog, file: &str, mapping: &TrackerMapping) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (key, rule) in &mapping.events {
        let mut found = |code, severity, message: String| {
            let rule = format!("events.\"{key}\"");
            findings.push(Finding { code, severity, file: file.to_owned(), rule, message });
        };
        let Some(name) = target(key, rule) else { continue };
        let Some(event) = catalog.event(name) else {
            if rule.event.is_some() || rule.version.is_some() {
                found(UNKNOWN_EVENT, Severity::Error, format!("catalog event `{name}` does not exist"));
            } else {
                // An unnamed track event (or a page view in a catalog without
                // one) meets the source's `unknown_events` rule, as documented.
                let what = format!("`{name}` is no catalog event: its events meet the source's `unknown_events` rule");
                found(UNKNOWN_EVENT, Severity::Warning, what);
            }
            continue;
        };
        let schema = match rule.version {
            None => event.latest(),
            Some(v) => match event.version(v) {
                Some(schema) => schema,
                None => {
                    let newest = event.latest().version;
                    found(
                        UNKNOWN_VERSION,
                        Severity::Error,
                        format!("`{name}` has no version {v} (newest is {newest})"),
                    );
                    continue;
                }
            },
        };
        for (from, to) in &rule.rename {
            // A page or screen call takes its own `name` from the properties.
            let call_field = matches!(rule.call, Call::Page | Call::Screen) && to == "name";
            if call_field || declares(schema, to) {
                continue;
            }
            let (severity, why) = if closed(schema) {
                (Severity::Error, "and allows no other (`additionalProperties: false`)")
            } else {
                (Severity::Warning, "(it allows other properties, so events pass with it undocumented)")
            };
            let message =
                format!("renames `{from}` to `{to}`, which `{name}` v{} does not declare {why}", schema.version);
            found(UNKNOWN_PROPERTY, severity, message);
        }
    }
    findings
}

fn properties(schema: &EventSchema) -> Option<&Value> {
    schema.document().pointer("/properties/properties")
}

/// Whether the schema declares `properties.<name>`.
fn declares(schema: &EventSchema, name: &str) -> bool {
    properties(schema).and_then(|p| p.get("properties")).and_then(|p| p.get(name)).is_some()
}

/// Whether the schema's `properties` object refuses undeclared names.
fn closed(schema: &EventSchema) -> bool {
    properties(schema).and_then(|p| p.get("additionalProperties")) == Some(&Value::Bool(false))
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
