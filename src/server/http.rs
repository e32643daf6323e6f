//! The connection loop of the doors that speak HTTP through hyper (MCP's
//! streamable HTTP, the model door): each accepted connection served
//! HTTP/1.1 or HTTP/2 by hyper, every request handed to the door's edge
//! ([`HttpEdge`]) with who sent it, until the door is told to stop; then
//! the connections finish what they have.

use std::{convert::Infallible, future::Future, sync::Arc};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::BoxBody;
use hyper::{body::Incoming, Request, Response};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto::Builder,
};
use tonic::transport::server::Connected;

use super::{Connections, Peer, Stopping};

/// What an HTTP door answers.
pub(crate) type Reply = Response<BoxBody<Bytes, Infallible>>;

/// A door's answer to each request: the request and who sent it (the
/// peer's address, what its connection presented, its calls).
pub(crate) trait HttpEdge: Send + Sync + 'static {
    /// Whether its connections are served on the connection threads
    /// ([`super::threads`]), each whole on one thread, rather than as
    /// tasks of the shared runtime.
    const ON_THREADS: bool = false;

    fn handle(&self, request: Request<Incoming>, connected: &Peer) -> impl Future<Output = Reply> + Send;
}

/// Serves every connection of `connections` with `edge` until `stopping`
/// completes, then waits for the connections' requests in flight. `door`
/// names the door in the log line of a connection that ended in error.
pub(crate) async fn serve_http<E: HttpEdge>(
    door: &'static str,
    edge: Arc<E>,
    mut connections: Connections,
    mut stopping: Stopping,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let builder = Builder::new(TokioExecutor::new());
    loop {
        let mut conn = tokio::select! {
            next = connections.next() => match next {
                Some(Ok(conn)) => conn,
                Some(Err(_)) => continue,
                None => break,
            },
            () = &mut stopping => break,
        };
        let connected = conn.connect_info();
        let Some(peer) = connected.addr else { continue };
        let edge = Arc::clone(&edge);
        let service = hyper::service::service_fn(move |request| {
            let (edge, connected) = (Arc::clone(&edge), connected.clone());
            async move { Ok::<_, Infallible>(edge.handle(request, &connected).await) }
        });
        let (builder, watcher) = (builder.clone(), graceful.watcher());
        let serving = async move {
            if E::ON_THREADS {
                if let Err(err) = conn.rehome() {
                    tracing::debug!(door, peer = %peer, "connection ended: cannot move it to its thread: {err}");
                    return;
                }
            }
            let connection = watcher.watch(builder.serve_connection_with_upgrades(TokioIo::new(conn), service));
            if let Err(err) = connection.await {
                tracing::debug!(door, peer = %peer, "connection ended: {err}");
            }
        };
        match E::ON_THREADS {
            true => super::threads::spawn(serving),
            false => {
                tokio::spawn(serving);
            }
        }
    }
    // Told to stop: the listener closes (a new client is refused, not left
    // in the listen queue) while the connections finish.
    drop(connections);
    graceful.shutdown().await;
}

/// Why the shared edge refuses a browser's request before a door reads
/// it; each door says it in its protocol (403).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Foreign {
    /// On a loopback listener, a `Host` that is not a loopback name: a
    /// page whose name was made to resolve to 127.0.0.1 (DNS rebinding).
    Host,
    /// An `Origin` neither allowed nor a loopback origin.
    Origin,
}

impl Foreign {
    pub(crate) fn message(self) -> &'static str {
        match self {
            Foreign::Host => "forbidden: this Host is not the gateway's",
            Foreign::Origin => "forbidden: this Origin may not call the gateway",
        }
    }
}

/// The browser rule of every HTTP door: an `Origin` must be one of
/// `allowed_origins` or a loopback origin (a page served from this
/// machine); on a loopback listener the `Host` must be a loopback name too.
/// A request without `Origin` is no browser's cross-origin request.
pub(crate) fn foreign<B>(request: &Request<B>, loopback: bool, allowed_origins: &[String]) -> Option<Foreign> {
    let headers = request.headers();
    if loopback {
        let host = headers.get(hyper::header::HOST).and_then(|h| h.to_str().ok());
        let host = host.or_else(|| request.uri().authority().map(|a| a.as_str()));
        if !host.is_some_and(is_loopback_host) {
            return Some(Foreign::Host);
        }
    }
    let origin = headers.get(hyper::header::ORIGIN)?;
    let allowed = origin.to_str().is_ok_and(|origin| {
        allowed_origins.iter().any(|a| a == origin)
            || origin
                .split_once("://")
                .is_some_and(|(scheme, host)| matches!(scheme, "http" | "https") && is_loopback_host(host))
    });
    (!allowed).then_some(Foreign::Origin)
}

/// `localhost`, `127.0.0.1` or `[::1]` (the loopback names), with or
/// without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map_or(v6, |(address, _)| address),
        None => host.rsplit_once(':').map_or(host, |(name, port)| match port.parse::<u16>() {
            Ok(_) => name,
            Err(_) => host,
        }),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in ["localhost", "LOCALHOST:8765", "127.0.0.1", "127.0.0.1:80", "[::1]", "[::1]:8765", "127.9.9.9"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["evil.example.com", "evil.example.com:8765", "localhost.evil.com", "10.0.0.1:80", "[::2]", ""] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
