//! The one way a front door is served ([`serve`]): its listener's
//! connections accepted through the guards ([`super::connections`]: the
//! cap, the handshake and idle deadlines, keepalive), through TLS when the
//! listener has it ([`super::tls`]), handed to the door's protocol engine
//! ([`Door`]), and, when the door is told to stop, drained for at most the
//! drain time (or not at all, on a second signal). A door brings only its
//! protocol: tonic for gRPC, hyper for MCP's streamable HTTP.

use std::{future::Future, io, net::SocketAddr, pin::Pin, sync::Arc, task::Poll};

use futures::{Stream, StreamExt};
use rustls::pki_types::CertificateDer;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpListener,
};
use tonic::transport::server::Connected;

use super::{
    connections::{CallGuard, Calls, Conn, Registry},
    handshake::{TlsConn, TlsIncoming},
    ConnectionSettings, Incoming, Stop,
};
use crate::{
    identity::{Identity, Presented},
    tls::ServerTls,
};

/// Who is at the other end of an accepted connection: its address and,
/// over TLS, the certificate chain it presented. Every door finds it in a
/// request's extensions.
#[derive(Clone, Debug, Default)]
pub(crate) struct Peer {
    pub(crate) addr: Option<SocketAddr>,
    pub(crate) chain: Option<Arc<Vec<CertificateDer<'static>>>>,
    /// The connection's calls in flight.
    pub(crate) calls: Option<Arc<Calls>>,
}

impl Peer {
    /// A call in flight on this connection until the guard drops: the
    /// connection is not idle meanwhile.
    pub(crate) fn call(&self) -> Option<CallGuard> {
        self.calls.as_ref().map(Calls::call)
    }

    /// The connection counts for `principal` from its first authenticated
    /// request on; `false` when that principal holds as many connections
    /// as it may (the connection then closes).
    pub(crate) fn authenticated(&self, principal: Option<&Arc<str>>) -> bool {
        self.calls.as_ref().is_none_or(|calls| calls.authenticated(principal))
    }

    /// The credentials a request on this connection presents: its
    /// `headers`, and the client certificate when `tls`, the listener's,
    /// still trusts the chain ([`ServerTls::vouched`]); for every door.
    pub(crate) fn presented<'h>(
        &self,
        identity: &Identity,
        headers: &'h http::HeaderMap,
        tls: Option<&ServerTls>,
        access_tokens: bool,
    ) -> Presented<'h> {
        let certificate = ServerTls::vouched(tls, self.chain.as_deref().map(Vec::as_slice));
        Presented::of(identity, headers, certificate, self.addr, access_tokens)
    }
}

/// A connection of a door's listener, as the door's engine receives it
/// (the TLS state boxed: it is several times the size of a connection; the
/// plaintext connection, the common one, stays inline).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Accepted {
    Plain(Conn),
    Tls(Box<TlsConn>),
}

impl Accepted {
    /// Moves the connection to the runtime this is called on
    /// ([`Conn::rehome`]), under TLS too.
    pub(crate) fn rehome(&mut self) -> io::Result<()> {
        match self {
            Accepted::Plain(conn) => conn.rehome(),
            Accepted::Tls(conn) => conn.get_mut().get_mut().0.rehome(),
        }
    }
}

/// The accepted connections of one listener.
pub(crate) type Connections = Pin<Box<dyn Stream<Item = io::Result<Accepted>> + Send>>;

