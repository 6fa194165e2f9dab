//! Flattens a JSON Schema into the rows of the catalog page's field table:
//! one row per field, nested objects and array items included, with its
//! type, whether it is required, its description and its constraints.

use serde_json::{Map, Value};

/// One documented field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRow {
    /// Dotted path into the event (`properties.amount`; `[]` for array items).
    pub path: String,
    /// Its type, or the values it may take.
    pub kind: String,
    /// Whether its object requires it.
    pub required: bool,
    /// The schema's description.
    pub description: String,
    /// Bounds, pattern and format, in schema words (`minLength 1`).
    pub constraints: String,
}

const CONSTRAINTS: [&str; 10] = [
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
];

/// Every field `schema` describes, depth first in document order.
pub fn rows(schema: &Value) -> Vec<FieldRow> {
    let mut out = Vec::new();
    if let Some(object) = schema.as_object() {
        walk(object, "", &mut out);
    }
    out
}

fn walk(schema: &Map<String, Value>, path: &str, out: &mut Vec<FieldRow>) {
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, field) in props {
            let at = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
            let Some(field) = field.as_object() else { continue };
            out.push(row(&at, field, required.contains(&name.as_str())));
            walk(field, &at, out);
        }
    }
    if let Some(items) = schema.get("items").and_then(Value::as_object) {
        let at = format!("{path}[]");
        out.push(row(&at, items, false));
        walk(items, &at, out);
    }
}

fn row(path: &str, field: &Map<String, Value>, required: bool) -> FieldRow {
    let kind = match (field.get("enum"), field.get("const"), field.get("type")) {
        (Some(Value::Array(values)), _, _) => format!("one of {}", list(values)),
        (_, Some(value), _) => format!("always {value}"),
        (_, _, Some(Value::String(t))) => t.clone(),
        (_, _, Some(Value::Array(ts))) => ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ => "any".to_owned(),
    };
    let constraints: Vec<String> =
        CONSTRAINTS.iter().filter_map(|k| field.get(*k).map(|v| format!("{k} {}", plain(v)))).collect();
    FieldRow {
        path: path.to_owned(),
        kind,
        required,
        description: field.get("description").and_then(Value::as_str).unwrap_or_default().to_owned(),
        constraints: constraints.join(", "),
    }
}

fn list(values: &[Value]) -> String {
    values.iter().map(Value::to_string).collect::<Vec<_>>().join(", ")
}

/// Strings without their JSON quotes; other values as JSON.
fn plain(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_fields_enums_and_items_become_rows() {
        let schema = json!({"type": "object", "required": ["properties"], "properties": {
            "type": {"enum": ["track"]},
            "properties": {"type": "object", "required": ["id"], "properties": {
                "id": {"type": "string", "minLength": 1, "description": "The id."},
                "tags": {"type": "array", "items": {"type": "string"}}}}}});
        let rows = rows(&schema);
        let paths: Vec<&str> = rows.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["type", "properties", "properties.id", "properties.tags", "properties.tags[]"]);
        assert_eq!(rows[0].kind, "one of \"track\"");
        assert!(rows[2].required && !rows[3].required);
        assert_eq!((rows[2].description.as_str(), rows[2].constraints.as_str()), ("The id.", "minLength 1"));
    }
}
