//! Who is calling: the one [`Client`] of a request, resolved once when it
//! arrives ([`ClientResolver::resolve`]) and read from the request's
//! context by every later use (per-IP quotas, the auth-failure lock-out,
//! enrichment, the IP policy). Its address believes `X-Forwarded-For` only
//! from configured proxies; its header-derived texts are bounded: they are
//! copied into every event of the request, so an unbounded header would
//! multiply into Kafka.

use std::net::IpAddr;

use actix_web::HttpRequest;
use actix_web::http::header::{USER_AGENT, X_FORWARDED_FOR};
use ipnet::IpNet;

use super::hints::ClientHints;
use crate::config::EnrichmentConfig;
use crate::privacy::anonymize;

/// Longest header-derived text copied into an event (`context.userAgent`):
/// 512 bytes, cut on a character boundary. Real user agents are under 300
/// bytes; the rest of a longer one is padding or an attack, and the prefix
/// keeps what user-agent parsers read.
pub const MAX_CLIENT_FIELD_BYTES: usize = 512;

/// What the gateway knows about the sender of one request.
#[derive(Debug, Clone, Default)]
pub struct Client {
    /// The client's address as the gateway reports it (`context.ip`, quota
    /// and lock-out keys): anonymised when `enrichment.anonymize_ip` is set.
    pub ip: Option<IpAddr>,
    /// The same address before anonymisation: geo and the sources' IP
    /// policy work from it. The resolver always sets it with `ip`; `None`
    /// beside a `Some` `ip` reads as `ip` itself.
    pub full_ip: Option<IpAddr>,
    /// The `User-Agent` header, if any, bounded.
    pub user_agent: Option<String>,
    /// `Sec-CH-UA-*`, when sent.
    pub hints: Option<ClientHints>,
}

/// Trusted proxy ranges, parsed once, and the anonymise setting.
#[derive(Debug, Clone, Default)]
pub struct ClientResolver {
    trusted: Vec<IpNet>,
    anonymize: bool,
}

/// An address or CIDR range; defined beside the configuration that checks it.
pub use crate::config::parse_net;

impl ClientResolver {
    /// From configuration (already checked).
    pub fn new(config: &EnrichmentConfig) -> Self {
        Self {
            trusted: config.trusted_proxies.iter().filter_map(|p| parse_net(p)).collect(),
            anonymize: config.anonymize_ip,
        }
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&ip))
    }

    /// The full address of the client: the peer, or, when the peer is a
    /// trusted proxy, the right-most `X-Forwarded-For` address that is not
    /// a trusted proxy. `forwarded_for` holds the header's lines in order;
    /// several lines are one list (RFC 9110 §5.3), so a proxy that adds its
    /// own line (HAProxy) is read after the lines the client sent.
    pub fn full_ip(&self, peer: Option<IpAddr>, forwarded_for: &[&str]) -> Option<IpAddr> {
        let mut client = peer?;
        if self.trusts(client) {
            let hops = forwarded_for.iter().rev().flat_map(|line| line.split(',').rev());
            for hop in hops {
                let Ok(ip) = hop.trim().parse::<IpAddr>() else { break };
                client = ip;
                if !self.trusts(ip) {
                    break;
                }
            }
        }
        Some(client)
    }

    /// [`ClientResolver::full_ip`] as the gateway reports it (anonymised if
    /// configured).
    pub fn client_ip(&self, peer: Option<IpAddr>, forwarded_for: &[&str]) -> Option<IpAddr> {
        self.full_ip(peer, forwarded_for).map(|ip| self.reported_ip(ip))
    }

    /// Applies the anonymise setting to an address a client reported itself
    /// (server SDKs forward their users' addresses in `context.ip`).
    pub fn reported_ip(&self, ip: IpAddr) -> IpAddr {
        if self.anonymize { anonymize(ip) } else { ip }
    }

    /// Everything about the client of `req`, resolved once per request.
    pub fn resolve(&self, req: &HttpRequest) -> Client {
        // A line that is not text cannot name a hop: it stops the walk like
        // any other unparsable hop.
        let forwarded: Vec<&str> =
            req.headers().get_all(X_FORWARDED_FOR).map(|v| v.to_str().unwrap_or_default()).collect();
        let full_ip = self.full_ip(req.peer_addr().map(|a| a.ip()), &forwarded);
        let hints = ClientHints::from_headers(req.headers());
        Client {
            ip: full_ip.map(|ip| self.reported_ip(ip)),
            full_ip,
            user_agent: req.headers().get(USER_AGENT).and_then(|v| v.to_str().ok()).map(bounded),
            hints: (!hints.is_empty()).then_some(hints),
        }
    }
}

