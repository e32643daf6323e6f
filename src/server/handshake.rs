//! The TLS handshake of each accepted connection (bounded by the handshake
//! timeout, side by side, refusals logged), on the listener's current
//! [`ServerTls`]; then the connection is read for the HTTP/2 preface
//! above TLS. A client that speaks plaintext to the TLS port is answered
//! in plaintext that it is one ([`plaintext_on_tls_port`]).

use std::{
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use futures::{stream::FuturesUnordered, Stream, StreamExt};
use tokio_rustls::server::TlsStream;

use super::connections::{Conn, Incoming, PrefaceWatch};
use crate::{
    telemetry::throttle::{self, Throttle},
    tls::ServerTls,
};

/// At most one refused handshake is logged at WARN in this time.
const REFUSED_LOG_PERIOD: Duration = Duration::from_secs(10);

/// The content type of a TLS handshake record, a TLS client's first byte.
const TLS_HANDSHAKE: u8 = 0x16;

/// What a plaintext client of the TLS port is told.
const TLS_PORT: &str = "this port speaks TLS: connect over TLS (an https:// address, or the client's TLS option)";

/// Answers a client that sent plaintext to the TLS port, in plaintext:
/// every gRPC call gets UNAVAILABLE with [`TLS_PORT`], any other HTTP
/// request a 400 that says the same. Without it such a client sees a
/// broken connection and a bare transport error.
async fn plaintext_on_tls_port(conn: Conn) {
    use http_body_util::Full;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let service = hyper::service::service_fn(|request: http::Request<hyper::body::Incoming>| async move {
        let grpc = request
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
        let response = match grpc {
            true => http::Response::builder()
                .header(http::header::CONTENT_TYPE, "application/grpc")
                .header("grpc-status", "14")
                .header("grpc-message", TLS_PORT)
                .body(Full::new(bytes::Bytes::new())),
            false => http::Response::builder()
                .status(http::StatusCode::BAD_REQUEST)
                .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
                .body(Full::new(bytes::Bytes::from(format!("{TLS_PORT}\n")))),
        };
        Ok::<_, std::convert::Infallible>(response.expect("a valid response"))
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let _ = builder.serve_connection(TokioIo::new(conn), service).await;
}

/// A TLS connection, its plaintext read for the HTTP/2 preface.
pub(crate) type TlsConn = PrefaceWatch<TlsStream<Conn>>;

type Handshake = Pin<Box<dyn std::future::Future<Output = Option<TlsConn>> + Send>>;

/// The accepted connections of [`Incoming`], each through its TLS handshake
/// (bounded by the handshake timeout) before it is handed to the server.
/// Handshakes run side by side; one slow client holds up no other.
pub(crate) struct TlsIncoming {
    inner: Incoming,
    tls: Arc<ServerTls>,
    handshake_timeout: Duration,
    /// Refused handshakes are logged at WARN, one every 10 s at most.
    refused: Arc<Throttle>,
    handshakes: FuturesUnordered<Handshake>,
    inner_done: bool,
}

impl TlsIncoming {
    pub(crate) fn new(inner: Incoming, tls: Arc<ServerTls>, handshake_timeout: Duration) -> Self {
        let refused = Arc::new(Throttle::new(REFUSED_LOG_PERIOD));
        Self { inner, tls, handshake_timeout, refused, handshakes: FuturesUnordered::new(), inner_done: false }
    }
}

impl Stream for TlsIncoming {
    type Item = io::Result<TlsConn>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        while !this.inner_done {
            match Pin::new(&mut this.inner).poll_next(cx) {
                Poll::Ready(Some(Ok(conn))) => {
                    let peer = conn.peer();
                    let acceptor = this.tls.acceptor(conn.http1());
                    let limit = this.handshake_timeout;
                    let refused = Arc::clone(&this.refused);
                    this.handshakes.push(Box::pin(async move {
                        // One deadline for the first byte and the handshake
                        // (or the plaintext answer).
                        let deadline = tokio::time::Instant::now() + limit;
                        // A TLS client's first record is a handshake.
                        match tokio::time::timeout_at(deadline, conn.first_byte()).await {
                            Ok(Ok(Some(TLS_HANDSHAKE))) => {}
                            Ok(Ok(Some(_))) => {
                                tracing::debug!(peer = %peer, "a plaintext client on the TLS port; told so");
                                let _ = tokio::time::timeout_at(deadline, plaintext_on_tls_port(conn)).await;
                                return None;
                            }
                            _ => return None,
                        }
                        match tokio::time::timeout_at(deadline, acceptor.accept(conn)).await {
                            Ok(Ok(mut stream)) => {
                                let http1 = stream.get_ref().0.http1();
                                let done = stream.get_mut().0.preface_above();
                                Some(PrefaceWatch::new(stream, done, http1))
                            }
                            Ok(Err(err)) => {
                                // A client that cannot connect sees only a
                                // failed dial: the reason is said here.
                                match refused.allow() {
                                    Some(skipped) => tracing::warn!(
                                        peer = %peer,
                                        "TLS handshake refused: {err}{}",
                                        throttle::more(skipped)
                                    ),
                                    None => tracing::debug!(peer = %peer, "TLS handshake refused: {err}"),
                                }
                                None
                            }
                            Err(_) => {
                                tracing::debug!(peer = %peer, "TLS handshake not finished within {limit:?}");
                                None
                            }
                        }
                    }));
                }
                Poll::Ready(Some(Err(err))) => return Poll::Ready(Some(Err(err))),
                Poll::Ready(None) => this.inner_done = true,
                Poll::Pending => break,
            }
        }
        loop {
            match this.handshakes.poll_next_unpin(cx) {
                Poll::Ready(Some(Some(stream))) => return Poll::Ready(Some(Ok(stream))),
                Poll::Ready(Some(None)) => continue,
                Poll::Ready(None) if this.inner_done => return Poll::Ready(None),
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            }
        }
    }
}