/// Completes when a door should stop accepting and finish what it has.
pub(crate) type Stopping = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Why a door stopped serving before it was told to.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("the server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// A front door's protocol over the connections [`serve`] accepted.
pub(crate) trait Door: Send {
    /// What the door calls itself (logs, spans, metrics, audit).
    fn name(&self) -> &'static str;

    /// Whether it speaks HTTP/1.1 besides HTTP/2 (the preface watch and
    /// TLS's ALPN then accept an HTTP/1.1 request head).
    fn http1(&self) -> bool {
        false
    }

    /// Serves every connection of `connections` (accepted on `local`, the
    /// listener's address) until
    /// `stopping` completes; then accepts no more and completes once the
    /// calls in flight have ended.
    fn run(
        self,
        local: Option<SocketAddr>,
        connections: Connections,
        stopping: Stopping,
    ) -> impl Future<Output = Result<(), ServeError>> + Send;
}

/// Serves `door` on `listener`, with `settings`' guards and `tls`, until
/// `stop`'s shutdown completes; then the door stops accepting and calls in
/// flight get up to the drain time to finish (or none, once `stop`'s second
/// signal comes).
pub(crate) async fn serve(
    listener: TcpListener,
    settings: ConnectionSettings,
    tls: Option<Arc<ServerTls>>,
    door: impl Door,
    stop: Stop<impl Future<Output = ()>, impl Future<Output = ()>>,
) -> Result<(), ServeError> {
    let name = door.name();
    let registry = Arc::new(Registry::default());
    let local = listener.local_addr().ok();
    let handshake_timeout = settings.handshake_timeout;
    let mut incoming = Incoming::new(listener, settings, Arc::clone(&registry));
    if door.http1() {
        incoming = incoming.http1();
    }
    let connections: Connections = match tls {
        None => Box::pin(incoming.map(|conn| conn.map(Accepted::Plain))),
        Some(tls) => {
            let accepted = TlsIncoming::new(incoming, tls, handshake_timeout);
            Box::pin(accepted.map(|conn| conn.map(|conn| Accepted::Tls(Box::new(conn)))))
        }
    };
    let (tell, told) = tokio::sync::watch::channel(false);
    let stopping: Stopping = Box::pin(async move {
        let mut told = told;
        let _ = told.wait_for(|&stop| stop).await;
    });
    let served = door.run(local, connections, stopping);
    tokio::pin!(served);
    let Stop { shutdown, drain, now } = stop;
    tokio::select! {
        result = &mut served => return result,
        () = shutdown => {}
    }
    let _ = tell.send(true);
    tokio::select! {
        result = tokio::time::timeout(drain, served) => result.unwrap_or_else(|_| {
            tracing::warn!(door = name, drain_secs = drain.as_secs_f64(), "calls still in flight after the drain time; closing");
            Ok(())
        }),
        () = now => {
            tracing::warn!(door = name, "asked again to stop: closing now, without waiting for calls in flight");
            Ok(())
        }
    }
}

impl Connected for Accepted {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        match self {
            Accepted::Plain(conn) => {
                Peer { addr: conn.connect_info().remote_addr(), chain: None, calls: Some(Arc::clone(conn.calls())) }
            }
            Accepted::Tls(conn) => {
                let info = conn.connect_info();
                let calls = Arc::clone(conn.get_ref().get_ref().0.calls());
                Peer { addr: info.get_ref().remote_addr(), chain: info.peer_certs(), calls: Some(calls) }
            }
        }
    }
}

impl AsyncRead for Accepted {
    fn poll_read(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Accepted::Plain(conn) => Pin::new(conn).poll_read(cx, buf),
            Accepted::Tls(conn) => Pin::new(conn.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Accepted::Plain(conn) => Pin::new(conn).poll_write(cx, buf),
            Accepted::Tls(conn) => Pin::new(conn.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Accepted::Plain(conn) => Pin::new(conn).poll_flush(cx),
            Accepted::Tls(conn) => Pin::new(conn.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Accepted::Plain(conn) => Pin::new(conn).poll_shutdown(cx),
            Accepted::Tls(conn) => Pin::new(conn.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Accepted::Plain(conn) => Pin::new(conn).poll_write_vectored(cx, bufs),
            Accepted::Tls(conn) => Pin::new(conn.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Accepted::Plain(conn) => conn.is_write_vectored(),
            Accepted::Tls(conn) => conn.is_write_vectored(),
        }
    }
}
