//! The docs keep pointing at things that exist: every relative link of every
//! `*.md` of the repository (README.md, docs/, RELIABILITY.md, BENCHMARKS.md,
//! the SDKs' and runbooks' READMEs) resolves to a file or directory, a
//! `#anchor` to a heading of its target, and every `scripts/<name>` the docs
//! name exists and is executable. No server, no network: it reads files.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// Directories never searched for docs: build output, installed packages,
/// and hidden ones (`.git`, caches).
const SKIPPED_DIRS: [&str; 2] = ["target", "node_modules"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a directory of the repository") {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if path.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) {
                markdown_files(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// Each line of `text` with whether it lies inside a fenced code block
/// (the fence lines themselves count as inside).
fn lines_with_fences(text: &str) -> Vec<(usize, &str, bool)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence = trimmed.starts_with("```") || trimmed.starts_with("~~~");
        if fence {
            fenced = !fenced;
        }
        out.push((i + 1, line, fenced || fence));
    }
    out
}

/// `line` without its inline code spans (a link inside backticks is text).
fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join("")
}

/// The anchor GitHub gives a heading: its rendered text lower-cased, with
/// everything but letters, digits, `-`, `_` and spaces dropped, and spaces
/// turned into `-`.
fn slug(heading: &str) -> String {
    let mut rendered = String::new();
    let mut rest = heading;
    // A link renders as its text.
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else { break };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else { break };
        rendered.push_str(&rest[..open]);
        rendered.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    rendered.push_str(rest);
    rendered
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a markdown file: one per ATX heading outside code
/// blocks, a repeated heading getting `-1`, `-2`, ... as on GitHub.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, line, fenced) in lines_with_fences(text) {
        let hashes = line.bytes().take_while(|&b| b == b'#').count();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of the inline links `[text](target)` and reference
/// definitions `[label]: target` of one line (code spans left out).
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut out = Vec::new();
    if let Some(definition) = line.trim_start().strip_prefix('[').and_then(|l| l.split_once("]:")) {
        out.extend(definition.1.split_whitespace().next().map(str::to_owned));
    }
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        out.extend(after[..end].split_whitespace().next().map(|t| t.trim_matches(['<', '>']).to_owned()));
        rest = &after[end..];
    }
    out
}

/// `path` with `.` and `..` resolved lexically.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Problems with one markdown file's links, as `file:line: what`.
fn check_links(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let name = file.strip_prefix(root).unwrap_or(file).display().to_string();
    let here = file.parent().unwrap_or(root);
    let mut problems = Vec::new();
    for (number, line, fenced) in lines_with_fences(text) {
        if fenced {
            continue;
        }
        for target in link_targets(line) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((target.as_str(), ""));
            let resolved = if path.is_empty() { file.to_path_buf() } else { normalise(&here.join(path)) };
            if !resolved.starts_with(normalise(root)) {
                problems.push(format!("{name}:{number}: `{target}` leaves the repository"));
            } else if !resolved.exists() {
                problems.push(format!("{name}:{number}: `{target}`: no such file"));
            } else if !fragment.is_empty() {
                let is_markdown = resolved.extension().is_some_and(|e| e == "md");
                let text = std::fs::read_to_string(&resolved).unwrap_or_default();
                if !is_markdown || !anchors(&text).contains(fragment) {
                    problems.push(format!("{name}:{number}: `{target}`: no heading with anchor #{fragment}"));
                }
            }
        }
    }
    problems
}

/// Every `scripts/<name>` a text names (anywhere, code blocks included),
/// unless it is part of a longer path such as `loadtest/scripts/x`.
fn named_scripts(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices("scripts/") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-')) {
            continue;
        }
        let name: String = text[at + "scripts/".len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect();
        let name = name.trim_end_matches('.');
        if !name.is_empty() {
            names.insert(name.to_owned());
        }
    }
    names
}

