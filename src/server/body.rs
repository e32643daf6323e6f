//! A request body read whole, for the doors that speak HTTP (MCP, the
//! model door): at most a limit, its first bytes and each part after
//! within the connection's handshake deadline (10 s by default), the
//! whole within its idle deadline (5 minutes); else 413 or 408. A
//! connection with a request in flight is not idle, so without these a
//! body that never arrives would hold its connection and its place under
//! `concurrent` for ever.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::{body::Incoming as Body, StatusCode};

use super::ConnectionSettings;

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
    use hyper::body::Body as _;
    let whole = tokio::time::Instant::now() + deadlines.whole;
    // A body whose length is declared is read into one buffer of that
    // size (never past the limit), not one that doubles as it grows. One
    // declared longer is still read up to the limit: a client that is
    // still sending hears its 413 instead of a broken connection.
    let declared = body.size_hint().exact().map_or(0, |length| length.min(limit as u64) as usize);
    let mut bytes = BytesMut::with_capacity(declared);
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
