//! What one principal may hold open at the MCP door: the door's own
//! bounds beside the connection guards of [`crate::server`].
//!
//! - Sessions: `mcp_front_door.sessions_per_principal` (see
//!   [`super::sessions`]).
//! - GET streams (server-sent events a client listens on):
//!   `mcp_front_door.streams_per_principal` open at once per principal
//!   (anonymous callers are one principal, [`crate::server::PerPrincipal`]);
//!   the next is refused with 429.
//! - A POST body: read by the edge's [`crate::server::body`] (its
//!   deadlines: else 408).

use std::sync::Arc;

use crate::{
    config::{McpSettings, DEFAULT_SESSIONS_PER_PRINCIPAL, DEFAULT_STREAMS_PER_PRINCIPAL},
    server::{Held, PerPrincipal},
};

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
pub(crate) struct Streams(PerPrincipal);

impl Streams {
    pub(crate) fn new(per_principal: usize) -> Self {
        Self(PerPrincipal::new(per_principal))
    }

    /// A place for one more stream of `principal`, held until the guard
    /// drops (with the stream); `None` past the bound.
    pub(crate) fn open(&self, principal: Option<&Arc<str>>) -> Option<Held> {
        self.0.hold(principal)
    }

    /// The 429 past the bound.
    pub(crate) fn refusal(&self) -> String {
        format!("this principal has {} MCP streams open (GET): close one first", self.0.bound())
    }
}
