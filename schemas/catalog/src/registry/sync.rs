//! Schemas as code in a Schema Registry: every catalog version of every
//! event is registered under its subject (`<topic>-<domain>.<schema>`, see
//! [`super::subject`]) as version N, and each subject's
//! compatibility is the catalog's mode. The plan refuses, before touching
//! anything, a registry that holds a version differing from the catalog's
//! (or one the catalog does not have). Applying is all or nothing: when the
//! registry refuses a change (its compatibility rule, say), every change
//! made so far is undone, then the registry is read back to prove it.

use std::collections::BTreeMap;
use std::fmt;

use eventgw_schemas::{Compatibility, DomainSource};
use reqwest::Method;
use serde_json::{Value, json};

use super::{RegistryClient, RegistryError, later_keyword, registered_document, subject};

/// One subject as the catalog declares it.
#[derive(Debug, Clone)]
pub struct DeclaredSubject {
    /// `<topic>-<domain>.<schema>`.
    pub subject: String,
    /// Versions by number: the schema as registered and the file it came from.
    pub versions: BTreeMap<u32, (Value, String)>,
    /// The registry's name of the catalog's mode: `BACKWARD`, `FORWARD`, `FULL`, `NONE`.
    pub compatibility: &'static str,
}

/// One subject as the registry holds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegisteredSubject {
    /// Versions by number.
    pub versions: BTreeMap<u32, Value>,
    /// The subject's own compatibility setting, if it has one.
    pub compatibility: Option<String>,
}

/// One step towards the catalog.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Set the subject's compatibility (from what it was, if anything).
    Compatibility {
        /// The subject.
        subject: String,
        /// Its setting now.
        from: Option<String>,
        /// The catalog's.
        to: &'static str,
    },
    /// Register a catalog version.
    Register {
        /// The subject.
        subject: String,
        /// The version it must become.
        version: u32,
        /// The schema.
        schema: Value,
        /// The file it comes from.
        origin: String,
    },
}

/// Changes, or refusals that stop the plan from being applied at all.
#[derive(Debug, Default)]
pub struct Plan {
    /// What `apply` would do, in order.
    pub changes: Vec<Change>,
    /// Why it must not.
    pub refusals: Vec<String>,
}

/// The registry's name of a compatibility mode (non-transitive, as the
/// catalog checks each version against the previous one).
pub fn level(mode: Compatibility) -> &'static str {
    match mode {
        Compatibility::Backward => "BACKWARD",
        Compatibility::Forward => "FORWARD",
        Compatibility::Full => "FULL",
        Compatibility::None => "NONE",
    }
}

/// Every event's subject with its versions, from the catalog sources.
pub fn declared(sources: &[DomainSource]) -> Vec<DeclaredSubject> {
    let mut out = Vec::new();
    for source in sources {
        let spec = &source.spec;
        for event in spec.events.values() {
            let versions = source
                .schemas
                .iter()
                .filter(|d| d.schema == event.schema)
                .map(|d| (d.version, (registered_document(&d.json), d.origin.clone())))
                .collect();
            out.push(DeclaredSubject {
                subject: subject(&spec.topic, &spec.domain, &event.schema),
                versions,
                compatibility: level(event.compatibility),
            });
        }
    }
    out.sort_by(|a, b| a.subject.cmp(&b.subject));
    out
}

