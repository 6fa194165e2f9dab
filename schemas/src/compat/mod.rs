//! Schema compatibility, as Schema Registry's modes define it: whether
//! consumers on a new version can read events written under the previous
//! one (backward), the other way round (forward), or both (full). Each
//! violation is explained in plain words, because the person reading it is
//! a schema author deciding how to fix a pull request.
//!
//! One deliberate leniency: adding an optional field is backward compatible
//! and removing an optional field forward compatible, even when the old
//! schema left unknown fields open. Strictly, an old producer could have
//! sent that field with any value; in practice producers send what their
//! schema describes, and refusing every new optional field would make the
//! check useless.

mod walk;

use serde_json::Value;

use crate::{Compatibility, DomainSource};
use walk::{Finding, Gap};

/// Which consumers a violation would break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Consumers on the new version, reading events written under the old one.
    Backward,
    /// Consumers still on the old version, reading events written under the new one.
    Forward,
}

/// What kind of change breaks compatibility.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A field old consumers rely on is gone (required before, or the object is closed).
    FieldRemoved,
    /// A field appeared where old consumers forbid unknown fields.
    FieldAdded,
    /// A field became required.
    NewRequiredField,
    /// A required field became optional.
    FieldMadeOptional,
    /// Fewer JSON types allowed.
    TypeNarrowed,
    /// More JSON types allowed.
    TypeWidened,
    /// An enum lost values.
    EnumValueRemoved,
    /// An enum gained values.
    EnumValueAdded,
    /// A free value became a fixed list.
    ValuesRestricted,
    /// A fixed list of values became free.
    ValuesUnrestricted,
    /// Unknown fields became forbidden.
    ExtraFieldsForbidden,
    /// Unknown fields became allowed where old consumers forbid them.
    ExtraFieldsAllowed,
    /// A bound (minimum, maxLength, ...) became stricter.
    ConstraintTightened,
    /// A bound became looser.
    ConstraintLoosened,
    /// A pattern, format or similar changed; strictness cannot be compared.
    ConstraintChanged,
    /// A keyword the checker does not model changed; a person must review it.
    Unverifiable,
}

/// One way a new version breaks the compatibility its event promises.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Incompatibility {
    /// Which consumers it breaks.
    pub direction: Direction,
    /// What kind of change it is.
    pub kind: ChangeKind,
    /// Where in the event, dotted (`properties.amount`); empty for the event itself.
    pub path: String,
    /// The explanation, in plain words.
    pub message: String,
}

/// Every way `new` breaks `mode` compatibility with `old`; empty when it keeps it.
pub fn check(old: &Value, new: &Value, mode: Compatibility) -> Vec<Incompatibility> {
    let mut found = Vec::new();
    if matches!(mode, Compatibility::Backward | Compatibility::Full) {
        found.extend(direction(Direction::Backward, new, old));
    }
    if matches!(mode, Compatibility::Forward | Compatibility::Full) {
        found.extend(direction(Direction::Forward, old, new));
    }
    found
}

fn direction(dir: Direction, reader: &Value, writer: &Value) -> Vec<Incompatibility> {
    let mut findings = Vec::new();
    walk::gaps(reader, writer, "", &mut findings);
    findings.into_iter().map(|f| explain(dir, f)).collect()
}

/// The compatibility of one pair of consecutive versions of an event.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VersionStep {
    /// The event's name.
    pub event: String,
    /// The mode its catalog entry promises.
    pub mode: Compatibility,
    /// The older version's number and file.
    pub old: (u32, String),
    /// The newer version's number and file.
    pub new: (u32, String),
    /// What breaks; empty when the step is compatible.
    pub problems: Vec<Incompatibility>,
}

/// Checks every version of every event against its previous version, under
/// the event's own mode. Versions are paired by number, so it works on
/// sources that have not compiled yet.
pub fn check_sources(sources: &[DomainSource]) -> Vec<VersionStep> {
    let mut steps = Vec::new();
    for source in sources {
        for (name, event) in &source.spec.events {
            let mut docs: Vec<_> = source.schemas.iter().filter(|d| d.schema == event.schema).collect();
            docs.sort_by_key(|d| d.version);
            for pair in docs.windows(2) {
                let (old, new) = (pair[0], pair[1]);
                steps.push(VersionStep {
                    event: name.clone(),
                    mode: event.compatibility,
                    old: (old.version, old.origin.clone()),
                    new: (new.version, new.origin.clone()),
                    problems: check(&old.json, &new.json, event.compatibility),
                });
            }
        }
    }
    steps
}

