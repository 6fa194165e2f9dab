//! Typed configuration: one TOML file, every value overridable from the
//! environment (`EVENTGW__KAFKA__BROKERS=host:9092`). A bad value stops the
//! gateway at start-up with the file, the key and the problem.
//!
//! Every section's struct and its defaults live here, one file per section
//! that has more than a handful of keys; this module uses nothing else of
//! the crate (the modules configured import from here, never the reverse),
//! except the enrichment sections still defined in `crate::enrichment`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;

pub mod dedupe;
pub mod enrichment;
pub mod jwt;
pub mod live;
mod load;
pub mod mapping;
pub mod privacy;
pub mod quota;
pub mod spool;

pub use load::ConfigError;

/// An address or CIDR range (`10.0.0.0/8`, `::1`), as `trusted_proxies` lists them.
pub fn parse_net(text: &str) -> Option<ipnet::IpNet> {
    text.parse::<ipnet::IpNet>().ok().or_else(|| text.parse::<std::net::IpAddr>().ok().map(ipnet::IpNet::from))
}

/// Prefix of environment overrides; `__` separates the key's segments.
pub const ENV_PREFIX: &str = "EVENTGW__";

/// The whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// HTTP listener and request handling.
    pub server: ServerConfig,
    /// Size and count limits on what clients send.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Where the schema catalog lives.
    pub catalog: CatalogConfig,
    /// What the gateway adds to events: client IP, user agent.
    #[serde(default)]
    pub enrichment: EnrichmentConfig,
    /// The producer and the topics that are not domain topics.
    pub kafka: KafkaConfig,
    /// Who may send, with which write key, to which domains.
    pub sources: Vec<SourceConfig>,
    /// Trusted JWT issuers.
    #[serde(default)]
    pub jwt: JwtConfig,
    /// Rate limits; each missing one is unlimited.
    #[serde(default)]
    pub quotas: quota::QuotaConfig,
    /// The local disk spool that takes events while Kafka cannot; off unless enabled.
    #[serde(default)]
    pub spool: spool::SpoolConfig,
    /// Dropping clients' retries of events already stored; off unless enabled.
    #[serde(default)]
    pub dedupe: dedupe::DedupeConfig,
    /// The Schema Registry, needed when a domain's `wire_format` is `confluent`.
    #[serde(default)]
    pub registry: Option<RegistryConfig>,
    /// The MaxMind-format geo databases; no geo without it.
    #[serde(default)]
    pub geo: Option<enrichment::GeoConfig>,
    /// Hash key, user keys and suppression list shared by all sources.
    #[serde(default)]
    pub privacy: privacy::PrivacyConfig,
    /// The live events view behind an operator token; off unless enabled.
    #[serde(default)]
    pub live: live::LiveConfig,
    /// How other trackers' events become catalog events, read from
    /// `<catalog.dir>/mappings/*.toml`; not a key.
    #[serde(skip)]
    pub mappings: mapping::TrackerMappings,
    /// The file this was read from, re-read on reload; not a key.
    #[serde(skip)]
    pub file: Option<PathBuf>,
}

/// The Schema Registry holding the catalog's schemas (`eventgw-catalog
/// registry apply`), whose ids framed records carry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// Its Confluent-compatible API, e.g. `http://127.0.0.1:18481/apis/ccompat/v7`.
    pub url: String,
    /// Where the ids are cached, so a start-up with the registry down still
    /// frames records; relative to the working directory.
    #[serde(default = "default_registry_cache")]
    pub cache_file: PathBuf,
    /// Longest wait for one registry answer.
    #[serde(default = "default_registry_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_registry_cache() -> PathBuf {
    PathBuf::from(".cache/registry-ids.json")
}

fn default_registry_timeout_ms() -> u64 {
    3000
}

/// Trusted JWT issuers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// Each issuer, chosen by a token's `iss`.
    #[serde(default)]
    pub issuers: Vec<jwt::IssuerConfig>,
}

