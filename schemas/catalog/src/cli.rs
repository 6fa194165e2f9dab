//! The `eventgw-catalog` subcommands, each a function returning the text to
//! print and whether it succeeded, so `main` stays a thin argument parser
//! and tests can call them directly. A tool: errors are `anyhow`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use eventgw_schemas::compat::{self, Direction};
use eventgw_schemas::loader::{load_catalog, load_sources};
use eventgw_schemas::{Catalog, Compatibility};

use crate::gateway_config::GatewayConfig;
use crate::mapping::{self, check::Severity};
use crate::registry::{RegistryClient, sync};
use crate::site::Site;
use crate::topics::{TopicAdmin, plan};

/// What a command prints, and whether it passed (the exit status).
#[derive(Debug)]
pub struct Report {
    /// The text for standard output.
    pub text: String,
    /// `false` makes the tool exit with status 1.
    pub ok: bool,
}

/// `schemas check [DIR]`: every version against the previous one under its
/// event's mode, then the whole catalog compiled as the gateway would, then
/// the mapping files of the other trackers against it ([`mapping::check`])
/// and, given `mappings_base`, against that earlier copy ([`mapping::base`]).
pub fn schemas_check(dir: &Path, mappings_base: Option<&Path>) -> anyhow::Result<Report> {
    let sources = load_sources(dir)?;
    let mut text = String::new();
    let mut ok = true;
    for step in compat::check_sources(&sources) {
        let head = format!("{} v{} -> v{} ({})", step.event, step.old.0, step.new.0, step.mode.as_str());
        if step.problems.is_empty() {
            text.push_str(&format!("ok    {head}\n"));
        } else {
            ok = false;
            text.push_str(&format!("FAIL  {head}: {} breaks {}\n", step.new.1, step.old.1));
            for problem in &step.problems {
                text.push_str(&format!("      - {}\n", problem.message));
            }
        }
    }
    let catalog = match Catalog::compile(sources) {
        Ok(catalog) => {
            let n = catalog.events().len();
            text.push_str(&format!("catalog compiles: {n} events in {} domains\n", catalog.domains().len()));
            Some(catalog)
        }
        Err(error) => {
            ok = false;
            text.push_str(&format!("FAIL  the gateway would refuse this catalog: {error}\n"));
            None
        }
    };
    let mappings_dir = dir.join(mapping::MAPPINGS_DIR);
    let mut mappings = mapping::check::check_dir(catalog.as_ref(), &mappings_dir);
    if let Some(base) = mappings_base {
        anyhow::ensure!(base.is_dir(), "the base mappings directory {} does not exist", base.display());
        let old = mapping::load_dir(base).map_err(|r| {
            anyhow::anyhow!("the base mappings cannot be read: {} {} {}: {}", r.code, r.file, r.key, r.problem)
        })?;
        match mapping::load_dir(&mappings_dir) {
            Ok(now) => mappings.findings.extend(mapping::base::compare(&old, &now, &mappings_dir)),
            Err(_) => text.push_str("mappings not compared with the base: they do not load (below)\n"),
        }
    }
    for finding in &mappings.findings {
        let label = if finding.severity == Severity::Error { "FAIL" } else { "warn" };
        text.push_str(&format!("{label}  {finding}\n"));
    }
    ok &= mappings.ok();
    text.push_str(&format!("mappings: {} rules in {} files checked\n", mappings.rules, mappings.files));
    Ok(Report { text, ok })
}

/// `schemas diff OLD.json NEW.json [--mode M]`: what breaks in which
/// direction; fails when `mode` (default backward) is broken.
pub fn schemas_diff(old: &Path, new: &Path, mode: Compatibility) -> anyhow::Result<Report> {
    let read = |path: &Path| -> anyhow::Result<serde_json::Value> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))
    };
    let problems = compat::check(&read(old)?, &read(new)?, Compatibility::Full);
    let mut text = String::new();
    for problem in &problems {
        let dir = if problem.direction == Direction::Backward { "backward" } else { "forward" };
        text.push_str(&format!("breaks {dir}: {}\n", problem.message));
    }
    let backward = !problems.iter().any(|p| p.direction == Direction::Backward);
    let forward = !problems.iter().any(|p| p.direction == Direction::Forward);
    let word = |ok: bool| if ok { "compatible" } else { "BREAKS" };
    text.push_str(&format!(
        "backward: {}, forward: {}, full: {}\n",
        word(backward),
        word(forward),
        word(backward && forward)
    ));
    let ok = match mode {
        Compatibility::Backward => backward,
        Compatibility::Forward => forward,
        Compatibility::Full => backward && forward,
        Compatibility::None => true,
    };
    Ok(Report { text, ok })
}

