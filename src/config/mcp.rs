//! The MCP front door's settings (`mcp_front_door:`, `--mcp-listen`):
//! streamable HTTP (docs/mcp.md).

use std::{net::SocketAddr, num::NonZeroUsize};

use serde::Deserialize;

use super::{doors::Door, ConfigError, Problems};
use crate::identity::{OauthConfig, Principals};

/// The MCP door in the list of doors ([`super::doors::DOORS`]).
pub(crate) const DOOR: Door = Door {
    name: "mcp",
    section: "mcp_front_door",
    listen_key: "mcp_front_door.listen",
    flag: "mcp-listen",
    env: "TOOLGATE_MCP_LISTEN",
    help: "Serve MCP (streamable HTTP)",
    serves: "MCP (streamable HTTP)",
    path: "/mcp",
    address: |doors| doors.mcp.as_ref().map(|mcp| mcp.listen),
    // Principals, or an OAuth authorization server.
    authenticates: |doors, principals| principals || doors.mcp.as_ref().is_some_and(|m| m.oauth.is_some()),
    // Its bounds and origins are read where the door reads them.
    restarts: |_, _| false,
    origins: |doors| doors.mcp.as_ref().map_or(&[], |mcp| mcp.allowed_origins.as_slice()),
};

/// `mcp_front_door:` of the configuration file (off unless set).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpFrontDoorConfig {
    /// Streamable HTTP on this address (TLS from `tls:` when that is set).
    pub(crate) listen: Option<String>,
    /// Browser origins allowed to call; a request with another `Origin`
    /// header is refused (403).
    #[serde(default)]
    pub(crate) allowed_origins: Vec<String>,
    /// Be an OAuth 2.1 resource server: access tokens as credentials.
    pub(crate) oauth: Option<OauthConfig>,
    /// Session-era sessions one principal keeps open (default 1,000).
    pub(crate) sessions_per_principal: Option<NonZeroUsize>,
    /// Open GET (server-sent event) streams of one principal (default 16).
    pub(crate) streams_per_principal: Option<NonZeroUsize>,
    /// Sessions one end user of a principal keeps open (default 100).
    pub(crate) sessions_per_user: Option<NonZeroUsize>,
    /// Open GET streams of one end user of a principal (default 4).
    pub(crate) streams_per_user: Option<NonZeroUsize>,
}

/// The MCP front door's settings, when it is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct McpSettings {
    pub(crate) listen: SocketAddr,
    pub(crate) allowed_origins: Vec<String>,
    pub(crate) oauth: Option<OauthConfig>,
    pub(crate) sessions_per_principal: usize,
    pub(crate) streams_per_principal: usize,
    pub(crate) sessions_per_user: usize,
    pub(crate) streams_per_user: usize,
}

/// `mcp_front_door.sessions_per_principal` when unset.
pub(crate) const DEFAULT_SESSIONS_PER_PRINCIPAL: usize = 1_000;
/// `mcp_front_door.streams_per_principal` when unset.
pub(crate) const DEFAULT_STREAMS_PER_PRINCIPAL: usize = 16;
/// `mcp_front_door.sessions_per_user` when unset.
pub(crate) const DEFAULT_SESSIONS_PER_USER: usize = 100;
/// `mcp_front_door.streams_per_user` when unset.
pub(crate) const DEFAULT_STREAMS_PER_USER: usize = 4;

impl McpFrontDoorConfig {
    /// The settings on `listen`; an OAuth section that does not check is
    /// left out, its problem kept.
    pub(super) fn settings(self, listen: SocketAddr, principals: &Principals, problems: &mut Problems) -> McpSettings {
        let oauth =
            self.oauth.filter(|oauth| problems.keep(oauth.check(principals).map_err(ConfigError::Users)).is_some());
        McpSettings {
            listen,
            allowed_origins: self.allowed_origins,
            oauth,
            sessions_per_principal: self
                .sessions_per_principal
                .map_or(DEFAULT_SESSIONS_PER_PRINCIPAL, NonZeroUsize::get),
            streams_per_principal: self.streams_per_principal.map_or(DEFAULT_STREAMS_PER_PRINCIPAL, NonZeroUsize::get),
            sessions_per_user: self.sessions_per_user.map_or(DEFAULT_SESSIONS_PER_USER, NonZeroUsize::get),
            streams_per_user: self.streams_per_user.map_or(DEFAULT_STREAMS_PER_USER, NonZeroUsize::get),
        }
    }
}
