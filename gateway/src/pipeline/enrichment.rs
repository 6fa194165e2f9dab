//! The enrich step: what the gateway adds to an accepted event, in one
//! place. Everything added here is bounded, so a record is at most the
//! client's event (`limits.max_event_bytes`) plus [`MAX_ENRICHMENT_BYTES`].

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::Admission;
use super::clock::{EventTime, format_time};
use crate::compact;
use crate::enrichment::request::Marks;
use crate::enrichment::splice::{EventSplice, Fragment};

/// What enrichment may add to one event at most: `receivedAt`, the corrected
/// `timestamp`, a generated `messageId`, `context.ip` and `context.userAgent`
/// (itself at most [`crate::enrichment::client::MAX_CLIENT_FIELD_BYTES`]), with room
/// for more header-derived fields. A record larger than the client's limit
/// plus this is refused (`event_too_large`), so no request is amplified.
pub const MAX_ENRICHMENT_BYTES: usize = 2048;

/// The record buffer's first size: most tracking events fit, so most
/// records are written without growing it.
const RECORD_CAPACITY: usize = 1024;

impl Admission<'_> {
    /// The record value of a valid event (before any registry framing) and
    /// what else enrichment marks on its record: the event enriched and
    /// serialised in one pass.
    pub fn enriched_payload(
        &self,
        name: &str,
        mut event: Map<String, Value>,
        time: &EventTime,
        consent_warning: Option<String>,
    ) -> (Vec<u8>, Marks) {
        #[cfg(test)]
        if tests::REFERENCE.get() {
            return tests::reference_payload(self, name, event, time, consent_warning);
        }
        let mut splice = EventSplice::default();
        self.enrich(&mut event, time, &mut splice);
        let marks = self.edge.finish(name, consent_warning, &mut event, &mut splice);
        self.note_shown(&event);
        (splice.write(&event, RECORD_CAPACITY), marks)
    }

    /// Adds `receivedAt`, the corrected `timestamp` (keeping the device's as
    /// `originalTimestamp`) and the client context, into `splice` (as
    /// inserting them would, so the event's map is neither hashed into nor
    /// grown; written, the record is what the inserts would give).
    fn enrich<'r>(&'r self, event: &mut Map<String, Value>, time: &EventTime, splice: &mut EventSplice<'r>) {
        splice.top.set(event, "receivedAt", Fragment::Text(Cow::Borrowed(&self.received_at_text)));
        // The device's value is taken out (its place, left `null`, is the
        // splice's to fill), then the key removed as a map removes it.
        if let Some(device) = compact::entry_mut(event, "timestamp").map(std::mem::take) {
            splice.top.remove(event, "timestamp");
            if !splice.top.contains(event, "originalTimestamp") {
                splice.top.set_device(event, "originalTimestamp", device);
            }
        }
        splice.top.set(event, "timestamp", Fragment::Text(Cow::Owned(format_time(time.timestamp))));
        // `context` is an object or absent here (the envelope step
        // dead-letters any other); an event without one gets an empty one.
        match compact::entry(event, "context") {
            Some(Value::Object(context)) => self.enrich_context(context, splice),
            Some(_) => {}
            None => {
                splice.top.set(event, "context", Fragment::Context);
                self.enrich_context(&Map::new(), splice);
            }
        }
    }

    /// `context.ip` and `context.userAgent`, unless the client reported its
    /// own (server SDKs forward their users'); the anonymise setting applies
    /// to both. Both go into `splice`, not the map.
    fn enrich_context<'r>(&'r self, context: &Map<String, Value>, splice: &mut EventSplice<'r>) {
        let reported =
            compact::entry(context, "ip").and_then(Value::as_str).and_then(|s| s.parse::<std::net::IpAddr>().ok());
        let ip = match (reported, self.client.ip) {
            (Some(ip), _) => Some(self.clients.reported_ip(ip)),
            (None, own) => own,
        };
        if let Some(ip) = ip {
            splice.context.set(context, "ip", self.edge.ip_text(ip));
            splice.ip = Some(ip);
        }
        if let (None, Some(agent)) = (compact::entry(context, "userAgent"), &self.client.user_agent) {
            splice.context.set(context, "userAgent", Fragment::Text(Cow::Borrowed(agent)));
        }
    }
}

#[cfg(test)]
#[path = "enrichment_tests.rs"]
mod tests;
