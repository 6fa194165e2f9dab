//! GA4's own rules for a request, as its validation server words them:
//! event and parameter names, counts, reserved names. The ingest path does
//! not refuse on them (the catalog decides); `/debug/mp/collect` reports
//! them beside the catalog's reasons.

use serde::Serialize;
use serde_json::Value;

/// Longest event and parameter name GA4 takes, in characters.
pub const MAX_NAME_CHARS: usize = 40;

/// Parameters per event GA4 takes.
pub const MAX_PARAMS: usize = 25;

/// Prefixes GA4 reserves for its own event names.
const RESERVED_PREFIXES: [&str; 5] = ["_", "firebase_", "ga_", "google_", "gtag."];

/// Event names GA4 reserves (its automatically collected events).
const RESERVED_NAMES: &[&str] = &[
    "ad_activeview",
    "ad_click",
    "ad_exposure",
    "ad_impression",
    "ad_query",
    "ad_reward",
    "adunit_exposure",
    "app_background",
    "app_clear_data",
    "app_exception",
    "app_remove",
    "app_store_refund",
    "app_store_subscription_cancel",
    "app_store_subscription_convert",
    "app_store_subscription_renew",
    "app_update",
    "app_upgrade",
    "dynamic_link_app_open",
    "dynamic_link_app_update",
    "dynamic_link_first_open",
    "error",
    "first_open",
    "first_visit",
    "in_app_purchase",
    "notification_dismiss",
    "notification_foreground",
    "notification_open",
    "notification_receive",
    "os_update",
    "session_start",
    "session_start_with_rollout",
    "user_engagement",
];

/// A rule of GA4's own broken, as `/debug/mp/collect` reports it (its
/// `validationMessages` entries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Where, as GA4 writes it (`events[0].name`).
    pub field_path: String,
    /// What is wrong, in words.
    pub description: String,
    /// GA4's code: `VALUE_INVALID`, `VALUE_REQUIRED`, `NAME_INVALID`,
    /// `NAME_RESERVED`, `EXCEEDED_MAX_ENTITIES`.
    pub validation_code: &'static str,
}

impl Finding {
    pub(super) fn new(field_path: String, validation_code: &'static str, description: String) -> Self {
        Self { field_path, description, validation_code }
    }
}

/// GA4's rules for one event: a name (letters, digits and `_`, starting
/// with a letter, at most [`MAX_NAME_CHARS`], not reserved), params an
/// object of at most [`MAX_PARAMS`] with valid names.
pub(super) fn event_findings(index: usize, event: &Value) -> Vec<Finding> {
    let at = |field: &str| format!("events[{index}]{field}");
    let Value::Object(event) = event else {
        return vec![Finding::new(at(""), "VALUE_INVALID", "each event must be a JSON object".into())];
    };
    let mut found = Vec::new();
    match event.get("name") {
        None | Some(Value::Null) => {
            found.push(Finding::new(at(".name"), "VALUE_REQUIRED", "an event needs a name".into()))
        }
        Some(Value::String(name)) => {
            if let Some(problem) = name_problem(name) {
                found.push(Finding::new(at(".name"), "NAME_INVALID", format!("event name `{name}` {problem}")));
            } else if is_reserved(name) {
                let message = format!("event name `{name}` is reserved by GA4");
                found.push(Finding::new(at(".name"), "NAME_RESERVED", message));
            }
        }
        Some(_) => found.push(Finding::new(at(".name"), "VALUE_INVALID", "the event name must be a string".into())),
    }
    match event.get("params") {
        None | Some(Value::Null) => {}
        Some(Value::Object(params)) => {
            if params.len() > MAX_PARAMS {
                let message = format!("{} params; GA4 takes at most {MAX_PARAMS} per event", params.len());
                found.push(Finding::new(at(".params"), "EXCEEDED_MAX_ENTITIES", message));
            }
            for name in params.keys() {
                if let Some(problem) = name_problem(name) {
                    let message = format!("param name `{name}` {problem}");
                    found.push(Finding::new(at(&format!(".params.{name}")), "NAME_INVALID", message));
                }
            }
        }
        Some(_) => found.push(Finding::new(at(".params"), "VALUE_INVALID", "`params` must be an object".into())),
    }
    found
}

/// Why `name` is not a GA4 name, if it is not.
fn name_problem(name: &str) -> Option<String> {
    if name.chars().count() > MAX_NAME_CHARS {
        return Some(format!("is longer than {MAX_NAME_CHARS} characters"));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Some("must start with a letter".into());
    }
    (!name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then(|| "may hold only letters, digits and underscores".into())
}

fn is_reserved(name: &str) -> bool {
    RESERVED_PREFIXES.iter().any(|p| name.starts_with(p)) || RESERVED_NAMES.contains(&name)
}
