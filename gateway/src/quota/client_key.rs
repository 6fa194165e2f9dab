//! The key of per-address limits (the IP quota and the authentication
//! lock-out). An IPv4 address is one subscriber; an IPv6 subscriber gets a
//! whole prefix (a /64 at least, often a /56 or /48) and can rotate
//! through its addresses at will, so keying by the full address would let
//! one client dodge its quota and the lock-out with a fresh address per
//! request. IPv6 addresses are keyed by their first `quotas.ipv6_prefix_len`
//! bits (default 64); IPv4-mapped ones (`::ffff:a.b.c.d`, how a dual-stack
//! socket shows an IPv4 client) by their IPv4 address.

use std::net::{IpAddr, Ipv6Addr};

pub use crate::config::quota::{DEFAULT_IPV6_PREFIX_LEN, MAX_IPV6_PREFIX_LEN};

/// The address that stands for `ip` in per-address limits.
pub fn client_key(ip: IpAddr, ipv6_prefix_len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let len = u32::from(ipv6_prefix_len.min(MAX_IPV6_PREFIX_LEN));
            let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn ipv6_addresses_of_one_prefix_share_a_key() {
        let key = |s: &str, len| client_key(ip(s), len);
        assert_eq!(key("2001:db8:1:2:aaaa::1", 64), key("2001:db8:1:2:bbbb::2", 64), "one /64");
        assert_ne!(key("2001:db8:1:2::1", 64), key("2001:db8:1:3::1", 64), "the next /64");
        assert_eq!(key("2001:db8:1:2::1", 56), key("2001:db8:1:ff::1", 56), "one /56");
        assert_ne!(key("2001:db8:1:2::1", 128), key("2001:db8:1:2::2", 128), "/128: the full address");
        assert_eq!(key("2001:db8:1:2::1", 128), ip("2001:db8:1:2::1"));
        assert_eq!(key("2001:db8:1:2::1", 1), ip("::"), "/1: 2001 starts with a 0 bit");
        assert_eq!(key("8001::1", 1), ip("8000::"));
        assert_eq!(key("192.0.2.7", 64), ip("192.0.2.7"), "IPv4: the address");
        assert_eq!(key("::ffff:192.0.2.7", 64), ip("192.0.2.7"), "IPv4-mapped: its IPv4 address");
    }
}
