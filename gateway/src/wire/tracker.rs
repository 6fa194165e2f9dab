//! What the tracker-protocol decoders (GA4, Snowplow) share when they build
//! the canonical call from a mapped event.

use serde_json::{Map, Value};

use crate::config::mapping::Call;

/// The path of an absolute URL (`https://a.example/p?q` → `/p`), `/` when it
/// has none; `None` when it is not an absolute URL.
pub(crate) fn url_path(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    Some(rest.find('/').map_or_else(|| "/".to_owned(), |at| rest[at..].to_owned()))
}

/// The fields a track, page or screen call takes from its name and
/// properties: a track call's `event` (none when the name is empty); a page
/// call's `path` from its `url` when it has none; a page or screen call's
/// `name` (its `name` property, else its `title`). False for the other
/// calls, which each protocol fills itself.
pub(crate) fn view_or_track_fields(out: &mut Map<String, Value>, call: Call, name: String, props: &mut Value) -> bool {
    match call {
        Call::Track => {
            if !name.is_empty() {
                out.insert("event".into(), name.into());
            }
            true
        }
        Call::Page | Call::Screen => {
            if let Some(props) = props.as_object_mut() {
                if call == Call::Page
                    && !props.contains_key("path")
                    && let Some(path) = props.get("url").and_then(Value::as_str).and_then(url_path)
                {
                    props.insert("path".into(), path.into());
                }
                if let Some(title) = props.get("name").or_else(|| props.get("title")).filter(|v| v.is_string()) {
                    out.insert("name".into(), title.clone());
                }
            }
            true
        }
        _ => false,
    }
}
