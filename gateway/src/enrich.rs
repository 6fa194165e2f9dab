//! Facts about the client that only the gateway can vouch for: its IP
//! address (believing `X-Forwarded-For` only from configured proxies) and
//! its user agent, each bounded: they are copied into every event of the
//! request, so an unbounded header would multiply into Kafka.

use std::net::IpAddr;

use actix_web::HttpRequest;
use actix_web::http::header::USER_AGENT;
use ipnet::IpNet;

use crate::config::EnrichmentConfig;

/// Longest header-derived text copied into an event (`context.userAgent`):
/// 512 bytes, cut on a character boundary. Real user agents are under 300
/// bytes; the rest of a longer one is padding or an attack, and the prefix
/// keeps what user-agent parsers read.
pub const MAX_CLIENT_FIELD_BYTES: usize = 512;

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

    /// The client of `req`: the peer, or, when the peer is a trusted proxy,
    /// the right-most `X-Forwarded-For` address that is not a trusted proxy.
    /// `forwarded_for` holds the header's lines in order; several lines are
    /// one list (RFC 9110 §5.3), so a proxy that adds its own line (HAProxy)
    /// is read after the lines the client sent.
    pub fn client_ip(&self, peer: Option<IpAddr>, forwarded_for: &[&str]) -> Option<IpAddr> {
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
        Some(if self.anonymize { anonymize(client) } else { client })
    }

    /// Applies the anonymise setting to an address a client reported itself
    /// (server SDKs forward their users' addresses in `context.ip`).
    pub fn reported_ip(&self, ip: IpAddr) -> IpAddr {
        if self.anonymize { anonymize(ip) } else { ip }
    }

    /// Everything about the client of `req`.
    pub fn resolve(&self, req: &HttpRequest) -> ClientInfo {
        // A line that is not text cannot name a hop: it stops the walk like
        // any other unparsable hop.
        let forwarded: Vec<&str> =
            req.headers().get_all("x-forwarded-for").map(|v| v.to_str().unwrap_or_default()).collect();
        let peer = req.peer_addr().map(|a| a.ip());
        ClientInfo {
            ip: self.client_ip(peer, &forwarded),
            user_agent: req.headers().get(USER_AGENT).and_then(|v| v.to_str().ok()).map(bounded),
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

/// Zeroes the host part an address shares with few others: the last octet
/// of IPv4, the last 80 bits of IPv6 (its /48 stays).
///
/// An IPv6 address may carry an IPv4 address, and the /48 of one form holds
/// all of it: 6to4 (`2002:AABB:CCDD::/48` is the site of `AA.BB.CC.DD`).
/// Such an address keeps exactly what truncating its IPv4 keeps (its /24:
/// `2002:AABB:CC00::`), so a 6to4 client is as anonymous as an IPv4 one and
/// its network still says where it is. An IPv4-mapped address
/// (`::ffff:0:0/96`, how a dual-stack socket shows an IPv4 client) is an
/// IPv4 client: it becomes the truncated IPv4 address. In every other form
/// the /48 holds no host bits of the IPv4 address: IPv4-compatible
/// (`::/96`) and NAT64 (`64:ff9b::/96`) carry it in the last 32 bits,
/// local-use NAT64 (`64:ff9b:1::/48`) after bit 48, Teredo (`2001::/32`)
/// the client's (obfuscated) address in the last 32 bits and only its
/// server's in bits 32 to 63, ISATAP in the interface id (the last 64 bits);
/// 6rd under an operator's /32 leaves the first two octets at most, less
/// than IPv4 truncation keeps.
pub fn anonymize(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(truncate_v4(v4)),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(truncate_v4(v4));
            }
            let mut segments = v6.segments();
            segments[3..].iter_mut().for_each(|s| *s = 0);
            if segments[0] == SIX_TO_FOUR {
                segments[2] &= 0xff00; // the embedded IPv4's last octet
            }
            IpAddr::from(segments)
        }
    }
}

/// The first 16 bits of 6to4 addresses (`2002::/16`, RFC 3056), followed
/// by the site's IPv4 address.
const SIX_TO_FOUR: u16 = 0x2002;

fn truncate_v4(v4: std::net::Ipv4Addr) -> std::net::Ipv4Addr {
    let [a, b, c, _] = v4.octets();
    std::net::Ipv4Addr::new(a, b, c, 0)
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
    fn anonymising_drops_the_host_part() {
        let r = resolver(&[], true);
        assert_eq!(r.client_ip(Some(ip("203.0.113.77")), &[]), Some(ip("203.0.113.0")));
        assert_eq!(anonymize(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1::"));
    }

    /// `192.0.2.33` (`c000:0221`) inside each IPv6 form that carries an
    /// IPv4 address: what stays holds no more of it than `192.0.2.0`.
    /// Before the fix 6to4 kept the whole address and a mapped one became `::`.
    #[test]
    fn truncation_keeps_no_host_part_of_an_embedded_ipv4_address() {
        let cases = [
            ("6to4", "2002:c000:0221:1:2:3:4:5", "2002:c000:0200::"),
            ("6to4, the IPv4 again in the interface id", "2002:c000:221::c000:221", "2002:c000:200::"),
            ("IPv4-mapped", "::ffff:192.0.2.33", "192.0.2.0"),
            ("IPv4-compatible", "::192.0.2.33", "::"),
            ("NAT64 well-known prefix", "64:ff9b::192.0.2.33", "64:ff9b::"),
            ("NAT64 local-use /48", "64:ff9b:1:c000:2:2100::", "64:ff9b:1::"),
            // Teredo: server 65.54.227.120 (4136:e378), client 192.0.2.33
            // obfuscated (xor ffff:ffff) as 3fff:fdde, port 40000 as 63bf.
            ("Teredo", "2001:0:4136:e378:8000:63bf:3fff:fdde", "2001:0:4136::"),
            ("ISATAP", "2001:db8:1:2:0:5efe:192.0.2.33", "2001:db8:1::"),
            ("ISATAP, universal", "2001:db8:1:2:200:5efe:192.0.2.33", "2001:db8:1::"),
        ];
        for (form, full, truncated) in cases {
            let got = anonymize(ip(full));
            assert_eq!(got, ip(truncated), "{form}: {full}");
            let text = got.to_string();
            assert!(!text.contains("221") && !text.contains(".33") && !text.contains("fdde"), "{form}: {text}");
        }
        assert_eq!(anonymize(ip("2002:c000:02ff::")), ip("2002:c000:0200::"), "a 6to4 address at the /24's end");
    }
}
