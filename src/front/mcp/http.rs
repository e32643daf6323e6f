//! The MCP front door over streamable HTTP: `/mcp` (the caller's tools),
//! `/mcp/toolsets/NAME` (one toolset of them) and `/mcp/search` (tool
//! search: `find_tools` and `call_tool`), on the accepted-connection
//! guards of [`crate::server`] (caps, deadlines, TLS). Before a request
//! reaches rmcp's transport, this edge checks its `Origin`, proves who sends
//! it (401 with `WWW-Authenticate: Bearer` when nothing does) and that its
//! toolset exists (404 with a did-you-mean); the handler then sees the
//! snapshot, caller and toolset in the request's extensions.

use std::{net::SocketAddr, sync::Arc};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{body::Incoming as Body, Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{json, Value};

use super::{
    limits::{McpLimits, Streams},
    listen,
    read::{self, Message, Unreadable},
    sessions::{NoRoom, Owner, Sessions, MAX_SESSIONS, OWNER},
    Asked, Handler, SentArguments, View,
};
use crate::{
    identity::{oauth, OauthVerifier},
    live::{Refused, Snapshot, SnapshotSlot},
    server::{
        body::{read_body, BodyDeadlines},
        connections::Guarded,
        http::{serve_http, HttpEdge, Reply},
        Connections, Door, Peer, ServeError, Stopping,
    },
    tls::ServerTls,
};

/// The largest request body; past it, 413.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// What every request of the listener shares.
struct Edge {
    current: SnapshotSlot,
    /// What the edge's GET streams follow.
    view: View,
    transport: StreamableHttpService<Handler, Sessions>,
    /// The transport's sessions, whose owners the edge checks.
    sessions: Arc<Sessions>,
    /// Open GET streams per principal.
    streams: Streams,
    body: BodyDeadlines,
    /// The listener's TLS, whose client CA checks client certificates.
    tls: Option<Arc<ServerTls>>,
    /// The listener is on a loopback address: requests must name a loopback
    /// host (DNS rebinding).
    loopback: bool,
}

/// The MCP door: `/mcp` and `/mcp/toolsets/NAME` over HTTP/1.1 and
/// HTTP/2, on the connections [`crate::server::serve`] accepted (through TLS
/// when the listener has it, client certificates as on gRPC).
pub(crate) struct McpDoor {
    view: View,
    tls: Option<Arc<ServerTls>>,
    limits: McpLimits,
    body: BodyDeadlines,
}

impl McpDoor {
    /// The door over `view`, its listener's TLS `tls`, bounded by `limits`;
    /// request bodies within the deadlines of `connections`.
    pub(crate) fn new(
        view: View,
        tls: Option<Arc<ServerTls>>,
        limits: McpLimits,
        connections: &crate::server::ConnectionSettings,
    ) -> Self {
        Self { view, tls, limits, body: BodyDeadlines::of(connections) }
    }
}

impl Door for McpDoor {
    fn name(&self) -> &'static str {
        super::NAME
    }

    fn http1(&self) -> bool {
        true
    }

    async fn run(
        self,
        local: Option<SocketAddr>,
        connections: Connections,
        stopping: Stopping,
    ) -> Result<(), ServeError> {
        let loopback = local.is_some_and(|local| local.ip().is_loopback());
        let view = self.view.clone();
        let current = self.view.current.clone();
        let handler = Handler::new(self.view);
        let config = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_legacy_session_mode(true)
            .with_max_request_body_bytes(MAX_BODY_BYTES);
        let woken = handler.clone();
        let bounds = super::sessions::Bounds {
            cap: MAX_SESSIONS,
            per_principal: self.limits.sessions_per_principal,
            per_user: self.limits.sessions_per_user,
        };
        let sessions = Sessions::new(bounds, move || woken.session());
        let transport = StreamableHttpService::new(move || Ok(handler.session()), Arc::clone(&sessions), config);
        let streams = Streams::new(self.limits.streams_per_principal, self.limits.streams_per_user);
        let edge =
            Arc::new(Edge { current, view, transport, sessions, streams, body: self.body, tls: self.tls, loopback });
        serve_http(super::NAME, edge, connections, stopping).await;
        Ok(())
    }
}

