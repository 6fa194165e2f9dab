//! What each Snowplow event type (`e`) is before the mapping: the keys its
//! rule is looked up by, the call and name it has when no rule names it,
//! and its properties, from the protocol's own fields.

use serde_json::{Map, Value};

use super::{Fields, LimitsConfig, UNSTRUCT_EVENT, WireError, invalid, json_field, text};
use crate::config::mapping::Call;

/// One event's type, as the mapping sees it.
pub(super) struct What {
    /// Rule keys, most specific first.
    pub keys: Vec<String>,
    /// The call when no rule names one.
    pub call: Call,
    /// The track call's name when no rule names one (Snowplow's own event
    /// names: `page_ping`, `transaction`, the structured event's action,
    /// the self-describing event's schema URI).
    pub name: String,
    /// The call's properties.
    pub properties: Value,
    /// A self-describing event's schema URI.
    pub schema: Option<String>,
}

impl What {
    fn new(key: &str, call: Call, name: &str, properties: Map<String, Value>) -> Self {
        Self {
            keys: vec![key.to_owned()],
            call,
            name: name.to_owned(),
            properties: Value::Object(properties),
            schema: None,
        }
    }

    /// The type of `event` by its `e`, its type's fields taken from it.
    pub fn of(index: usize, event: &mut Fields, limits: &LimitsConfig) -> Result<Self, WireError> {
        let kind = text(event, "e").unwrap_or_default().to_owned();
        Ok(match kind.as_str() {
            "pv" => Self::new("pv", Call::Page, "", page(event, &[])),
            "pp" => {
                let ping = [("pp_mix", "min_x"), ("pp_max", "max_x"), ("pp_miy", "min_y"), ("pp_may", "max_y")];
                Self::new("pp", Call::Track, "page_ping", page(event, &ping))
            }
            "se" => structured(event),
            "ue" => self_describing(index, event, limits)?,
            "tr" => {
                let order = [
                    ("tr_id", "order_id"),
                    ("tr_af", "affiliation"),
                    ("tr_tt", "total"),
                    ("tr_tx", "tax"),
                    ("tr_sh", "shipping"),
                    ("tr_ci", "city"),
                    ("tr_st", "state"),
                    ("tr_co", "country"),
                    ("tr_cu", "currency"),
                ];
                Self::new("tr", Call::Track, "transaction", take(event, &order))
            }
            "ti" => {
                let item = [
                    ("ti_id", "order_id"),
                    ("ti_sk", "sku"),
                    ("ti_nm", "name"),
                    ("ti_ca", "category"),
                    ("ti_pr", "price"),
                    ("ti_qu", "quantity"),
                    ("ti_cu", "currency"),
                ];
                Self::new("ti", Call::Track, "transaction_item", take(event, &item))
            }
            // An unknown type keeps its code as its name, to meet the
            // source's `unknown_events` rule; no `e` is no name.
            other => Self::new(other, Call::Track, other, Map::new()),
        })
    }
}

/// Fields whose text is a number in the protocol.
const NUMERIC: &[&str] =
    &["pp_mix", "pp_max", "pp_miy", "pp_may", "se_va", "tr_tt", "tr_tx", "tr_sh", "ti_pr", "ti_qu"];

/// `pairs` (protocol field → property) taken from the event; numeric
/// fields become numbers when their text is one.
fn take(event: &mut Fields, pairs: &[(&str, &str)]) -> Map<String, Value> {
    let mut props = Map::new();
    for (field, property) in pairs {
        let Some(Value::String(value)) = event.remove(*field).filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        else {
            continue;
        };
        let value = if NUMERIC.contains(field) { number(value) } else { Value::String(value) };
        props.insert((*property).to_owned(), value);
    }
    props
}

/// A number's text as a JSON number (integers stay integers); any other
/// text as sent, for the catalog to judge.
fn number(text: String) -> Value {
    if let Ok(int) = text.trim().parse::<i64>() {
        return int.into();
    }
    match text.trim().parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
        Some(n) => Value::Number(n),
        None => Value::String(text),
    }
}

/// A page's properties (`url`, `title`, `referrer`), and `extra` fields.
fn page(event: &mut Fields, extra: &[(&str, &str)]) -> Map<String, Value> {
    let mut props = Map::new();
    for (field, property) in [("url", "url"), ("page", "title"), ("refr", "referrer")] {
        if let Some(value) = text(event, field) {
            props.insert(property.into(), value.into());
        }
    }
    props.extend(take(event, extra));
    props
}

/// `e=se`: keyed `se/<category>/<action>`, then `se/*/<action>`; named by
/// its action when no rule names it.
fn structured(event: &mut Fields) -> What {
    let category = text(event, "se_ca").unwrap_or_default().to_owned();
    let action = text(event, "se_ac").unwrap_or_default().to_owned();
    let fields =
        [("se_ca", "category"), ("se_ac", "action"), ("se_la", "label"), ("se_pr", "property"), ("se_va", "value")];
    let mut what = What::new(&format!("se/{category}/{action}"), Call::Track, &action, take(event, &fields));
    what.keys.push(format!("se/*/{action}"));
    what
}

/// `e=ue`: keyed by its schema URI, then by the URI with any version of
/// the same model (`1-*-*`); named by the URI when no rule names it. Its
/// `data` are the properties.
fn self_describing(index: usize, event: &mut Fields, limits: &LimitsConfig) -> Result<What, WireError> {
    let at = format!("data[{index}].ue_pr/ue_px");
    let Some(envelope) = json_field(index, event, "ue_pr", "ue_px", limits)? else {
        return Err(invalid(&format!(
            "`data[{index}]` is a self-describing event (`e=ue`) without `ue_pr` or `ue_px`"
        )));
    };
    let Value::Object(mut envelope) = envelope else {
        return Err(invalid(&format!("`{at}` must be a `{{\"schema\", \"data\"}}` object")));
    };
    if !envelope.get("schema").and_then(Value::as_str).is_some_and(|s| s.starts_with(UNSTRUCT_EVENT)) {
        return Err(invalid(&format!("`{at}` must have the schema {UNSTRUCT_EVENT}x-x")));
    }
    let Some(Value::Object(mut inner)) = envelope.remove("data") else {
        return Err(invalid(&format!("`{at}.data` must be the event: `{{\"schema\": \"iglu:…\", \"data\": {{…}}}}`")));
    };
    let schema = match inner.remove("schema") {
        Some(Value::String(schema)) if schema.starts_with("iglu:") && schema.len() > "iglu:".len() => schema,
        _ => return Err(invalid(&format!("`{at}.data.schema` must be an `iglu:` schema URI"))),
    };
    let properties = inner.remove("data").unwrap_or_else(|| Value::Object(Map::new()));
    let mut keys = vec![schema.clone()];
    if let Some(model) = any_version(&schema) {
        keys.push(model);
    }
    Ok(What { keys, call: Call::Track, name: schema.clone(), properties, schema: Some(schema) })
}

/// `iglu:com.acme/x/jsonschema/1-0-2` → `iglu:com.acme/x/jsonschema/1-*-*`.
pub(super) fn any_version(schema: &str) -> Option<String> {
    let (prefix, version) = schema.rsplit_once('/')?;
    let model = version.split('-').next().filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))?;
    Some(format!("{prefix}/{model}-*-*"))
}
