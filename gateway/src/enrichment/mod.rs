//! What the gateway adds to an event, from what only it can vouch for:
//! who the client is ([`client`]: its address after trusted proxies, user
//! agent and client hints, resolved once per request), geo from the full
//! address ([`geo`]), browser, OS and device class from the user agent and
//! client hints ([`device`]), and a bot label ([`bots`]). [`Edge`] holds
//! what every request shares; [`request::EdgeRequest`] what one request
//! computes once for all its events, where the sources' privacy actions
//! (defined in [`crate::privacy`]) are applied beside enrichment.

pub mod bots;
pub mod cache;
pub mod client;
pub mod device;
pub mod geo;
pub mod hints;
pub mod request;
pub mod splice;

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::config::Config;
use crate::privacy::suppression_topic::SuppressionTopic;
use crate::privacy::{Privacy, PrivacyError, SourcePrivacy};

/// How often replaced geo databases and suppression lists are noticed.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);

pub use crate::config::enrichment::{BotPolicy, SourceEnrichment};

/// A source's settings of both kinds.
#[derive(Debug, Clone, Default)]
pub struct SourceEdge {
    /// Geo, device, bots.
    pub enrichment: SourceEnrichment,
    /// IP, personal data, suppression, consent.
    pub privacy: SourcePrivacy,
}

/// Why enrichment or privacy cannot start (or reload).
#[derive(Debug, thiserror::Error)]
pub enum EdgeError {
    /// A geo database cannot be opened.
    #[error(transparent)]
    Geo(#[from] geo::GeoError),
    /// A privacy file or secret cannot be used.
    #[error(transparent)]
    Privacy(#[from] PrivacyError),
}

/// Everything enrichment and privacy share across requests.
pub struct Edge {
    /// The geo databases, when `[geo]` is configured.
    pub geo: Option<geo::GeoDb>,
    /// Secrets, user keys and the suppression list.
    pub privacy: Privacy,
    /// Each source's settings by id, swapped on reload.
    sources: ArcSwap<HashMap<String, Arc<SourceEdge>>>,
    /// The user-agent parser (compiled once).
    pub parser: woothee::parser::Parser,
    /// Profiles by user agent (and client hints), shared across requests:
    /// most traffic comes from a few thousand distinct agents, and a parse
    /// costs microseconds.
    profiles: cache::BoundedCache<String, Arc<device::Profile>>,
}

/// Profiles [`Edge`] keeps across requests, per cache generation.
pub const MAX_CACHED_PROFILES: usize = 8192;

impl std::fmt::Debug for Edge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edge").field("geo", &self.geo).field("privacy", &self.privacy).finish_non_exhaustive()
    }
}

fn source_settings(config: &Config) -> HashMap<String, Arc<SourceEdge>> {
    config
        .sources
        .iter()
        .map(|s| {
            let edge = SourceEdge { enrichment: s.enrichment.clone(), privacy: s.privacy.clone() };
            (s.id.clone(), Arc::new(edge))
        })
        .collect()
}

impl Edge {
    /// Opens the databases and lists of `config`.
    pub fn new(config: &Config) -> Result<Self, EdgeError> {
        let mut privacy = Privacy::new(&config.privacy)?;
        if let Some(topic) = &config.privacy.suppression_topic {
            let list = SuppressionTopic::follow(&config.kafka, topic).map_err(PrivacyError::from)?;
            privacy.suppression_topic = Some(list);
        }
        Ok(Self {
            geo: config.geo.as_ref().map(geo::GeoDb::open).transpose()?,
            privacy,
            sources: ArcSwap::from_pointee(source_settings(config)),
            parser: woothee::parser::Parser::new(),
            profiles: cache::BoundedCache::new(MAX_CACHED_PROFILES),
        })
    }

