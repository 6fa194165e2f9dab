//! Reads a catalog directory: `<domain>/catalog.toml` plus
//! `<domain>/<schema>/<version>.json`. The only part of the crate that
//! touches files, kept apart so the core stays pure.

use std::fs;
use std::path::Path;

use crate::{Catalog, CatalogError, DomainSource, DomainSpec, SchemaDocument};

/// The name of each domain's catalog file.
pub const CATALOG_FILE: &str = "catalog.toml";

/// Loads and compiles the catalog under `root`.
pub fn load_catalog(root: &Path) -> Result<Catalog, CatalogError> {
    Catalog::compile(load_sources(root)?)
}

/// Reads every domain under `root` (each subdirectory with a `catalog.toml`).
pub fn load_sources(root: &Path) -> Result<Vec<DomainSource>, CatalogError> {
    let origin = root.display().to_string();
    let entries = fs::read_dir(root).map_err(|e| CatalogError::new(&origin, format!("cannot read directory: {e}")))?;
    let mut dirs: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    let mut sources = Vec::new();
    for dir in dirs {
        let file = dir.join(CATALOG_FILE);
        if file.is_file() {
            sources.push(load_domain(&dir, &file)?);
        }
    }
    if sources.is_empty() {
        return Err(CatalogError::new(origin, format!("no <domain>/{CATALOG_FILE} found")));
    }
    Ok(sources)
}

fn load_domain(dir: &Path, file: &Path) -> Result<DomainSource, CatalogError> {
    let origin = file.display().to_string();
    let text = fs::read_to_string(file).map_err(|e| CatalogError::new(&origin, format!("cannot read: {e}")))?;
    let spec: DomainSpec = toml::from_str(&text).map_err(|e| CatalogError::new(&origin, e.to_string()))?;
    let dir_name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if spec.domain != dir_name {
        return Err(CatalogError::new(
            &origin,
            format!("domain `{}` must match its directory name `{dir_name}`", spec.domain),
        ));
    }
    let mut schemas = Vec::new();
    let mut schema_dirs: Vec<String> = spec.events.values().map(|e| e.schema.clone()).collect();
    schema_dirs.sort();
    schema_dirs.dedup();
    for schema in schema_dirs {
        schemas.extend(load_versions(&dir.join(&schema), &schema)?);
    }
    Ok(DomainSource { origin, spec, schemas })
}

fn load_versions(dir: &Path, schema: &str) -> Result<Vec<SchemaDocument>, CatalogError> {
    let origin = dir.display().to_string();
    let entries = fs::read_dir(dir).map_err(|e| CatalogError::new(&origin, format!("cannot read directory: {e}")))?;
    let mut docs = Vec::new();
    for path in entries.filter_map(Result::ok).map(|e| e.path()) {
        let file_origin = path.display().to_string();
        let Some(stem) = path.extension().filter(|x| *x == "json").and(path.file_stem()) else {
            return Err(CatalogError::new(file_origin, "only <version>.json files belong in a schema directory"));
        };
        let version: u32 = stem
            .to_string_lossy()
            .parse()
            .map_err(|_| CatalogError::new(&file_origin, "file name must be a version number, e.g. 1.json"))?;
        let text =
            fs::read_to_string(&path).map_err(|e| CatalogError::new(&file_origin, format!("cannot read: {e}")))?;
        let json =
            serde_json::from_str(&text).map_err(|e| CatalogError::new(&file_origin, format!("not valid JSON: {e}")))?;
        docs.push(SchemaDocument { schema: schema.to_owned(), version, origin: file_origin, json });
    }
    Ok(docs)
}
