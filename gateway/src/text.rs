//! [`Text`]: a record's topic and header values, shared rather than copied.
//! A leaf: it uses nothing of the crate.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A record's topic or header value. Most of it is the same for many
/// records: the protocol and `auth` are fixed words, the source and
/// `received-at` are the request's, the topic, event name, schema and
/// version are the catalog's. So a record holds them by reference (a
/// `&'static str`, or a count on the catalog's or the request's `Arc<str>`)
/// and building a record's envelope allocates only for what is its own
/// (its `event-id`). Reads as a `&str`.
#[derive(Clone)]
pub enum Text {
    /// A fixed word of the gateway's.
    Static(&'static str),
    /// Text shared with the catalog, the configuration or the request.
    Shared(Arc<str>),
}

impl Text {
    /// The text as a `&str`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Static(text) => text,
            Self::Shared(text) => text,
        }
    }

    /// A text of its own: one allocation, the bytes copied once.
    pub fn copied(text: &str) -> Self {
        Self::Shared(Arc::from(text))
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<&'static str> for Text {
    fn from(text: &'static str) -> Self {
        Self::Static(text)
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Self::Shared(Arc::from(text))
    }
}

impl From<&Arc<str>> for Text {
    fn from(text: &Arc<str>) -> Self {
        Self::Shared(Arc::clone(text))
    }
}

impl From<Text> for Arc<str> {
    /// The shared text itself; a fixed word is copied once.
    fn from(text: Text) -> Self {
        match text {
            Text::Static(text) => Self::from(text),
            Text::Shared(text) => text,
        }
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl serde::Serialize for Text {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_text_is_one_buffer_and_reads_like_its_words() {
        let catalog: Arc<str> = Arc::from("web.tracking");
        let topic = Text::from(&catalog);
        let copy = topic.clone();
        let (Text::Shared(a), Text::Shared(b)) = (&topic, &copy) else { panic!("shared text stays shared") };
        assert!(Arc::ptr_eq(a, b) && Arc::ptr_eq(a, &catalog), "a clone is a count, not a copy");
        assert_eq!(Arc::strong_count(&catalog), 3);
        assert_eq!(topic, Text::from("web.tracking"), "equal words are equal, however held");
        assert_eq!(topic, "web.tracking");
        assert_eq!(format!("{topic} {topic:?}"), r#"web.tracking "web.tracking""#);
        assert!(matches!(Text::from("auth"), Text::Static("auth")));
        assert_eq!(Text::copied("id-1").len(), 4);
        let answered: Arc<str> = topic.into();
        assert!(Arc::ptr_eq(&answered, &catalog), "the answer's topic is the catalog's text");
    }
}
