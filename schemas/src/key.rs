//! Partition keys: the field whose value keeps one user's (or one order's)
//! events on one partition, in order.

use serde_json::Value;

/// Ordered candidate fields; the first that holds a non-empty string or a
/// number is the key (`userId`, falling back to `anonymousId`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPath {
    candidates: Vec<Vec<String>>,
}

impl KeyPath {
    /// Parses dotted paths such as `properties.order_id`. `None` when the
    /// list is empty or a path has an empty segment.
    pub fn parse(paths: &[String]) -> Option<Self> {
        let mut candidates = Vec::with_capacity(paths.len());
        for path in paths {
            let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
            if segments.iter().any(String::is_empty) {
                return None;
            }
            candidates.push(segments);
        }
        (!candidates.is_empty()).then_some(Self { candidates })
    }

    /// The key of `event`, or `None` when no candidate field is present.
    pub fn extract(&self, event: &Value) -> Option<String> {
        self.candidates.iter().find_map(|segments| {
            let value = segments.iter().try_fold(event, |node, segment| crate::lookup::field(node, segment))?;
            match value {
                Value::String(s) if !s.is_empty() => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            }
        })
    }

    /// Whether `segments` is a candidate field, or holds or is held by one.
    pub(crate) fn touches(&self, segments: &[String]) -> bool {
        self.candidates.iter().any(|c| c.starts_with(segments) || segments.starts_with(c))
    }

    /// The candidate fields as written in the catalog, for messages and docs.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self.candidates.iter().map(|s| s.join(".")).collect();
        names.join(" or ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(paths: &[&str]) -> KeyPath {
        let owned: Vec<String> = paths.iter().map(|s| (*s).to_owned()).collect();
        KeyPath::parse(&owned).expect("valid key path")
    }

    #[test]
    fn falls_back_to_the_next_candidate() {
        let k = key(&["userId", "anonymousId"]);
        assert_eq!(k.extract(&json!({"userId": "u1", "anonymousId": "a1"})).as_deref(), Some("u1"));
        assert_eq!(k.extract(&json!({"anonymousId": "a1"})).as_deref(), Some("a1"));
        assert_eq!(k.extract(&json!({"userId": "", "anonymousId": "a1"})).as_deref(), Some("a1"));
        assert_eq!(k.extract(&json!({"userId": null})), None);
    }

    #[test]
    fn follows_dotted_paths_and_numbers() {
        let k = key(&["properties.order_id"]);
        assert_eq!(k.extract(&json!({"properties": {"order_id": 42}})).as_deref(), Some("42"));
        assert_eq!(k.extract(&json!({"properties": {}})), None);
    }

    #[test]
    fn refuses_empty_paths() {
        assert!(KeyPath::parse(&[]).is_none());
        assert!(KeyPath::parse(&["properties.".to_owned()]).is_none());
    }
}