fn explain(dir: Direction, finding: Finding) -> Incompatibility {
    use ChangeKind as K;
    let at = if finding.path.is_empty() { "the event".to_owned() } else { format!("`{}`", finding.path) };
    let back = dir == Direction::Backward;
    // Who gets hurt, appended to every message.
    let harm = if back {
        "events written under the old version would be refused by consumers on the new one"
    } else {
        "consumers still on the old version would refuse events written under the new one"
    };
    let (kind, what) = match finding.gap {
        Gap::Types { reader, writer, extra } => {
            let (from, to) = if back { (&writer, &reader) } else { (&reader, &writer) };
            let kind = if back { K::TypeNarrowed } else { K::TypeWidened };
            let verb = if back { "narrowed" } else { "widened" };
            (kind, format!("type {verb} from {} to {} ({} values)", or(from), or(to), or(&extra)))
        }
        Gap::Values { extra } => {
            let list = values(&extra);
            if back {
                (K::EnumValueRemoved, format!("enum value {list} removed"))
            } else {
                (K::EnumValueAdded, format!("enum value {list} added"))
            }
        }
        Gap::ValuesRestricted { reader } if back => {
            (K::ValuesRestricted, format!("now limited to {}, where any value was allowed", values(&reader)))
        }
        Gap::ValuesRestricted { reader } => {
            (K::ValuesUnrestricted, format!("no longer limited to {}", values(&reader)))
        }
        Gap::Required { field, .. } if back => (K::NewRequiredField, format!("new required field `{field}`")),
        Gap::Required { field, writer_defines: false } => {
            (K::FieldRemoved, format!("required field `{field}` removed"))
        }
        Gap::Required { field, writer_defines: true } => {
            (K::FieldMadeOptional, format!("field `{field}` is no longer required"))
        }
        Gap::ClosedField { field } if back => {
            (K::FieldRemoved, format!("field `{field}` removed while unknown fields are forbidden"))
        }
        Gap::ClosedField { field } => {
            (K::FieldAdded, format!("field `{field}` added, but the old version forbids unknown fields"))
        }
        Gap::Closed if back => (K::ExtraFieldsForbidden, "unknown fields are now forbidden".to_owned()),
        Gap::Closed => {
            (K::ExtraFieldsAllowed, "unknown fields are now allowed, the old version forbids them".to_owned())
        }
        Gap::Bound { keyword, reader, writer } => {
            let (from, to) = if back {
                (bound(writer.as_ref()), bound(Some(&reader)))
            } else {
                (bound(Some(&reader)), bound(writer.as_ref()))
            };
            let kind = if back { K::ConstraintTightened } else { K::ConstraintLoosened };
            let verb = if back { "tightened" } else { "loosened" };
            (kind, format!("`{keyword}` {verb} from {from} to {to}"))
        }
        Gap::Changed { keyword, reader, writer } => {
            let (from, to) = if back {
                (bound(writer.as_ref()), bound(Some(&reader)))
            } else {
                (bound(Some(&reader)), bound(writer.as_ref()))
            };
            (
                K::ConstraintChanged,
                format!("`{keyword}` changed from {from} to {to}; the checker cannot prove the values still match"),
            )
        }
        Gap::Unverifiable { keyword } => {
            (K::Unverifiable, format!("`{keyword}` changed; the checker cannot compare it, so a person must review it"))
        }
    };
    Incompatibility { direction: dir, kind, message: format!("{at}: {what}: {harm}"), path: finding.path }
}

fn or(items: &[String]) -> String {
    items.join(" or ")
}

fn values(items: &[Value]) -> String {
    items.iter().map(Value::to_string).collect::<Vec<_>>().join(", ")
}

fn bound(value: Option<&Value>) -> String {
    value.map_or_else(|| "none".to_owned(), Value::to_string)
}
