//! The readable catalog: a static site rendered from the compiled catalog
//! (domains, owners, topics, keys, each event's versions with their fields
//! and examples, the other trackers' events mapped to it: [`page`],
//! [`fields`], `mappings`) plus the WebAssembly checker, so a
//! person can paste an event and see what the gateway would say.
//! `eventgw-catalog schemas docs` writes it to a directory; the gateway
//! serves the same files at `/catalog/`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use eventgw_schemas::{Catalog, DomainSource};

pub mod fields;
mod mappings;
mod page;

/// The wasm-bindgen output the page loads, as `scripts/build-wasm` names it.
pub const WASM_FILES: [&str; 2] = ["eventgw_schemas_wasm.js", "eventgw_schemas_wasm_bg.wasm"];

/// Where the WebAssembly build lives inside a catalog directory
/// (`scripts/build-wasm` puts it there).
pub const WASM_PKG: &str = "wasm/pkg";

/// One file of the site.
#[derive(Debug, Clone)]
pub struct SiteFile {
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes; shared, so a server answering a request copies nothing.
    pub body: bytes::Bytes,
}

/// Every file of the catalog site, by path relative to the site root.
/// Cheap to clone: each server worker holds one.
#[derive(Debug, Clone)]
pub struct Site {
    files: Arc<BTreeMap<String, SiteFile>>,
}

impl Site {
    /// Renders the site for `catalog`, loaded from `catalog_dir` (file names
    /// on the page are shown relative to it), with the tracker mappings of
    /// its `mappings/` directory. The WebAssembly checker is
    /// taken from `wasm_dir` when it holds a build; without one the page
    /// says the in-browser check is unavailable and how to build it.
    pub fn render(catalog: &Catalog, catalog_dir: &Path, wasm_dir: Option<&Path>) -> Self {
        let mut files = BTreeMap::new();
        let mut put = |name: &str, content_type, body: Vec<u8>| {
            files.insert(name.to_owned(), SiteFile { content_type, body: body.into() });
        };
        // The gateway's own loader: the page shows the rules it applies (a
        // gateway refuses to start on a file this refuses).
        let mappings = crate::mapping::load_dir(&catalog_dir.join(crate::mapping::MAPPINGS_DIR));
        let index = page::index(catalog, catalog_dir, &mappings);
        put("index.html", "text/html; charset=utf-8", index.into_bytes());
        put("catalog.css", "text/css; charset=utf-8", include_bytes!("assets/catalog.css").to_vec());
        put("checker.js", "text/javascript; charset=utf-8", include_bytes!("assets/checker.js").to_vec());
        let sources = relative_sources(catalog.sources(), catalog_dir);
        put("catalog.json", "application/json", serde_json::to_vec(&sources).unwrap_or_default());
        for name in WASM_FILES {
            if let Some(body) = wasm_dir.and_then(|dir| std::fs::read(dir.join(name)).ok()) {
                let content_type =
                    if name.ends_with(".wasm") { "application/wasm" } else { "text/javascript; charset=utf-8" };
                put(&format!("wasm/{name}"), content_type, body);
            }
        }
        Self { files: Arc::new(files) }
    }

    /// The site for a gateway that loaded `catalog` from `catalog_dir`,
    /// with the checker from the directory's [`WASM_PKG`].
    pub fn for_catalog(catalog: &Catalog, catalog_dir: &Path) -> Self {
        Self::render(catalog, catalog_dir, Some(&catalog_dir.join(WASM_PKG)))
    }

    /// The file at `path` (`index.html`, `wasm/...`), if the site has it.
    pub fn get(&self, path: &str) -> Option<&SiteFile> {
        self.files.get(path)
    }

    /// Whether the WebAssembly checker is part of the site.
    pub fn has_checker(&self) -> bool {
        WASM_FILES.iter().all(|name| self.files.contains_key(&format!("wasm/{name}")))
    }

    /// Writes every file under `out`, creating directories as needed.
    pub fn write_to(&self, out: &Path) -> std::io::Result<()> {
        for (name, file) in self.files.iter() {
            let path = out.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, &file.body)?;
        }
        Ok(())
    }
}

/// The sources with file names relative to the catalog directory, so the
/// page does not publish the server's paths.
fn relative_sources(sources: &[DomainSource], root: &Path) -> Vec<DomainSource> {
    let strip = |origin: &str| {
        Path::new(origin).strip_prefix(root).map_or_else(|_| origin.to_owned(), |p| p.display().to_string())
    };
    let mut sources = sources.to_vec();
    for source in &mut sources {
        source.origin = strip(&source.origin);
        for doc in &mut source.schemas {
            doc.origin = strip(&doc.origin);
        }
    }
    sources
}