/// What brings the registry to the catalog, or why it must not be tried.
pub fn plan(declared: &[DeclaredSubject], registered: &BTreeMap<String, RegisteredSubject>) -> Plan {
    let mut plan = Plan::default();
    let empty = RegisteredSubject::default();
    for d in declared {
        let r = registered.get(&d.subject).unwrap_or(&empty);
        refusals(d, r, &mut plan.refusals);
        let top = r.versions.keys().next_back().copied().unwrap_or(0);
        let pending: Vec<Change> = d
            .versions
            .range(top + 1..)
            .map(|(version, (schema, origin))| Change::Register {
                subject: d.subject.clone(),
                version: *version,
                schema: schema.clone(),
                origin: origin.clone(),
            })
            .collect();
        let subject = d.subject.clone();
        // A subject new to the registry imports its history under NONE:
        // those versions already passed the catalog's check when they were
        // published, and the registry's reading of BACKWARD is stricter
        // (an optional field added to an open object breaks it). Every
        // version after that is held to the subject's rule.
        if top == 0 && pending.len() > 1 && d.compatibility != "NONE" {
            plan.changes.push(Change::Compatibility {
                subject: subject.clone(),
                from: r.compatibility.clone(),
                to: "NONE",
            });
            plan.changes.extend(pending);
            plan.changes.push(Change::Compatibility { subject, from: Some("NONE".into()), to: d.compatibility });
            continue;
        }
        if r.compatibility.as_deref() != Some(d.compatibility) {
            plan.changes.push(Change::Compatibility { subject, from: r.compatibility.clone(), to: d.compatibility });
        }
        plan.changes.extend(pending);
    }
    plan
}

/// Why `d` must not be applied over what the registry holds, `r`.
fn refusals(d: &DeclaredSubject, r: &RegisteredSubject, out: &mut Vec<String>) {
    for (version, stored) in &r.versions {
        match d.versions.get(version) {
            None => out.push(format!(
                "{} holds version {version}, which the catalog does not have: the registry is ahead of this catalog",
                d.subject
            )),
            Some((schema, origin)) if schema != stored => out.push(format!(
                "{} version {version} in the registry differs from {origin}: a published version never changes; add a new version instead",
                d.subject
            )),
            Some(_) => {}
        }
    }
    for (schema, origin) in d.versions.values() {
        if let Some(keyword) = later_keyword(schema) {
            out.push(format!("{origin} uses `{keyword}`, which draft-07 (the dialect registered) does not have"));
        }
    }
    let top = r.versions.keys().next_back().copied().unwrap_or(0);
    if let Some(gap) = (1..top).find(|v| !r.versions.contains_key(v)) {
        out.push(format!("{} lacks version {gap} below its version {top}: fix the registry by hand", d.subject));
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for change in &self.changes {
            match change {
                Change::Compatibility { subject, from, to } => writeln!(
                    f,
                    "  ~ compatibility {subject}: {} -> {to}",
                    from.as_deref().unwrap_or("(registry default)")
                )?,
                Change::Register { subject, version, origin, .. } => {
                    writeln!(f, "  + register {subject} version {version} ({origin})")?
                }
            }
        }
        for refusal in &self.refusals {
            writeln!(f, "  ! refused: {refusal}")?;
        }
        if self.changes.is_empty() && self.refusals.is_empty() {
            writeln!(f, "No changes.")?;
        }
        Ok(())
    }
}

fn path(subject: &str) -> String {
    format!("/subjects/{subject}")
}

fn fail(client: &RegistryClient, status: u16, body: &Value) -> RegistryError {
    let message = body.get("message").and_then(Value::as_str).map_or_else(|| body.to_string(), str::to_owned);
    RegistryError::Unreachable { url: client.url.clone(), problem: format!("{status}: {message}") }
}

/// What the registry holds for each declared subject.
pub async fn registered(
    client: &RegistryClient,
    declared: &[DeclaredSubject],
) -> Result<BTreeMap<String, RegisteredSubject>, RegistryError> {
    let mut out = BTreeMap::new();
    for d in declared {
        let mut subject = RegisteredSubject::default();
        let (status, body) = client.call(Method::GET, &format!("{}/versions", path(&d.subject)), None).await?;
        match status {
            200 => {
                for version in body.as_array().into_iter().flatten().filter_map(Value::as_u64) {
                    let version = u32::try_from(version).unwrap_or(u32::MAX);
                    if let Some((_, schema)) = client.version(&d.subject, version).await? {
                        subject.versions.insert(version, schema);
                    }
                }
            }
            404 => {}
            _ => return Err(fail(client, status, &body)),
        }
        let (status, body) = client.call(Method::GET, &format!("/config/{}", d.subject), None).await?;
        match status {
            200 => subject.compatibility = body.get("compatibilityLevel").and_then(Value::as_str).map(str::to_owned),
            404 => {}
            _ => return Err(fail(client, status, &body)),
        }
        out.insert(d.subject.clone(), subject);
    }
    Ok(out)
}

