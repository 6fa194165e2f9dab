//! What every request needs ([`AppState`]), built once at start-up and
//! swapped in part on reload. It sits below every stage: `stages`, `api`,
//! `server` and `run` use it; it uses none of them.

use crate::{auth, config, dedupe, enrichment, live, pipeline, registry, sink, telemetry, wire};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use eventgw_schemas::Catalog;

/// The time source; tests pin it to check clock-skew correction.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// What every request needs, built once at start-up.
pub struct AppState {
    /// The checked configuration.
    pub config: config::Config,
    /// The compiled event catalog.
    pub catalog: Catalog,
    /// Sources, write keys, JWT issuers and quotas: swapped whole on reload.
    pub auth: arc_swap::ArcSwap<auth::AuthState>,
    /// Where records go (Kafka, or memory in unit tests).
    pub sink: Arc<dyn sink::Sink>,
    /// Now.
    pub clock: Clock,
    /// Resolves each request's one client (address after trusted
    /// proxies, user agent, client hints); the only resolver.
    pub clients: enrichment::client::ClientResolver,
    /// Counters and histograms for `/metrics`.
    pub metrics: telemetry::Metrics,
    /// Schema Registry ids of framed domains' schemas; empty until
    /// [`AppState::load_schema_ids`], refreshed on reload.
    pub schema_ids: arc_swap::ArcSwap<registry::SchemaIds>,
    /// Geo, device and bot enrichment; IP policy, personal data,
    /// suppression and consent.
    pub edge: Arc<enrichment::Edge>,
    /// Set once shutdown began: `/readyz` answers `503 draining` so load
    /// balancers move traffic away while requests are still served.
    pub draining: std::sync::atomic::AtomicBool,
    /// What the buffers of bodies still arriving hold together, within
    /// `limits.max_unfinished_body_bytes`.
    pub bodies: wire::BodyBudget,
    /// The live events view's channels (`[live]`); never fed while
    /// nobody watches.
    pub live: Arc<live::LiveHub>,
}

/// Why the gateway cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The schema catalog is broken.
    #[error("schema catalog: {0}")]
    Catalog(#[from] eventgw_schemas::CatalogError),
    /// A source allows a domain the catalog does not have.
    #[error("config: sources.domains: source `{source_id}` names unknown domain `{domain}`")]
    UnknownDomain {
        /// The source.
        source_id: String,
        /// The domain it names.
        domain: String,
    },
    /// Sources, keys or JWT issuers cannot be used.
    #[error("config: {0}")]
    Auth(String),
    /// A geo database, the suppression list or a privacy secret cannot be used.
    #[error("config: {0}")]
    Edge(#[from] enrichment::EdgeError),
    /// The producer could not be created (bad librdkafka property).
    #[error("Kafka producer: {0}")]
    Producer(#[from] rdkafka::error::KafkaError),
    /// The dedupe store cannot be set up (bad Redis URL).
    #[error("dedupe: {0}")]
    Dedupe(#[from] dedupe::StoreError),
    /// The spool directory cannot be used (locked, unreadable).
    #[error("spool: {0}")]
    Spool(#[from] sink::spool::SpoolError),
}

impl AppState {
    /// Loads the catalog and checks the sources against it, with `sink` as
    /// the destination of records (behind dedupe when `[dedupe]` is enabled).
    pub fn new(config: config::Config, sink: Arc<dyn sink::Sink>) -> Result<Self, StartupError> {
        let sink = dedupe::wrap(&config, sink)?;
        let metrics = telemetry::Metrics::new();
        sink.register_metrics(metrics.registry());
        let bodies = wire::BodyBudget::new(config.limits.max_unfinished_body_bytes);
        bodies.register(metrics.registry());
        let live = Arc::new(live::LiveHub::new(config.live.buffer_events, config.live.recent_mib << 20));
        live.register(metrics.registry());
        let catalog = eventgw_schemas::loader::load_catalog(&config.catalog.dir)?;
        let auth = build_auth(&config, &catalog)?;
        let clients = enrichment::client::ClientResolver::new(&config.enrichment);
        let edge = Arc::new(enrichment::Edge::new(&config)?);
        enrichment::Edge::watch(&edge, enrichment::WATCH_INTERVAL);
        Ok(Self {
            config,
            catalog,
            auth: arc_swap::ArcSwap::from_pointee(auth),
            sink,
            clock: Arc::new(Utc::now),
            clients,
            metrics,
            schema_ids: arc_swap::ArcSwap::from_pointee(registry::SchemaIds::default()),
            edge,
            draining: std::sync::atomic::AtomicBool::new(false),
            bodies,
            live,
        })
    }

    /// Loads the Schema Registry ids of the catalog's framed schemas (from
    /// the registry, or its cache file) and swaps them in.
    pub async fn load_schema_ids(&self) -> Result<(), registry::RegistryError> {
        registry::start(self.config.registry.as_ref(), &self.catalog, &self.schema_ids).await
    }

    /// Fetches the schema ids again (on reload); on any failure the running ones stay.
    pub async fn refresh_schema_ids(&self) {
        registry::refresh(self.config.registry.as_ref(), &self.catalog, &self.schema_ids).await;
    }

    /// Whether shutdown began (see `server::drain`).
    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Swaps in the sources, write keys, JWT issuers and quotas of `config`
    /// (and each source's enrichment and privacy settings, re-reading the
    /// geo databases and the suppression list);
    /// on any error the running ones stay. Other settings need a restart.
    pub fn reload(&self, config: &config::Config) -> Result<(), StartupError> {
        let auth = build_auth(config, &self.catalog)?;
        self.edge.reload(config)?;
        self.auth.store(Arc::new(auth));
        Ok(())
    }

    /// As [`AppState::new`], producing to the Kafka brokers of `config`.
    pub fn with_kafka(config: config::Config) -> Result<Self, StartupError> {
        let sink = sink::KafkaSink::new(&config.kafka)?;
        Self::new(config, Arc::new(sink))
    }

    /// The state `gateway serve` runs with: as [`AppState::with_kafka`],
    /// with the spool in front of Kafka when `[spool]` is enabled (its
    /// directory locked, and what a previous process left replayed first),
    /// and with dedupe's long producer message timeout when `[dedupe]` is.
    pub fn serving(config: config::Config) -> Result<Self, StartupError> {
        if !config.spool.enabled {
            if config.dedupe.enabled {
                let kafka = sink::KafkaSink::with_message_timeout(&config.kafka, config.dedupe.delivery_timeout_ms)?;
                return Self::new(config, Arc::new(kafka));
            }
            return Self::with_kafka(config);
        }
        let kafka = sink::KafkaSink::with_message_timeout(&config.kafka, config.spool.delivery_timeout_ms)?;
        let sink = sink::SpoolSink::open(&config.spool, kafka)?.direct_to(config.kafka.clone());
        Self::new(config, Arc::new(sink))
    }
}

fn build_auth(config: &config::Config, catalog: &Catalog) -> Result<auth::AuthState, StartupError> {
    for source in &config.sources {
        for domain in &source.domains {
            if domain != pipeline::IDENTITY_DOMAIN && !catalog.topics().contains_key(domain) {
                return Err(StartupError::UnknownDomain { source_id: source.id.clone(), domain: domain.clone() });
            }
        }
    }
    auth::AuthState::new(config).map_err(StartupError::Auth)
}