/// `schemas docs [--out DIR]`: writes the catalog site.
pub fn schemas_docs(dir: &Path, out: &Path, wasm: &Path) -> anyhow::Result<Report> {
    let catalog = load_catalog(dir)?;
    let site = Site::render(&catalog, dir, Some(wasm));
    site.write_to(out).with_context(|| format!("cannot write the site to {}", out.display()))?;
    let checker = if site.has_checker() {
        "with the in-browser checker".to_owned()
    } else {
        format!("WITHOUT the in-browser checker: no build in {} (run scripts/build-wasm)", wasm.display())
    };
    let text = format!("wrote {}/index.html ({} events), {checker}\n", out.display(), catalog.events().len());
    Ok(Report { text, ok: true })
}

/// `topics plan|apply --config FILE`: compares the declared topics with the
/// cluster; with `apply`, makes the changes. A plan with refusals fails and
/// applies nothing.
pub async fn topics(config_path: &Path, apply: bool) -> anyhow::Result<Report> {
    let config = GatewayConfig::load(config_path)?;
    let catalog = load_catalog(&config.catalog_dir)?;
    let declared = plan::declared(&catalog, &config.topics);
    let admin = TopicAdmin::connect_with(&config.topics.brokers, &config.topics.connection)?;
    let existing = admin.existing(&declared).await?;
    let plan = plan::plan(&declared, &existing);
    let mut text = format!("Plan for {} ({} topics declared):\n{plan}\n", config.topics.brokers, declared.len());
    if !plan.refusals.is_empty() {
        return Ok(Report { text, ok: false });
    }
    if apply {
        for line in admin.apply(&plan, &existing).await? {
            text.push_str(&format!("{line}\n"));
        }
        text.push_str(&format!("Applied {} change(s).\n", plan.changes.len()));
    }
    Ok(Report { text, ok: true })
}

/// Where `registry plan|apply` finds the registry when neither
/// `--registry` nor the configuration's `[registry] url` says.
pub const DEFAULT_REGISTRY_URL: &str = "http://127.0.0.1:18481/apis/ccompat/v7";

/// `registry plan|apply`: compares every catalog version with the registry;
/// with `apply`, registers what is missing and sets each subject's
/// compatibility, all or nothing. A refusal fails and leaves the registry
/// as it was.
pub async fn registry(dir: &Path, url: &str, apply: bool) -> anyhow::Result<Report> {
    let sources = load_sources(dir)?;
    let declared = sync::declared(&sources);
    let client = RegistryClient::new(url, std::time::Duration::from_secs(10))?;
    let before = sync::registered(&client, &declared).await?;
    let plan = sync::plan(&declared, &before);
    let mut text = format!("Plan for {url} ({} subjects declared):\n{plan}", declared.len());
    if !plan.refusals.is_empty() {
        return Ok(Report { text, ok: false });
    }
    if !apply {
        return Ok(Report { text, ok: true });
    }
    match sync::apply(&client, &plan, &before).await? {
        Ok(lines) => {
            for line in lines {
                text.push_str(&format!("{line}\n"));
            }
            text.push_str(&format!("Applied {} change(s).\n", plan.changes.len()));
            Ok(Report { text, ok: true })
        }
        Err(refused) => {
            let after = sync::registered(&client, &declared).await?;
            let same = if after == before {
                "verified: the registry is as it was"
            } else {
                "BUT THE REGISTRY DIFFERS FROM BEFORE"
            };
            text.push_str(&format!(
                "! refused by the registry: {}\n  {}\nRolled back {} change(s); {same}.\n",
                refused.change, refused.reason, refused.undone
            ));
            Ok(Report { text, ok: false })
        }
    }
}

/// The catalog directory when none is given: `./schemas`.
pub fn default_catalog_dir() -> PathBuf {
    PathBuf::from("schemas")
}
