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

    /// Whether `event` passes every filter given (for one event; a stream
    /// checks many with its [`Prepared`] filter).
    pub fn admits(&self, event: &Row) -> bool {
        self.prepared().admits(event)
    }

    /// The filter as a viewer's stream checks it, event after event: its
    /// texts trimmed and its status list split once, not per event.
    pub fn prepared(&self) -> Prepared {
        Prepared {
            statuses: given(&self.status)
                .map(|list| list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()),
            event: given(&self.event).map(str::to_owned),
            user: given(&self.user).map(str::to_owned),
        }
    }
}

/// A [`Filter`] ready to check events with ([`Filter::prepared`]).
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    /// The status words wanted; `None`: any.
    statuses: Option<Vec<String>>,
    /// The exact event name wanted.
    event: Option<String>,
    /// The exact `userId` or `anonymousId` wanted.
    user: Option<String>,
}

impl Prepared {
    /// Whether every event passes.
    pub fn admits_all(&self) -> bool {
        self.statuses.is_none() && self.event.is_none() && self.user.is_none()
    }

    /// Whether `event` passes every filter given.
    pub fn admits(&self, event: &Row) -> bool {
        let status = self.statuses.as_ref().is_none_or(|list| list.iter().any(|s| s == event.status));
        let field = |f| event.fields.get(f);
        let name = self.event.as_deref().is_none_or(|name| field(Field::Event) == Some(name));
        let user = self
            .user
            .as_deref()
            .is_none_or(|user| field(Field::UserId) == Some(user) || field(Field::AnonymousId) == Some(user));
        status && name && user
    }
}
