//! Every path the gateway answers, in one table: the actix routes, the
//! metric label of each (a fixed set, whatever path a client invents) and
//! which paths take CORS preflights all come from here.
//!
//! Paths are those the SDKs really use, answered directly (a redirect would
//! turn a POST into a GET in several HTTP clients):
//! - Segment HTTP API: `/v1/batch` and the single calls `/v1/track` ...
//! - Segment analytics-next: `/v1/t`, `/v1/p`, `/v1/i`, `/v1/g`, `/v1/a`,
//!   `/v1/s` (`packages/browser/src/plugins/segmentio/index.ts` posts to
//!   the event type's first letter) and `/v1/b` when batching
//!   (`batched-dispatcher.ts`); Segment's Kotlin, Swift, Flutter and React
//!   Native SDKs also post to `/v1/b`.
//! - Segment classic Android, Java and Ruby: `/v1/import`, Java with a
//!   trailing slash (`/v1/import/`).
//! - RudderStack: `/v1/batch` (Node, Python, Java, Go, Android, iOS,
//!   Kotlin, Swift), `/v1/{type}` (JS v3 without batching) and
//!   `/beacon/v1/batch?writeKey=...` (JS v3's beacon plugin).
//! - PostHog capture (see [`super::posthog`]): `/e/` (posthog-js),
//!   `/i/v0/e/` (posthog-js when its remote config names it), `/batch/`
//!   (posthog-node, Python `posthog`), `/i/v0/ai/batch/` (their AI lane),
//!   `/capture/`, `/track/`, `/engage/` (older SDKs); each with or without
//!   the trailing slash. Its load-time configuration: `/flags/`,
//!   `/decide/`, `/array/{token}/config` and `/array/{token}/config.js`;
//!   the extension bundles it loads anyway (`/static/surveys.js`).
//! - GA4 Measurement Protocol (see [`super::ga4`]): `/mp/collect` and its
//!   validation server's `/debug/mp/collect`, as Google documents them.
//! - Snowplow's tracker protocol (see [`super::snowplow`]): its
//!   collector's `/com.snowplowanalytics.snowplow/tp2` (POST, every
//!   tracker's default `postPath`), `/i` and
//!   `/com.snowplowanalytics.snowplow/i` (GET, one event in the query).
//! - Configuration: Segment's `/v1/projects/{writeKey}/settings` and
//!   RudderStack's `/sourceConfig` (with or without its trailing slash).

/// Paths of the batch call, with the trailing-slash forms clients send.
pub const BATCH: [&str; 6] = ["/v1/batch", "/v1/batch/", "/v1/b", "/v1/b/", "/v1/import", "/v1/import/"];

/// RudderStack JS v3's beacon path: the write key is in the query string.
pub const BEACON: [&str; 2] = ["/beacon/v1/batch", "/beacon/v1/batch/"];

/// The single calls, long and short (analytics-next) names, with or
/// without a trailing slash: each a static path (see
/// `server::routes` on why not one `{kind}` pattern).
pub const SINGLE: [&str; 24] = [
    "/v1/track",
    "/v1/track/",
    "/v1/page",
    "/v1/page/",
    "/v1/screen",
    "/v1/screen/",
    "/v1/identify",
    "/v1/identify/",
    "/v1/group",
    "/v1/group/",
    "/v1/alias",
    "/v1/alias/",
    "/v1/t",
    "/v1/t/",
    "/v1/p",
    "/v1/p/",
    "/v1/s",
    "/v1/s/",
    "/v1/i",
    "/v1/i/",
    "/v1/g",
    "/v1/g/",
    "/v1/a",
    "/v1/a/",
];

/// PostHog's capture endpoints (POST, and GET with `data=` in the query).
pub const POSTHOG_CAPTURE: [&str; 14] = [
    "/e",
    "/e/",
    "/i/v0/e",
    "/i/v0/e/",
    "/capture",
    "/capture/",
    "/batch",
    "/batch/",
    "/track",
    "/track/",
    "/engage",
    "/engage/",
    "/i/v0/ai/batch",
    "/i/v0/ai/batch/",
];

/// posthog-js's feature-flag calls, current and older.
pub const POSTHOG_FLAGS: [&str; 4] = ["/flags", "/flags/", "/decide", "/decide/"];

/// posthog-js's remote configuration, JSON and script.
pub const POSTHOG_CONFIG: [&str; 1] = ["/array/{token}/config"];

/// The script form of [`POSTHOG_CONFIG`].
pub const POSTHOG_CONFIG_JS: [&str; 1] = ["/array/{token}/config.js"];

/// posthog-js's extension bundles (`/static/surveys.js`, ...): answered
/// with an empty script, the gateway serves capture only.
pub const POSTHOG_STATIC: [&str; 1] = ["/static/{file:.*}"];

/// GA4's Measurement Protocol collection endpoint.
pub const GA4_COLLECT: [&str; 1] = ["/mp/collect"];

/// GA4's validation server: the same request, checked, nothing stored.
pub const GA4_DEBUG: [&str; 1] = ["/debug/mp/collect"];

