//! One request's enrichment and privacy: what the whole request shares
//! (the client's geo, its user agent's profile, the IP texts and salt, user
//! keys) is computed once and reused by every event; each event then only
//! records which fragments it and its `context` get ([`EventSplice`],
//! written into the record as pre-serialised JSON) and applies its
//! catalog's actions.

use std::borrow::Cow;
use std::cell::{OnceCell, RefCell};
use std::net::IpAddr;
use std::sync::Arc;

use eventgw_schemas::{Catalog, PersonalAction, Rollout};
use serde_json::{Map, Value};

use serde_json::value::RawValue;

use super::client::Client;
use super::device::Profile;
use super::geo::Place;
use super::splice::{EventSplice, Fragment};
use super::{BotPolicy, Edge, SourceEdge};
use crate::compact;
use crate::privacy::IpPolicy;
use crate::privacy::consent::{self, Consent};
use crate::privacy::personal::PersonalData;
use crate::sink::{OutRecord, Text};
use crate::telemetry::Metrics;

/// What one event's enrichment adds to its record besides the payload.
#[derive(Debug, Default)]
pub struct Marks {
    headers: Vec<(&'static str, Text)>,
    topic: Option<Text>,
}

impl Marks {
    /// Adds the headers (`bot`, `consent-warning`) and the bot topic to `record`.
    pub fn apply(self, record: &mut OutRecord) {
        record.headers.extend(self.headers);
        if let Some(topic) = self.topic {
            record.topic = topic;
        }
    }
}

/// Counts gathered while the request's events are admitted, added to the
/// metrics once per label set at the end.
#[derive(Debug, Default)]
struct Counts {
    bots: Vec<(&'static str, u64)>,
    consent: Vec<((String, &'static str), u64)>,
    personal: Vec<(&'static str, u64)>,
    /// Geo lookups found and not found (fixed: no allocation per request).
    geo: [u64; 2],
}

fn bump<K: PartialEq>(counts: &mut Vec<(K, u64)>, key: K) {
    match counts.iter_mut().find(|(k, _)| *k == key) {
        Some((_, n)) => *n += 1,
        None => counts.push((key, 1)),
    }
}

/// A profile's JSON `field` as a fragment: borrowed from the request's own
/// profile, shared with the cache otherwise.
fn shared<'r>(
    profile: &Cow<'r, Arc<Profile>>,
    field: impl Fn(&Profile) -> Option<&Arc<RawValue>>,
) -> Option<Fragment<'r>> {
    match profile {
        Cow::Borrowed(own) => {
            let own: &'r Arc<Profile> = own;
            field(own).map(|json| Fragment::Json(json))
        }
        Cow::Owned(other) => field(other).map(|json| Fragment::Shared(Arc::clone(json))),
    }
}

/// Enrichment and privacy for the events of one request.
pub struct EdgeRequest<'a> {
    edge: &'a Edge,
    catalog: &'a Catalog,
    settings: Arc<SourceEdge>,
    /// The request's one client (address, agent, hints).
    client: &'a Client,
    unix_secs: i64,
    salt: OnceCell<Option<Vec<u8>>>,
    /// The geo of the request's own address, looked up once for all its
    /// events (other addresses go to the shared cache each time).
    own_place: OnceCell<Option<Place>>,
    /// The profile of the request's own user agent, likewise.
    own_profile: OnceCell<Arc<Profile>>,
    /// The request's own address as text, truncated, and hashed: once per
    /// request, not per event.
    own_ip_text: OnceCell<String>,
    own_truncated: OnceCell<String>,
    own_ip_hash: OnceCell<String>,
    personal: PersonalData<'a>,
    counts: RefCell<Counts>,
}

impl<'a> EdgeRequest<'a> {
    /// For a request of `source`, received at `unix_secs`.
    pub fn new(edge: &'a Edge, catalog: &'a Catalog, source: &str, client: &'a Client, unix_secs: i64) -> Self {
        let personal = PersonalData {
            hash_key: edge.privacy.hash_key.as_deref(),
            keys: edge.privacy.keys.as_ref(),
            cache: RefCell::default(),
        };
        Self {
            edge,
            catalog,
            settings: edge.source(source),
            client,
            unix_secs,
            salt: OnceCell::new(),
            own_place: OnceCell::new(),
            own_profile: OnceCell::new(),
            own_ip_text: OnceCell::new(),
            own_truncated: OnceCell::new(),
            own_ip_hash: OnceCell::new(),
            personal,
            counts: RefCell::default(),
        }
    }

    /// Whether the event's user is on the suppression list.
    pub fn suppressed(&self, event: &Map<String, Value>) -> bool {
        let privacy = &self.edge.privacy;
        if !self.settings.privacy.suppression || !privacy.suppresses() {
            return false;
        }
        ["userId", "anonymousId"]
            .iter()
            .any(|f| compact::entry(event, f).and_then(Value::as_str).is_some_and(|id| privacy.is_suppressed(id)))
    }

    /// Whether the source lets an `alias` under a JWT name any `previousId`.
    pub fn alias_any_previous_id(&self) -> bool {
        self.settings.privacy.alias_any_previous_id
    }

