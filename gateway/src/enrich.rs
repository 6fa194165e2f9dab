//! Facts about the client that only the gateway can vouch for: its IP
//! address (believing `X-Forwarded-For` only from configured proxies) and
//! its user agent.

use std::net::IpAddr;

use actix_web::HttpRequest;
use actix_web::http::header::USER_AGENT;
use ipnet::IpNet;

use crate::config::EnrichmentConfig;

/// What the gateway knows about the sender of one request.
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    /// The client's address (anonymised if configured).
    pub ip: Option<IpAddr>,
    /// The `User-Agent` header, if any.
    pub user_agent: Option<String>,
}

/// Trusted proxy ranges, parsed once.
#[derive(Debug, Clone, Default)]
pub struct ClientResolver {
    trusted: Vec<IpNet>,
    anonymize: bool,
}

/// An address or CIDR range (`10.0.0.0/8`, `::1`).
pub fn parse_net(text: &str) -> Option<IpNet> {
    text.parse::<IpNet>().ok().or_else(|| text.parse::<IpAddr>().ok().map(IpNet::from))
}

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

    /// The client of `req`: the peer, or, when the peer is a trusted proxy,
    /// the right-most `X-Forwarded-For` address that is not a trusted proxy.
    pub fn client_ip(&self, peer: Option<IpAddr>, forwarded_for: Option<&str>) -> Option<IpAddr> {
        let mut client = peer?;
        if self.trusts(client) {
            let hops = forwarded_for.unwrap_or_default().split(',').rev();
            for hop in hops {
                let Ok(ip) = hop.trim().parse::<IpAddr>() else { break };
                client = ip;
                if !self.trusts(ip) {
                    break;
                }
            }
        }
        Some(if self.anonymize { anonymize(client) } else { client })
    }

    /// Applies the anonymise setting to an address a client reported itself
    /// (server SDKs forward their users' addresses in `context.ip`).
    pub fn reported_ip(&self, ip: IpAddr) -> IpAddr {
        if self.anonymize { anonymize(ip) } else { ip }
    }

    /// Everything about the client of `req`.
    pub fn resolve(&self, req: &HttpRequest) -> ClientInfo {
        let forwarded = req.headers().get("x-forwarded-for").and_then(|v| v.to_str().ok());
        let peer = req.peer_addr().map(|a| a.ip());
        ClientInfo {
            ip: self.client_ip(peer, forwarded),
            user_agent: req.headers().get(USER_AGENT).and_then(|v| v.to_str().ok()).map(str::to_owned),
        }
    }
}

/// Zeroes the host part an address shares with few others: the last octet
/// of IPv4, the last 80 bits of IPv6.
pub fn anonymize(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            IpAddr::from([a, b, c, 0])
        }
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[3..].iter_mut().for_each(|s| *s = 0);
            IpAddr::from(segments)
        }
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(r.client_ip(Some(ip("10.1.2.3")), Some("203.0.113.9")), Some(ip("203.0.113.9")));
        assert_eq!(r.client_ip(Some(ip("198.51.100.7")), Some("203.0.113.9")), Some(ip("198.51.100.7")), "forged");
        // A client may prepend anything; only hops added by trusted proxies count.
        assert_eq!(r.client_ip(Some(ip("10.1.2.3")), Some("1.1.1.1, 203.0.113.9, 10.9.9.9")), Some(ip("203.0.113.9")));
        assert_eq!(r.client_ip(Some(ip("10.1.2.3")), Some("garbage")), Some(ip("10.1.2.3")));
    }

    #[test]
    fn anonymising_drops_the_host_part() {
        let r = resolver(&[], true);
        assert_eq!(r.client_ip(Some(ip("203.0.113.77")), None), Some(ip("203.0.113.0")));
        assert_eq!(anonymize(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1::"));
    }
}
