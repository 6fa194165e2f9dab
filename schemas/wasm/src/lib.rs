//! The catalog checker for the browser: the catalog page and sdk-js debug
//! mode hand it the catalog's sources (the `catalog.json` that
//! `eventgw-catalog schemas docs` writes) and then events to check. The
//! checking is the very code the gateway runs, compiled to WebAssembly, so a
//! page can never disagree with the gateway about what is valid.

use eventgw_schemas::{Catalog, DomainSource, Violation};
use serde::Serialize;
use serde_json::Value;
use wasm_bindgen::prelude::*;

/// A compiled catalog, ready to check events.
#[wasm_bindgen]
pub struct Checker {
    catalog: Catalog,
}

/// What checking one event found; serialised to JSON for JavaScript.
#[derive(Debug, Serialize)]
pub struct Outcome {
    /// Whether the gateway would accept the event as valid.
    pub valid: bool,
    /// The catalog event it was checked as, when it is known.
    pub event: Option<String>,
    /// `domain/schema`, as on the Kafka record's `schema` header.
    pub schema: Option<String>,
    /// The schema version used (pinned by `context.schemaVersion`, else the newest).
    pub version: Option<u32>,
    /// The domain topic it would go to.
    pub topic: Option<String>,
    /// Its partition key.
    pub key: Option<String>,
    /// What the gateway does with it when it is invalid: observe, warn or enforce.
    pub rollout: Option<String>,
    /// Every problem, each with a JSON Pointer path (empty for the event itself).
    pub errors: Vec<Problem>,
}

/// One problem with an event.
#[derive(Debug, Serialize)]
pub struct Problem {
    /// JSON Pointer into the event, e.g. `/properties/amount`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

#[wasm_bindgen]
impl Checker {
    /// Compiles the catalog from its sources as JSON (the `catalog.json` of
    /// the catalog site). Throws the catalog error, naming the file at fault.
    #[wasm_bindgen(constructor)]
    pub fn new(sources_json: &str) -> Result<Checker, JsError> {
        let sources: Vec<DomainSource> = serde_json::from_str(sources_json)?;
        Ok(Self { catalog: Catalog::compile(sources)? })
    }

    /// Checks one event (JSON text) and returns the [`Outcome`] as JSON text.
    pub fn check(&self, event_json: &str) -> String {
        let outcome = match serde_json::from_str::<Value>(event_json) {
            Ok(event) => check_event(&self.catalog, &event),
            Err(e) => invalid(None, "", format!("not valid JSON: {e}")),
        };
        serde_json::to_string(&outcome)
            .unwrap_or_else(|e| format!(r#"{{"valid":false,"errors":[{{"path":"","message":"{e}"}}]}}"#))
    }

    /// Every event name the catalog knows, sorted by domain then name, as a JSON array.
    pub fn events(&self) -> String {
        let names: Vec<&str> = self.catalog.events().iter().map(|e| &*e.name).collect();
        serde_json::to_string(&names).unwrap_or_else(|_| "[]".to_owned())
    }
}

/// The catalog event an event is checked as, the way the gateway routes it:
/// a `track` call by its `event` name, `page` as `Page Viewed` and `screen`
/// as `Screen Viewed`.
pub fn event_name(event: &Value) -> Result<String, String> {
    match event.get("type").and_then(Value::as_str) {
        Some("track") | None => event
            .get("event")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| "a track event needs an `event` name".to_owned()),
        Some("page") => Ok("Page Viewed".to_owned()),
        Some("screen") => Ok("Screen Viewed".to_owned()),
        Some(other) => Err(format!("`{other}` calls are not checked against the catalog")),
    }
}

/// Checks `event` as the gateway would; pure, so it is tested natively.
pub fn check_event(catalog: &Catalog, event: &Value) -> Outcome {
    let name = match event_name(event) {
        Ok(name) => name,
        Err(message) => return invalid(None, "/type", message),
    };
    let Some(event_type) = catalog.event(&name) else {
        return invalid(Some(name.clone()), "/event", format!("`{name}` is not in the catalog"));
    };
    let pinned = event.pointer("/context/schemaVersion").and_then(Value::as_u64).map(|v| v as u32);
    let mut outcome = Outcome {
        valid: false,
        event: Some(name),
        schema: Some(format!("{}/{}", event_type.domain, event_type.schema)),
        version: Some(pinned.unwrap_or(event_type.latest().version)),
        topic: Some(event_type.topic.to_string()),
        key: None,
        rollout: Some(event_type.rollout().as_str().to_owned()),
        errors: Vec::new(),
    };
    match event_type.check(event, pinned) {
        Ok((schema, key)) => {
            outcome.valid = true;
            outcome.version = Some(schema.version);
            outcome.key = Some(key);
        }
        Err(Violation::Schema(errors)) => {
            outcome.errors = errors.into_iter().map(|e| Problem { path: e.path, message: e.message }).collect();
        }
        Err(Violation::UnknownVersion { requested, latest }) => outcome.errors.push(Problem {
            path: "/context/schemaVersion".to_owned(),
            message: format!("version {requested} does not exist; the newest is {latest}"),
        }),
        Err(Violation::MissingKey(fields)) => {
            outcome.errors.push(Problem { path: String::new(), message: format!("no partition key: needs {fields}") })
        }
    }
    outcome
}

fn invalid(event: Option<String>, path: &str, message: String) -> Outcome {
    Outcome {
        valid: false,
        event,
        schema: None,
        version: None,
        topic: None,
        key: None,
        rollout: None,
        errors: vec![Problem { path: path.to_owned(), message }],
    }
}