/// Snowplow's POST path (`payload_data` batches).
pub const SNOWPLOW_TP2: [&str; 1] = ["/com.snowplowanalytics.snowplow/tp2"];

/// Snowplow's GET paths: one event in the query, answered with a GIF.
pub const SNOWPLOW_PIXEL: [&str; 2] = ["/i", "/com.snowplowanalytics.snowplow/i"];

/// Segment's settings document.
pub const SEGMENT_SETTINGS: [&str; 2] = ["/v1/projects/{write_key}/settings", "/v1/projects/{write_key}/settings/"];

/// RudderStack's source configuration.
pub const SOURCE_CONFIG: [&str; 2] = ["/sourceConfig", "/sourceConfig/"];

/// The single call a path of [`SINGLE`] names (`/v1/<call>`, a trailing
/// slash or not): long names as they are, short names (analytics-next) by
/// their first letter. The handler and the metric label both read it here.
pub fn single_call(path: &str) -> Option<&'static str> {
    const KINDS: [&str; 6] = ["track", "page", "screen", "identify", "group", "alias"];
    let segment = path.strip_prefix("/v1/")?;
    let segment = segment.strip_suffix('/').unwrap_or(segment);
    KINDS.iter().copied().find(|kind| *kind == segment || (segment.len() == 1 && kind.starts_with(segment)))
}

/// The metric label of a path: one per endpoint, whichever of its spellings
/// was used; `None` for paths the gateway does not serve.
pub fn label(path: &str) -> Option<&'static str> {
    let trimmed = if path.len() > 1 { path.strip_suffix('/').unwrap_or(path) } else { path };
    let label = match trimmed {
        "/v1/batch" | "/v1/b" | "/v1/import" => "/v1/batch",
        "/beacon/v1/batch" => "/beacon/v1/batch",
        "/v1/pixel.gif" => "/v1/pixel.gif",
        "/sourceConfig" => "/sourceConfig",
        "/healthz" => "/healthz",
        "/readyz" => "/readyz",
        "/metrics" => "/metrics",
        "/catalog" => "/catalog",
        "/e" | "/i/v0/e" | "/capture" | "/batch" | "/track" | "/engage" | "/i/v0/ai/batch" => "/posthog/capture",
        "/flags" | "/decide" => "/posthog/flags",
        "/mp/collect" => "/ga4/collect",
        "/debug/mp/collect" => "/ga4/debug",
        "/com.snowplowanalytics.snowplow/tp2" => "/snowplow/tp2",
        "/i" | "/com.snowplowanalytics.snowplow/i" => "/snowplow/i",
        other => {
            if other.starts_with("/static/") && other.ends_with(".js") {
                return Some("/posthog/static");
            }
            if other.starts_with("/array/") && (other.ends_with("/config") || other.ends_with("/config.js")) {
                return (other.matches('/').count() == 3).then_some("/posthog/config");
            }
            if other.starts_with("/catalog/") {
                return Some("/catalog");
            }
            if other.starts_with("/v1/projects/") && other.ends_with("/settings") && other.matches('/').count() == 4 {
                return Some("/v1/projects/settings");
            }
            let kind = single_call(other)?;
            return Some(match kind {
                "track" => "/v1/track",
                "page" => "/v1/page",
                "screen" => "/v1/screen",
                "identify" => "/v1/identify",
                "group" => "/v1/group",
                _ => "/v1/alias",
            });
        }
    };
    Some(label)
}

/// Whether browsers may call `path` from other origins (a CORS preflight is
/// granted): the ingestion and configuration endpoints, not the operators'.
pub fn cross_origin(path: &str) -> bool {
    !matches!(label(path), None | Some("/healthz" | "/readyz" | "/metrics" | "/catalog"))
}

/// Whether answers on `path` allow credentials (cookies) to an allowed
/// origin: Snowplow's browser tracker sends them by default
/// (`withCredentials: true`), and a browser drops a credentialed request
/// whose answer does not say `Access-Control-Allow-Credentials: true`.
pub fn credentialed(path: &str) -> bool {
    matches!(label(path), Some("/snowplow/tp2" | "/snowplow/i"))
}

/// Checks `server.path_aliases`: each alias is a path of its own (not one
/// the gateway serves, no query), and each target is an ingestion path the
/// gateway serves (a tracker's, Segment's or the pixel's).
pub fn check_aliases(aliases: &std::collections::BTreeMap<String, String>) -> Result<(), String> {
    for (alias, target) in aliases {
        let problem = if !alias.starts_with('/') || alias.contains(['?', '#', '{', '}']) || alias.len() < 2 {
            Some("the alias must be a plain path starting with `/`".to_owned())
        } else if let Some(served) = label(alias) {
            Some(format!("the gateway already serves it (as {served})"))
        } else {
            match label(target) {
                Some(label) if INGESTION.contains(&label) && !target.contains('{') => None,
                _ => Some(format!(
                    "`{target}` is not an ingestion path of the gateway (one of {})",
                    INGESTION.join(", ")
                )),
            }
        };
        if let Some(problem) = problem {
            return Err(format!("server.path_aliases: `{alias}`: {problem}"));
        }
    }
    Ok(())
}