    /// The consent check of event `name` under its rollout: `Ok` with an
    /// optional `consent-warning` (rollout `warn`), or the dead-letter
    /// reason and message (rollout `enforce`).
    pub fn consent(&self, name: &str, event: &Value) -> Result<Option<String>, (crate::code::Code, String)> {
        if !self.settings.privacy.consent {
            return Ok(None);
        }
        let Some(event_type) = self.catalog.event(name) else { return Ok(None) };
        let Some(purpose) = event_type.purpose() else { return Ok(None) };
        let verdict = consent::check(compact::field(event, "context"), purpose);
        if verdict == Consent::Granted {
            return Ok(None);
        }
        let rollout = event_type.rollout();
        bump(&mut self.counts.borrow_mut().consent, (purpose.to_owned(), rollout.as_str()));
        let message = match verdict {
            Consent::Missing => format!("`{name}` serves `{purpose}` and the event carries no consent"),
            _ => format!("`{name}` serves `{purpose}`, which the user did not consent to"),
        };
        match rollout {
            Rollout::Enforce => Err((verdict.code(), message)),
            Rollout::Warn => Ok(Some(message)),
            Rollout::Observe => Ok(None),
        }
    }

    /// Geo, device and bot into `context`, then the IP policy and the
    /// catalog's personal-data actions; `consent_warning` becomes a header.
    /// What goes into `context` is recorded in `splice`, not copied into
    /// the event: [`EventSplice::write`] writes the record.
    pub fn finish<'r>(
        &'r self,
        name: &str,
        consent_warning: Option<String>,
        event: &mut Map<String, Value>,
        splice: &mut EventSplice<'r>,
    ) -> Marks {
        let mut marks = Marks::default();
        if let Some(warning) = consent_warning {
            marks.headers.push(("consent-warning", warning.into()));
        }
        match compact::entry_mut(event, "context") {
            Some(Value::Object(context)) => self.client_context(context, splice, &mut marks),
            // An event without one: enrichment's `context` is the splice's.
            None => self.client_context(&mut Map::new(), splice, &mut marks),
            Some(_) => {}
        }
        self.personal_data(name, event, Some(splice));
        marks
    }

    fn client_context<'r>(&'r self, context: &mut Map<String, Value>, splice: &mut EventSplice<'r>, marks: &mut Marks) {
        let enrichment = &self.settings.enrichment;
        let wanted = enrichment.device || enrichment.bots != BotPolicy::Off;
        if wanted && let Some(profile) = splice.context.text(context, "userAgent").map(|ua| self.profile(ua)) {
            if enrichment.device
                && !splice.context.contains(context, "agent")
                && let Some(agent) = shared(&profile, |p| Some(&p.agent_json))
            {
                splice.context.set(context, "agent", agent);
            }
            if let (Some(bot), Some(json), true) =
                (&profile.bot, shared(&profile, |p| p.bot_json.as_ref()), enrichment.bots != BotPolicy::Off)
            {
                splice.context.set(context, "bot", json);
                marks.headers.push(("bot", Text::Static(bot.name)));
                bump(&mut self.counts.borrow_mut().bots, bot.name);
                if enrichment.bots == BotPolicy::Route {
                    marks.topic = enrichment.bot_topic.as_deref().map(Text::copied);
                }
            }
        }
        // The pipeline wrote the (possibly anonymised) request address;
        // geo and the policy below work from the full one.
        let Some(ip) = splice.ip else { return };
        let full = self.full_ip(ip);
        if enrichment.geo
            && self.edge.geo.is_some()
            && !splice.context.contains(context, "geo")
            && let Some(place) = self.place(full)
        {
            splice.context.set(context, "geo", place);
        }
        match self.settings.privacy.ip {
            IpPolicy::Keep => {}
            IpPolicy::Truncate => splice.context.set(context, "ip", self.truncated(full)),
            IpPolicy::Hash => {
                splice.context.remove(context, "ip");
                if let Some(hash) = self.ip_hash(full) {
                    splice.context.set(context, "ipHash", hash);
                }
            }
            IpPolicy::Drop => splice.context.remove(context, "ip"),
        }
    }

