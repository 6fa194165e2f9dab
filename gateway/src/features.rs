//! What a configuration turns on, said once at start-up in one structured
//! `Gateway started` line, so an operator reading the log (or a support
//! request quoting it) sees which paths a gateway runs without reading its
//! configuration file: spool, dedupe store, geo and enrichment, privacy
//! actions, JWT, TLS and HTTP versions, quotas.

use crate::config::Config;
use crate::config::dedupe::StoreKind;
use crate::config::enrichment::BotPolicy;
use crate::privacy::IpPolicy;

/// Each feature as a short text (`off` when off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// `off`, or the spool directory.
    pub spool: String,
    /// `off`, `memory`, `memory, id log <dir>` or `redis`.
    pub dedupe: String,
    /// `off`, `city` or `city+asn` (the `[geo]` databases).
    pub geo: String,
    /// Sources per enrichment: `geo=2 device=1 bots=1`.
    pub enrichment: String,
    /// Privacy actions with the sources taking them, e.g.
    /// `ip:truncate=web personal_data=web suppression=file`; `none` when none.
    pub privacy: String,
    /// `off`, or how many JWT issuers are trusted.
    pub jwt: String,
    /// `http/1.1+h2c` in the clear, `https h2+http/1.1` with TLS (ALPN).
    pub http: String,
    /// The quotas configured (`source ip auth_failures`) and the IPv6 key
    /// prefix; `none` when none.
    pub quotas: String,
    /// How many proxies' `X-Forwarded-For` is believed, and whether
    /// addresses are anonymised at resolution.
    pub client_ip: String,
}

impl Features {
    /// The features `config` turns on.
    pub fn of(config: &Config) -> Self {
        let dedupe = match (config.dedupe.enabled, config.dedupe.store, &config.dedupe.path) {
            (false, ..) => "off".to_owned(),
            (true, StoreKind::Redis, _) => "redis".to_owned(),
            (true, StoreKind::Memory, Some(dir)) => format!("memory, id log {}", dir.display()),
            (true, StoreKind::Memory, None) => "memory".to_owned(),
        };
        let geo = match &config.geo {
            None => "off",
            Some(g) if g.asn_database.is_some() => "city+asn",
            Some(_) => "city",
        };
        let count = |f: &dyn Fn(&crate::config::SourceConfig) -> bool| config.sources.iter().filter(|s| f(s)).count();
        let enrichment = format!(
            "geo={} device={} bots={}",
            if config.geo.is_some() { count(&|s| s.enrichment.geo) } else { 0 },
            count(&|s| s.enrichment.device),
            count(&|s| s.enrichment.bots != BotPolicy::default()),
        );
        let quotas = &config.quotas;
        let scopes: Vec<&str> = [
            ("source", quotas.source.is_some()),
            ("subject", quotas.subject.is_some()),
            ("ip", quotas.ip.is_some()),
            ("global", quotas.global.is_some()),
            ("auth_failures", quotas.auth_failures.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, on)| on.then_some(name))
        .collect();
        let quotas = if scopes.is_empty() {
            "none".to_owned()
        } else {
            format!("{} (ipv6 /{})", scopes.join(" "), quotas.ipv6_prefix_len)
        };
        Self {
            spool: if config.spool.enabled { config.spool.dir.display().to_string() } else { "off".into() },
            dedupe,
            geo: geo.to_owned(),
            enrichment,
            privacy: privacy(config),
            jwt: match config.jwt.issuers.len() {
                0 => "off".to_owned(),
                n => format!("{n} issuer(s)"),
            },
            http: if config.server.tls.is_some() { "https h2+http/1.1" } else { "http/1.1+h2c" }.to_owned(),
            quotas,
            client_ip: format!(
                "{} trusted proxies, anonymised: {}",
                config.enrichment.trusted_proxies.len(),
                config.enrichment.anonymize_ip
            ),
        }
    }

    /// Logs the `Gateway started` line.
    pub fn log(&self, listen: std::net::SocketAddr, events: usize) {
        tracing::info!(
            %listen,
            events,
            spool = %self.spool,
            dedupe = %self.dedupe,
            geo = %self.geo,
            enrichment = %self.enrichment,
            privacy = %self.privacy,
            jwt = %self.jwt,
            http = %self.http,
            quotas = %self.quotas,
            client_ip = %self.client_ip,
            "Gateway started"
        );
    }
}

/// `ip:<policy>=<sources>` for each policy other than keep, then the
/// sources with personal-data handling, consent, suppression; `none`.
fn privacy(config: &Config) -> String {
    let ids = |f: &dyn Fn(&crate::config::SourceConfig) -> bool| {
        config.sources.iter().filter(|s| f(s)).map(|s| s.id.as_str()).collect::<Vec<_>>().join(",")
    };
    let mut parts = Vec::new();
    for (name, policy) in [("truncate", IpPolicy::Truncate), ("hash", IpPolicy::Hash), ("drop", IpPolicy::Drop)] {
        let sources = ids(&|s| s.privacy.ip == policy);
        if !sources.is_empty() {
            parts.push(format!("ip:{name}={sources}"));
        }
    }
    for (name, sources) in [
        ("personal_data", ids(&|s| s.privacy.personal_data)),
        ("consent", ids(&|s| s.privacy.consent)),
        ("suppression", ids(&|s| s.privacy.suppression)),
    ] {
        if !sources.is_empty() {
            parts.push(format!("{name}={sources}"));
        }
    }
    let p = &config.privacy;
    let lists: Vec<&str> = [("file", p.suppression_file.is_some()), ("topic", p.suppression_topic.is_some())]
        .into_iter()
        .filter_map(|(n, on)| on.then_some(n))
        .collect();
    if !lists.is_empty() {
        parts.push(format!("suppression_lists={}", lists.join("+")));
    }
    if parts.is_empty() { "none".to_owned() } else { parts.join(" ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(env: &[(&str, &str)]) -> Config {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/dev.toml");
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        Config::load_with_env(&path, env).expect("dev config")
    }

    #[test]
    fn each_feature_says_whether_it_is_on() {
        let off = Features::of(&dev(&[]));
        assert_eq!(off.spool, "off");
        assert_eq!(off.dedupe, "off");
        assert_eq!(off.http, "http/1.1+h2c");
        let on = Features::of(&dev(&[
            ("EVENTGW__SPOOL__ENABLED", "true"),
            ("EVENTGW__SPOOL__DIR", "/var/spool/eventgw"),
            ("EVENTGW__DEDUPE__ENABLED", "true"),
            ("EVENTGW__DEDUPE__STORE", "redis"),
            ("EVENTGW__QUOTAS__IP", "{ per_second = 1, burst = 2 }"),
            ("EVENTGW__QUOTAS__IPV6_PREFIX_LEN", "56"),
            ("EVENTGW__SOURCES__0__PRIVACY__IP", "truncate"),
        ]));
        assert_eq!(on.spool, "/var/spool/eventgw");
        assert_eq!(on.dedupe, "redis");
        assert!(on.quotas.contains("ip") && on.quotas.ends_with("(ipv6 /56)"), "{}", on.quotas);
        assert!(on.privacy.contains("ip:truncate="), "{}", on.privacy);
    }
}
