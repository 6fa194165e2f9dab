//! Geo from the full client IP, in process, from MaxMind-format databases
//! (`.mmdb`: GeoLite2/GeoIP2 City, and optionally a separate ASN one). The
//! readers are swapped whole on reload, so a lookup never sees half a file.
//! Places already looked up are cached with the readers that found them, so
//! a reload drops them too: a cached place is never older than the database.

use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwapOption;
use maxminddb::Reader;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::cache::BoundedCache;
use super::splice::shared_json;

pub use crate::config::enrichment::GeoConfig;

/// Why a database cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("geo database {path}: {problem}")]
pub struct GeoError {
    /// The file.
    pub path: String,
    /// What is wrong.
    pub problem: String,
}

/// The fields we read; everything else in the record is skipped unparsed.
#[derive(Debug, Default, Deserialize)]
struct Record<'a> {
    #[serde(borrow, default)]
    country: Option<Coded<'a>>,
    #[serde(borrow, default)]
    subdivisions: Option<Vec<Coded<'a>>>,
    #[serde(borrow, default)]
    city: Option<Coded<'a>>,
    #[serde(borrow, default)]
    location: Option<Location<'a>>,
    #[serde(default)]
    autonomous_system_number: Option<u32>,
    #[serde(borrow, default)]
    autonomous_system_organization: Option<&'a str>,
}

#[derive(Debug, Default, Deserialize)]
struct Coded<'a> {
    #[serde(borrow, default)]
    iso_code: Option<&'a str>,
    #[serde(borrow, default)]
    names: Option<Names<'a>>,
}

#[derive(Debug, Default, Deserialize)]
struct Names<'a> {
    #[serde(borrow, default)]
    en: Option<&'a str>,
}

#[derive(Debug, Default, Deserialize)]
struct Location<'a> {
    #[serde(borrow, default)]
    time_zone: Option<&'a str>,
}

/// One address's `context.geo` as compact JSON, serialised once when it is
/// looked up and spliced as is into every record that carries it.
pub type Place = Arc<RawValue>;

/// Addresses whose place is cached per generation (see [`BoundedCache`]):
/// a visitor sends several requests; at about half a kilobyte a place,
/// both generations hold under 35 MB.
pub const MAX_CACHED_PLACES: usize = 32_768;

struct Readers {
    city: Reader<Vec<u8>>,
    asn: Option<Reader<Vec<u8>>>,
    /// Places found in these databases, by address (`None`: not found).
    places: BoundedCache<IpAddr, Option<Place>>,
}

/// The loaded databases and where they come from.
pub struct GeoDb {
    config: GeoConfig,
    readers: ArcSwapOption<Readers>,
    /// Modification times at the last load, to notice a replaced file.
    seen: Mutex<Vec<Option<SystemTime>>>,
}

impl std::fmt::Debug for GeoDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeoDb").field("config", &self.config).finish_non_exhaustive()
    }
}

fn open(path: &Path) -> Result<Reader<Vec<u8>>, GeoError> {
    Reader::open_readfile(path).map_err(|e| GeoError { path: path.display().to_string(), problem: e.to_string() })
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl GeoDb {
    /// Opens the databases of `config`; a missing or broken file stops start-up.
    pub fn open(config: &GeoConfig) -> Result<Self, GeoError> {
        let db = Self { config: config.clone(), readers: ArcSwapOption::empty(), seen: Mutex::new(Vec::new()) };
        db.reload()?;
        Ok(db)
    }

    /// The settings the databases were opened with.
    pub fn config(&self) -> &GeoConfig {
        &self.config
    }

    fn paths(&self) -> Vec<&Path> {
        std::iter::once(self.config.database.as_path()).chain(self.config.asn_database.as_deref()).collect()
    }

    /// Re-opens every database; on error the running ones stay.
    pub fn reload(&self) -> Result<(), GeoError> {
        let stamps: Vec<_> = self.paths().into_iter().map(modified).collect();
        let city = open(&self.config.database)?;
        let asn = self.config.asn_database.as_deref().map(open).transpose()?;
        let places = BoundedCache::new(MAX_CACHED_PLACES);
        self.readers.store(Some(Arc::new(Readers { city, asn, places })));
        if let Ok(mut seen) = self.seen.lock() {
            *seen = stamps;
        }
        Ok(())
    }

    /// Re-opens the databases if a file was replaced since the last load.
    pub fn reload_if_changed(&self) -> Option<Result<(), GeoError>> {
        let stamps: Vec<_> = self.paths().into_iter().map(modified).collect();
        let changed = self.seen.lock().map(|seen| *seen != stamps).unwrap_or(false);
        changed.then(|| self.reload())
    }

    /// `{country, region, city, timeZone, asn, asOrganization}` for `ip`,
    /// with only the fields the databases know; `None` when they know none.
    pub fn lookup(&self, ip: IpAddr) -> Option<Place> {
        let readers = self.readers.load();
        let readers = readers.as_deref()?;
        if let Some(cached) = readers.places.get(&ip) {
            return cached;
        }
        let place = readers.find(ip).map(|fields| shared_json(&Value::Object(fields)));
        readers.places.insert(ip, place.clone());
        place
    }
}

impl Readers {
    fn find(&self, ip: IpAddr) -> Option<Map<String, Value>> {
        let readers = self;
        let mut out = Map::new();
        if let Some(record) = decode(&readers.city, ip) {
            put(&mut out, "country", record.country.as_ref().and_then(|c| c.iso_code));
            let region = record.subdivisions.as_ref().and_then(|s| s.first());
            put(&mut out, "region", region.and_then(|r| r.iso_code.or(r.names.as_ref()?.en)));
            put(&mut out, "city", record.city.as_ref().and_then(|c| c.names.as_ref()?.en));
            put(&mut out, "timeZone", record.location.as_ref().and_then(|l| l.time_zone));
            asn(&mut out, &record);
        }
        if let Some(record) = readers.asn.as_ref().and_then(|r| decode(r, ip)) {
            asn(&mut out, &record);
        }
        (!out.is_empty()).then_some(out)
    }
}

fn decode(reader: &Reader<Vec<u8>>, ip: IpAddr) -> Option<Record<'_>> {
    reader.lookup(ip).ok()?.decode::<Record<'_>>().ok().flatten()
}

fn put(out: &mut Map<String, Value>, key: &str, value: Option<&str>) {
    if let Some(value) = value.filter(|v| !v.is_empty()) {
        out.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

fn asn(out: &mut Map<String, Value>, record: &Record<'_>) {
    if let Some(number) = record.autonomous_system_number {
        out.insert("asn".into(), Value::from(number));
    }
    put(out, "asOrganization", record.autonomous_system_organization);
}
