//! `eventgw-catalog`: data contracts as code. Checks schema compatibility,
//! explains the difference between two versions, writes the catalog site,
//! provisions topics and registers schemas in a Schema Registry.

use std::path::PathBuf;

use anyhow::{Context, bail};
use eventgw_catalog::cli::{self, Report};
use eventgw_catalog::gateway_config::GatewayConfig;
use eventgw_schemas::Compatibility;

const USAGE: &str = "usage: eventgw-catalog COMMAND
  schemas check [DIR]                      check every version against the previous one, then compile the catalog
  schemas diff OLD.json NEW.json [--mode backward|forward|full|none]
                                           explain what breaks; fails when MODE (default backward) is broken
  schemas docs [DIR] [--out DIR] [--wasm DIR]
                                           write the catalog site (default target/catalog, checker from DIR/wasm/pkg)
  topics plan --config FILE                show what would change on the cluster
  topics apply --config FILE               make it so (refuses to shrink partitions)
  registry plan [DIR] [--registry URL] [--config FILE]
                                           compare every schema version with the Schema Registry
  registry apply [DIR] [--registry URL] [--config FILE]
                                           register what is missing, set each subject's compatibility;
                                           all or nothing (subjects are <topic>-<domain>.<schema>)
DIR defaults to ./schemas. Exit status: 0 ok, 1 a check failed or a change was refused, 2 usage or other errors.";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(report) => {
            print!("{}", report.text);
            std::process::exit(if report.ok { 0 } else { 1 });
        }
        Err(error) => {
            eprintln!("eventgw-catalog: {error:#}");
            std::process::exit(2);
        }
    }
}

fn run(args: &[String]) -> anyhow::Result<Report> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let (positional, options) = split(&words)?;
    let option = |name: &str| options.iter().find(|(k, _)| *k == name).map(|(_, v)| PathBuf::from(v));
    match positional.as_slice() {
        ["schemas", "check", rest @ ..] => cli::schemas_check(&dir(rest)),
        ["schemas", "diff", old, new] => {
            let mode = match option("--mode").as_deref().and_then(|m| m.to_str()) {
                None | Some("backward") => Compatibility::Backward,
                Some("forward") => Compatibility::Forward,
                Some("full") => Compatibility::Full,
                Some("none") => Compatibility::None,
                Some(other) => bail!("unknown mode `{other}`\n{USAGE}"),
            };
            cli::schemas_diff(old.as_ref(), new.as_ref(), mode)
        }
        ["schemas", "docs", rest @ ..] => {
            let dir = dir(rest);
            let out = option("--out").unwrap_or_else(|| PathBuf::from("target/catalog"));
            let wasm = option("--wasm").unwrap_or_else(|| dir.join(eventgw_catalog::site::WASM_PKG));
            cli::schemas_docs(&dir, &out, &wasm)
        }
        ["topics", verb @ ("plan" | "apply")] => {
            let config = option("--config")
                .or_else(|| std::env::var_os("EVENTGW_CONFIG").map(PathBuf::from))
                .context(format!("topics needs --config FILE (the gateway's configuration)\n{USAGE}"))?;
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(cli::topics(&config, *verb == "apply"))
        }
        ["registry", verb @ ("plan" | "apply"), rest @ ..] => {
            let config = option("--config").map(|path| GatewayConfig::load(&path)).transpose()?;
            let dir = match (rest.first(), &config) {
                (Some(dir), _) => PathBuf::from(dir),
                (None, Some(config)) => config.catalog_dir.clone(),
                (None, None) => cli::default_catalog_dir(),
            };
            let url = option("--registry")
                .map(|u| u.to_string_lossy().into_owned())
                .or_else(|| config.as_ref().and_then(|c| c.registry_url.clone()))
                .or_else(|| std::env::var("EVENTGW_REGISTRY_URL").ok())
                .unwrap_or_else(|| cli::DEFAULT_REGISTRY_URL.to_owned());
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(cli::registry(&dir, &url, *verb == "apply"))
        }
        _ => bail!("{USAGE}"),
    }
}

fn dir(rest: &[&str]) -> PathBuf {
    rest.first().map_or_else(cli::default_catalog_dir, PathBuf::from)
}

/// Positional words, and `--name value` options.
type Words<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);

fn split<'a>(words: &[&'a str]) -> anyhow::Result<Words<'a>> {
    let (mut positional, mut options) = (Vec::new(), Vec::new());
    let mut iter = words.iter();
    while let Some(word) = iter.next() {
        if *word == "--help" || *word == "-h" {
            bail!("{USAGE}");
        }
        if word.starts_with("--") {
            let value = iter.next().with_context(|| format!("{word} needs a value\n{USAGE}"))?;
            options.push((*word, *value));
        } else {
            positional.push(*word);
        }
    }
    Ok((positional, options))
}
