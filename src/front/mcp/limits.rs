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

use crate::{
    config::{
        McpSettings, DEFAULT_SESSIONS_PER_PRINCIPAL, DEFAULT_SESSIONS_PER_USER, DEFAULT_STREAMS_PER_PRINCIPAL,
        DEFAULT_STREAMS_PER_USER,
    },
    server::{Held, PerPrincipal},
};

/// The MCP door's bounds per principal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct McpLimits {
    pub(crate) sessions_per_principal: usize,
    pub(crate) streams_per_principal: usize,
    pub(crate) sessions_per_user: usize,
    pub(crate) streams_per_user: usize,
}

impl Default for McpLimits {
    fn default() -> Self {
        Self {
            sessions_per_principal: DEFAULT_SESSIONS_PER_PRINCIPAL,
            streams_per_principal: DEFAULT_STREAMS_PER_PRINCIPAL,
            sessions_per_user: DEFAULT_SESSIONS_PER_USER,
            streams_per_user: DEFAULT_STREAMS_PER_USER,
        }
    }
}

impl McpLimits {
    /// As the settings say (the defaults when the door is off).
    pub(crate) fn of(settings: Option<&McpSettings>) -> Self {
        settings.map_or_else(Self::default, |mcp| Self {
            sessions_per_principal: mcp.sessions_per_principal,
            streams_per_principal: mcp.streams_per_principal,
            sessions_per_user: mcp.sessions_per_user,
            streams_per_user: mcp.streams_per_user,
        })
    }
}

/// The open GET streams of each principal, and of each end user of one.
pub(crate) struct Streams {
    principals: PerPrincipal,
    /// Keyed by the principal and the user together.
    users: PerPrincipal,
}

impl Streams {
    pub(crate) fn new(per_principal: usize, per_user: usize) -> Self {
        Self { principals: PerPrincipal::new(per_principal), users: PerPrincipal::new(per_user) }
    }

    /// A place for one more stream of `owner`, held until the guard drops
    /// (with the stream); the refusal past its user's or its principal's
    /// bound.
    pub(crate) fn open(&self, owner: &super::sessions::Owner) -> Result<(Held, Held), String> {
        let user = self
            .users
            .hold(Some(&owner.key()))
            .ok_or_else(|| format!("this user has {} MCP streams open (GET): close one first", self.users.bound()))?;
        let principal = self.principals.hold(owner.principal.as_ref()).ok_or_else(|| {
            format!("this principal has {} MCP streams open (GET): close one first", self.principals.bound())
        })?;
        Ok((user, principal))
    }
}
