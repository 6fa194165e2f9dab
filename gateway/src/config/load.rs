//! Reading the file, applying `EVENTGW__` environment overrides, and the
//! checks no type can express; every refusal names the file and the key.

use std::path::{Path, PathBuf};

use super::*;

/// A configuration that cannot be used; names the file and the key.
#[derive(Debug, thiserror::Error)]
#[error("config {file}: {key}: {problem}")]
pub struct ConfigError {
    /// The configuration file.
    pub file: String,
    /// The key at fault, dotted (`kafka.delivery_timeout_ms`), or `-` for the whole file.
    pub key: String,
    /// What is wrong.
    pub problem: String,
}

impl Config {
    /// Reads `path`, applies environment overrides, and checks every value.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with_env(path, std::env::vars())
    }

    /// As [`Config::load`], with the environment given explicitly (for tests).
    pub fn load_with_env(path: &Path, env: impl Iterator<Item = (String, String)>) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let fail = |key: &str, problem: String| ConfigError { file: file.clone(), key: key.into(), problem };
        let text = std::fs::read_to_string(path).map_err(|e| fail("-", format!("cannot read: {e}")))?;
        let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| fail("-", e.to_string()))?;
        for (name, value) in env {
            if let Some(rest) = name.strip_prefix(ENV_PREFIX) {
                let segments: Vec<String> = rest.split("__").map(str::to_lowercase).collect();
                apply_override(&mut table, &segments, &value)
                    .map_err(|problem| fail(&segments.join("."), format!("from environment {name}: {problem}")))?;
            }
        }
        let mut config: Config = serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
            let key = e.path().to_string();
            fail(&key, e.into_inner().to_string())
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        if config.catalog.dir.is_relative() {
            config.catalog.dir = base.join(&config.catalog.dir);
        }
        if config.spool.dir.is_relative() {
            config.spool.dir = base.join(&config.spool.dir);
        }
        if let Some(tls) = &mut config.server.tls {
            for file in [&mut tls.cert_file, &mut tls.key_file] {
                if file.is_relative() {
                    *file = base.join(&*file);
                }
            }
        }
        config.resolve_edge_paths(base);
        config.mappings = mapping::load_dir(&config.catalog.dir.join(mapping::MAPPINGS_DIR))
            .map_err(|r| ConfigError { file: r.file, key: r.key, problem: r.problem })?;
        config.check().map_err(|(key, problem)| fail(key, problem))?;
        config.file = Some(path.to_path_buf());
        Ok(config)
    }

    /// Checks values that types alone cannot.
    fn check(&self) -> Result<(), (&'static str, String)> {
        self.live.check()?;
        let k = &self.kafka;
        if k.delivery_timeout_ms >= self.server.request_timeout_ms {
            return Err((
                "kafka.delivery_timeout_ms",
                format!(
                    "{} must be below server.request_timeout_ms ({}) so clients hear 503 before they time out",
                    k.delivery_timeout_ms, self.server.request_timeout_ms
                ),
            ));
        }
        if k.linger_ms >= k.delivery_timeout_ms {
            return Err(("kafka.linger_ms", "must be below kafka.delivery_timeout_ms".into()));
        }
        if !["lz4", "zstd", "gzip", "snappy", "none"].contains(&k.compression.as_str()) {
            return Err((
                "kafka.compression",
                format!("`{}` is not one of lz4, zstd, gzip, snappy, none", k.compression),
            ));
        }
        if k.brokers.trim().is_empty() {
            return Err(("kafka.brokers", "must name at least one broker".into()));
        }
        if !(1024..=120 * 1024).contains(&self.server.max_header_bytes) {
            return Err((
                "server.max_header_bytes",
                "must be between 1024 and 122880 (actix closes heads past 128 KiB without a readable answer)".into(),
            ));
        }
        let l = &self.limits;
        let limits = [
            ("limits.max_body_bytes", l.max_body_bytes),
            ("limits.max_decompressed_bytes", l.max_decompressed_bytes),
            ("limits.max_event_bytes", l.max_event_bytes),
            ("limits.max_batch_events", l.max_batch_events),
            ("limits.max_json_depth", l.max_json_depth),
            ("limits.max_string_bytes", l.max_string_bytes),
            ("limits.max_unfinished_body_bytes", l.max_unfinished_body_bytes),
            ("server.max_streams_per_connection", self.server.max_streams_per_connection),
        ];
        if let Some((key, _)) = limits.iter().find(|(_, v)| *v == 0) {
            return Err((key, "must be above zero".into()));
        }
        if l.max_unfinished_body_bytes < l.max_body_bytes {
            return Err((
                "limits.max_unfinished_body_bytes",
                format!(
                    "must be at least limits.max_body_bytes ({}), or no body of that size is ever taken",
                    l.max_body_bytes
                ),
            ));
        }
        if !(3..=120).contains(&l.max_json_depth) {
            return Err(("limits.max_json_depth", "must be between 3 (body, batch, event) and 120".into()));
        }
        let quotas = &self.quotas;
        let rates = [
            ("quotas.source", quotas.source),
            ("quotas.subject", quotas.subject),
            ("quotas.ip", quotas.ip),
            ("quotas.global", quotas.global),
            ("quotas.auth_failures", quotas.auth_failures),
        ];
        for (key, rate) in rates {
            if rate.is_some_and(|r| r.quota().is_none()) {
                return Err((key, "per_second must be above 0 and burst at least 1".into()));
            }
        }
        if !(1..=super::quota::MAX_IPV6_PREFIX_LEN).contains(&quotas.ipv6_prefix_len) {
            return Err(("quotas.ipv6_prefix_len", "must be between 1 and 128 (the full address)".into()));
        }
        for proxy in &self.enrichment.trusted_proxies {
            if parse_net(proxy).is_none() {
                return Err(("enrichment.trusted_proxies", format!("`{proxy}` is not an IP address or CIDR range")));
            }
        }
        self.spool.check(self.server.request_timeout_ms)?;
        self.dedupe.check()?;
        if self.sources.is_empty() {
            return Err(("sources", "at least one source is needed".into()));
        }
        self.check_edge()?;
        let mut keys = std::collections::HashSet::new();
        let mut ids = std::collections::HashSet::new();
        let mut app_ids = std::collections::HashSet::new();
        for source in &self.sources {
            if let Some(key) = &source.write_key {
                if key.len() < 8 {
                    let problem = format!("source `{}`: write keys need at least 8 characters", source.id);
                    return Err(("sources.write_key", problem));
                }
                if !keys.insert(key.as_str()) {
                    return Err((
                        "sources.write_key",
                        format!("source `{}` reuses another source's write key", source.id),
                    ));
                }
            }
            for app_id in &source.snowplow_app_ids {
                if app_id.trim().is_empty() {
                    return Err(("sources.snowplow_app_ids", format!("source `{}`: an app id is empty", source.id)));
                }
                if !app_ids.insert(app_id.as_str()) {
                    let problem = format!("source `{}` reuses app id `{app_id}` of another source", source.id);
                    return Err(("sources.snowplow_app_ids", problem));
                }
            }
            if !ids.insert(source.id.as_str()) {
                return Err(("sources.id", format!("source id `{}` appears twice", source.id)));
            }
        }
        Ok(())
    }
}

