//! `docs/architecture.md` ("Which module may use which") says which module of the gateway crate may
//! use which, and that dependencies run one way. This reads every
//! `crate::<module>` path in `gateway/src` (comments and `#[cfg(test)]`
//! items left out: tests may use anything) and checks there is no cycle
//! between top-level modules, and that the leaves use nothing of the crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`None` for the crate
/// root and the binary).
fn top_module(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// `text` without `//` comments and without the items marked `#[cfg(test)]`.
fn production_code(text: &str) -> String {
    let mut kept = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        kept.push_str(&rest[..at]);
        rest = skip_item(&rest[at..]);
    }
    kept.push_str(rest);
    kept.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// What follows the item at the start of `text`: up to its first `;` when
/// that comes before any `{`, else past the matching `}`.
fn skip_item(text: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            ';' if depth == 0 => return &text[i + 1..],
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[i + 1..];
                }
            }
            _ => {}
        }
    }
    ""
}

fn graph() -> Graph {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let modules: BTreeSet<String> =
        files.iter().filter_map(|f| top_module(f.strip_prefix(&root).expect("under src"))).collect();
    let mut graph: Graph = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for file in &files {
        let relative = file.strip_prefix(&root).expect("under src");
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let Some(from) = top_module(relative) else { continue };
        if name.ends_with("_tests.rs") {
            continue;
        }
        let text = production_code(&std::fs::read_to_string(file).expect("read source"));
        for used in uses(&text) {
            if used != from && modules.contains(&used) {
                graph.get_mut(&from).expect("module").insert(used);
            }
        }
    }
    graph
}

/// Every module named after `crate::`, also inside `use crate::{a, b::c}`.
fn uses(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let after = &text[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                found.insert(ident(part.trim_start()));
            }
        } else {
            found.insert(ident(after));
        }
    }
    found
}

fn ident(text: &str) -> String {
    text.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
}

/// The modules on a cycle, each cycle as one path `a -> b -> ... -> a`.
fn cycles(graph: &Graph) -> Vec<String> {
    let mut found = Vec::new();
    for start in graph.keys() {
        let mut path = vec![start.clone()];
        walk(graph, start, &mut path, &mut found);
    }
    found
}

fn walk(graph: &Graph, start: &str, path: &mut Vec<String>, found: &mut Vec<String>) {
    let last = path.last().expect("non-empty").clone();
    for next in &graph[&last] {
        if next == start {
            // Report each cycle once, from its smallest module.
            if path.iter().all(|m| m.as_str() >= start) {
                found.push(format!("{} -> {start}", path.join(" -> ")));
            }
        } else if !path.contains(next) && next.as_str() > start {
            path.push(next.clone());
            walk(graph, start, path, found);
            path.pop();
        }
    }
}

#[test]
fn no_cycle_between_top_level_modules() {
    let graph = graph();
    for (from, to) in &graph {
        println!("{from} -> {}", to.iter().cloned().collect::<Vec<_>>().join(" "));
    }
    assert!(graph.len() > 10, "found only {} modules: is the path right?", graph.len());
    assert!(graph["stages"].contains("pipeline"), "the reader missed `stages` using `pipeline`");
    assert_eq!(cycles(&graph), Vec::<String>::new());
}

#[test]
fn leaves_use_nothing_of_the_crate() {
    let graph = graph();
    for leaf in ["code", "compact", "config", "outcome", "text"] {
        assert_eq!(graph[leaf], BTreeSet::new(), "`{leaf}` must use nothing of the crate");
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut graph = Graph::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    graph.entry("c".into()).or_default().insert("a".into());
    graph.entry("d".into()).or_default().insert("a".into());
    assert_eq!(cycles(&graph), vec!["a -> b -> c -> a".to_string()]);
    assert_eq!(uses("use crate::{x::Y, z};\nlet _ = crate::w::f();"), ["w", "x", "z"].map(String::from).into());
    assert_eq!(
        production_code("use crate::a;\n#[cfg(test)]\nmod t { use crate::b; }\n// crate::c\n"),
        "use crate::a;\n"
    );
}

/// The "Which module may use which" list of `docs/architecture.md`.
fn documented_layout() -> String {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md"))
        .expect("docs/architecture.md");
    let section =
        doc.split("\n## Which module may use which\n").nth(1).expect("a \"Which module may use which\" section");
    section.split("\n## ").next().unwrap_or_default().to_owned()
}

/// The backticked names of a piece of the doc.
fn named(text: &str) -> BTreeSet<String> {
    text.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

#[test]
fn the_architecture_doc_names_every_module_and_its_leaves_are_leaves() {
    let graph = graph();
    let doc = documented_layout();
    let missing: Vec<&String> = graph.keys().filter(|m| !named(&doc).contains(*m)).collect();
    assert!(missing.is_empty(), "modules docs/architecture.md does not place: {missing:?}");
    let first = doc.split("\n- ").nth(1).expect("a first item");
    let (leaves, _) = first.split_once("use nothing of the crate").expect("the first item names the leaves");
    let leaves = named(leaves);
    assert!(["code", "config", "outcome"].iter().all(|l| leaves.contains(*l)), "leaves read: {leaves:?}");
    for leaf in &leaves {
        let uses = graph.get(leaf).unwrap_or_else(|| panic!("docs/architecture.md names `{leaf}`, not a module"));
        assert_eq!(uses, &BTreeSet::new(), "`{leaf}` must use nothing of the crate (docs/architecture.md)");
    }
}

/// Items named at the crate root, `crate::AppState` or `crate::{x, AppState}`:
/// the root declares modules and re-exports, so a module that needs the
/// state names `crate::state` and the graph sees the arrow.
fn root_items(text: &str) -> BTreeSet<String> {
    uses(text).into_iter().filter(|name| name.starts_with(|c: char| c.is_ascii_uppercase())).collect()
}

#[test]
fn the_crate_root_declares_modules_and_re_exports_only() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let code = production_code(&lib);
    let other: Vec<&str> = code
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//!") && !l.starts_with("pub mod ") && !l.starts_with("pub use "))
        .collect();
    assert!(other.is_empty(), "lib.rs holds more than modules and re-exports: {other:?}");
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut reaching = Vec::new();
    for file in &files {
        let text = production_code(&std::fs::read_to_string(file).expect("read source"));
        for item in root_items(&text) {
            reaching.push(format!("{} uses crate::{item}", file.strip_prefix(&root).expect("under src").display()));
        }
    }
    assert_eq!(reaching, Vec::<String>::new(), "modules reaching the crate root for an item");
    assert_eq!(root_items("use crate::{state::AppState, Clock};"), ["Clock".to_string()].into());
}

#[test]
fn the_state_sits_below_every_stage() {
    let graph = graph();
    let above: Vec<&String> =
        graph["state"].iter().filter(|m| ["stages", "api", "server", "run"].contains(&m.as_str())).collect();
    assert!(above.is_empty(), "`state` uses modules above it: {above:?}");
    assert!(graph["stages"].contains("state"), "the reader missed `stages` using `state`");
}
