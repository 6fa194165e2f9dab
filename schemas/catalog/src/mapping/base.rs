//! The mapping files against an earlier copy of them (`schemas check
//! --mappings-base DIR`, e.g. the main branch checked out with `git
//! worktree`): a rule removed or pointed at another catalog event changes
//! where trackers' events already in production land, so it fails the
//! check like a breaking schema change; a changed pin or rename is printed.

use std::path::Path;

use super::check::{Finding, Severity, target};
use super::{EventRule, TrackerMappings};

/// A rule of the base is gone: its tracker events now stay track calls of
/// their own names and meet the source's `unknown_events` rule.
pub const REMOVED: &str = "mapping_rule_removed";
/// A rule of the base now makes another call or another catalog event.
pub const REPOINTED: &str = "mapping_rule_repointed";
/// A rule's pinned version changed (a warning: the schema check guards it).
pub const PIN_CHANGED: &str = "mapping_pin_changed";
/// A rename of the base is gone or lands on another property (a warning).
pub const RENAME_CHANGED: &str = "mapping_rename_changed";

/// What changed from `base` to `now`, protocol by protocol, rule by rule.
/// `dir` names the current files in the findings.
pub fn compare(base: &TrackerMappings, now: &TrackerMappings, dir: &Path) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (protocol, old) in &base.protocols {
        let file = dir.join(format!("{protocol}.toml")).display().to_string();
        let current = now.of(protocol);
        for (key, was) in &old.events {
            let finding = |code, severity, message: String| Finding {
                code,
                severity,
                file: file.clone(),
                rule: format!("events.\"{key}\""),
                message,
            };
            let Some(is) = current.events.get(key) else {
                findings.push(finding(
                    REMOVED,
                    Severity::Error,
                    format!(
                        "the base maps it to {}; without the rule its events stay a track call named `{key}` and meet \
                         the source's `unknown_events` rule",
                        describe(key, was)
                    ),
                ));
                continue;
            };
            if was.call != is.call || target(key, was) != target(key, is) {
                findings.push(finding(
                    REPOINTED,
                    Severity::Error,
                    format!(
                        "the base maps it to {}, now {}: the same tracker events land elsewhere",
                        describe(key, was),
                        describe(key, is)
                    ),
                ));
            } else if was.version != is.version {
                findings.push(finding(
                    PIN_CHANGED,
                    Severity::Warning,
                    format!("pinned version {} in the base, now {}", pin(was.version), pin(is.version)),
                ));
            }
            for (from, to) in &was.rename {
                match is.rename.get(from) {
                    Some(now_to) if now_to == to => {}
                    Some(now_to) => findings.push(finding(
                        RENAME_CHANGED,
                        Severity::Warning,
                        format!("`{from}` became `{to}` in the base, now `{now_to}`"),
                    )),
                    None => findings.push(finding(
                        RENAME_CHANGED,
                        Severity::Warning,
                        format!("`{from}` became `{to}` in the base; now it keeps its own name"),
                    )),
                }
            }
        }
    }
    findings
}

/// A rule's call and catalog event, in words.
fn describe(key: &str, rule: &EventRule) -> String {
    match target(key, rule) {
        Some(event) if rule.call == super::Call::Track => format!("`{event}`"),
        Some(event) => format!("a {} call (`{event}`)", rule.call.as_str()),
        None => format!("an {} call", rule.call.as_str()),
    }
}

fn pin(version: Option<u32>) -> String {
    version.map_or_else(|| "none (the newest)".to_owned(), |v| format!("v{v}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mappings(text: &str) -> TrackerMappings {
        let mut m = TrackerMappings::default();
        m.protocols.insert("ga4".into(), toml::from_str(text).expect("mapping"));
        m
    }

    const BASE: &str = r#"
[events.purchase]
event = "Order Completed"
rename = { transaction_id = "order_id", value = "total" }
[events.page_view]
call = "page"
[events.click]
event = "Link Clicked"
version = 1
"#;

    #[test]
    fn the_same_rules_find_nothing_and_a_new_rule_is_no_change() {
        let base = mappings(BASE);
        assert_eq!(compare(&base, &base, Path::new("m")), []);
        let grown = mappings(&format!("{BASE}\n[events.login]\nevent = \"Signed In\"\n"));
        assert_eq!(compare(&base, &grown, Path::new("m")), []);
    }

    #[test]
    fn a_removed_or_repointed_rule_fails_and_pins_and_renames_are_printed() {
        let now = mappings(
            r#"
[events.purchase]
event = "Checkout Started"
rename = { transaction_id = "order_id" }
[events.click]
event = "Link Clicked"
version = 2
"#,
        );
        let found = compare(&mappings(BASE), &now, Path::new("m"));
        let codes: Vec<(&str, &str, Severity)> = found.iter().map(|f| (f.code, f.rule.as_str(), f.severity)).collect();
        assert_eq!(
            codes,
            [
                (PIN_CHANGED, "events.\"click\"", Severity::Warning),
                (REMOVED, "events.\"page_view\"", Severity::Error),
                (REPOINTED, "events.\"purchase\"", Severity::Error),
                (RENAME_CHANGED, "events.\"purchase\"", Severity::Warning),
            ],
            "{found:#?}"
        );
        assert!(found[1].message.contains("a page call (`Page Viewed`)"), "{}", found[1].message);
        assert!(found[2].message.contains("`Order Completed`, now `Checkout Started`"), "{}", found[2].message);
        assert_eq!(found[1].file, Path::new("m").join("ga4.toml").display().to_string());
    }

    #[test]
    fn a_removed_protocol_file_reports_every_rule() {
        let found = compare(&mappings(BASE), &TrackerMappings::default(), Path::new("m"));
        assert_eq!(found.iter().filter(|f| f.code == REMOVED).count(), 3, "{found:#?}");
    }
}
