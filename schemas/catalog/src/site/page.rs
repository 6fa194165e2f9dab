//! The catalog page's HTML: one section per domain, one article per event
//! with a field table per version, every text escaped.

use std::fmt::Write as _;
use std::path::Path;

use eventgw_schemas::{Catalog, Domain, EventType};

use super::fields;
use super::mappings::{self, Loaded};

/// The page for `catalog` and the trackers' `mappings` to it, file names
/// shown relative to `root`.
pub(super) fn index(catalog: &Catalog, root: &Path, mappings: &Loaded) -> String {
    let events = catalog.events();
    let mapped = mappings::by_event(mappings);
    let mut html = String::from(concat!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        "<title>Event catalog</title>\n<link rel=\"stylesheet\" href=\"catalog.css\">\n",
        "<script type=\"module\" src=\"checker.js\"></script>\n</head>\n<body>\n",
    ));
    let _ = write!(
        html,
        "<header><h1>Event catalog</h1><p>{} events in {} domains. Each event's schema versions, owner, topic and \
         partition key, generated from the catalog the gateway enforces.</p><nav>",
        events.len(),
        catalog.domains().len()
    );
    for name in catalog.domains().keys() {
        let _ = write!(html, "<a href=\"#domain-{0}\">{0}</a> ", esc(name));
    }
    html.push_str(mappings::nav(mappings));
    html.push_str(concat!(
        "</nav></header>\n<section id=\"check\"><h2>Check an event</h2>",
        "<p>Paste an event as a client would send it (a <code>track</code> call with its <code>event</code> name, ",
        "or a <code>page</code> or <code>screen</code> call). It is checked here, in your browser, by the same ",
        "code the gateway runs, compiled to WebAssembly.</p>",
        "<textarea id=\"event-input\" rows=\"10\" spellcheck=\"false\"></textarea>",
        "<p><button id=\"check-button\" type=\"button\" disabled>Check</button> ",
        "<span id=\"check-status\">Loading the checker…</span></p>",
        "<div id=\"check-result\" role=\"status\" aria-live=\"polite\"></div></section>\n<main>\n",
    ));
    for domain in catalog.domains().values() {
        domain_section(&mut html, domain, &events, root, &mapped);
    }
    mappings::section(&mut html, catalog, mappings, root);
    html.push_str("</main>\n</body>\n</html>\n");
    html
}

/// Each catalog event's tracker events, `(protocol, tracker event)`.
type Mapped<'a> = std::collections::BTreeMap<String, Vec<(&'a str, &'a str)>>;

fn domain_section(html: &mut String, domain: &Domain, events: &[&EventType], root: &Path, mapped: &Mapped<'_>) {
    let settings: Vec<String> = domain.settings.kafka_configs().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let file = Path::new(&domain.origin).strip_prefix(root).map_or(domain.origin.clone(), |p| p.display().to_string());
    let _ = writeln!(
        html,
        "<section class=\"domain\" id=\"domain-{name}\"><h2>{name}</h2><p>{desc}</p><dl>\
         <dt>Owner</dt><dd>{owner}</dd><dt>Topic</dt><dd><code>{topic}</code>, {parts} partitions</dd>\
         <dt>Topic settings</dt><dd>{settings}</dd><dt>Declared in</dt><dd><code>{file}</code></dd></dl>",
        name = esc(&domain.name),
        desc = esc(&domain.description),
        owner = esc(&domain.owner),
        topic = esc(&domain.topic),
        parts = domain.partitions,
        settings = if settings.is_empty() { "broker defaults".to_owned() } else { esc(&settings.join(", ")) },
        file = esc(&file),
    );
    for event in events.iter().filter(|e| e.domain == domain.name) {
        event_article(html, event, &mappings::event_term(mapped.get(&*event.name)));
    }
    html.push_str("</section>\n");
}

fn event_article(html: &mut String, event: &EventType, mapped: &str) {
    let _ = writeln!(
        html,
        "<article class=\"event\" id=\"event-{anchor}\" data-event=\"{name}\"><h3>{name}</h3><p>{desc}</p><dl>\
         <dt>Schema</dt><dd><code>{domain}/{schema}</code></dd><dt>Partition key</dt><dd>{key}</dd>\
         <dt>Compatibility</dt><dd>{compat}</dd><dt>Rollout</dt><dd>{rollout}</dd>{privacy}{mapped}</dl>",
        anchor = esc(&event.schema),
        name = esc(&event.name),
        desc = esc(event.description()),
        domain = esc(&event.domain),
        schema = esc(&event.schema),
        key = esc(&event.key.describe()),
        compat = event.compatibility().as_str(),
        rollout = event.rollout().as_str(),
        privacy = privacy_terms(event),
    );
    let newest = event.latest().version;
    for version in event.versions().collect::<Vec<_>>().into_iter().rev() {
        let open = if version.version == newest { " open" } else { "" };
        let label = if version.version == newest { " (newest)" } else { "" };
        let _ = write!(
            html,
            "<details class=\"version\" data-version=\"{v}\"{open}><summary>Version {v}{label}</summary>\
             <table class=\"fields\"><thead><tr><th>Field</th><th>Type</th><th>Required</th><th>Description</th>\
             <th>Constraints</th></tr></thead><tbody>",
            v = version.version
        );
        for row in fields::rows(version.document()) {
            let _ = write!(
                html,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&row.path),
                esc(&row.kind),
                if row.required { "yes" } else { "" },
                esc(&row.description),
                esc(&row.constraints)
            );
        }
        html.push_str("</tbody></table>");
        for example in &version.examples {
            let pretty = serde_json::to_string_pretty(example).unwrap_or_default();
            let _ = write!(
                html,
                "<div class=\"example\"><pre>{}</pre><button type=\"button\" class=\"try\">Check this example</button></div>",
                esc(&pretty)
            );
        }
        html.push_str("</details>\n");
    }
    html.push_str("</article>\n");
}

/// The event's purpose and personal fields (each with what the gateway
/// does to it at ingest), as definition-list terms; empty when it has none.
fn privacy_terms(event: &EventType) -> String {
    let mut out = String::new();
    if let Some(purpose) = event.purpose() {
        let _ = write!(out, "<dt>Purpose</dt><dd>{}</dd>", esc(purpose));
    }
    if !event.personal().is_empty() {
        let fields: Vec<String> =
            event.personal().iter().map(|f| format!("<code>{}</code>: {}", esc(&f.path), f.action.as_str())).collect();
        let _ = write!(out, "<dt>Personal data</dt><dd class=\"personal\">{}</dd>", fields.join(", "));
    }
    out
}

/// Escapes text for HTML content and attribute values.
pub(super) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
