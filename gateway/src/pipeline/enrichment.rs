//! The enrich step: what the gateway adds to an accepted event, in one
//! place. Everything added here is bounded, so a record is at most the
//! client's event (`limits.max_event_bytes`) plus [`MAX_ENRICHMENT_BYTES`].

use serde_json::{Map, Value};

use super::Admission;
use super::clock::{EventTime, format_time};

/// What enrichment may add to one event at most: `receivedAt`, the corrected
/// `timestamp`, a generated `messageId`, `context.ip` and `context.userAgent`
/// (itself at most [`crate::enrich::MAX_CLIENT_FIELD_BYTES`]), with room
/// for more header-derived fields. A record larger than the client's limit
/// plus this is refused (`event_too_large`), so no request is amplified.
pub const MAX_ENRICHMENT_BYTES: usize = 2048;

impl Admission<'_> {
    /// Adds `receivedAt`, the corrected `timestamp` (keeping the device's as
    /// `originalTimestamp`) and the client context.
    pub(super) fn enrich(&self, event: &mut Map<String, Value>, time: &EventTime) {
        event.insert("receivedAt".into(), Value::String(self.received_at_text.to_owned()));
        if let Some(device) = event.remove("timestamp")
            && !event.contains_key("originalTimestamp")
        {
            event.insert("originalTimestamp".into(), device);
        }
        event.insert("timestamp".into(), Value::String(format_time(time.timestamp)));
        self.enrich_context(event);
    }

    /// `context.ip` and `context.userAgent`, unless the client reported its
    /// own (server SDKs forward their users'); the anonymise setting applies
    /// to both. `context` is an object or absent here (the envelope step
    /// dead-letters any other).
    fn enrich_context(&self, event: &mut Map<String, Value>) {
        let context = event.entry("context").or_insert_with(|| Value::Object(Map::new()));
        let Some(context) = context.as_object_mut() else { return };
        let reported = context.get("ip").and_then(Value::as_str).and_then(|s| s.parse::<std::net::IpAddr>().ok());
        match (reported, self.client.ip) {
            (Some(ip), _) => {
                context.insert("ip".into(), Value::String(self.clients.reported_ip(ip).to_string()));
            }
            (None, Some(ip)) => {
                context.insert("ip".into(), Value::String(ip.to_string()));
            }
            (None, None) => {}
        }
        if let (None, Some(agent)) = (context.get("userAgent"), &self.client.user_agent) {
            context.insert("userAgent".into(), Value::String(agent.clone()));
        }
    }
}