impl HttpEdge for Edge {
    async fn handle(&self, request: Request<Body>, connected: &Peer) -> Reply {
        let snapshot = self.current.load_full();
        if let Some(refused) = self.refused_origin(&request, snapshot.identity.allowed_origins(super::NAME)) {
            return refused;
        }
        let (toolset, search) = match route(&snapshot, &request) {
            Ok(route) => route,
            Err(reply) => return reply,
        };
        let presented = connected.presented(&snapshot.identity, request.headers(), self.tls.as_deref(), true);
        let (caller, admitted) =
            match snapshot.admit(&presented.credentials(), toolset.as_deref(), |p| connected.authenticated(p)).await {
                Ok(admitted) => admitted,
                Err(refused) => return refusal(&snapshot, refused, presented.sent_authorization()),
            };
        // A session is its owner's: to anyone else it does not exist.
        let owner = Owner::of(&caller);
        let session = request.headers().get(SESSION_HEADER).and_then(|id| id.to_str().ok());
        if let Some(reply) = self.session_ends(session, &owner, request.method()).await {
            return reply;
        }
        let in_session = session.is_some();
        let guard = connected.call();
        let stream = match request.method() == hyper::Method::GET {
            true => match self.streams.open(&owner) {
                Ok(stream) => Some(stream),
                Err(refusal) => return plain(StatusCode::TOO_MANY_REQUESTS, &refusal),
            },
            false => None,
        };
        let asked = Asked { snapshot, caller, toolset, search };
        // A session's GET stream is the edge's own: it keeps no worker.
        if let Some(id) = session.filter(|_| stream.is_some() && listens(&request)) {
            let Some((ended, listening)) = self.sessions.listen(id) else {
                return plain(StatusCode::NOT_FOUND, "Not Found: Session not found");
            };
            let reply = listen::stream(self.view.clone(), asked, ended);
            return reply.map(|body| Guarded::new(body, (guard, listening, stream)).boxed());
        }
        // Any other request of a session holds it busy until answered.
        let hold = session.and_then(|id| self.sessions.hold(id));
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(asked);
        let body = match parts.method {
            hyper::Method::POST => match self.posted(body, &mut parts.extensions, &owner, in_session).await {
                Ok(bytes) => bytes,
                Err(reply) => return reply,
            },
            _ => Bytes::new(),
        };
        // A call holds its place under the principal's `concurrent` limit
        // until its answer is sent: in the session era rmcp answers with a
        // stream at once and the call runs on. Any other request lets go
        // now (a GET stream or a subscription lives long).
        let calling = parts.extensions.get::<SentArguments>().is_some();
        let held = calling.then_some(admitted);
        let handled = self.transport.handle(Request::from_parts(parts, Full::new(body)));
        let response = OWNER.scope(owner, handled).await;
        response.map(|body| Guarded::new(body, (guard, held, stream, hold)).boxed())
    }
}

/// Where a request goes: the resource metadata (answered here), a tool
/// set's endpoint (`None`: every tool the caller may use) or the search
/// endpoint (`true`); anything else is not found.
#[allow(clippy::result_large_err)] // the error is the reply, sent as it is
fn route(snapshot: &Snapshot, request: &Request<Body>) -> Result<(Option<String>, bool), Reply> {
    let path = request.uri().path();
    if let Some(oauth) = snapshot.identity.oauth().filter(|_| path.starts_with(oauth::METADATA_PATH)) {
        return Err(match request.method() == hyper::Method::GET {
            true => json_reply(StatusCode::OK, &oauth.metadata()),
            false => plain(StatusCode::METHOD_NOT_ALLOWED, "the resource metadata is read with GET"),
        });
    }
    match endpoint(path) {
        Some(Endpoint::Tools(toolset)) => Ok((toolset, false)),
        Some(Endpoint::Search(toolset)) => Ok((toolset, true)),
        None => Err(plain(
            StatusCode::NOT_FOUND,
            "not found: MCP is served at /mcp, /mcp/toolsets/NAME, /mcp/search and /mcp/toolsets/NAME/search",
        )),
    }
}

impl Edge {
    /// The answer to a request of a session that ends there: a session
    /// another owner's (to whom it does not exist), or a DELETE, which ends
    /// it and its GET streams.
    async fn session_ends(&self, session: Option<&str>, owner: &Owner, method: &hyper::Method) -> Option<Reply> {
        let id = session?;
        if self.sessions.foreign(id, owner) {
            return Some(plain(StatusCode::NOT_FOUND, "Not Found: Session not found"));
        }
        if method != hyper::Method::DELETE {
            return None;
        }
        Some(match self.sessions.end(id).await {
            true => Response::new(Full::new(Bytes::new()).boxed()),
            false => plain(StatusCode::NOT_FOUND, "Not Found: Session not found"),
        })
    }