/// Why `apply` stopped: the change the registry refused and what it said.
#[derive(Debug)]
pub struct Refused {
    /// The change, as the plan prints it.
    pub change: String,
    /// The registry's answer.
    pub reason: String,
    /// Changes undone.
    pub undone: usize,
}

/// Makes every change in order; on the first refusal undoes the ones made.
/// `Ok(Err(_))` is a refusal cleanly rolled back; `Err` is a failure
/// (including one during the roll-back, which the message names).
pub async fn apply(
    client: &RegistryClient,
    plan: &Plan,
    before: &BTreeMap<String, RegisteredSubject>,
) -> Result<Result<Vec<String>, Refused>, RegistryError> {
    let mut done: Vec<&Change> = Vec::new();
    let mut lines = Vec::new();
    for change in &plan.changes {
        let refusal = match change {
            Change::Compatibility { subject, to, .. } => {
                let body = json!({ "compatibility": to });
                let (status, answer) = client.call(Method::PUT, &format!("/config/{subject}"), Some(&body)).await?;
                (status != 200).then_some((status, answer))
            }
            Change::Register { subject, version, schema, .. } => {
                let body = json!({ "schemaType": "JSON", "schema": schema.to_string() });
                let (status, answer) =
                    client.call(Method::POST, &format!("{}/versions", path(subject)), Some(&body)).await?;
                match (status, client.version(subject, *version).await?) {
                    (200, Some((_, stored))) if stored == *schema => None,
                    (200, _) => {
                        Some((409, json!({ "message": format!("the registry did not store it as version {version}") })))
                    }
                    _ => Some((status, answer)),
                }
            }
        };
        if let Some((status, answer)) = refusal {
            let undone = undo(client, &done, before).await?;
            let change = Plan { changes: vec![change.clone()], refusals: Vec::new() }.to_string().trim().to_owned();
            let reason = fail(client, status, &answer).to_string();
            return Ok(Err(Refused { change, reason, undone }));
        }
        lines.push(
            Plan { changes: vec![change.clone()], refusals: Vec::new() }
                .to_string()
                .trim_end()
                .replacen("  ", "  done ", 1),
        );
        done.push(change);
    }
    Ok(Ok(lines))
}

/// Reverses `done`, newest first, back to `before`.
async fn undo(
    client: &RegistryClient,
    done: &[&Change],
    before: &BTreeMap<String, RegisteredSubject>,
) -> Result<usize, RegistryError> {
    for change in done.iter().rev() {
        let calls: Vec<(Method, String, Option<Value>)> = match change {
            Change::Register { subject, version, .. } => {
                let existed = before.get(subject).is_some_and(|s| !s.versions.is_empty());
                let target = if existed { format!("{}/versions/{version}", path(subject)) } else { path(subject) };
                vec![(Method::DELETE, target.clone(), None), (Method::DELETE, format!("{target}?permanent=true"), None)]
            }
            Change::Compatibility { subject, from: Some(level), .. } => {
                vec![(Method::PUT, format!("/config/{subject}"), Some(json!({ "compatibility": level })))]
            }
            Change::Compatibility { subject, from: None, .. } => {
                vec![(Method::DELETE, format!("/config/{subject}"), None)]
            }
        };
        for (method, target, body) in calls {
            let (status, answer) = client.call(method, &target, body.as_ref()).await?;
            if !(200..300).contains(&status) && status != 404 {
                let problem =
                    format!("roll-back of `{target}` failed ({status}: {answer}); the registry is half-applied");
                return Err(RegistryError::Unreachable { url: client.url.clone(), problem });
            }
        }
    }
    Ok(done.len())
}
