//! Device, browser and OS from the user agent (woothee, a maintained
//! parser with no data file to ship), refined by client hints
//! (`Sec-CH-UA-*`) where Chromium sends them: its reduced user agent
//! freezes the OS version and model, the hints do not.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::bots::{self, Bot};
use super::hints::ClientHints;
use super::splice::shared_json;

/// What one user agent says: `context.agent` and whether it is a bot.
#[derive(Debug, Clone)]
pub struct Profile {
    /// `{browser, browserVersion, os, osVersion, deviceClass, model}`.
    pub agent: Map<String, Value>,
    /// Set when the agent is a crawler or a headless browser.
    pub bot: Option<Bot>,
    /// `agent` as compact JSON, serialised once per profile and spliced as
    /// is into every record of this user agent.
    pub agent_json: Arc<RawValue>,
    /// `context.bot` (`{name, category}`) as compact JSON, when a bot.
    pub bot_json: Option<Arc<RawValue>>,
}

/// Parses `agent`; `hints` are the request's own, applied only when
/// `agent` is the request's `User-Agent` (not one a server SDK forwarded).
pub fn profile(parser: &woothee::parser::Parser, agent: &str, hints: Option<&ClientHints>) -> Profile {
    let parsed = parser.parse(agent);
    let (name, category, os, os_version, version) =
        parsed.as_ref().map_or(("UNKNOWN", "UNKNOWN", "UNKNOWN", "UNKNOWN", "UNKNOWN"), |r| {
            (r.name, r.category, r.os, r.os_version.as_ref(), r.version)
        });
    let bot = bots::classify(agent, category, static_name(parsed.as_ref()), hints);
    let mut out = Map::new();
    let mut put = |key: &str, value: &str| {
        if !value.is_empty() && value != "UNKNOWN" {
            out.insert(key.to_owned(), Value::String(value.to_owned()));
        }
    };
    put("browser", name);
    put("browserVersion", version);
    put("os", os);
    put("osVersion", os_version);
    put("deviceClass", device_class(category, os));
    if let Some(hints) = hints.filter(|h| !h.is_empty()) {
        if let Some((brand, version)) = hints.browser() {
            put("browser", &brand);
            put("browserVersion", &version);
        }
        if let Some(platform) = hints.platform() {
            put("os", &platform);
            if let Some(version) = hints.platform_version() {
                put("osVersion", &platform_version(&platform, &version));
            }
        }
        match hints.mobile() {
            Some("?1") => put("deviceClass", "mobile"),
            Some("?0") if device_class(category, os) != "tablet" => put("deviceClass", "desktop"),
            _ => {}
        }
        if let Some(model) = hints.model() {
            put("model", &model);
        }
    }
    if bot.is_some() {
        out.insert("deviceClass".into(), Value::String("bot".into()));
    }
    let agent_json = shared_json(&Value::Object(out.clone()));
    let bot_json =
        bot.as_ref().map(|bot| shared_json(&serde_json::json!({"name": bot.name, "category": bot.category})));
    Profile { agent: out, bot, agent_json, bot_json }
}

/// woothee's names are `&'static str` from its dataset, except for a few
/// built at parse time; only the static ones may become metric labels.
fn static_name(parsed: Option<&woothee::parser::WootheeResult<'_>>) -> &'static str {
    const KNOWN: [&str; 12] = [
        "Googlebot",
        "Googlebot Mobile",
        "Google Mediapartners",
        "AdsBot-Google",
        "AdsBot-Google-Mobile",
        "Baiduspider",
        "bingbot",
        "BingPreview",
        "msnbot",
        "Yahoo! Slurp",
        "twitter",
        "facebook",
    ];
    let name = parsed.map_or("", |r| r.name);
    KNOWN.iter().find(|k| **k == name).copied().unwrap_or("misc crawler")
}

/// `desktop`, `mobile`, `tablet`, `console`, `bot` or `other`.
fn device_class(category: &str, os: &str) -> &'static str {
    match category {
        "pc" => "desktop",
        "smartphone" if os == "iPad" => "tablet",
        "smartphone" | "mobilephone" => "mobile",
        "appliance" => "console",
        "crawler" => "bot",
        _ => "other",
    }
}

/// Windows 11 reports itself as `Windows NT 10.0` in the user agent; only
/// the platform-version hint (13 and up) tells it from Windows 10.
fn platform_version(platform: &str, version: &str) -> String {
    if platform == "Windows" {
        let major: u32 = version.split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
        return if major >= 13 {
            "11".into()
        } else if major > 0 {
            "10".into()
        } else {
            version.into()
        };
    }
    version.to_owned()
}