    /// SIGHUP: new per-source settings, and the geo databases and the
    /// suppression list re-read; on error nothing changes.
    /// Changed `[geo]` settings are not applied (the databases are opened
    /// at start-up), but a restart with them must start: their files are
    /// opened now, and the reload is refused when one cannot be read.
    pub fn reload(&self, config: &Config) -> Result<(), EdgeError> {
        let running = self.geo.as_ref().map(geo::GeoDb::config);
        if config.geo.as_ref() != running {
            if let Some(new) = &config.geo {
                geo::GeoDb::open(new)?;
            }
            let path = |g: Option<&crate::config::enrichment::GeoConfig>| {
                g.map_or_else(|| "none".to_owned(), |g| g.database.display().to_string())
            };
            tracing::warn!(
                running = %path(running),
                configured = %path(config.geo.as_ref()),
                "Geo database settings changed; they apply on restart, the running ones stay"
            );
        }
        if let Some(geo) = &self.geo {
            geo.reload()?;
        }
        if let Some(list) = &self.privacy.suppressed {
            list.reload().map_err(PrivacyError::from)?;
        }
        self.sources.store(Arc::new(source_settings(config)));
        Ok(())
    }

    /// A source's settings (defaults for a source the map does not know).
    pub fn source(&self, id: &str) -> Arc<SourceEdge> {
        self.sources.load().get(id).cloned().unwrap_or_default()
    }

    /// `Ok` when every list is complete: the suppression topic was read to
    /// its end as of start-up (`/readyz` says why not).
    pub fn ready(&self) -> Result<(), String> {
        self.privacy.suppression_topic.as_ref().map_or(Ok(()), |t| t.ready())
    }

    /// `Ok` when events of `source` may be admitted: not before the
    /// suppression topic is read, if the source applies suppression.
    pub fn admits(&self, source: &str) -> Result<(), String> {
        if self.source(source).privacy.suppression { self.ready() } else { Ok(()) }
    }

    /// The profile of `agent` with the request's `hints`, parsed once per
    /// distinct pair while it stays in the cache.
    pub fn profile(&self, agent: &str, hints: Option<&hints::ClientHints>) -> Arc<device::Profile> {
        // Without hints the agent is the key: looked up without a copy.
        let hinted = hints.map(|hints| format!("{agent}\n{}", hints.cache_key()));
        let key = hinted.as_deref().unwrap_or(agent);
        if let Some(found) = self.profiles.get(key) {
            return found;
        }
        let profile = Arc::new(device::profile(&self.parser, agent, hints));
        self.profiles.insert(hinted.unwrap_or_else(|| agent.to_owned()), Arc::clone(&profile));
        profile
    }

    /// Re-reads replaced files every `interval`, on a thread of its own
    /// that ends when the gateway state is dropped.
    pub fn watch(edge: &Arc<Self>, interval: Duration) {
        if edge.geo.is_none() && edge.privacy.suppressed.is_none() && edge.privacy.keys.is_none() {
            return;
        }
        let weak: Weak<Self> = Arc::downgrade(edge);
        let spawned = std::thread::Builder::new().name("eventgw-edge-watch".into()).spawn(move || {
            loop {
                std::thread::sleep(interval);
                let Some(edge) = weak.upgrade() else { return };
                edge.reload_changed();
            }
        });
        if let Err(error) = spawned {
            tracing::error!(%error, "Cannot watch the geo database and suppression list; reload with SIGHUP");
        }
    }

    /// Re-reads whichever watched file changed.
    pub fn reload_changed(&self) {
        match self.geo.as_ref().and_then(geo::GeoDb::reload_if_changed) {
            Some(Ok(())) => tracing::info!("Geo database reloaded after it changed"),
            Some(Err(error)) => {
                tracing::error!(%error, "Geo database changed but cannot be read; keeping the running one")
            }
            None => {}
        }
        match self.privacy.suppressed.as_ref().and_then(|l| l.reload_if_changed()) {
            Some(Ok(count)) => tracing::info!(count, "Suppression list reloaded after it changed"),
            Some(Err(error)) => {
                tracing::error!(%error, "Suppression list changed but cannot be read; keeping the running one")
            }
            None => {}
        }
        // A rotation (a new master generation) or a retirement, by an
        // operator on any instance, reaches this one.
        if let Some(Err(error)) = self.privacy.keys.as_ref().map(crate::privacy::keys::UserKeys::reload) {
            tracing::error!(%error, "User key masters cannot be re-read; keeping the running ones");
        }
    }
}
