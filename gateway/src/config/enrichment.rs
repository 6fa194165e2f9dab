//! `[geo]` and each source's `[sources.enrichment]`: geo, device and bot
//! settings (the enrichment itself is in `crate::enrichment`).

use std::path::PathBuf;

use serde::Deserialize;

/// `[geo]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeoConfig {
    /// A City (or Country) database; relative to the configuration file.
    pub database: PathBuf,
    /// A separate ASN database, as GeoLite2 ships it; optional.
    #[serde(default)]
    pub asn_database: Option<PathBuf>,
}

/// What the gateway does with bot traffic of a source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BotPolicy {
    /// Not classified (the default: nothing changes for existing sources).
    #[default]
    Off,
    /// `context.bot`, a `bot` record header and `eventgw_bots_total`.
    Label,
    /// As `label`, and produced to the source's `bot_topic` instead.
    Route,
}

/// A source's `[sources.enrichment]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourceEnrichment {
    /// `context.geo` when `[geo]` has a database (on by default).
    pub geo: bool,
    /// `context.agent`: browser, OS, device class (off by default).
    pub device: bool,
    /// Bot labelling and routing.
    pub bots: BotPolicy,
    /// Where bot events go under `bots = "route"`.
    pub bot_topic: Option<String>,
}

impl Default for SourceEnrichment {
    fn default() -> Self {
        Self { geo: true, device: false, bots: BotPolicy::Off, bot_topic: None }
    }
}
