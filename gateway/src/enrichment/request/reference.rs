//! The enrichment as it was before records were spliced: every value
//! copied into the event's map, then the map serialised. Kept only as the
//! reference the spliced records are compared with, byte for byte
//! (`pipeline::enrichment` tests).

use std::net::IpAddr;

use serde_json::{Map, Value};

use super::{BotPolicy, EdgeRequest, Marks, bump};
use crate::sink::Text;

impl EdgeRequest<'_> {
    /// [`EdgeRequest::finish`] on the map alone.
    pub(crate) fn finish_reference(
        &self,
        name: &str,
        consent_warning: Option<String>,
        event: &mut Map<String, Value>,
    ) -> Marks {
        let mut marks = Marks::default();
        if let Some(warning) = consent_warning {
            marks.headers.push(("consent-warning", warning.into()));
        }
        if let Some(Value::Object(context)) = event.get_mut("context") {
            self.client_context_reference(context, &mut marks);
        }
        self.personal_data(name, event, None);
        marks
    }

    fn client_context_reference(&self, context: &mut Map<String, Value>, marks: &mut Marks) {
        let enrichment = &self.settings.enrichment;
        let wanted = enrichment.device || enrichment.bots != BotPolicy::Off;
        if wanted
            && let Some(profile) =
                context.get("userAgent").and_then(Value::as_str).map(|ua| self.profile(ua).into_owned())
        {
            if enrichment.device && !context.contains_key("agent") {
                context.insert("agent".into(), Value::Object(profile.agent.clone()));
            }
            if let (Some(bot), true) = (&profile.bot, enrichment.bots != BotPolicy::Off) {
                context.insert("bot".into(), serde_json::json!({"name": bot.name, "category": bot.category}));
                marks.headers.push(("bot", Text::Static(bot.name)));
                bump(&mut self.counts.borrow_mut().bots, bot.name);
                if enrichment.bots == BotPolicy::Route {
                    marks.topic = enrichment.bot_topic.as_deref().map(Text::copied);
                }
            }
        }
        let Some(ip) = context.get("ip").and_then(Value::as_str).and_then(|s| s.parse::<IpAddr>().ok()) else {
            return;
        };
        let full = match self.client.full_ip {
            Some(full) if self.client.ip == Some(ip) => full,
            _ => ip,
        };
        if enrichment.geo
            && !context.contains_key("geo")
            && let Some(place) = self.edge.geo.as_ref().and_then(|geo| geo.lookup(full))
        {
            let place: Value = serde_json::from_str(place.get()).expect("a place is JSON");
            context.insert("geo".into(), place);
        }
        self.apply_ip_policy(context, full);
    }
}
