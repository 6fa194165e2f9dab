//! Which events a viewer wants, from the stream's query string
//! (`source`, `status`, `event`, `user`): the source picks the channel,
//! the rest are checked per event on the viewer's own task.

use serde::Deserialize;

use super::Row;
use super::event::Field;

/// The query of `/live/stream`, as sent.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct Filter {
    /// One source id; empty or absent: every source.
    pub source: Option<String>,
    /// Status words, comma-separated (`invalid,rejected`); empty: any.
    pub status: Option<String>,
    /// The exact event name of a `track`.
    pub event: Option<String>,
    /// The exact `userId` or `anonymousId` as stored.
    pub user: Option<String>,
}

/// `Some(text)` unless it is empty.
fn given(text: &Option<String>) -> Option<&str> {
    text.as_deref().map(str::trim).filter(|t| !t.is_empty())
}

impl Filter {
    /// The one source watched, `None` for all.
    pub fn source(&self) -> Option<&str> {
        given(&self.source)
    }

    /// Whether every event passes (no filter given but the source).
    pub fn admits_all(&self) -> bool {
        given(&self.status).is_none() && given(&self.event).is_none() && given(&self.user).is_none()
    }

    /// Whether `event` passes every filter given.
    pub fn admits(&self, event: &Row) -> bool {
        let status = given(&self.status).is_none_or(|list| list.split(',').any(|s| s.trim() == event.status));
        let field = |f| event.fields.get(f);
        let name = given(&self.event).is_none_or(|name| field(Field::Event) == Some(name));
        let user = given(&self.user)
            .is_none_or(|user| field(Field::UserId) == Some(user) || field(Field::AnonymousId) == Some(user));
        status && name && user
    }
}
