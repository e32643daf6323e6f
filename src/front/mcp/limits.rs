//! What one principal may hold open at the MCP door, and how long a request
//! body may take to arrive: the door's own bounds beside the connection
//! guards of [`crate::server`].
//!
//! - Sessions: `mcp_front_door.sessions_per_principal` (see
//!   [`super::sessions`]).
//! - GET streams (server-sent events a client listens on):
//!   `mcp_front_door.streams_per_principal` open at once per principal
//!   (anonymous callers are one principal); the next is refused with 429.
//! - A POST body: its first bytes, and each part after, within the
//!   connection's handshake deadline (10 s by default), the whole within
//!   its idle deadline (5 minutes); else 408. A connection with a request
//!   in flight is not idle, so without these a body that never arrives
//!   would hold its connection and its place under `concurrent` for ever.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::{body::Incoming as Body, StatusCode};

use crate::{
    config::{McpSettings, DEFAULT_SESSIONS_PER_PRINCIPAL, DEFAULT_STREAMS_PER_PRINCIPAL},
    server::ConnectionSettings,
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
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
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
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.principal) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.principal);
            }
        }
    }
}

/// How long a request body may take: each part (the first included)
/// within `gap`, the whole within `whole`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyDeadlines {
    gap: Duration,
    whole: Duration,
}

impl BodyDeadlines {
    /// The connection's: its handshake deadline between parts, its idle
    /// deadline for the whole.
    pub(crate) fn of(connections: &ConnectionSettings) -> Self {
        Self { gap: connections.handshake_timeout, whole: connections.idle_timeout }
    }
}

/// Why a body was not read.
pub(crate) enum Unread {
    /// Longer than the limit: 413.
    TooLarge,
    /// Not in time: 408.
    Late,
    /// The connection failed: 400.
    Broken(String),
}

impl Unread {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Unread::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Unread::Late => StatusCode::REQUEST_TIMEOUT,
            Unread::Broken(_) => StatusCode::BAD_REQUEST,
        }
    }

    pub(crate) fn message(&self, limit: usize) -> String {
        match self {
            Unread::TooLarge => format!("the request body is larger than {} MiB", limit / (1024 * 1024)),
            Unread::Late => "the request body did not arrive in time".to_owned(),
            Unread::Broken(why) => format!("the request body could not be read: {why}"),
        }
    }
}

/// `body` whole, at most `limit` bytes, within `deadlines`.
pub(crate) async fn read_body(mut body: Body, limit: usize, deadlines: BodyDeadlines) -> Result<Bytes, Unread> {
    let whole = tokio::time::Instant::now() + deadlines.whole;
    let mut bytes = BytesMut::new();
    loop {
        let wait = deadlines.gap.min(whole.saturating_duration_since(tokio::time::Instant::now()));
        let frame = match tokio::time::timeout(wait, body.frame()).await {
            Err(_) => return Err(Unread::Late),
            Ok(None) => return Ok(bytes.freeze()),
            Ok(Some(Err(err))) => return Err(Unread::Broken(err.to_string())),
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > limit {
                return Err(Unread::TooLarge);
            }
            bytes.extend_from_slice(&data);
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
