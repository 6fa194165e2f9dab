//! The other trackers' mappings on the catalog page: which tracker events
//! become each catalog event (on the event's article), and a table per
//! protocol of its rules, so a team sending PostHog, GA4 or Snowplow events
//! sees what the gateway will make of them. Every text escaped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use eventgw_schemas::Catalog;

use super::page::esc;
use crate::mapping::check::target;
use crate::mapping::{MAPPINGS_DIR, MappingRefusal, TrackerMappings};

/// The mappings as the page shows them: loaded, or why not.
pub(super) type Loaded = Result<TrackerMappings, MappingRefusal>;

/// How the page names a protocol (the file's stem otherwise).
fn label(protocol: &str) -> &str {
    match protocol {
        "posthog" => "PostHog",
        "ga4" => "GA4",
        "snowplow" => "Snowplow",
        other => other,
    }
}

/// The tracker events that become each catalog event, by catalog event
/// name: `(protocol label, tracker event)`, protocol by protocol.
pub(super) fn by_event(mappings: &Loaded) -> BTreeMap<String, Vec<(&str, &str)>> {
    let mut by_event: BTreeMap<String, Vec<(&str, &str)>> = BTreeMap::new();
    for (protocol, mapping) in mappings.iter().flat_map(|m| &m.protocols) {
        for (key, rule) in &mapping.events {
            if let Some(name) = target(key, rule) {
                by_event.entry(name.to_owned()).or_default().push((label(protocol), key));
            }
        }
    }
    by_event
}

/// The event article's definition-list term; empty when nothing maps to it.
pub(super) fn event_term(mapped: Option<&Vec<(&str, &str)>>) -> String {
    let Some(mapped) = mapped.filter(|m| !m.is_empty()) else { return String::new() };
    let names: Vec<String> = mapped.iter().map(|(p, key)| format!("{} <code>{}</code>", esc(p), esc(key))).collect();
    format!("<dt>Tracker events</dt><dd class=\"mapped\">{}</dd>", names.join(", "))
}

/// The nav link to the mappings section, when there is one.
pub(super) fn nav(mappings: &Loaded) -> &'static str {
    match mappings {
        Ok(m) if m.protocols.is_empty() => "",
        _ => "<a href=\"#mappings\">tracker mappings</a> ",
    }
}

/// The section of every protocol's rules; nothing when there are none.
pub(super) fn section(html: &mut String, catalog: &Catalog, mappings: &Loaded, root: &Path) {
    let mappings = match mappings {
        Ok(m) if m.protocols.is_empty() => return,
        Ok(m) => m,
        Err(refusal) => {
            let file =
                Path::new(&refusal.file).strip_prefix(root).map_or(refusal.file.clone(), |p| p.display().to_string());
            let _ = writeln!(
                html,
                "<section class=\"mappings\" id=\"mappings\"><h2>Tracker mappings</h2><p>The mapping files could not be \
                 read: <code>{}</code> <code>{}</code> <code>{}</code>: {}</p></section>",
                esc(refusal.code),
                esc(&file),
                esc(&refusal.key),
                esc(&refusal.problem)
            );
            return;
        }
    };
    html.push_str(concat!(
        "<section class=\"mappings\" id=\"mappings\"><h2>Tracker mappings</h2><p>How the events of other trackers ",
        "become catalog events: each rule's call, catalog event, pinned version and property renames, checked ",
        "against this catalog by <code>eventgw-catalog schemas check</code>. A tracker event no rule names stays ",
        "a track call of its own name.</p>\n",
    ));
    for (protocol, mapping) in &mappings.protocols {
        let _ = write!(
            html,
            "<article class=\"mapping\" id=\"mapping-{p}\" data-protocol=\"{p}\"><h3>{label}</h3><dl><dt>Declared \
             in</dt><dd><code>{dir}/{p}.toml</code></dd></dl><table class=\"fields\"><thead><tr><th>Tracker event</th>\
             <th>Call</th><th>Catalog event</th><th>Version</th><th>Renames</th></tr></thead><tbody>",
            p = esc(protocol),
            label = esc(label(protocol)),
            dir = MAPPINGS_DIR,
        );
        for (key, rule) in &mapping.events {
            let event = match target(key, rule) {
                None => "none (the call itself)".to_owned(),
                Some(name) => match catalog.event(name) {
                    Some(event) => format!("<a href=\"#event-{}\">{}</a>", esc(&event.schema), esc(name)),
                    None => format!("{} (not in the catalog)", esc(name)),
                },
            };
            let version = rule.version.map_or_else(|| "newest".to_owned(), |v| v.to_string());
            let renames: Vec<String> =
                rule.rename.iter().map(|(f, t)| format!("<code>{}</code> → <code>{}</code>", esc(f), esc(t))).collect();
            let _ = write!(
                html,
                "<tr><td><code>{}</code></td><td>{}</td><td>{event}</td><td>{version}</td><td>{}</td></tr>",
                esc(key),
                rule.call.as_str(),
                renames.join(", ")
            );
        }
        html.push_str("</tbody></table></article>\n");
    }
    html.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::{EventRule, TrackerMapping};

    #[test]
    fn tracker_names_are_escaped_and_grouped_by_catalog_event() {
        let rule = |event: &str| EventRule {
            call: crate::mapping::Call::Track,
            event: Some(event.to_owned()),
            version: None,
            rename: BTreeMap::new(),
        };
        let mut posthog = TrackerMapping::default();
        posthog.events.insert("<script>x</script>".into(), rule("Link Clicked"));
        posthog.events.insert("\"quoted\"".into(), rule("Form Submitted"));
        let mut mappings = TrackerMappings::default();
        mappings.protocols.insert("posthog".into(), posthog);
        let loaded: Loaded = Ok(mappings);
        let by_event = by_event(&loaded);
        let term = event_term(by_event.get("Link Clicked"));
        assert_eq!(
            term,
            "<dt>Tracker events</dt><dd class=\"mapped\">PostHog <code>&lt;script&gt;x&lt;/script&gt;</code></dd>"
        );
        assert!(event_term(by_event.get("Form Submitted")).contains("<code>&quot;quoted&quot;</code>"));
        assert_eq!(event_term(by_event.get("Page Viewed")), "");
    }
}
