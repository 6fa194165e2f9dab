//! The structural walk behind the compatibility check: given a reader's
//! schema and a writer's, finds every place where an event the writer
//! accepts could be refused by the reader. Direction-neutral; `mod.rs`
//! words each gap as old/new for backward or forward.

use serde_json::{Map, Value};

/// One way a writer's event may fall outside what the reader accepts.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Gap {
    /// The writer allows JSON types the reader does not.
    Types { reader: Vec<String>, writer: Vec<String>, extra: Vec<String> },
    /// The writer's enum (or const) has values the reader's lacks.
    Values { extra: Vec<Value> },
    /// The reader lists allowed values; the writer allows any.
    ValuesRestricted { reader: Vec<Value> },
    /// The reader requires a field the writer does not.
    Required { field: String, writer_defines: bool },
    /// The writer defines a field the reader forbids (closed object).
    ClosedField { field: String },
    /// The reader forbids fields it does not list; the writer allows them.
    Closed,
    /// A numeric or size bound is stricter in the reader.
    Bound { keyword: &'static str, reader: Value, writer: Option<Value> },
    /// A constraint whose strictness cannot be compared changed.
    Changed { keyword: &'static str, reader: Value, writer: Option<Value> },
    /// A keyword the checker does not reason about differs.
    Unverifiable { keyword: &'static str },
}

/// A gap at a place in the event, as a dotted path (`properties.amount`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Finding {
    pub path: String,
    pub gap: Gap,
}

const LOWER_BOUNDS: [&str; 5] = ["minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"];
const UPPER_BOUNDS: [&str; 5] = ["maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"];
const OPAQUE: [&str; 6] = ["pattern", "format", "multipleOf", "uniqueItems", "contentEncoding", "contentMediaType"];
/// Keywords whose effect this checker does not model: any difference is
/// reported for a person to review rather than guessed at.
const UNMODELLED: [&str; 15] = [
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "$ref",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "prefixItems",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
];
const ALL_TYPES: [&str; 7] = ["array", "boolean", "integer", "null", "number", "object", "string"];

/// Every gap between `reader` and `writer` at `path` and below.
pub(super) fn gaps(reader: &Value, writer: &Value, path: &str, out: &mut Vec<Finding>) {
    let empty = Map::new();
    // `true` / `false` schemas: `true` accepts anything, like `{}`.
    let (Some(r), w) = (reader.as_object(), writer.as_object().unwrap_or(&empty)) else {
        if reader == &Value::Bool(false) && writer != &Value::Bool(false) {
            out.push(Finding { path: path.to_owned(), gap: Gap::Closed });
        }
        return;
    };
    let mut push = |gap| out.push(Finding { path: path.to_owned(), gap });
    if let Some(gap) = type_gap(r, w) {
        push(gap);
    }
    if let Some(gap) = value_gap(r, w) {
        push(gap);
    }
    for keyword in LOWER_BOUNDS.iter().chain(&UPPER_BOUNDS) {
        if let Some(gap) = bound_gap(keyword, r, w) {
            push(gap);
        }
    }
    for keyword in OPAQUE {
        if let Some(rv) = r.get(keyword).filter(|rv| w.get(keyword) != Some(*rv)) {
            push(Gap::Changed { keyword, reader: rv.clone(), writer: w.get(keyword).cloned() });
        }
    }
    for keyword in UNMODELLED {
        if r.get(keyword).is_some_and(|rv| w.get(keyword) != Some(rv)) {
            push(Gap::Unverifiable { keyword });
        }
    }
    object_gaps(r, w, path, out);
    if let Some(items) = r.get("items") {
        let writer_items = w.get("items").cloned().unwrap_or(Value::Bool(true));
        gaps(items, &writer_items, &format!("{path}[]"), out);
    }
}

fn object_gaps(r: &Map<String, Value>, w: &Map<String, Value>, path: &str, out: &mut Vec<Finding>) {
    let empty = Map::new();
    let r_props = r.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let w_props = w.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let closed = |m: &Map<String, Value>| m.get("additionalProperties") == Some(&Value::Bool(false));
    let at = |field: &str| if path.is_empty() { field.to_owned() } else { format!("{path}.{field}") };
    for (field, w_schema) in w_props {
        match (r_props.get(field), r.get("additionalProperties")) {
            (Some(r_schema), _) => gaps(r_schema, w_schema, &at(field), out),
            (None, Some(Value::Bool(false))) => {
                out.push(Finding { path: path.to_owned(), gap: Gap::ClosedField { field: field.clone() } })
            }
            (None, Some(extra @ Value::Object(_))) => gaps(extra, w_schema, &at(field), out),
            // A field the reader does not describe is one it ignores.
            (None, _) => {}
        }
    }
    // A field only the reader describes is an added optional field (its
    // being required is caught below): writers following their own schema
    // never sent it, so no event they wrote can break it.
    let w_required = string_set(w.get("required"));
    for field in string_set(r.get("required")) {
        if !w_required.contains(&field) {
            let writer_defines = w_props.contains_key(&field);
            out.push(Finding { path: path.to_owned(), gap: Gap::Required { field, writer_defines } });
        }
    }
    if closed(r) && !closed(w) && (w.get("type").is_none() || types_of(w).iter().any(|t| t == "object")) {
        out.push(Finding { path: path.to_owned(), gap: Gap::Closed });
    }
}

fn type_gap(r: &Map<String, Value>, w: &Map<String, Value>) -> Option<Gap> {
    r.get("type")?;
    let (reader, writer) = (types_of(r), types_of(w));
    // An integer is a number, so `number` readers accept `integer` writers.
    let accepts = |t: &String| reader.contains(t) || (t == "integer" && reader.iter().any(|r| r == "number"));
    let extra: Vec<String> = writer.iter().filter(|t| !accepts(t)).cloned().collect();
    (!extra.is_empty()).then_some(Gap::Types { reader, writer, extra })
}

/// The JSON types a schema allows: its `type`, else its enum values' types,
/// else all of them.
fn types_of(schema: &Map<String, Value>) -> Vec<String> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => match allowed_values(schema) {
            Some(values) => {
                let mut types: Vec<String> = values.iter().map(json_type).map(str::to_owned).collect();
                types.sort();
                types.dedup();
                types
            }
            None => ALL_TYPES.iter().map(|t| (*t).to_owned()).collect(),
        },
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn allowed_values(schema: &Map<String, Value>) -> Option<Vec<Value>> {
    match (schema.get("enum"), schema.get("const")) {
        (Some(Value::Array(values)), _) => Some(values.clone()),
        (_, Some(value)) => Some(vec![value.clone()]),
        _ => None,
    }
}

fn value_gap(r: &Map<String, Value>, w: &Map<String, Value>) -> Option<Gap> {
    let reader = allowed_values(r)?;
    match allowed_values(w) {
        Some(writer) => {
            let extra: Vec<Value> = writer.into_iter().filter(|v| !reader.contains(v)).collect();
            (!extra.is_empty()).then_some(Gap::Values { extra })
        }
        None => Some(Gap::ValuesRestricted { reader }),
    }
}

fn bound_gap(keyword: &'static str, r: &Map<String, Value>, w: &Map<String, Value>) -> Option<Gap> {
    let reader = r.get(keyword)?;
    let writer = w.get(keyword);
    let stricter = match (reader.as_f64(), writer.and_then(Value::as_f64)) {
        (Some(rv), Some(wv)) if LOWER_BOUNDS.contains(&keyword) => rv > wv,
        (Some(rv), Some(wv)) => rv < wv,
        (_, None) => true,
        (None, Some(_)) => reader != writer.unwrap_or(&Value::Null),
    };
    stricter.then(|| Gap::Bound { keyword, reader: reader.clone(), writer: writer.cloned() })
}

fn string_set(value: Option<&Value>) -> Vec<String> {
    let items = value.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
}
