//! `gateway keys rotate|forget|decrypt [--config FILE]`: the operator's
//! side of the user keys of `encrypt` fields (see [`super::keys`]). Only
//! these commands add files to `privacy.user_keys_dir`; no request does.

use anyhow::Context;

use super::keys::UserKeys;
use crate::config::Config;

/// A `gateway keys` command (parsed by clap in `main.rs`).
#[derive(Debug, Clone, clap::Subcommand)]
pub enum KeysCommand {
    /// Start a new master generation; running gateways encrypt with it
    /// within seconds (they re-read the masters), older values still decrypt.
    Rotate,
    /// Erase a user: what was encrypted for them no longer decrypts.
    Forget {
        /// The `userId` or `anonymousId`, exactly as in the events.
        user: String,
    },
    /// Decrypt one `enc:` value of a user (for a consumer entitled to read).
    Decrypt {
        /// The `userId` or `anonymousId` the value was encrypted for.
        user: String,
        /// The value as stored (`enc:v2:…` or `enc:v1:…`).
        value: String,
    },
}

/// Runs a `gateway keys` command on the key store of `config`.
pub fn main(command: KeysCommand, config: &Config) -> anyhow::Result<()> {
    let dir = config.privacy.user_keys_dir.as_deref().context("privacy.user_keys_dir is not configured")?;
    let keys = UserKeys::open(dir)?;
    match command {
        KeysCommand::Rotate => println!("generation {} now encrypts", keys.rotate()?),
        KeysCommand::Forget { user } => {
            let new = keys.forget(&user)?;
            println!("{}", if new { "erased" } else { "already erased" });
        }
        KeysCommand::Decrypt { user, value } => {
            let plain = keys.decrypt(&user, &value)?;
            println!("{}", String::from_utf8_lossy(&plain));
        }
    }
    Ok(())
}