    /// The geo of `ip`: the request's own address once per request, any
    /// other (reported by a server SDK) from the shared cache. Counted per
    /// event.
    fn place<'r>(&'r self, ip: IpAddr) -> Option<Fragment<'r>> {
        let geo = self.edge.geo.as_ref()?;
        let place = if self.is_own(ip) {
            self.own_place.get_or_init(|| geo.lookup(ip)).as_deref().map(Fragment::Json)
        } else {
            geo.lookup(ip).map(Fragment::Shared)
        };
        self.counts.borrow_mut().geo[usize::from(place.is_none())] += 1;
        place
    }

    /// The profile of `agent`: the request's own user agent (with its
    /// client hints) once per request, any other from the shared cache.
    fn profile<'r>(&'r self, agent: &str) -> Cow<'r, Arc<Profile>> {
        if self.client.user_agent.as_deref() == Some(agent) {
            let own = || self.edge.profile(agent, self.client.hints.as_ref());
            return Cow::Borrowed(self.own_profile.get_or_init(own));
        }
        Cow::Owned(self.edge.profile(agent, None))
    }

    /// The catalog's personal-data actions. They work on the map: an event
    /// whose actions reach into `context` gets its splice written into it
    /// first (rare; catalogs mark fields of `properties` and `traits`).
    fn personal_data(&self, name: &str, event: &mut Map<String, Value>, splice: Option<&mut EventSplice<'_>>) {
        if !self.settings.privacy.personal_data {
            return;
        }
        let Some(fields) = self.catalog.event(name).map(|e| e.personal()).filter(|f| !f.is_empty()) else { return };
        if let Some(splice) = splice {
            // The actions work on the maps they reach as enrichment left
            // them: the event's own, when a field is one of its entries (an
            // action on a top-level key can remove it, which moves the last
            // entry, and the last may be the splice's) or in `context`
            // (which the splice holds for an event that had none), and
            // `context`.
            if fields.iter().any(|f| f.segments.len() == 1 || f.segments.first().is_some_and(|s| s == "context")) {
                splice.top.materialize(event);
            }
            if let Some(Value::Object(context)) = event.get_mut("context")
                && fields.iter().any(|f| f.segments.first().is_some_and(|s| s == "context"))
            {
                splice.context.materialize(context);
            }
        }
        let done = self.personal.apply(fields, event).unwrap_or_else(|error| {
            // The key store failed: nothing personal may pass in clear.
            tracing::error!(%error, "User key store failed; redacting the event's encrypted fields");
            for field in fields.iter().filter(|f| f.action == PersonalAction::Encrypt) {
                remove_path(event, &field.segments);
            }
            Vec::new()
        });
        let mut counts = self.counts.borrow_mut();
        for action in done {
            bump(&mut counts.personal, action.as_str());
        }
    }

    /// The event as it goes to the dead-letter topic: the client-reported
    /// IP and the personal fields handled as on the domain topic, so the
    /// dead-letter topic holds nothing the domain topic may not.
    pub fn scrub<'v>(&self, event: &'v Value) -> Cow<'v, Value> {
        let name = event_name(event);
        let personal = self.settings.privacy.personal_data
            && name.is_some_and(|n| self.catalog.event(n).is_some_and(|e| !e.personal().is_empty()));
        // A tracker's event its decoder could not read keeps the tracker's
        // shape: Snowplow's client-reported address is a top-level `ip`.
        let ip = self.settings.privacy.ip != IpPolicy::Keep
            && (event.get("context").and_then(|c| c.get("ip")).is_some() || event.get("ip").is_some());
        if !personal && !ip {
            return Cow::Borrowed(event);
        }
        let mut copy = event.clone();
        if let Some(map) = copy.as_object_mut() {
            if ip {
                if let Some(Value::Object(context)) = map.get_mut("context") {
                    self.scrub_ip(context);
                }
                self.scrub_ip(map);
            }
            if let Some(name) = name {
                self.personal_data(name, map, None);
            }
        }
        Cow::Owned(copy)
    }

    /// The source's IP policy applied to `map`'s `ip`; one that is not an
    /// address is removed (it cannot be anonymised).
    fn scrub_ip(&self, map: &mut Map<String, Value>) {
        match map.get("ip").map(|ip| ip.as_str().and_then(|s| s.parse::<IpAddr>().ok())) {
            None => {}
            Some(Some(ip)) => self.apply_ip_policy(map, ip),
            Some(None) => {
                map.remove("ip");
            }
        }
    }

    /// Adds what was counted to `metrics`, once per label set.
    pub fn flush(&self, metrics: &Metrics) {
        let counts = self.counts.borrow();
        for (name, n) in &counts.bots {
            metrics.bots.with_label_values(&[name]).inc_by(*n);
        }
        for ((purpose, rollout), n) in &counts.consent {
            metrics.consent_violations.with_label_values(&[purpose.as_str(), rollout]).inc_by(*n);
        }
        for (action, n) in &counts.personal {
            metrics.personal_fields.with_label_values(&[action]).inc_by(*n);
        }
        for (result, n) in ["found", "not_found"].into_iter().zip(counts.geo) {
            if n > 0 {
                metrics.geo_lookups.with_label_values(&[result]).inc_by(n);
            }
        }
    }
}

mod ip;
#[cfg(test)]
mod reference;

/// The catalog name of an event as received, as the pipeline routes it.
fn event_name(event: &Value) -> Option<&str> {
    match event.get("type").and_then(Value::as_str)? {
        "track" => event.get("event").and_then(Value::as_str),
        "page" => Some("Page Viewed"),
        "screen" => Some("Screen Viewed"),
        _ => None,
    }
}

fn remove_path(event: &mut Map<String, Value>, segments: &[String]) {
    let Some((last, parents)) = segments.split_last() else { return };
    let parent = parents.iter().try_fold(event, |map, s| map.get_mut(s.as_str())?.as_object_mut());
    if let Some(parent) = parent {
        parent.remove(last.as_str());
    }
}
