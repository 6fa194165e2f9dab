//! How another tracker's events become catalog events: the mapping files
//! beside the catalog (`<catalog.dir>/mappings/<protocol>.toml`), read at
//! start-up (and on reload) with the rest of the configuration. The loader
//! lives in the catalog tool's crate so that `schemas check` and the catalog
//! site read the files with the very same code; this is its name here.

pub use eventgw_catalog::mapping::{
    Call, EventRule, MAPPINGS_DIR, MappingRefusal, TrackerMapping, TrackerMappings, load_dir, load_file,
};