impl Config {
    /// Geo databases, user keys and the suppression list are relative to
    /// the configuration file, like the catalog.
    fn resolve_edge_paths(&mut self, base: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        if let Some(geo) = &mut self.geo {
            resolve(&mut geo.database);
            geo.asn_database.iter_mut().for_each(resolve);
        }
        self.privacy.user_keys_dir.iter_mut().for_each(resolve);
        self.privacy.suppression_file.iter_mut().for_each(resolve);
    }

    /// Per-source enrichment and privacy settings that need something
    /// configured elsewhere.
    fn check_edge(&self) -> Result<(), (&'static str, String)> {
        for source in &self.sources {
            let routes = source.enrichment.bots == super::enrichment::BotPolicy::Route;
            if routes && source.enrichment.bot_topic.as_deref().is_none_or(str::is_empty) {
                let problem = format!("source `{}`: bots = \"route\" needs a bot_topic", source.id);
                return Err(("sources.enrichment.bot_topic", problem));
            }
            if source.privacy.ip == privacy::IpPolicy::Hash && self.privacy.hash_key.is_none() {
                let problem = format!("source `{}`: ip = \"hash\" needs privacy.hash_key", source.id);
                return Err(("sources.privacy.ip", problem));
            }
        }
        Ok(())
    }
}

/// Sets `segments` in `table` to `raw`, read as a TOML value when it parses
/// as one (numbers, booleans, arrays) and as a string otherwise.
fn apply_override(table: &mut toml::Table, segments: &[String], raw: &str) -> Result<(), String> {
    set_path(table, segments, parse_scalar(raw))
}

fn set_path(table: &mut toml::Table, segments: &[String], value: toml::Value) -> Result<(), String> {
    let (first, rest) = segments.split_first().ok_or("empty key")?;
    if rest.is_empty() {
        table.insert(first.clone(), value);
        return Ok(());
    }
    let node = table.entry(first.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    set_below(node, first, rest, value)
}

/// Sets `rest` below `node`, which a table key or an array index named `name`.
fn set_below(node: &mut toml::Value, name: &str, rest: &[String], value: toml::Value) -> Result<(), String> {
    match node {
        toml::Value::Table(table) => set_path(table, rest, value),
        toml::Value::Array(items) => {
            let (index, rest) = rest.split_first().ok_or("arrays are indexed by number")?;
            let i: usize = index.parse().map_err(|_| "arrays are indexed by number")?;
            let item = items.get_mut(i).ok_or(format!("there is no element {i}"))?;
            if rest.is_empty() {
                *item = value;
                Ok(())
            } else {
                set_below(item, index, rest, value)
            }
        }
        _ => Err(format!("`{name}` is not a table")),
    }
}

fn parse_scalar(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()))
}
