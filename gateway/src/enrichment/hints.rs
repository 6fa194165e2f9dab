//! The client hints (`Sec-CH-UA-*`) of a request: a fact about the client
//! ([`super::client::Client`]) that device parsing ([`super::device`]) and
//! bot labelling ([`super::bots`]) both read, kept in a file of its own so
//! neither of those imports the other for it.

use actix_web::http::header::{HeaderMap, HeaderName};

// Named once: a lookup by `&str` parses and checks the name on every
// request.
const BRANDS: HeaderName = HeaderName::from_static("sec-ch-ua");
const FULL_VERSIONS: HeaderName = HeaderName::from_static("sec-ch-ua-full-version-list");
const MOBILE: HeaderName = HeaderName::from_static("sec-ch-ua-mobile");
const PLATFORM: HeaderName = HeaderName::from_static("sec-ch-ua-platform");
const PLATFORM_VERSION: HeaderName = HeaderName::from_static("sec-ch-ua-platform-version");
const MODEL: HeaderName = HeaderName::from_static("sec-ch-ua-model");

/// The `Sec-CH-UA-*` headers of a request, as sent.
#[derive(Debug, Clone, Default)]
pub struct ClientHints {
    brands: Option<String>,
    full_versions: Option<String>,
    mobile: Option<String>,
    platform: Option<String>,
    platform_version: Option<String>,
    model: Option<String>,
}

impl ClientHints {
    /// The hints of a request; all `None` when it sent none.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let get = |name: &HeaderName| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        Self {
            brands: get(&BRANDS),
            full_versions: get(&FULL_VERSIONS),
            mobile: get(&MOBILE),
            platform: get(&PLATFORM),
            platform_version: get(&PLATFORM_VERSION),
            model: get(&MODEL),
        }
    }

    /// The hints that change a profile, as one text, for caching profiles
    /// by user agent and hints together.
    pub fn cache_key(&self) -> String {
        let parts =
            [&self.brands, &self.full_versions, &self.mobile, &self.platform, &self.platform_version, &self.model];
        parts.iter().map(|p| p.as_deref().unwrap_or_default()).collect::<Vec<_>>().join("\n")
    }

    /// Whether any hint was sent.
    pub fn is_empty(&self) -> bool {
        self.brands.is_none() && self.mobile.is_none() && self.platform.is_none()
    }

    /// Headless Chromium names itself in its brand list.
    pub fn headless(&self) -> bool {
        self.brands.as_deref().is_some_and(|b| b.contains("HeadlessChrome"))
    }

    /// The browser brand and version: the first real brand, preferring a
    /// named browser over its engine (`Google Chrome` over `Chromium`) and
    /// skipping the deliberately bogus GREASE entry (`Not-A.Brand`).
    pub fn browser(&self) -> Option<(String, String)> {
        let list = self.full_versions.as_deref().or(self.brands.as_deref())?;
        let brands: Vec<(String, String)> = list
            .split(',')
            .filter_map(|entry| {
                let (brand, version) = entry.split_once(";v=")?;
                Some((unquote(brand), unquote(version)))
            })
            .filter(|(brand, _)| !(brand.contains("Not") && brand.contains("Brand")))
            .collect();
        brands.iter().find(|(b, _)| b != "Chromium").or(brands.first()).cloned()
    }

    /// `Sec-CH-UA-Platform`, unquoted (`Windows`).
    pub fn platform(&self) -> Option<String> {
        self.platform.as_deref().map(unquote)
    }

    /// `Sec-CH-UA-Platform-Version`, unquoted.
    pub fn platform_version(&self) -> Option<String> {
        self.platform_version.as_deref().map(unquote)
    }

    /// `Sec-CH-UA-Mobile` as sent: `?1` or `?0`.
    pub fn mobile(&self) -> Option<&str> {
        self.mobile.as_deref()
    }

    /// `Sec-CH-UA-Model`, unquoted.
    pub fn model(&self) -> Option<String> {
        self.model.as_deref().map(unquote)
    }
}

fn unquote(text: &str) -> String {
    text.trim().trim_matches('"').to_owned()
}
