//! The protocol's JSON carried in a string field: the self-describing
//! event (`ue_pr` plain, `ue_px` base64) and the contexts (`co` plain, `cx`
//! base64), decoded within the body's JSON limits. A field that cannot be
//! read makes its event undecodable, the reason naming the event and field
//! (`data[1].cx`); a limit broken refuses the request with its code.

use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::Value;

use super::{Fields, LimitsConfig, WireError, invalid, parse};

/// The envelope of `co`/`cx`, any 1-x-x version.
const CONTEXTS: &str = "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-";

/// base64 of either alphabet, padded or not: trackers differ (the browser
/// tracker's `encodeBase64` and the Python tracker write url-safe).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The event's `co` (JSON) or `cx` (base64 JSON) contexts: the entities of
/// a `contexts` envelope, an array of `{schema, data}`.
pub(super) fn contexts(index: usize, event: &mut Fields, limits: &LimitsConfig) -> Result<Option<Value>, WireError> {
    let Some(envelope) = json_field(index, event, "co", "cx", limits)? else { return Ok(None) };
    let at = format!("data[{index}].co/cx");
    let Value::Object(mut envelope) = envelope else {
        return Err(invalid(&format!("`{at}` must be a `{{\"schema\", \"data\"}}` contexts object")));
    };
    match envelope.get("schema").and_then(Value::as_str) {
        Some(schema) if schema.starts_with(CONTEXTS) => {}
        _ => return Err(invalid(&format!("`{at}` must have the schema {CONTEXTS}x-x"))),
    }
    match envelope.remove("data") {
        Some(Value::Array(entities)) => Ok(Some(Value::Array(entities))),
        _ => Err(invalid(&format!("`{at}.data` must be an array of `{{\"schema\", \"data\"}}` entities"))),
    }
}

/// The JSON of a field sent plain (`plain`) or base64-encoded (`encoded`),
/// removed from the event; the plain one wins when both are sent.
pub(super) fn json_field(
    index: usize,
    event: &mut Fields,
    plain: &str,
    encoded: &str,
    limits: &LimitsConfig,
) -> Result<Option<Value>, WireError> {
    let (plain_text, encoded_text) = (event.remove(plain), event.remove(encoded));
    let (field, bytes) = match (plain_text, encoded_text) {
        (Some(Value::String(text)), _) => (plain, text.into_bytes()),
        (_, Some(Value::String(text))) => {
            // A `+` a client left unescaped in a query reads as a space.
            let text = text.trim().trim_end_matches('=').replace([' ', '-'], "+").replace('_', "/");
            let bytes = BASE64.decode(text.as_bytes()).map_err(|e| {
                invalid(&format!("`data[{index}].{encoded}` is not base64 (standard or url-safe): {e}"))
            })?;
            (encoded, bytes)
        }
        _ => return Ok(None),
    };
    parse(&bytes, limits.json()).map(Some).map_err(|e| match e {
        // Limits keep their own codes; anything else is this field's fault.
        limit @ (WireError::TooDeep { .. } | WireError::StringTooLong { .. }) => limit,
        other => invalid(&format!("`data[{index}].{field}` is not JSON we take: {other}")),
    })
}