/// HTTP listener and request handling.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// actix worker threads; 0 means one per core.
    #[serde(default)]
    pub workers: usize,
    /// The longest a client waits for an answer. Must exceed the Kafka
    /// delivery timeout, so a client hears 503 before it gives up.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// What `Retry-After` tells clients when Kafka is unavailable.
    #[serde(default = "default_retry_after_secs")]
    pub retry_after_secs: u64,
    /// How long a graceful shutdown waits for in-flight requests.
    #[serde(default = "default_shutdown_secs")]
    pub shutdown_timeout_secs: u64,
    /// On SIGTERM, how long `/readyz` answers `503 draining` while every
    /// other request is still served, before the listener closes: long
    /// enough for load balancers' health checks to see it and stop
    /// sending new connections here. 0 stops at once.
    #[serde(default)]
    pub drain_grace_secs: u64,
    /// A client must finish sending the request head within this (slow-loris).
    #[serde(default = "default_header_timeout_ms")]
    pub header_timeout_ms: u64,
    /// A client must finish sending the body within this.
    #[serde(default = "default_body_timeout_ms")]
    pub body_timeout_ms: u64,
    /// Open connections per worker; past it new connections wait in the backlog.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Idle keep-alive connections are closed after this.
    #[serde(default = "default_keep_alive_secs")]
    pub keep_alive_secs: u64,
    /// Largest request head (names and values of every header) accepted:
    /// past it, `431 headers_too_large` with a JSON body. Must stay below
    /// actix's own 128 KiB head buffer, past which it can only answer an
    /// empty 431 and close.
    #[serde(default = "default_max_header_bytes")]
    pub max_header_bytes: usize,
    /// Requests one HTTP/2 connection may have in flight: past it, a new
    /// stream is answered `503 too_many_streams` before its body is read,
    /// so one connection cannot open thousands of stalled bodies.
    #[serde(default = "default_max_streams_per_connection")]
    pub max_streams_per_connection: usize,
    /// How SDKs reach this gateway from outside (`events.example.com`,
    /// `https://events.example.com`, `host:port`): the API host the
    /// Segment settings document and RudderStack's `sourceConfig` point
    /// SDKs back to. Unset, the request's own `Host` (and scheme) is used.
    #[serde(default)]
    pub public_host: Option<String>,
    /// Other paths a tracker is configured to send to, each served as one
    /// of the gateway's own (`"/com.acme/track" =
    /// "/com.snowplowanalytics.snowplow/tp2"`, a Snowplow tracker's custom
    /// `postPath`): the request is handled, counted and answered exactly as
    /// on the target path. Checked at start-up (`api::routes::check_aliases`).
    #[serde(default)]
    pub path_aliases: std::collections::BTreeMap<String, String>,
    /// When set, the listener speaks HTTPS only, with this certificate.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
}

/// `[server.tls]`: the listener's certificate chain and private key, PEM
/// files read at start-up and again on SIGHUP. Relative paths are relative
/// to the config file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The certificate chain, leaf first (`-----BEGIN CERTIFICATE-----` blocks).
    pub cert_file: PathBuf,
    /// The leaf's private key (PKCS#8, PKCS#1 RSA or SEC1 EC).
    pub key_file: PathBuf,
}

/// What the gateway adds to events.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnrichmentConfig {
    /// Proxies (addresses or CIDR ranges) whose `X-Forwarded-For` is believed;
    /// from anyone else the header is ignored, so clients cannot forge an IP.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// Zero the last octet of IPv4 (last 80 bits of IPv6) before storing.
    #[serde(default)]
    pub anonymize_ip: bool,
}

