//! The accepted connections of a listener: capped in number, and an
//! accept loop that pauses when the process runs out of descriptors or
//! memory instead of spinning.
//!
//! The cap is a budget that several listeners may share (the gRPC and MCP
//! doors): a permit is taken after a connection is accepted, never held
//! while waiting for one (a door with no clients would hold a permit
//! another door's client needs). At the cap, a listener holds the one
//! connection it accepted unserved until a permit frees, and the next wait
//! in the listen queue.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Sleep,
};

use super::{Conn, ConnectionSettings, Registry};

/// The first and the longest pause of the accept loop after a resource error.
const BACKOFF_FIRST: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Accepted connections of a listener, as [`ConnectionSettings`] say.
pub(crate) struct Incoming {
    listener: TcpListener,
    settings: Arc<ConnectionSettings>,
    /// An HTTP/1.1 request head counts as a preface (the MCP listener).
    http1: bool,
    registry: Arc<Registry>,
    permits: Arc<Semaphore>,
    /// A connection accepted at the cap, waiting for a permit.
    held: Option<(TcpStream, SocketAddr)>,
    /// Waiting for a connection to close, at the cap.
    waiting: Option<Pin<Box<dyn Future<Output = OwnedSemaphorePermit> + Send>>>,
    /// Pausing after a resource error.
    backoff: Option<Pin<Box<Sleep>>>,
    next_backoff: Duration,
}

impl Incoming {
    pub(crate) fn new(listener: TcpListener, settings: ConnectionSettings, registry: Arc<Registry>) -> Self {
        let permits = settings.budget.permits(settings.max_connections);
        Self {
            listener,
            settings: Arc::new(settings),
            http1: false,
            registry,
            permits,
            held: None,
            waiting: None,
            backoff: None,
            next_backoff: BACKOFF_FIRST,
        }
    }

    /// Connections may speak HTTP/1.1 as well: its first request head is
    /// what must arrive before the handshake deadline.
    pub(crate) fn http1(mut self) -> Self {
        self.http1 = true;
        self
    }

    fn poll_permit(&mut self, cx: &mut Context<'_>) -> Poll<OwnedSemaphorePermit> {
        if self.waiting.is_none() {
            let max = self.settings.max_connections;
            match Arc::clone(&self.permits).try_acquire_owned() {
                Ok(permit) => {
                    self.settings.budget.shed(max);
                    return Poll::Ready(permit);
                }
                Err(_) => {
                    self.settings.budget.shed(max);
                    tracing::warn!(
                        max_connections = self.settings.max_connections,
                        "connection limit reached: {} connections are open over the doors; new ones wait in \
                         the listen queue until one closes",
                        self.settings.max_connections
                    );
                    // While it waits, idle connections are looked for again each
                    // second: one that falls idle makes room as well.
                    let (permits, budget) = (Arc::clone(&self.permits), self.settings.budget.clone());
                    self.waiting = Some(Box::pin(async move {
                        let acquired = permits.acquire_owned_or_never();
                        tokio::pin!(acquired);
                        loop {
                            tokio::select! {
                                permit = &mut acquired => return permit,
                                () = tokio::time::sleep(Duration::from_secs(1)) => budget.shed(max),
                            }
                        }
                    }));
                }
            }
        }
        let waiting = self.waiting.as_mut().expect("set above");
        match waiting.as_mut().poll(cx) {
            Poll::Ready(permit) => {
                self.waiting = None;
                tracing::info!("below the connection limit again: accepting connections");
                Poll::Ready(permit)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn accepted(&mut self, stream: TcpStream, peer: SocketAddr, permit: OwnedSemaphorePermit) -> io::Result<Conn> {
        stream.set_nodelay(true)?;
        // Best effort, as tonic does: a socket that refuses them still serves.
        let _ = silent_peer_closes(&stream, &self.settings);
        Ok(Conn::new(stream, peer, Arc::clone(&self.registry), Arc::clone(&self.settings), self.http1, permit))
    }
}

/// Probes the kernel sends to a peer silent for `keepalive_interval`,
/// spread over `keepalive_timeout`.
const KEEPALIVE_PROBES: u32 = 4;

/// Has the kernel close a connection whose peer has vanished: after
/// `keepalive_interval` without a packet from it, [`KEEPALIVE_PROBES`]
/// probes spread over `keepalive_timeout`, and data it has not acknowledged
/// for as long (`TCP_USER_TIMEOUT`, which also ends the probing then).
///
/// The gateway answers HTTP/2 PINGs and sends none: hyper's keepalive
/// records every frame a connection receives under a lock its streams
/// share, which cost a tenth of the requests a second at one connection ×
/// 64 streams (docs/benchmarks.md), while the kernel watches the same peer
/// for nothing. A peer that is there but stuck is closed by the idle
/// timeout once it has no call.
fn silent_peer_closes(stream: &TcpStream, settings: &ConnectionSettings) -> io::Result<()> {
    let socket = socket2::SockRef::from(stream);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(settings.keepalive_interval)
        .with_interval((settings.keepalive_timeout / KEEPALIVE_PROBES).max(Duration::from_secs(1)))
        .with_retries(KEEPALIVE_PROBES);
    socket.set_tcp_keepalive(&keepalive)?;
    #[cfg(target_os = "linux")]
    socket.set_tcp_user_timeout(Some(settings.keepalive_interval + settings.keepalive_timeout))?;
    Ok(())
}

trait AcquireOwned {
    /// A permit, whenever one frees; the semaphore is never closed.
    fn acquire_owned_or_never(self) -> impl Future<Output = OwnedSemaphorePermit> + Send;
}

impl AcquireOwned for Arc<Semaphore> {
    async fn acquire_owned_or_never(self) -> OwnedSemaphorePermit {
        self.acquire_owned().await.expect("the connection semaphore is never closed")
    }
}

/// Whether an accept error says the process or system ran out of something
/// (descriptors, buffers, memory): retrying at once would fail the same way.
fn exhausted(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(code) if code == libc::EMFILE || code == libc::ENFILE || code == libc::ENOBUFS || code == libc::ENOMEM
    )
}

impl futures::Stream for Incoming {
    type Item = io::Result<Conn>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(backoff) = this.backoff.as_mut() {
                if backoff.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.backoff = None;
            }
            let (stream, peer) = match this.held.take() {
                Some(held) => held,
                None => match this.listener.poll_accept(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(accepted)) => {
                        this.next_backoff = BACKOFF_FIRST;
                        accepted
                    }
                    Poll::Ready(Err(err)) if exhausted(&err) => {
                        let pause = this.next_backoff;
                        tracing::warn!(
                            open = this.registry.len(),
                            "cannot accept a connection: {err}; pausing the accept loop for {pause:?}"
                        );
                        this.next_backoff = (pause * 2).min(BACKOFF_MAX);
                        this.backoff = Some(Box::pin(tokio::time::sleep(pause)));
                        continue;
                    }
                    // A connection that failed on its own (reset before it
                    // was accepted): tonic logs it and accepts the next.
                    Poll::Ready(Err(err)) => return Poll::Ready(Some(Err(err))),
                },
            };
            let permit = match this.poll_permit(cx) {
                Poll::Ready(permit) => permit,
                Poll::Pending => {
                    this.held = Some((stream, peer));
                    return Poll::Pending;
                }
            };
            match this.accepted(stream, peer, permit) {
                Ok(conn) => return Poll::Ready(Some(Ok(conn))),
                // The peer left already; its permit goes back.
                Err(_) => continue,
            }
        }
    }
}
