//! Bots are labelled, not dropped: known crawlers (the parser's list) and
//! headless or automated browsers (our list below). HTTP libraries and the
//! server SDKs built on them are not bots: backends send real events.

use super::hints::ClientHints;

/// A user agent judged to be a bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bot {
    /// The bot's name, from a fixed list (a metric label): `Googlebot`,
    /// `HeadlessChrome`, `misc crawler`.
    pub name: &'static str,
    /// `crawler` (indexes or fetches pages) or `headless` (a scripted browser).
    pub category: &'static str,
}

/// Markers of automation woothee does not know, matched case-sensitively as
/// the tools write them. Order matters only for which name is reported.
const MARKERS: [(&str, &str, &str); 18] = [
    ("HeadlessChrome", "HeadlessChrome", "headless"),
    ("PhantomJS", "PhantomJS", "headless"),
    ("Chrome-Lighthouse", "Lighthouse", "headless"),
    ("Electron/", "Electron", "headless"),
    ("Puppeteer", "Puppeteer", "headless"),
    ("Playwright", "Playwright", "headless"),
    ("Selenium", "Selenium", "headless"),
    ("GPTBot", "GPTBot", "crawler"),
    ("ClaudeBot", "ClaudeBot", "crawler"),
    ("CCBot", "CCBot", "crawler"),
    ("Applebot", "Applebot", "crawler"),
    ("DuckDuckBot", "DuckDuckBot", "crawler"),
    ("YandexBot", "YandexBot", "crawler"),
    ("Bytespider", "Bytespider", "crawler"),
    ("facebookexternalhit", "facebook", "crawler"),
    ("Slackbot", "Slackbot", "crawler"),
    ("SemrushBot", "SemrushBot", "crawler"),
    ("PetalBot", "PetalBot", "crawler"),
];

/// Whether `agent` (parsed by woothee as `category`/`name`) is a bot.
pub fn classify(agent: &str, category: &str, name: &'static str, hints: Option<&ClientHints>) -> Option<Bot> {
    // Desktop apps built on Electron are not automation unless headless.
    if let Some((_, bot, kind)) = MARKERS.iter().find(|(m, _, _)| *m != "Electron/" && agent.contains(m)) {
        return Some(Bot { name: bot, category: kind });
    }
    if hints.is_some_and(ClientHints::headless) {
        return Some(Bot { name: "HeadlessChrome", category: "headless" });
    }
    (category == "crawler").then_some(Bot { name, category: "crawler" })
}