    /// A POST's message, read within its bounds: a call's arguments kept
    /// aside in `extensions`, and room made for a new session among its
    /// owner's.
    async fn posted(
        &self,
        body: Body,
        extensions: &mut http::Extensions,
        owner: &Owner,
        in_session: bool,
    ) -> Result<Bytes, Reply> {
        let read = message(body, self.body).await?;
        if let Some(arguments) = read.arguments {
            extensions.insert(arguments);
        }
        if read.initialize && !in_session {
            if let Err(no_room) = self.sessions.make_room(owner).await {
                return Err(no_room_reply(no_room));
            }
        }
        Ok(read.bytes)
    }

    /// A browser's request from a page the gateway does not trust: 403
    /// (the shared edge's rule, [`crate::server::foreign`]).
    fn refused_origin(&self, request: &Request<Body>, allowed_origins: &[String]) -> Option<Reply> {
        let foreign = crate::server::foreign(request, self.loopback, allowed_origins)?;
        Some(plain(StatusCode::FORBIDDEN, foreign.message()))
    }
}

/// Whether a GET asks for a session's stream of changes the edge serves
/// ([`listen::served_here`]), accepting server-sent events (else the
/// transport answers it: 406).
fn listens(request: &Request<Body>) -> bool {
    let headers = request.headers();
    let accepts = headers.get_all(hyper::header::ACCEPT).iter().filter_map(|v| v.to_str().ok());
    let accepts = accepts.flat_map(|v| v.split(',')).any(|media| {
        let essence = media.split(';').next().unwrap_or("").trim();
        essence.eq_ignore_ascii_case("text/event-stream")
    });
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    accepts && listen::served_here(last_event_id)
}

/// The body of a POST, read whole (at most [`MAX_BODY_BYTES`], within the
/// connection's deadlines) and as one message ([`read`]).
async fn message(body: Body, deadlines: BodyDeadlines) -> Result<Message, Reply> {
    let bytes = match read_body(body, MAX_BODY_BYTES, deadlines).await {
        Ok(bytes) => bytes,
        Err(unread) => return Err(plain(unread.status(), &unread.message(MAX_BODY_BYTES))),
    };
    read::read(bytes).map_err(|unreadable| match unreadable {
        Unreadable::Rpc { id, code, message } => rpc_error(id, code, &message),
        Unreadable::TooLarge => plain(StatusCode::PAYLOAD_TOO_LARGE, &Unreadable::too_large_message()),
    })
}

/// The header naming a session.
const SESSION_HEADER: &str = "mcp-session-id";

/// No room for a new session: 429 past the principal's bound, 503 when the
/// process is full (each with `Retry-After: 1`: a session ends or a call
/// ends in the meantime).
fn no_room_reply(no_room: NoRoom) -> Reply {
    let status = match no_room {
        NoRoom::Principal(_) | NoRoom::User(_) => StatusCode::TOO_MANY_REQUESTS,
        NoRoom::Full(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut reply = plain(status, &no_room.to_string());
    reply.headers_mut().insert(hyper::header::RETRY_AFTER, 1.into());
    reply
}

/// A JSON-RPC error: 200 for a request whose id was read (the answer to
/// that request, which SDKs show as a JSON-RPC error, not a transport
/// failure); 400 when no request could be read (invalid JSON, a batch).
fn rpc_error(id: Value, code: i64, message: &str) -> Reply {
    let status = match id.is_null() {
        true => StatusCode::BAD_REQUEST,
        false => StatusCode::OK,
    };
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .expect("a valid response")
}

/// What an endpoint offers.
#[derive(Debug, PartialEq, Eq)]
enum Endpoint {
    /// The caller's tools (`/mcp`), or one toolset of them
    /// (`/mcp/toolsets/NAME`).
    Tools(Option<String>),
    /// `find_tools` and `call_tool` over the caller's tools (`/mcp/search`)
    /// or over one toolset of them (`/mcp/toolsets/NAME/search`).
    Search(Option<String>),
}

/// The endpoint a path names; `None` for any other path.
fn endpoint(path: &str) -> Option<Endpoint> {
    let path = path.strip_suffix('/').unwrap_or(path);
    match path {
        "/mcp" => return Some(Endpoint::Tools(None)),
        "/mcp/search" => return Some(Endpoint::Search(None)),
        _ => {}
    }
    let rest = path.strip_prefix("/mcp/toolsets/")?;
    let (name, search) = match rest.strip_suffix("/search") {
        Some(name) => (name, true),
        None => (rest, false),
    };
    if name.is_empty() || name.contains('/') {
        return None;
    }
    Some(match search {
        true => Endpoint::Search(Some(name.to_owned())),
        false => Endpoint::Tools(Some(name.to_owned())),
    })
}

fn plain(status: StatusCode, message: &str) -> Reply {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(message.to_owned())).boxed())
        .expect("a valid response")
}

