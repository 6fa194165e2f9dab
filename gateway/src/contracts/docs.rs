//! The readable catalog: a static site rendered from the compiled catalog
//! (domains, owners, topics, keys, each event's versions with their fields
//! and examples) plus the WebAssembly checker, so a person can paste an
//! event and see what the gateway would say. `eventgw-catalog schemas docs`
//! writes it to a directory; the gateway serves the same files at `/catalog`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use eventgw_schemas::{Catalog, Domain, DomainSource, EventType};

use super::fields;

/// The wasm-bindgen output the page loads, as `scripts/build-wasm` names it.
pub const WASM_FILES: [&str; 2] = ["eventgw_schemas_wasm.js", "eventgw_schemas_wasm_bg.wasm"];

/// One file of the site.
#[derive(Debug, Clone)]
pub struct SiteFile {
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes; shared, so answering a request copies nothing.
    pub body: actix_web::web::Bytes,
}

/// Every file of the catalog site, by path relative to the site root.
/// Cheap to clone: each server worker holds one.
#[derive(Debug, Clone)]
pub struct Site {
    files: Arc<BTreeMap<String, SiteFile>>,
}

impl Site {
    /// Renders the site for `catalog`, loaded from `catalog_dir` (file names
    /// on the page are shown relative to it). The WebAssembly checker is
    /// taken from `wasm_dir` when it holds a build; without one the page
    /// says the in-browser check is unavailable and how to build it.
    pub fn render(catalog: &Catalog, catalog_dir: &Path, wasm_dir: Option<&Path>) -> Self {
        let mut files = BTreeMap::new();
        let mut put = |name: &str, content_type, body: Vec<u8>| {
            files.insert(name.to_owned(), SiteFile { content_type, body: body.into() });
        };
        put("index.html", "text/html; charset=utf-8", index(catalog, catalog_dir).into_bytes());
        put("catalog.css", "text/css; charset=utf-8", include_bytes!("assets/catalog.css").to_vec());
        put("checker.js", "text/javascript; charset=utf-8", include_bytes!("assets/checker.js").to_vec());
        let sources = relative_sources(catalog.sources(), catalog_dir);
        put("catalog.json", "application/json", serde_json::to_vec(&sources).unwrap_or_default());
        for name in WASM_FILES {
            if let Some(body) = wasm_dir.and_then(|dir| std::fs::read(dir.join(name)).ok()) {
                let content_type =
                    if name.ends_with(".wasm") { "application/wasm" } else { "text/javascript; charset=utf-8" };
                put(&format!("wasm/{name}"), content_type, body);
            }
        }
        Self { files: Arc::new(files) }
    }

    /// The file at `path` (`index.html`, `wasm/...`), if the site has it.
    pub fn get(&self, path: &str) -> Option<&SiteFile> {
        self.files.get(path)
    }

    /// Whether the WebAssembly checker is part of the site.
    pub fn has_checker(&self) -> bool {
        WASM_FILES.iter().all(|name| self.files.contains_key(&format!("wasm/{name}")))
    }

    /// Writes every file under `out`, creating directories as needed.
    pub fn write_to(&self, out: &Path) -> std::io::Result<()> {
        for (name, file) in self.files.iter() {
            let path = out.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, &file.body)?;
        }
        Ok(())
    }
}

/// The sources with file names relative to the catalog directory, so the
/// page does not publish the server's paths.
fn relative_sources(sources: &[DomainSource], root: &Path) -> Vec<DomainSource> {
    let strip = |origin: &str| {
        Path::new(origin).strip_prefix(root).map_or_else(|_| origin.to_owned(), |p| p.display().to_string())
    };
    let mut sources = sources.to_vec();
    for source in &mut sources {
        source.origin = strip(&source.origin);
        for doc in &mut source.schemas {
            doc.origin = strip(&doc.origin);
        }
    }
    sources
}

fn index(catalog: &Catalog, root: &Path) -> String {
    let events = catalog.events();
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
        domain_section(&mut html, domain, &events, root);
    }
    html.push_str("</main>\n</body>\n</html>\n");
    html
}

fn domain_section(html: &mut String, domain: &Domain, events: &[&EventType], root: &Path) {
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
        event_article(html, event);
    }
    html.push_str("</section>\n");
}

fn event_article(html: &mut String, event: &EventType) {
    let _ = writeln!(
        html,
        "<article class=\"event\" id=\"event-{anchor}\" data-event=\"{name}\"><h3>{name}</h3><p>{desc}</p><dl>\
         <dt>Schema</dt><dd><code>{domain}/{schema}</code></dd><dt>Partition key</dt><dd>{key}</dd>\
         <dt>Compatibility</dt><dd>{compat}</dd><dt>Rollout</dt><dd>{rollout}</dd>{privacy}</dl>",
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
fn esc(text: &str) -> String {
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
