//! Consent as clients send it, read the way each SDK family writes it, and
//! checked against the purpose the catalog declares for an event.
//!
//! Accepted shapes of `context`:
//! - `consent: {"analytics": true, "marketing": false}` (categories to booleans;
//!   this gateway's own convention, and what most consent managers export);
//! - `consent: ["analytics"]` (the granted categories);
//! - `consent: "granted"` / `"denied"` (sdk-js's consent state: all or nothing);
//! - `consent: {"categoryPreferences": {"Analytics": true}}` (Segment's Consent
//!   Management, analytics.js `@segment/analytics-consent-tools`);
//! - `consentManagement: {"allowedConsentIds": [...], "deniedConsentIds": [...]}`
//!   (RudderStack's JavaScript SDK v3).
//!
//! Category names compare without regard to case.

use serde_json::Value;

/// What the event says about its purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// The purpose was granted.
    Granted,
    /// The event states consent, and the purpose is not among what was granted.
    Denied,
    /// The event carries no consent information at all.
    Missing,
}

impl Consent {
    /// The dead-letter reason for an event refused under `enforce` (a
    /// granted purpose is never refused: it has no reason of its own).
    pub fn code(self) -> crate::code::Code {
        match self {
            Self::Missing => crate::code::Code::ConsentMissing,
            Self::Granted | Self::Denied => crate::code::Code::ConsentDenied,
        }
    }
}

/// Whether `context` grants `purpose`.
pub fn check(context: Option<&Value>, purpose: &str) -> Consent {
    let Some(context) = context else { return Consent::Missing };
    let mut stated = false;
    if let Some(consent) = context.get("consent") {
        let categories = consent.get("categoryPreferences").unwrap_or(consent);
        match grants(categories, purpose) {
            Some(true) => return Consent::Granted,
            Some(false) => stated = true,
            None => {}
        }
    }
    if let Some(managed) = context.get("consentManagement") {
        let allowed = managed.get("allowedConsentIds").map(|ids| listed(ids, purpose));
        match allowed {
            Some(true) => return Consent::Granted,
            Some(false) => stated = true,
            None => stated |= managed.get("deniedConsentIds").is_some(),
        }
    }
    if stated { Consent::Denied } else { Consent::Missing }
}

/// `Some(granted)` when `value` is a consent statement this reads.
fn grants(value: &Value, purpose: &str) -> Option<bool> {
    match value {
        Value::Object(map) => Some(
            map.iter()
                .any(|(category, granted)| category.eq_ignore_ascii_case(purpose) && granted.as_bool() == Some(true)),
        ),
        Value::Array(_) => Some(listed(value, purpose)),
        Value::String(state) if state.eq_ignore_ascii_case("granted") => Some(true),
        Value::String(state) if state.eq_ignore_ascii_case("denied") => Some(false),
        _ => None,
    }
}

fn listed(ids: &Value, purpose: &str) -> bool {
    ids.as_array().is_some_and(|ids| ids.iter().filter_map(Value::as_str).any(|id| id.eq_ignore_ascii_case(purpose)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_every_sdk_shape() {
        let granted = [
            json!({"consent": {"marketing": true}}),
            json!({"consent": ["analytics", "Marketing"]}),
            json!({"consent": "granted"}),
            json!({"consent": {"categoryPreferences": {"Marketing": true, "Analytics": false}}}),
            json!({"consentManagement": {"allowedConsentIds": ["marketing"], "deniedConsentIds": []}}),
        ];
        for context in &granted {
            assert_eq!(check(Some(context), "marketing"), Consent::Granted, "{context}");
        }
        let denied = [
            json!({"consent": {"marketing": false}}),
            json!({"consent": ["analytics"]}),
            json!({"consent": "denied"}),
            json!({"consent": {"categoryPreferences": {"Analytics": true}}}),
            json!({"consentManagement": {"allowedConsentIds": ["analytics"]}}),
            json!({"consentManagement": {"deniedConsentIds": ["marketing"]}}),
        ];
        for context in &denied {
            assert_eq!(check(Some(context), "marketing"), Consent::Denied, "{context}");
        }
        assert_eq!(check(Some(&json!({"locale": "de"})), "marketing"), Consent::Missing);
        assert_eq!(check(None, "marketing"), Consent::Missing);
    }
}