/// A request [`Snapshot::admit`] refused, in HTTP: 401 or 403 for its
/// credentials ([`unauthenticated`]); 429 with `Retry-After` (whole
/// seconds, rounded up) over the principal's limit; 404 for an unknown
/// toolset.
fn refusal(snapshot: &Snapshot, refused: Refused, sent: bool) -> Reply {
    match refused {
        Refused::Unauthenticated(refused) => {
            let oauth = snapshot.identity.oauth().map(|o| o.as_ref());
            unauthenticated(oauth, sent, refused.insufficient_scope)
        }
        Refused::Limited(limited) => {
            let mut reply = plain(StatusCode::TOO_MANY_REQUESTS, &limited.message);
            reply.headers_mut().insert(hyper::header::RETRY_AFTER, limited.retry_after_seconds().into());
            reply
        }
        Refused::Connections => {
            let mut reply = plain(StatusCode::TOO_MANY_REQUESTS, Refused::CONNECTIONS);
            reply.headers_mut().insert(hyper::header::RETRY_AFTER, 1.into());
            reply
        }
        // As a JSON-RPC error too, where SDKs read it (a 404 with a JSON
        // body is the error they show; a plain one becomes "Not Found").
        Refused::UnknownToolset(message) => {
            let mut reply = rpc_error(Value::Null, -32601, &message);
            *reply.status_mut() = StatusCode::NOT_FOUND;
            reply
        }
    }
}

/// 401 with `WWW-Authenticate: Bearer`, saying `error="invalid_token"` when
/// a credential was sent, and with `oauth` where its metadata is; or, for
/// an access token without a required scope, 403 `insufficient_scope`
/// naming the scopes.
fn unauthenticated(oauth: Option<&OauthVerifier>, sent: bool, insufficient_scope: bool) -> Reply {
    let mut parameters = Vec::new();
    let status = match (insufficient_scope, oauth) {
        (true, Some(oauth)) => {
            parameters.push(r#"error="insufficient_scope""#.to_owned());
            parameters.push(format!(r#"scope="{}""#, oauth.scopes().join(" ")));
            StatusCode::FORBIDDEN
        }
        _ => {
            if sent {
                parameters.push(r#"error="invalid_token""#.to_owned());
            }
            StatusCode::UNAUTHORIZED
        }
    };
    if let Some(oauth) = oauth {
        parameters.push(format!(r#"resource_metadata="{}""#, oauth.metadata_url()));
    }
    let challenge = match parameters.is_empty() {
        true => "Bearer".to_owned(),
        false => format!("Bearer {}", parameters.join(", ")),
    };
    let message = match status {
        StatusCode::FORBIDDEN => "forbidden: the access token lacks a scope this resource requires",
        _ => crate::identity::UNAUTHENTICATED,
    };
    let mut reply = plain(status, message);
    if let Ok(value) = hyper::header::HeaderValue::from_str(&challenge) {
        reply.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, value);
    }
    reply
}

fn json_reply(status: StatusCode, value: &Value) -> Reply {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(value.to_string())).boxed())
        .expect("a valid response")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(endpoint("/mcp"), Some(Endpoint::Tools(None)));
        assert_eq!(endpoint("/mcp/"), Some(Endpoint::Tools(None)));
        assert_eq!(endpoint("/mcp/search"), Some(Endpoint::Search(None)));
        assert_eq!(endpoint("/mcp/toolsets/courier/search"), Some(Endpoint::Search(Some("courier".to_owned()))));
        assert_eq!(endpoint("/mcp/toolsets//search"), None);
        assert_eq!(endpoint("/mcp/toolsets/a/b/search"), None);
        assert_eq!(endpoint("/mcp/search/x"), None);
        assert_eq!(endpoint("/mcp/toolsets/courier"), Some(Endpoint::Tools(Some("courier".to_owned()))));
        assert_eq!(endpoint("/mcp/toolsets/"), None);
        assert_eq!(endpoint("/mcp/toolsets/a/b"), None);
        assert_eq!(endpoint("/other"), None);
    }
}
