//! The MCP front door over streamable HTTP: `/mcp` (the caller's tools) and
//! `/mcp/toolsets/NAME` (one toolset of them), on the accepted-connection
//! guards of [`crate::server`] (caps, deadlines, TLS). Before a request
//! reaches rmcp's transport, this edge checks its `Origin`, proves who sends
//! it (401 with `WWW-Authenticate: Bearer` when nothing does) and that its
//! toolset exists (404 with a did-you-mean); the handler then sees the
//! snapshot, caller and toolset in the request's extensions.

use std::{convert::Infallible, future::Future, net::SocketAddr, sync::Arc};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::{body::Incoming as Body, Request, Response, StatusCode};
use hyper_util::{rt::TokioExecutor, rt::TokioIo, server::conn::auto::Builder};
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use tokio::net::TcpListener;
use tokio_stream::StreamExt;

use super::{Asked, Door};
use crate::{
    catalog::Name,
    config::McpSettings,
    identity::Credentials,
    live::SnapshotSlot,
    resolve::message::quote_emitted,
    server::{
        connections::{Guarded, Registry},
        ConnectionSettings, Incoming, Stop,
    },
};

/// The largest request body; past it, 413.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

type Reply = Response<BoxBody<Bytes, Infallible>>;

/// What every request of the listener shares.
struct Edge {
    current: SnapshotSlot,
    allowed_origins: Vec<String>,
    transport: StreamableHttpService<Door, LocalSessionManager>,
    registry: Arc<Registry>,
}

/// Serves MCP on `listener` until `stop` says; calls in flight get the
/// drain time to finish.
pub(crate) async fn serve(
    listener: TcpListener,
    current: SnapshotSlot,
    settings: McpSettings,
    connections: ConnectionSettings,
    stop: Stop<impl Future<Output = ()>, impl Future<Output = ()>>,
) {
    let door = Door::new(Arc::clone(&current));
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_legacy_session_mode(true)
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    let transport =
        StreamableHttpService::new(move || Ok(door.clone()), Arc::new(LocalSessionManager::default()), config);
    let registry = Arc::new(Registry::default());
    let edge = Arc::new(Edge {
        current,
        allowed_origins: settings.allowed_origins,
        transport,
        registry: Arc::clone(&registry),
    });
    let mut incoming = Incoming::new(listener, connections, registry).http1();
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let builder = Builder::new(TokioExecutor::new());
    let Stop { shutdown, drain, now } = stop;
    tokio::pin!(shutdown);
    loop {
        let conn = tokio::select! {
            next = incoming.next() => match next {
                Some(Ok(conn)) => conn,
                Some(Err(_)) => continue,
                None => break,
            },
            () = &mut shutdown => break,
        };
        let peer = conn.peer();
        let edge = Arc::clone(&edge);
        let service = hyper::service::service_fn(move |request| {
            let edge = Arc::clone(&edge);
            async move { Ok::<_, Infallible>(edge.handle(request, peer).await) }
        });
        let connection =
            graceful.watch(builder.serve_connection_with_upgrades(TokioIo::new(conn), service).into_owned());
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(peer = %peer, "MCP connection ended: {err}");
            }
        });
    }
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(drain) => tracing::warn!("MCP calls still in flight after the drain time; closing"),
        () = now => {}
    }
}

impl Edge {
    async fn handle(&self, mut request: Request<Body>, peer: SocketAddr) -> Reply {
        let toolset = match endpoint(request.uri().path()) {
            Some(toolset) => toolset,
            None => return plain(StatusCode::NOT_FOUND, "not found: MCP is served at /mcp and /mcp/toolsets/NAME"),
        };
        if let Some(origin) = request.headers().get(hyper::header::ORIGIN) {
            let allowed = origin.to_str().is_ok_and(|o| self.allowed_origins.iter().any(|a| a == o));
            if !allowed {
                return plain(StatusCode::FORBIDDEN, "forbidden: this Origin may not call the gateway");
            }
        }
        let snapshot = self.current.load_full();
        let headers = request.headers();
        let values =
            |name: &str| -> Vec<Option<&str>> { headers.get_all(name).iter().map(|v| v.to_str().ok()).collect() };
        let authorization = values("authorization");
        let user_token = snapshot.identity.user_header().map(values).unwrap_or_default();
        let credentials =
            Credentials { authorization: &authorization, certificate: None, user_token: &user_token, peer: Some(peer) };
        let caller = match snapshot.identity.authenticate(&credentials) {
            Ok(caller) => caller,
            Err(refused) => return unauthenticated(!authorization.is_empty(), &refused.to_string()),
        };
        if let Some(name) = &toolset {
            let catalog = snapshot.executor().catalog();
            if !matches!(catalog.lookup(name), Some(Name::Toolset(_))) {
                let known = catalog.toolsets().iter().map(|t| t.name.as_str());
                let statement = format!("unknown toolset {}", quote_emitted(name));
                let message = crate::similar::did_you_mean(&statement, name, known, String::new);
                return plain(StatusCode::NOT_FOUND, &message);
            }
        }
        request.extensions_mut().insert(Asked { snapshot, caller, toolset });
        let guard = self.registry.call(peer);
        let response = self.transport.handle(request).await;
        response.map(|body| Guarded::new(body, guard).boxed())
    }
}

/// The toolset an endpoint names: `Some(None)` for `/mcp`, `Some(Some(name))`
/// for `/mcp/toolsets/NAME`; `None` for any other path.
fn endpoint(path: &str) -> Option<Option<String>> {
    let path = path.strip_suffix('/').unwrap_or(path);
    if path == "/mcp" {
        return Some(None);
    }
    let name = path.strip_prefix("/mcp/toolsets/")?;
    (!name.is_empty() && !name.contains('/')).then(|| Some(name.to_owned()))
}

fn plain(status: StatusCode, message: &str) -> Reply {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(message.to_owned())).boxed())
        .expect("a valid response")
}

/// 401 with `WWW-Authenticate: Bearer`, saying `error="invalid_token"` when
/// a credential was sent.
fn unauthenticated(sent: bool, message: &str) -> Reply {
    let challenge = match sent {
        true => r#"Bearer error="invalid_token""#,
        false => "Bearer",
    };
    let mut reply = plain(StatusCode::UNAUTHORIZED, message);
    reply.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, hyper::header::HeaderValue::from_static(challenge));
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(endpoint("/mcp"), Some(None));
        assert_eq!(endpoint("/mcp/"), Some(None));
        assert_eq!(endpoint("/mcp/toolsets/courier"), Some(Some("courier".to_owned())));
        assert_eq!(endpoint("/mcp/toolsets/"), None);
        assert_eq!(endpoint("/mcp/toolsets/a/b"), None);
        assert_eq!(endpoint("/other"), None);
    }
}