/// Size and count limits on what clients send; each missing key takes its default.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest request body accepted, in bytes, as sent (before gunzip): 413 `body_too_large`.
    pub max_body_bytes: usize,
    /// Largest body after gunzip: 413 `decompressed_too_large`.
    pub max_decompressed_bytes: usize,
    /// Largest single event as compact JSON: that event is rejected, `event_too_large`.
    pub max_event_bytes: usize,
    /// Most events accepted in one batch: 413 `batch_too_large`.
    pub max_batch_events: usize,
    /// Deepest nesting of objects and arrays: 400 `json_too_deep`.
    pub max_json_depth: usize,
    /// Longest string, key or value: 400 `string_too_long`.
    pub max_string_bytes: usize,
    /// Bytes the buffers of all bodies still being received may hold
    /// together (a buffer grows as bytes arrive, to at most twice what
    /// arrived): past it, 503 `body_buffer_full`. At least `max_body_bytes`.
    pub max_unfinished_body_bytes: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 512 * 1024,
            max_decompressed_bytes: 2 * 1024 * 1024,
            max_event_bytes: 32 * 1024,
            max_batch_events: 500,
            max_json_depth: 32,
            max_string_bytes: 16 * 1024,
            max_unfinished_body_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Where the schema catalog lives.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// The catalog directory; relative paths are relative to the config file.
    pub dir: PathBuf,
}

/// The producer and the topics that are not domain topics.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaConfig {
    /// Bootstrap brokers, comma separated.
    pub brokers: String,
    /// Where events that break their contract go, with the reason. The
    /// three topics are `Arc<str>` because each of their records names
    /// its topic: a count on this text, not a copy.
    pub dead_letter_topic: Arc<str>,
    /// Where `identify`, `group` and `alias` calls go.
    pub identity_topic: Arc<str>,
    /// Where events unknown to the catalog go, for sources whose policy is `pass`.
    pub unclassified_topic: Arc<str>,
    /// `lz4`, `zstd`, `gzip`, `snappy` or `none`.
    #[serde(default = "default_compression")]
    pub compression: String,
    /// How long the producer waits to fill a batch. 20 ms by measurement
    /// (`loadtest/profiles/README.md`): librdkafka sends one request per
    /// partition, and the domain topics spread a gateway's events over many,
    /// so a longer linger is fewer, fuller requests: 14–21% less CPU than
    /// 5 ms for about 15 ms more acknowledgement latency.
    #[serde(default = "default_linger_ms")]
    pub linger_ms: u64,
    /// Largest producer batch in bytes.
    #[serde(default = "default_batch_size")]
    pub batch_size: u64,
    /// How long a record may take to be acknowledged before its request gets 503.
    #[serde(default = "default_delivery_timeout_ms")]
    pub delivery_timeout_ms: u64,
    /// Bound on records waiting in the producer; past it requests get 503.
    #[serde(default = "default_queue_max_messages")]
    pub queue_max_messages: u64,
    /// Bound on bytes waiting in the producer, in KiB; past it requests get 503.
    #[serde(default = "default_queue_max_kbytes")]
    pub queue_max_kbytes: u64,
    /// Records waiting in the producer above which new requests get 503
    /// at once, before anything is produced; defaults to 80% of
    /// `queue_max_messages`, so Kafka slowness is answered early.
    #[serde(default)]
    pub backpressure_queue_depth: Option<u64>,
    /// Partitions of the dead-letter, identity and unclassified topics when created.
    #[serde(default = "default_partitions")]
    pub system_topic_partitions: i32,
    /// Replication factor of every topic the gateway creates.
    #[serde(default = "default_replication")]
    pub replication_factor: i32,
    /// Any other librdkafka producer property, passed through unchanged
    /// (numbers and booleans are written as librdkafka expects them).
    #[serde(default, deserialize_with = "scalar_strings")]
    pub extra: BTreeMap<String, String>,
}

impl KafkaConfig {
    /// The queue depth above which requests are refused with 503 up front.
    pub fn backpressure_threshold(&self) -> u64 {
        self.backpressure_queue_depth.unwrap_or(self.queue_max_messages / 10 * 8)
    }
}

/// What to do with an event the catalog does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownEvents {
    /// Refuse it in the answer; produce nothing.
    Reject,
    /// Send it to the dead-letter topic with reason `unknown_event`.
    DeadLetter,
    /// Produce it unchecked to the unclassified topic.
    Pass,
}