/// The endpoints (by metric label) a path alias may stand for.
const INGESTION: [&str; 12] = [
    "/v1/batch",
    "/beacon/v1/batch",
    "/v1/pixel.gif",
    "/v1/track",
    "/v1/page",
    "/v1/screen",
    "/v1/identify",
    "/v1/group",
    "/posthog/capture",
    "/ga4/collect",
    "/snowplow/tp2",
    "/snowplow/i",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_alias_must_be_new_and_stand_for_an_ingestion_path() {
        let check = |alias: &str, target: &str| check_aliases(&[(alias.to_owned(), target.to_owned())].into());
        assert_eq!(check("/com.acme/track", "/com.snowplowanalytics.snowplow/tp2"), Ok(()));
        assert_eq!(check("/com.acme/i", "/i"), Ok(()));
        for (alias, target, says) in [
            ("com.acme/track", "/i", "plain path"),
            ("/t?x=1", "/i", "plain path"),
            ("/v1/batch", "/i", "already serves it"),
            ("/com.acme/track", "/metrics", "not an ingestion path"),
            ("/com.acme/track", "/nowhere", "not an ingestion path"),
            ("/com.acme/track", "/v1/projects/{write_key}/settings", "not an ingestion path"),
        ] {
            let error = check(alias, target).expect_err(alias);
            assert!(error.starts_with("server.path_aliases: ") && error.contains(says), "{alias} -> {target}: {error}");
        }
    }

    #[test]
    fn every_spelling_of_an_endpoint_has_its_one_label() {
        for path in ["/v1/batch", "/v1/batch/", "/v1/b", "/v1/import", "/v1/import/"] {
            assert_eq!(label(path), Some("/v1/batch"), "{path}");
        }
        for (path, want) in
            [("/v1/t", "/v1/track"), ("/v1/track/", "/v1/track"), ("/v1/s", "/v1/screen"), ("/v1/a", "/v1/alias")]
        {
            assert_eq!(label(path), Some(want), "{path}");
        }
        assert_eq!(label("/v1/projects/abc/settings"), Some("/v1/projects/settings"));
        assert_eq!(label("/sourceConfig/"), Some("/sourceConfig"));
        assert_eq!(label("/catalog/web/"), Some("/catalog"));
        for path in ["/e/", "/e", "/i/v0/e/", "/batch/", "/capture", "/track/", "/engage/", "/i/v0/ai/batch/"] {
            assert_eq!(label(path), Some("/posthog/capture"), "{path}");
            assert!(cross_origin(path), "{path}");
        }
        assert_eq!(label("/flags/"), Some("/posthog/flags"));
        assert_eq!(label("/decide"), Some("/posthog/flags"));
        assert_eq!(label("/array/phc_x/config"), Some("/posthog/config"));
        assert_eq!(label("/array/phc_x/config.js"), Some("/posthog/config"));
        assert_eq!(label("/array/a/b/config"), None);
        assert_eq!(label("/static/1.449.2/surveys.js"), Some("/posthog/static"));
        assert_eq!(label("/mp/collect"), Some("/ga4/collect"));
        assert_eq!(label("/debug/mp/collect"), Some("/ga4/debug"));
        assert_eq!(label("/mp/collectx"), None);
        assert_eq!(label("/com.snowplowanalytics.snowplow/tp2"), Some("/snowplow/tp2"));
        for path in ["/i", "/com.snowplowanalytics.snowplow/i"] {
            assert_eq!(label(path), Some("/snowplow/i"), "{path}");
            assert!(cross_origin(path) && credentialed(path), "{path}");
        }
        assert_eq!(label("/com.snowplowanalytics.snowplow/tp1"), None);
        assert!(!credentialed("/v1/batch") && !credentialed("/e/") && !credentialed("/mp/collect"));
    }

    #[test]
    fn invented_paths_have_no_label_and_no_preflight() {
        for path in ["/v1/x", "/v1/tr", "/v1/projects/a/b/settings", "/v1//", "/", "/v2/batch", "/v1/trackx"] {
            assert_eq!(label(path), None, "{path}");
            assert!(!cross_origin(path), "{path}");
        }
        assert!(!cross_origin("/metrics"));
        assert!(cross_origin("/v1/p") && cross_origin("/sourceConfig") && cross_origin("/v1/pixel.gif"));
    }

    #[test]
    fn short_names_are_first_letters_and_long_names_are_exact() {
        assert_eq!(single_call("/v1/i"), Some("identify"));
        assert_eq!(single_call("/v1/g/"), Some("group"));
        assert_eq!(single_call("/v1/identify"), Some("identify"));
        assert_eq!(single_call("/v1/identify/"), Some("identify"));
        assert_eq!(single_call("/v1/iden"), None);
        assert_eq!(single_call("/v1/x"), None);
        assert_eq!(single_call("/v2/track"), None);
        assert_eq!(single_call("/v1/track/extra"), None);
        for path in SINGLE {
            assert!(single_call(path).is_some(), "{path} names a call");
        }
    }
}
