//! Generates the typed events (`eventgw_sdk::catalog`) from the schema
//! catalog, so a property of the wrong type is a compile error in the
//! caller's code rather than a dead-lettered event in production.
//!
//! The catalog is `$EVENTGW_CATALOG_DIR` when set, else the workspace's
//! `schemas/` directory. It is loaded and compiled with `eventgw-schemas`,
//! the same code the gateway validates with, so a catalog the gateway would
//! refuse also refuses to build here.

#[path = "build/codegen.rs"]
mod codegen;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    println!("cargo:rerun-if-env-changed=EVENTGW_CATALOG_DIR");
    println!("cargo:rerun-if-changed=build/codegen.rs");
    let Some(manifest) = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from) else {
        eprintln!("CARGO_MANIFEST_DIR is not set; run this through cargo");
        return ExitCode::FAILURE;
    };
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        eprintln!("OUT_DIR is not set; run this through cargo");
        return ExitCode::FAILURE;
    };
    let dir = std::env::var_os("EVENTGW_CATALOG_DIR").map(PathBuf::from).unwrap_or_else(|| manifest.join("../schemas"));
    println!("cargo:rerun-if-changed={}", dir.display());
    let code = if dir.is_dir() {
        match load(&dir) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("the event catalog at {} cannot be used: {e}", dir.display());
                return ExitCode::FAILURE;
            }
        }
    } else {
        println!("cargo:warning=no event catalog at {}; typed events are not generated", dir.display());
        codegen::EMPTY.to_owned()
    };
    let target = out_dir.join("catalog.rs");
    if let Err(e) = std::fs::write(&target, code) {
        eprintln!("cannot write {}: {e}", target.display());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn load(dir: &std::path::Path) -> Result<String, String> {
    // Loading compiles the catalog, which refuses what the gateway would
    // refuse (broken schemas, examples that break their own schema, gaps in
    // versions).
    let catalog = eventgw_schemas::loader::load_catalog(dir).map_err(|e| e.to_string())?;
    codegen::generate(&catalog, dir)
}