/// Problems with the scripts one markdown file names: each must exist, and
/// be executable unless it is a sourced `.sh` library or a directory.
fn check_scripts(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let name = file.strip_prefix(root).unwrap_or(file).display().to_string();
    let mut problems = Vec::new();
    for script in named_scripts(text) {
        let path = root.join("scripts").join(&script);
        match std::fs::metadata(&path) {
            Err(_) => problems.push(format!("{name}: names `scripts/{script}`, which does not exist")),
            Ok(meta) if meta.is_file() && !script.ends_with(".sh") && meta.permissions().mode() & 0o111 == 0 => {
                problems.push(format!("{name}: names `scripts/{script}`, which is not executable"))
            }
            Ok(_) => {}
        }
    }
    problems
}

fn check_tree(root: &Path) -> (usize, Vec<String>) {
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    files.sort();
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a markdown file");
        problems.extend(check_links(root, file, &text));
        problems.extend(check_scripts(root, file, &text));
    }
    (files.len(), problems)
}

#[test]
fn every_link_anchor_and_script_of_the_docs_exists() {
    let root = normalise(&repo_root());
    let (files, problems) = check_tree(&root);
    assert!(files >= 15, "the docs were found: {files} markdown files");
    assert!(problems.is_empty(), "{} broken reference(s) in the docs:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn the_main_pages_exist_and_the_readme_maps_docs() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    for page in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let page = page.expect("dir entry").file_name().to_string_lossy().into_owned();
        assert!(readme.contains(&format!("(docs/{page})")), "README.md's map of docs/ does not link docs/{page}");
    }
    let lines = readme.lines().count();
    assert!(lines <= 200, "README.md has {lines} lines; keep it to 200 and move detail to docs/");
}

#[test]
fn slugs_follow_github() {
    assert_eq!(slug("Spool: Kafka away, nothing lost"), "spool-kafka-away-nothing-lost");
    assert_eq!(slug("Dedupe: a client's retry is never stored twice"), "dedupe-a-clients-retry-is-never-stored-twice");
    assert_eq!(slug("What `scripts/test` runs, in order"), "what-scriptstest-runs-in-order");
    assert_eq!(slug("eventgw — event-tracking gateway"), "eventgw--event-tracking-gateway");
    assert_eq!(slug("See [the API](api.md) now"), "see-the-api-now");
    assert_eq!(anchors("# A\n```\n# not a heading\n```\n## A\n"), BTreeSet::from(["a".to_owned(), "a-1".to_owned()]));
}

/// The checker can fail: a scratch tree with one of each mistake.
#[test]
fn broken_links_anchors_and_scripts_are_reported() {
    let root = std::env::temp_dir().join(format!("eventgw-docs-links-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("docs")).expect("scratch docs/");
    std::fs::create_dir_all(root.join("scripts")).expect("scratch scripts/");
    for (script, mode) in [("good", 0o755), ("plain", 0o644)] {
        std::fs::write(root.join("scripts").join(script), "#!/bin/sh\n").expect("scratch script");
        std::fs::set_permissions(root.join("scripts").join(script), std::fs::Permissions::from_mode(mode))
            .expect("chmod");
    }
    std::fs::write(root.join("docs/a.md"), "# Title\n\n## Kept: yes\n").expect("scratch page");
    std::fs::write(
        root.join("README.md"),
        "# Read me\n\n[ok](docs/a.md#kept-yes) [self](#read-me) [web](https://example.com/x)\n\
         [gone](docs/missing.md) [bad anchor](docs/a.md#nope) [up](../../outside.md)\n\
         `[not a link](nowhere.md)`\n```\n[in code](nowhere.md)\n```\n\
         Run `scripts/good`, `scripts/plain` and `scripts/absent`; loadtest/scripts/x is another path.\n",
    )
    .expect("scratch README");
    let (files, problems) = check_tree(&root);
    std::fs::remove_dir_all(&root).expect("clean up");
    assert_eq!(files, 2);
    let expected = [
        "README.md:4: `docs/missing.md`: no such file",
        "README.md:4: `docs/a.md#nope`: no heading with anchor #nope",
        "README.md:4: `../../outside.md` leaves the repository",
        "README.md: names `scripts/absent`, which does not exist",
        "README.md: names `scripts/plain`, which is not executable",
    ];
    let got: BTreeSet<&str> = problems.iter().map(String::as_str).collect();
    assert_eq!(got, BTreeSet::from(expected), "problems: {problems:#?}");
}
