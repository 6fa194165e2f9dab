//! The client address made less identifying, for the `anonymize_ip`
//! setting and the sources' IP policy (`truncate`, `hash`): what is kept of
//! it, and its keyed hash.

use std::net::{IpAddr, Ipv4Addr};

use super::crypto;

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

fn truncate_v4(v4: Ipv4Addr) -> Ipv4Addr {
    let [a, b, c, _] = v4.octets();
    Ipv4Addr::new(a, b, c, 0)
}

/// `ip` with the salt of its period, shortened to 128 bits: enough to count
/// distinct visitors, too short to be a lookup key across datasets.
pub fn hash_ip(salt: &[u8], ip: IpAddr) -> String {
    let mut hash = crypto::keyed_hash(salt, ip.to_string().as_bytes());
    hash.truncate(32);
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn anonymising_drops_the_host_part() {
        assert_eq!(anonymize(ip("203.0.113.77")), ip("203.0.113.0"));
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
