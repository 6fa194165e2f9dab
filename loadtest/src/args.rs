//! `--key value` arguments, without a parser dependency: the harness has a
//! handful of flags and scripts/bench is their only regular caller.

use std::collections::HashMap;
use std::str::FromStr;

use anyhow::{Context, bail};

/// Flags after the subcommand.
pub struct Args {
    values: HashMap<String, String>,
}

impl Args {
    /// Parses `--key value` pairs and `--flag` switches.
    pub fn parse(raw: &[String]) -> anyhow::Result<Self> {
        let mut values = HashMap::new();
        let mut i = 0;
        while i < raw.len() {
            let Some(key) = raw[i].strip_prefix("--") else { bail!("unexpected argument `{}`", raw[i]) };
            match raw.get(i + 1).filter(|v| !v.starts_with("--")) {
                Some(value) => {
                    values.insert(key.to_owned(), value.clone());
                    i += 2;
                }
                None => {
                    values.insert(key.to_owned(), "true".to_owned());
                    i += 1;
                }
            }
        }
        Ok(Self { values })
    }

    /// The value of `--key`, parsed, or `default`.
    pub fn get<T: FromStr>(&self, key: &str, default: T) -> anyhow::Result<T>
    where
        T::Err: std::fmt::Display,
    {
        match self.values.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e| anyhow::anyhow!("--{key} {v}: {e}")),
        }
    }

    /// The value of a required `--key`.
    pub fn required(&self, key: &str) -> anyhow::Result<String> {
        self.values.get(key).cloned().with_context(|| format!("--{key} is required"))
    }

    /// Whether `--flag` was given.
    pub fn flag(&self, key: &str) -> bool {
        self.values.get(key).is_some_and(|v| v == "true")
    }
}