/// One sending source (a website, an app, a backend).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Stable name, carried on every record.
    pub id: String,
    /// The public key clients send (HTTP Basic user name or `writeKey`).
    #[serde(default)]
    pub write_key: Option<String>,
    /// Instead of `write_key`: its SHA-256 in hex, for server secrets that
    /// should not sit in the file in clear. A source with neither is JWT-only.
    #[serde(default)]
    pub write_key_sha256: Option<String>,
    /// Domains whose events this source may send.
    pub domains: Vec<String>,
    /// Policy for events the catalog does not know.
    #[serde(default = "default_unknown_events")]
    pub unknown_events: UnknownEvents,
    /// Web origins whose pages may read this source's answers (CORS), e.g.
    /// `https://shop.example`; `*` allows any origin (never with credentials).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Refuse a whole batch with 422 when any event would not be accepted.
    #[serde(default)]
    pub strict: bool,
    /// Snowplow app ids (`aid`, the tracker's `appId`) whose events are this
    /// source's: Snowplow's protocol carries no key, so its app id names
    /// the source. Like a browser write key it is public, in every page.
    #[serde(default)]
    pub snowplow_app_ids: Vec<String>,
    /// Whether this source's key may travel in a URL (the pixel's and the
    /// beacon's `writeKey` query parameter, the Segment settings path),
    /// where it ends up in access logs, proxies and referrers. Defaults to
    /// `true` for browser sources and `false` for strict (server) sources.
    #[serde(default)]
    pub key_in_url: Option<bool>,
    /// Geo, device and bot enrichment of this source's events.
    #[serde(default)]
    pub enrichment: enrichment::SourceEnrichment,
    /// IP policy, personal data, suppression and consent for this source.
    #[serde(default)]
    pub privacy: privacy::SourcePrivacy,
    /// With `[spool]` enabled, whether this source's events may go to the
    /// spool (the default). `false`: they wait for Kafka and get 503 when it
    /// cannot take them, exactly as with the spool off (for a source whose
    /// clients retry and would rather hear 503 than wait for a replay).
    #[serde(default = "default_spool")]
    pub spool: bool,
}

fn default_spool() -> bool {
    true
}

impl SourceConfig {
    /// Whether the key may appear in a URL (see `key_in_url`).
    pub fn key_in_url(&self) -> bool {
        self.key_in_url.unwrap_or(!self.strict)
    }
}

/// librdkafka takes every property as a string; TOML and the environment
/// naturally give numbers and booleans.
fn scalar_strings<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Scalar {
        Text(String),
        Int(i64),
        Float(f64),
        Bool(bool),
    }
    let raw = BTreeMap::<String, Scalar>::deserialize(d)?;
    Ok(raw
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                Scalar::Text(s) => s,
                Scalar::Int(i) => i.to_string(),
                Scalar::Float(f) => f.to_string(),
                Scalar::Bool(b) => b.to_string(),
            };
            (k, text)
        })
        .collect())
}

fn default_request_timeout_ms() -> u64 {
    10_000
}
fn default_retry_after_secs() -> u64 {
    5
}
fn default_shutdown_secs() -> u64 {
    15
}
fn default_header_timeout_ms() -> u64 {
    5_000
}
fn default_body_timeout_ms() -> u64 {
    10_000
}
fn default_max_connections() -> usize {
    25_000
}
fn default_max_header_bytes() -> usize {
    64 * 1024
}
fn default_max_streams_per_connection() -> usize {
    100
}
fn default_keep_alive_secs() -> u64 {
    75
}
fn default_compression() -> String {
    "lz4".into()
}
fn default_linger_ms() -> u64 {
    20
}
fn default_batch_size() -> u64 {
    1_000_000
}
fn default_delivery_timeout_ms() -> u64 {
    5_000
}
fn default_queue_max_messages() -> u64 {
    100_000
}
fn default_queue_max_kbytes() -> u64 {
    256 * 1024
}
fn default_partitions() -> i32 {
    3
}
fn default_replication() -> i32 {
    1
}
fn default_unknown_events() -> UnknownEvents {
    UnknownEvents::DeadLetter
}
