//! The `/live/` page: one self-contained HTML file (no external assets),
//! with the configured source ids written into it.

/// The page, with `__SOURCES__` standing for the source ids.
const PAGE: &str = include_str!("page.html");

/// The page offering `sources` in its source picker.
pub fn render(sources: &[&str]) -> String {
    // `<` escaped so no id can close the script element.
    let ids = serde_json::to_string(sources).unwrap_or_else(|_| "[]".into()).replace('<', "\\u003c");
    PAGE.replace("__SOURCES__", &ids)
}