/// `text` cut to at most [`MAX_CLIENT_FIELD_BYTES`] on a character boundary.
pub fn bounded(text: &str) -> String {
    let mut cut = text.len().min(MAX_CLIENT_FIELD_BYTES);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text[..cut].to_owned()
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn resolver(trusted: &[&str], anonymize: bool) -> ClientResolver {
        ClientResolver::new(&EnrichmentConfig {
            trusted_proxies: trusted.iter().map(|s| (*s).to_owned()).collect(),
            anonymize_ip: anonymize,
        })
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_proxies() {
        let r = resolver(&["10.0.0.0/8"], false);
        assert_eq!(r.client_ip(Some(ip("10.1.2.3")), &["203.0.113.9"]), Some(ip("203.0.113.9")));
        assert_eq!(r.client_ip(Some(ip("198.51.100.7")), &["203.0.113.9"]), Some(ip("198.51.100.7")), "forged");
        // A client may prepend anything; only hops added by trusted proxies count.
        assert_eq!(r.client_ip(Some(ip("10.1.2.3")), &["1.1.1.1, 203.0.113.9, 10.9.9.9"]), Some(ip("203.0.113.9")));
        assert_eq!(r.client_ip(Some(ip("10.1.2.3")), &["garbage"]), Some(ip("10.1.2.3")));
    }

    #[test]
    fn forwarded_for_on_several_lines_is_one_list_read_from_the_last_line() {
        let r = resolver(&["10.0.0.0/8"], false);
        // The client sent its own line; the proxy (HAProxy) added the real
        // address on a line of its own, after it.
        let lines = ["6.6.6.6", "203.0.113.9"];
        assert_eq!(r.client_ip(Some(ip("10.1.2.3")), &lines), Some(ip("203.0.113.9")));
        let lines = ["6.6.6.6, 7.7.7.7", "203.0.113.9, 10.0.0.5"];
        assert_eq!(r.client_ip(Some(ip("10.1.2.3")), &lines), Some(ip("203.0.113.9")), "trusted hops skipped");
        let lines = ["6.6.6.6", "10.0.0.5"];
        assert_eq!(r.client_ip(Some(ip("10.1.2.3")), &lines), Some(ip("6.6.6.6")), "across the line break");
    }

    #[test]
    fn header_fields_are_bounded_on_a_character_boundary() {
        assert_eq!(bounded(&"a".repeat(MAX_CLIENT_FIELD_BYTES)).len(), MAX_CLIENT_FIELD_BYTES, "at the limit");
        assert_eq!(bounded(&"a".repeat(MAX_CLIENT_FIELD_BYTES + 1)).len(), MAX_CLIENT_FIELD_BYTES, "one past");
        let wide = format!("a{}", "é".repeat(MAX_CLIENT_FIELD_BYTES));
        let cut = bounded(&wide);
        assert_eq!(cut.len(), MAX_CLIENT_FIELD_BYTES - 1, "a two-byte character is not split");
        assert!(wide.starts_with(&cut));
    }

    #[test]
    fn anonymising_drops_the_host_part_and_keeps_the_full_address_beside_it() {
        let r = resolver(&["10.0.0.0/8"], true);
        assert_eq!(r.client_ip(Some(ip("203.0.113.77")), &[]), Some(ip("203.0.113.0")));
        let req = TestRequest::default()
            .peer_addr("10.1.2.3:5000".parse().expect("addr"))
            .insert_header(("x-forwarded-for", "203.0.113.77"))
            .insert_header((USER_AGENT, "curl/8.5.0"))
            .insert_header(("sec-ch-ua-platform", "\"Linux\""))
            .to_http_request();
        let client = r.resolve(&req);
        assert_eq!((client.ip, client.full_ip), (Some(ip("203.0.113.0")), Some(ip("203.0.113.77"))));
        assert_eq!(client.user_agent.as_deref(), Some("curl/8.5.0"));
        assert_eq!(client.hints.and_then(|h| h.platform()).as_deref(), Some("Linux"));
        let plain = resolver(&[], false).resolve(&TestRequest::default().to_http_request());
        assert!(plain.ip.is_none() && plain.full_ip.is_none() && plain.hints.is_none());
    }
}
