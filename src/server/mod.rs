//! Listeners and accepted connections (docs/architecture.md, "Layers"):
//! what every front door's listener gets before a request reaches it. Each
//! accepted connection is capped, given deadlines and keepalive
//! (`connections`) and, when configured, TLS with certificates re-read on
//! reload (`tls`). How a server stops is a `Stop`.
//!
//! Front doors take a bound listener, so callers (and tests) bind port 0
//! and know the address before the first request, with no sleeping.

pub(crate) mod body;
pub(crate) mod connections;
mod handshake;
pub(crate) mod http;
mod per_principal;
mod serve;
pub(crate) mod threads;

use std::time::Duration;

pub use connections::ConnectionSettings;
pub(crate) use connections::Incoming;
pub(crate) use http::foreign;
pub(crate) use per_principal::{Held, PerPrincipal};
pub use serve::ServeError;
pub(crate) use serve::{serve, Connections, Door, Peer, Stopping};

/// Serves `routes` on `listener` through the gateway's own accepted-
/// connection path (the connection cap, handshake and idle deadlines, the
/// IO wrapper and call tracking, with default settings) and nothing else
/// of the gateway: for the load tool's "bare behind the accept path" row,
/// which shows what that path costs a caller.
pub async fn serve_accepted(
    listener: tokio::net::TcpListener,
    routes: tonic::service::Routes,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    use futures::StreamExt;
    let registry = std::sync::Arc::new(connections::Registry::default());
    let incoming = Incoming::new(listener, ConnectionSettings::default(), registry);
    tonic::transport::Server::builder()
        .layer(connections::TrackCalls)
        .add_routes(routes)
        .serve_with_incoming_shutdown(incoming.map(|conn| conn.map(serve::Accepted::Plain)), shutdown)
        .await
}

/// When and how a server stops.
pub struct Stop<S, N> {
    /// Completes when the server should stop accepting and drain.
    pub shutdown: S,
    /// How long calls in flight may take to finish then.
    pub drain: Duration,
    /// Completes when the drain should end at once (a second signal).
    pub now: N,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::net::TcpListener;
    use tokio_stream::StreamExt;

    use super::*;

    /// The regression guard: the server's side of an accepted connection has
    /// `TCP_NODELAY` set, read from the socket itself.
    #[tokio::test]
    async fn accepted_connections_have_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let registry = Arc::new(connections::Registry::default());
        let mut accepted = Incoming::new(listener, ConnectionSettings::default(), registry);
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let server_side = accepted.next().await.expect("a connection").expect("accepted");
        assert!(server_side.nodelay().unwrap(), "TCP_NODELAY is set on the server's side");
    }

    /// A vanished peer is the kernel's to find: the server's side of an
    /// accepted connection probes after `keepalive_interval` of silence, 4
    /// times over `keepalive_timeout`, and gives up on unacknowledged data
    /// after both, read from the socket itself.
    #[tokio::test]
    async fn accepted_connections_are_watched_by_the_kernel() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let registry = Arc::new(connections::Registry::default());
        let settings = ConnectionSettings {
            keepalive_interval: Duration::from_secs(45),
            keepalive_timeout: Duration::from_secs(12),
            ..ConnectionSettings::default()
        };
        let mut accepted = Incoming::new(listener, settings, registry);
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let server_side = accepted.next().await.expect("a connection").expect("accepted");
        let socket = server_side.socket();
        assert!(socket.keepalive().unwrap());
        assert_eq!(socket.tcp_keepalive_time().unwrap(), Duration::from_secs(45));
        assert_eq!(socket.tcp_keepalive_interval().unwrap(), Duration::from_secs(3));
        assert_eq!(socket.tcp_keepalive_retries().unwrap(), 4);
        #[cfg(target_os = "linux")]
        assert_eq!(socket.tcp_user_timeout().unwrap(), Some(Duration::from_secs(57)));
    }
}
