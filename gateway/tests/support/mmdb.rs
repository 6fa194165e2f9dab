//! A small writer of MaxMind DB (`.mmdb`) files, from the public format
//! specification (MaxMind DB File Format, version 2.0), so tests and the
//! benchmark build their own geo database instead of downloading one.
//!
//! Layout: a binary search tree over the address bits (IPv6; IPv4 networks
//! sit under `::/96`), 24-bit records; a 16-byte zero separator; the data
//! section; then `\xAB\xCD\xEFMaxMind.com` and the metadata map.
#![allow(dead_code)]

use std::net::IpAddr;

use serde_json::Value;

#[derive(Clone, Copy)]
enum Slot {
    Empty,
    Node(usize),
    Data(usize),
}

/// Networks and their records, written with [`Writer::to_bytes`].
pub struct Writer {
    nodes: Vec<[Slot; 2]>,
    data: Vec<u8>,
    database_type: String,
}

impl Writer {
    /// An empty database of `database_type` (e.g. `GeoIP2-City`).
    pub fn new(database_type: &str) -> Self {
        Self { nodes: vec![[Slot::Empty; 2]], data: Vec::new(), database_type: database_type.to_owned() }
    }

    /// Maps `network/prefix` to `record`. Networks must not nest.
    pub fn insert(&mut self, network: IpAddr, prefix: u8, record: &Value) {
        let (bits, prefix) = match network {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)), prefix + 96),
            IpAddr::V6(v6) => (u128::from(v6), prefix),
        };
        let offset = self.data.len();
        encode(record, &mut self.data);
        let mut node = 0;
        for depth in 0..prefix {
            let bit = usize::from((bits >> (127 - depth)) & 1 == 1);
            if depth + 1 == prefix {
                self.nodes[node][bit] = Slot::Data(offset);
                break;
            }
            node = match self.nodes[node][bit] {
                Slot::Node(next) => next,
                _ => {
                    self.nodes.push([Slot::Empty; 2]);
                    let next = self.nodes.len() - 1;
                    self.nodes[node][bit] = Slot::Node(next);
                    next
                }
            };
        }
    }

    /// The whole file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let count = self.nodes.len();
        let mut out = Vec::with_capacity(count * 6 + 16 + self.data.len() + 256);
        for node in &self.nodes {
            for slot in node {
                let value = match *slot {
                    Slot::Empty => count,
                    Slot::Node(i) => i,
                    Slot::Data(offset) => count + 16 + offset,
                };
                let value = u32::try_from(value).expect("fits 24 bits in a test database");
                out.extend_from_slice(&value.to_be_bytes()[1..]);
            }
        }
        out.extend_from_slice(&[0u8; 16]);
        out.extend_from_slice(&self.data);
        out.extend_from_slice(b"\xAB\xCD\xEFMaxMind.com");
        let metadata = serde_json::json!({
            "node_count": count,
            "record_size": 24,
            "ip_version": 6,
            "database_type": self.database_type,
            "languages": ["en"],
            "binary_format_major_version": 2,
            "binary_format_minor_version": 0,
            "build_epoch": 1_700_000_000u64,
            "description": {"en": "eventgw test database"},
        });
        encode_metadata(&metadata, &mut out);
        out
    }
}

/// Metadata fields have fixed types in the specification.
fn encode_metadata(value: &Value, out: &mut Vec<u8>) {
    let Value::Object(map) = value else { return };
    control(7, map.len(), out);
    for (key, value) in map {
        encode(&Value::String(key.clone()), out);
        let n = value.as_u64();
        match key.as_str() {
            "record_size" | "ip_version" | "binary_format_major_version" | "binary_format_minor_version" => {
                uint(5, n.unwrap_or(0), out);
            }
            "node_count" => uint(6, n.unwrap_or(0), out),
            "build_epoch" => uint(9, n.unwrap_or(0), out),
            _ => encode(value, out),
        }
    }
}

/// Encodes `value`: strings as UTF-8 strings, non-negative integers as
/// uint32 (uint64 when larger), other numbers as doubles.
pub fn encode(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::String(s) => {
            control(2, s.len(), out);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Number(n) => match n.as_u64() {
            Some(v) if v <= u64::from(u32::MAX) => uint(6, v, out),
            Some(v) => uint(9, v, out),
            None => {
                control(3, 8, out);
                out.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_be_bytes());
            }
        },
        Value::Bool(b) => control(14, usize::from(*b), out),
        Value::Array(items) => {
            control(11, items.len(), out);
            items.iter().for_each(|item| encode(item, out));
        }
        Value::Object(map) => {
            control(7, map.len(), out);
            for (key, value) in map {
                encode(&Value::String(key.clone()), out);
                encode(value, out);
            }
        }
        Value::Null => control(7, 0, out),
    }
}

fn uint(kind: u8, value: u64, out: &mut Vec<u8>) {
    let bytes = value.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    control(kind, 8 - skip, out);
    out.extend_from_slice(&bytes[skip..]);
}

/// A control byte (type in the top 3 bits, extended types after it) and the size.
fn control(kind: u8, size: usize, out: &mut Vec<u8>) {
    let (first, extra): (u8, Vec<u8>) = match size {
        0..29 => (u8::try_from(size).expect("below 29"), Vec::new()),
        29..285 => (29, vec![u8::try_from(size - 29).expect("below 256")]),
        285..65821 => (30, u16::try_from(size - 285).expect("below 65536").to_be_bytes().to_vec()),
        _ => (31, u32::try_from(size - 65821).expect("small").to_be_bytes()[1..].to_vec()),
    };
    if kind <= 7 {
        out.push((kind << 5) | first);
    } else {
        out.push(first);
        out.push(kind - 7);
    }
    out.extend_from_slice(&extra);
}

/// A city record as GeoIP2-City lays it out, with ASN fields merged in (a
/// real deployment often has them in a second file; the reader takes both).
pub fn city_record(country: &str, region: &str, city: &str, time_zone: &str, asn: u32, org: &str) -> Value {
    serde_json::json!({
        "city": {"geoname_id": 1, "names": {"en": city, "de": city}},
        "country": {"iso_code": country, "names": {"en": country}},
        "subdivisions": [{"iso_code": region, "names": {"en": region}}],
        "location": {"latitude": 52.52, "longitude": 13.40, "time_zone": time_zone, "accuracy_radius": 20},
        "autonomous_system_number": asn,
        "autonomous_system_organization": org,
    })
}

/// The test database: 203.0.113.0/24 (TEST-NET-3) in Berlin, 198.51.100.0/24
/// (TEST-NET-2) in Lyon, 2001:db8::/32 in Tokyo.
pub fn test_database() -> Vec<u8> {
    let mut writer = Writer::new("GeoIP2-City");
    let berlin = city_record("DE", "BE", "Berlin", "Europe/Berlin", 64_500, "Example Carrier");
    let lyon = city_record("FR", "ARA", "Lyon", "Europe/Paris", 64_501, "Exemple Réseau");
    let tokyo = city_record("JP", "13", "Tokyo", "Asia/Tokyo", 64_502, "Example KK");
    writer.insert("203.0.113.0".parse().expect("ip"), 24, &berlin);
    writer.insert("198.51.100.0".parse().expect("ip"), 24, &lyon);
    writer.insert("2001:db8::".parse().expect("ip"), 32, &tokyo);
    writer.to_bytes()
}
