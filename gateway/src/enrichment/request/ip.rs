//! The client address of a request's events: as text, truncated or
//! hashed per the source's policy; for the request's own address each
//! once per request (a keyed hash costs about a microsecond), for an
//! address a server SDK forwarded once per event.

use std::borrow::Cow;
use std::net::IpAddr;

use serde_json::{Map, Value};

use super::EdgeRequest;
use crate::enrichment::splice::Fragment;
use crate::privacy::{IpPolicy, anonymize, hash_ip};

impl EdgeRequest<'_> {
    /// The full address behind `ip` as written in `context.ip`.
    pub(super) fn full_ip(&self, ip: IpAddr) -> IpAddr {
        match self.client.full_ip {
            Some(full) if self.client.ip == Some(ip) => full,
            _ => ip,
        }
    }

    /// Whether `ip` is the request's own (full) address, whose texts are
    /// made once per request.
    pub(super) fn is_own(&self, ip: IpAddr) -> bool {
        self.client.full_ip.or(self.client.ip) == Some(ip)
    }

    /// `ip` as text: the request's own address once per request.
    pub fn ip_text<'r>(&'r self, ip: IpAddr) -> Fragment<'r> {
        if self.client.ip == Some(ip) {
            return Fragment::Text(Cow::Borrowed(self.own_ip_text.get_or_init(|| address_text(ip))));
        }
        Fragment::Text(Cow::Owned(address_text(ip)))
    }

    pub(super) fn truncated<'r>(&'r self, full: IpAddr) -> Fragment<'r> {
        if self.is_own(full) {
            return Fragment::Text(Cow::Borrowed(self.own_truncated.get_or_init(|| address_text(anonymize(full)))));
        }
        Fragment::Text(Cow::Owned(address_text(anonymize(full))))
    }

    /// The keyed hash of `full` (a keyed HMAC: a microsecond, so the
    /// request's own address is hashed once per request).
    pub(super) fn ip_hash<'r>(&'r self, full: IpAddr) -> Option<Fragment<'r>> {
        let salt = self.salt.get_or_init(|| self.edge.privacy.ip_salt(self.unix_secs)).as_deref()?;
        if self.is_own(full) {
            return Some(Fragment::Text(Cow::Borrowed(self.own_ip_hash.get_or_init(|| hash_ip(salt, full)))));
        }
        Some(Fragment::Text(Cow::Owned(hash_ip(salt, full))))
    }

    pub(super) fn apply_ip_policy(&self, context: &mut Map<String, Value>, full: IpAddr) {
        match self.settings.privacy.ip {
            IpPolicy::Keep => {}
            IpPolicy::Truncate => {
                context.insert("ip".into(), Value::String(anonymize(full).to_string()));
            }
            IpPolicy::Hash => {
                context.remove("ip");
                let salt = self.salt.get_or_init(|| self.edge.privacy.ip_salt(self.unix_secs));
                if let Some(salt) = salt {
                    context.insert("ipHash".into(), Value::String(hash_ip(salt, full)));
                }
            }
            IpPolicy::Drop => {
                context.remove("ip");
            }
        }
    }
}

/// `ip` as `Display` writes it: an IPv4 address (most clients) by hand, as
/// its four numbers (`fmt`'s padding-aware writer took about 1,400
/// instructions, once per request), an IPv6 one through `Display`.
pub fn address_text(ip: IpAddr) -> String {
    let IpAddr::V4(v4) = ip else { return ip.to_string() };
    let mut out = Vec::with_capacity(15);
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        crate::compact::write_uint(&mut out, u64::from(octet));
    }
    // Digits and dots only.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn an_address_is_written_as_display_writes_it(v4 in any::<u32>(), v6 in any::<u128>()) {
            for ip in [IpAddr::V4(Ipv4Addr::from(v4)), IpAddr::V6(Ipv6Addr::from(v6))] {
                prop_assert_eq!(address_text(ip), ip.to_string());
            }
        }
    }

    #[test]
    fn the_edges_of_ipv4_are_written_as_display_writes_them() {
        for ip in ["0.0.0.0", "255.255.255.255", "10.0.100.9", "192.168.1.1"] {
            let ip: IpAddr = ip.parse().expect("an address");
            assert_eq!(address_text(ip), ip.to_string());
        }
    }
}
