//! What one principal may hold open at the MCP door: the door's own
//! bounds beside the connection guards of [`crate::server`].
//!
//! - Sessions: `mcp_front_door.sessions_per_principal` (see
//!   [`super::sessions`]).
//! - GET streams (server-sent events a client listens on):
//!   `mcp_front_door.streams_per_principal` open at once per principal
//!   (anonymous callers are one principal); the next is refused with 429.
//! - A POST body: read by the edge's [`crate::server::body`] (its
//!   deadlines: else 408).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use crate::config::{McpSettings, DEFAULT_SESSIONS_PER_PRINCIPAL, DEFAULT_STREAMS_PER_PRINCIPAL};

/// The MCP door's bounds per principal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct McpLimits {
    pub(crate) sessions_per_principal: usize,
    pub(crate) streams_per_principal: usize,
}

impl Default for McpLimits {
    fn default() -> Self {
        Self {
            sessions_per_principal: DEFAULT_SESSIONS_PER_PRINCIPAL,
            streams_per_principal: DEFAULT_STREAMS_PER_PRINCIPAL,
        }
    }
}

impl McpLimits {
    /// As the settings say (the defaults when the door is off).
    pub(crate) fn of(settings: Option<&McpSettings>) -> Self {
        settings.map_or_else(Self::default, |mcp| Self {
            sessions_per_principal: mcp.sessions_per_principal,
            streams_per_principal: mcp.streams_per_principal,
        })
    }
}

/// The open GET streams of each principal.
pub(crate) struct Streams {
    per_principal: usize,
    open: Arc<Mutex<HashMap<Option<Arc<str>>, usize>>>,
}

impl Streams {
    pub(crate) fn new(per_principal: usize) -> Self {
        Self { per_principal, open: Arc::default() }
    }

    /// A place for one more stream of `principal`, held until the guard
    /// drops (with the stream); `None` past the bound.
    pub(crate) fn open(&self, principal: Option<&Arc<str>>) -> Option<OpenStream> {
        let mut open = crate::lock::lock(&self.open);
        let count = open.entry(principal.cloned()).or_default();
        if *count >= self.per_principal {
            return None;
        }
        *count += 1;
        Some(OpenStream { principal: principal.cloned(), open: Arc::clone(&self.open) })
    }

    /// The 429 past the bound.
    pub(crate) fn refusal(&self) -> String {
        format!("this principal has {} MCP streams open (GET): close one first", self.per_principal)
    }
}

/// One open GET stream, counted until dropped.
pub(crate) struct OpenStream {
    principal: Option<Arc<str>>,
    open: Arc<Mutex<HashMap<Option<Arc<str>>, usize>>>,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        let mut open = crate::lock::lock(&self.open);
        if let Some(count) = open.get_mut(&self.principal) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principals_streams_are_bounded_and_freed_when_closed() {
        let streams = Streams::new(2);
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        let first = streams.open(Some(&a)).unwrap();
        let _second = streams.open(Some(&a)).unwrap();
        assert!(streams.open(Some(&a)).is_none());
        let _other = streams.open(Some(&b)).expect("another principal's bound is its own");
        drop(first);
        assert!(streams.open(Some(&a)).is_some());
    }
}
