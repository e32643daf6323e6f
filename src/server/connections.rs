//! The gateway's connections: accepted with `TCP_NODELAY` and TCP
//! keepalive, capped in number, closed when they never start or stay idle,
//! and an accept loop that backs off when the process runs out of file
//! descriptors instead of spinning.
//!
//! tonic's own serve loop `continue`s on every accept error (a core at
//! 100 % while `accept` fails with EMFILE) and has no handshake or idle
//! timeout, so these live here: in the stream of accepted connections
//! ([`Incoming`]) and the wrapper of each ([`Conn`]), which keeps tonic's
//! connect info (`remote_addr()`, and later the TLS peer certificates).
//! Whether a connection is idle is counted in calls, not bytes: HTTP/2
//! keepalive pings are bytes, and a connection that only answers pings is
//! idle. A tower layer ([`TrackCalls`]) counts each connection's calls.

use std::{
    collections::HashMap,
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex, OnceLock,
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Sleep,
};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// How the gateway treats connections. The defaults are in docs/limits.md's
/// limits table.
#[derive(Clone, Debug)]
pub struct ConnectionSettings {
    /// Connections open at once; more wait in the listen queue until one
    /// closes. Default: three quarters of the process's file-descriptor
    /// limit (the rest is for tools, backends and files), at most 10,000.
    pub max_connections: usize,
    /// A connection must send the whole HTTP/2 preface and its first
    /// SETTINGS frame within this time (counted after the TLS handshake,
    /// which has as long again), or it is closed.
    pub handshake_timeout: Duration,
    /// A connection without a call for this long is closed.
    pub idle_timeout: Duration,
    /// HTTP/2 PING after this long without a frame from the client…
    pub keepalive_interval: Duration,
    /// …and the connection is closed if the PING is not answered in this
    /// time: a peer that vanished (half-open) does not hold a connection.
    pub keepalive_timeout: Duration,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            max_connections: default_max_connections(),
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            keepalive_interval: Duration::from_secs(60),
            keepalive_timeout: Duration::from_secs(20),
        }
    }
}

/// Connections the probe port (`health_listen`) keeps open at once.
const PROBE_CONNECTIONS: usize = 16;
/// How long a probe connection may take to send its preface, and stay idle.
const PROBE_HANDSHAKE: Duration = Duration::from_secs(2);
const PROBE_IDLE: Duration = Duration::from_secs(30);

impl ConnectionSettings {
    /// The settings of the probe port: a cap of its own, small (16 or this
    /// port's, if smaller), and deadlines no longer than 2 s to send the
    /// preface and 30 s idle. A probe connects, asks and leaves.
    pub(crate) fn for_probes(&self) -> ConnectionSettings {
        ConnectionSettings {
            max_connections: self.max_connections.min(PROBE_CONNECTIONS),
            handshake_timeout: self.handshake_timeout.min(PROBE_HANDSHAKE),
            idle_timeout: self.idle_timeout.min(PROBE_IDLE),
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
        }
    }
}

/// Three quarters of the soft file-descriptor limit, between 16 and 10,000.
pub(crate) fn default_max_connections() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    limit.map_or(10_000, |n| (n.min(1 << 20) as usize * 3 / 4).clamp(16, 10_000))
}

/// How often a connection's idle time is looked at when it has calls.
const RECHECK: Duration = Duration::from_secs(1);
/// The first and the longest pause of the accept loop after a resource error.
const BACKOFF_FIRST: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The open connections, by peer address, with their calls in flight.
#[derive(Default)]
pub(crate) struct Registry {
    open: Mutex<HashMap<SocketAddr, Arc<Calls>>>,
}

impl Registry {
    fn calls(&self, peer: SocketAddr) -> Option<Arc<Calls>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).get(&peer).cloned()
    }

    /// A call in flight on the connection of `peer` until the guard drops
    /// (with the response body): the connection is not idle meanwhile.
    pub(crate) fn call(&self, peer: SocketAddr) -> Option<CallGuard> {
        self.calls(peer).map(CallGuard::new)
    }

    /// Connections open now.
    pub(crate) fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The calls of one connection: how many are in flight, and since when
/// there have been none.
#[derive(Default)]
struct Calls {
    active: AtomicUsize,
    /// Milliseconds since [`epoch`] at which `active` last fell to 0 (or
    /// the connection opened).
    idle_since: AtomicU64,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_millis() -> u64 {
    epoch().elapsed().as_millis() as u64
}

/// Accepted connections of a listener, as [`ConnectionSettings`] say.
pub(crate) struct Incoming {
    listener: TcpListener,
    settings: Arc<ConnectionSettings>,
    /// An HTTP/1.1 request head counts as a preface (the MCP listener).
    http1: bool,
    registry: Arc<Registry>,
    permits: Arc<Semaphore>,
    /// A permit held for the next accepted connection.
    permit: Option<OwnedSemaphorePermit>,
    /// Waiting for a connection to close, at the cap.
    waiting: Option<Pin<Box<dyn Future<Output = OwnedSemaphorePermit> + Send>>>,
    /// Pausing after a resource error.
    backoff: Option<Pin<Box<Sleep>>>,
    next_backoff: Duration,
}

impl Incoming {
    pub(crate) fn new(listener: TcpListener, settings: ConnectionSettings, registry: Arc<Registry>) -> Self {
        let permits = Arc::new(Semaphore::new(settings.max_connections));
        Self {
            listener,
            settings: Arc::new(settings),
            http1: false,
            registry,
            permits,
            permit: None,
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

    fn poll_permit(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.permit.is_some() {
            return Poll::Ready(());
        }
        if self.waiting.is_none() {
            match Arc::clone(&self.permits).try_acquire_owned() {
                Ok(permit) => {
                    self.permit = Some(permit);
                    return Poll::Ready(());
                }
                Err(_) => {
                    tracing::warn!(
                        max_connections = self.settings.max_connections,
                        "connection limit reached: {} connections are open; new ones wait in the listen queue \
                         until one closes",
                        self.settings.max_connections
                    );
                    self.waiting = Some(Box::pin(Arc::clone(&self.permits).acquire_owned_or_never()));
                }
            }
        }
        let waiting = self.waiting.as_mut().expect("set above");
        match waiting.as_mut().poll(cx) {
            Poll::Ready(permit) => {
                self.waiting = None;
                self.permit = Some(permit);
                tracing::info!("below the connection limit again: accepting connections");
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn accepted(&mut self, stream: TcpStream, peer: SocketAddr) -> io::Result<Conn> {
        stream.set_nodelay(true)?;
        let keepalive = socket2::TcpKeepalive::new().with_time(self.settings.keepalive_interval);
        // Best effort, as tonic does: a socket that refuses it still serves.
        let _ = socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive);
        let connect_info = stream.connect_info();
        let calls = Arc::new(Calls { active: AtomicUsize::new(0), idle_since: AtomicU64::new(now_millis()) });
        self.registry.open.lock().unwrap_or_else(|e| e.into_inner()).insert(peer, Arc::clone(&calls));
        let deadline = Instant::now() + self.settings.handshake_timeout;
        Ok(Conn {
            io: stream,
            connect_info,
            peer,
            calls,
            registry: Arc::clone(&self.registry),
            settings: Arc::clone(&self.settings),
            preface: Preface::default(),
            http1: self.http1,
            watch: Watch::Bytes,
            timer: Box::pin(tokio::time::sleep_until(deadline.into())),
            _permit: self.permit.take().expect("a permit was taken before accepting"),
        })
    }
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
            if this.poll_permit(cx).is_pending() {
                return Poll::Pending;
            }
            match this.listener.poll_accept(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok((stream, peer))) => {
                    this.next_backoff = BACKOFF_FIRST;
                    match this.accepted(stream, peer) {
                        Ok(conn) => return Poll::Ready(Some(Ok(conn))),
                        // The peer left already; the permit is kept for the next.
                        Err(_) => continue,
                    }
                }
                Poll::Ready(Err(err)) if exhausted(&err) => {
                    let pause = this.next_backoff;
                    tracing::warn!(
                        open = this.registry.len(),
                        "cannot accept a connection: {err}; pausing the accept loop for {pause:?}"
                    );
                    this.next_backoff = (pause * 2).min(BACKOFF_MAX);
                    this.backoff = Some(Box::pin(tokio::time::sleep(pause)));
                }
                // A connection that failed on its own (reset before it was
                // accepted): tonic logs it and accepts the next.
                Poll::Ready(Err(err)) => return Poll::Ready(Some(Err(err))),
            }
        }
    }
}

/// One accepted connection: closed if it has not sent the HTTP/2 preface
/// and its first SETTINGS frame within the handshake timeout, or has no call
/// for the idle timeout.
pub(crate) struct Conn {
    io: TcpStream,
    connect_info: TcpConnectInfo,
    peer: SocketAddr,
    calls: Arc<Calls>,
    registry: Arc<Registry>,
    settings: Arc<ConnectionSettings>,
    /// How much of the preface has arrived.
    preface: Preface,
    /// An HTTP/1.1 request head counts as one.
    http1: bool,
    /// Where the preface is read: the bytes of this socket, or (under TLS)
    /// the plaintext of the stream above it.
    watch: Watch,
    timer: Pin<Box<Sleep>>,
    _permit: OwnedSemaphorePermit,
}

/// Where a connection's preface is looked for.
enum Watch {
    /// In the bytes read from the socket (plaintext).
    Bytes,
    /// In the plaintext above the TLS layer, which says when it is done
    /// ([`PrefaceWatch`]).
    Above(Arc<AtomicBool>),
}

/// The client connection preface of HTTP/2 (RFC 9113, section 3.4): these
/// 24 octets, then a SETTINGS frame.
const CLIENT_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The SETTINGS frame type.
const SETTINGS: u8 = 0x4;

/// How much of the client preface has arrived: counted byte by byte, so a
/// client cannot clear the handshake deadline with one byte (or a TLS
/// ClientHello). Bytes that are not a preface are left for the HTTP/2
/// server to refuse; they never count as one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Preface {
    /// This many octets of [`CLIENT_PREFACE`] seen.
    #[default]
    Start,
    Magic(usize),
    /// This many octets of the SETTINGS frame header seen, and its length
    /// so far.
    Header(usize, u32),
    /// This many octets of the SETTINGS payload still to come.
    Payload(u32),
    /// An HTTP/1.1 request head (where one is allowed): how much of the
    /// `\r\n\r\n` that ends it has been seen.
    Head(u8),
    Done,
    /// Not a preface: the server will close the connection.
    Wrong,
}

impl Preface {
    /// Takes the next bytes read; whether the preface is now complete. With
    /// `http1`, a whole HTTP/1.1 request head counts as one too.
    fn feed(&mut self, bytes: &[u8], http1: bool) -> bool {
        for &byte in bytes {
            *self = match *self {
                Preface::Start => Preface::Magic(0).next(byte, http1),
                state @ (Preface::Magic(_) | Preface::Header(..) | Preface::Payload(_) | Preface::Head(_)) => {
                    state.next(byte, http1)
                }
                Preface::Done | Preface::Wrong => break,
            };
        }
        *self == Preface::Done
    }

    fn next(self, byte: u8, http1: bool) -> Preface {
        match self {
            Preface::Magic(seen) if CLIENT_PREFACE[seen] != byte && http1 => Preface::Head(0).next(byte, http1),
            Preface::Magic(seen) if CLIENT_PREFACE[seen] != byte => Preface::Wrong,
            Preface::Head(3) if byte == b'\n' => Preface::Done,
            Preface::Head(seen) if byte == b"\r\n\r\n"[usize::from(seen)] => Preface::Head(seen + 1),
            Preface::Head(_) if byte == b'\r' => Preface::Head(1),
            Preface::Head(_) => Preface::Head(0),
            Preface::Magic(seen) if seen + 1 == CLIENT_PREFACE.len() => Preface::Header(0, 0),
            Preface::Magic(seen) => Preface::Magic(seen + 1),
            // Length (3 octets), type, flags, stream id (4 octets).
            Preface::Header(seen, length) if seen < 3 => Preface::Header(seen + 1, length << 8 | u32::from(byte)),
            Preface::Header(3, _) if byte != SETTINGS => Preface::Wrong,
            Preface::Header(8, 0) => Preface::Done,
            Preface::Header(8, length) => Preface::Payload(length),
            Preface::Header(seen, length) => Preface::Header(seen + 1, length),
            Preface::Payload(1) => Preface::Done,
            Preface::Payload(left) => Preface::Payload(left - 1),
            other => other,
        }
    }
}

/// The plaintext stream above a TLS connection, read for the HTTP/2
/// preface: the handshake deadline is counted from the end of the TLS
/// handshake, and cleared only by a whole preface and SETTINGS frame.
pub(crate) struct PrefaceWatch<S> {
    inner: S,
    preface: Preface,
    done: Arc<AtomicBool>,
    /// An HTTP/1.1 request head counts as a preface.
    http1: bool,
}

impl<S> PrefaceWatch<S> {
    pub(crate) fn new(inner: S, done: Arc<AtomicBool>, http1: bool) -> Self {
        Self { inner, preface: Preface::default(), done, http1 }
    }
}

impl<S: Connected> Connected for PrefaceWatch<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for PrefaceWatch<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && !matches!(self.preface, Preface::Done | Preface::Wrong) {
            let this = &mut *self;
            if this.preface.feed(&buf.filled()[before..], this.http1) {
                this.done.store(true, Ordering::Release);
            }
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for PrefaceWatch<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl Conn {
    /// The peer's address.
    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Whether `TCP_NODELAY` is set on the socket.
    #[cfg(test)]
    pub(crate) fn nodelay(&self) -> io::Result<bool> {
        self.io.nodelay()
    }

    /// Whether an HTTP/1.1 request head counts as a preface here.
    pub(crate) fn http1(&self) -> bool {
        self.http1
    }

    /// From now on the preface is read above this connection (TLS), and its
    /// deadline starts again: the TLS handshake took its own.
    pub(crate) fn preface_above(&mut self) -> Arc<AtomicBool> {
        let done = Arc::new(AtomicBool::new(false));
        self.watch = Watch::Above(Arc::clone(&done));
        self.timer.as_mut().reset((Instant::now() + self.settings.handshake_timeout).into());
        done
    }

    /// Whether the whole preface has arrived.
    fn prefaced(&self) -> bool {
        match &self.watch {
            Watch::Bytes => self.preface == Preface::Done,
            Watch::Above(done) => done.load(Ordering::Acquire),
        }
    }

    /// Called when the socket has nothing to read: whether the connection
    /// should end now (the error to end it with), else the timer is set for
    /// the next look.
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Result<()>> {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return None;
            }
            if !self.prefaced() {
                let message = format!("no HTTP/2 preface within {:?}", self.settings.handshake_timeout);
                tracing::debug!(peer = %self.peer, "closing a connection: {message}");
                return Some(Err(io::Error::new(io::ErrorKind::TimedOut, message)));
            }
            let next = match self.calls.active.load(Ordering::Acquire) {
                0 => {
                    let since = self.calls.idle_since.load(Ordering::Acquire);
                    let idle = Duration::from_millis(now_millis().saturating_sub(since));
                    if idle >= self.settings.idle_timeout {
                        tracing::debug!(peer = %self.peer, "closing a connection idle for {idle:?}");
                        return Some(Ok(()));
                    }
                    self.settings.idle_timeout - idle
                }
                _ => self.settings.idle_timeout.min(RECHECK.max(self.settings.idle_timeout / 4)),
            };
            self.timer.as_mut().reset((Instant::now() + next).into());
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.registry.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.peer);
    }
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.connect_info.clone()
    }
}

impl AsyncRead for Conn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if matches!(self.watch, Watch::Bytes) && self.preface != Preface::Done => {
                let this = &mut *self;
                if this.preface.feed(&buf.filled()[before..], this.http1) {
                    // From now on the timer watches idleness.
                    let first = (Instant::now() + this.settings.idle_timeout).into();
                    this.timer.as_mut().reset(first);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match self.expired(cx) {
                // Ok with nothing read: the end of the stream, as if the
                // client had closed it; there is no call to lose.
                Some(end) => Poll::Ready(end),
                None => Poll::Pending,
            },
            ready => ready,
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// A tower layer counting each connection's calls in flight, from the
/// request to the end of its response body, so that [`Conn`] can tell an
/// idle connection from a busy one.
#[derive(Clone)]
pub(crate) struct TrackCalls {
    registry: Arc<Registry>,
}

impl TrackCalls {
    pub(crate) fn new(registry: Arc<Registry>) -> Self {
        Self { registry }
    }
}

impl<S> tower::Layer<S> for TrackCalls {
    type Service = Tracked<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Tracked { inner, registry: Arc::clone(&self.registry) }
    }
}

#[derive(Clone)]
pub(crate) struct Tracked<S> {
    inner: S,
    registry: Arc<Registry>,
}

/// One call in flight on a connection; dropped with the response body.
pub(crate) struct CallGuard(Arc<Calls>);

impl CallGuard {
    fn new(calls: Arc<Calls>) -> Self {
        calls.active.fetch_add(1, Ordering::AcqRel);
        Self(calls)
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.0.idle_since.store(now_millis(), Ordering::Release);
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<S, B> tower::Service<http::Request<B>> for Tracked<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
{
    type Response = http::Response<Guarded>;
    type Error = S::Error;
    type Future = Responding<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let peer = request.extensions().get::<super::Peer>().and_then(|peer| peer.addr);
        let guard = peer.and_then(|peer| self.registry.calls(peer)).map(CallGuard::new);
        Responding { response: self.inner.call(request), guard }
    }
}

pin_project_lite::pin_project! {
    /// The inner service's response, its body then given the call's guard.
    pub(crate) struct Responding<F> {
        #[pin]
        response: F,
        guard: Option<CallGuard>,
    }
}

impl<F, E> Future for Responding<F>
where
    F: Future<Output = Result<http::Response<tonic::body::Body>, E>>,
{
    type Output = Result<http::Response<Guarded>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = std::task::ready!(this.response.poll(cx))?;
        let guard = this.guard.take();
        Poll::Ready(Ok(response.map(|body| Guarded { body, _guard: guard })))
    }
}

/// A response body that holds its call's [`CallGuard`] until it is done.
pub(crate) struct Guarded<B = tonic::body::Body> {
    body: B,
    _guard: Option<CallGuard>,
}

impl<B> Guarded<B> {
    pub(crate) fn new(body: B, guard: Option<CallGuard>) -> Self {
        Self { body, _guard: guard }
    }
}

impl<B: http_body::Body + Unpin> http_body::Body for Guarded<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS_FRAME: &[u8] = b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64";

    fn fed(chunks: &[&[u8]]) -> Preface {
        let mut preface = Preface::default();
        for chunk in chunks {
            preface.feed(chunk, false);
        }
        preface
    }

    #[test]
    fn only_the_whole_preface_and_settings_count() {
        let whole = [&CLIENT_PREFACE[..], SETTINGS_FRAME].concat();
        assert_eq!(fed(&[&whole]), Preface::Done);
        // Byte by byte, and an empty SETTINGS frame.
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(fed(&bytes), Preface::Done);
        assert_eq!(fed(&[CLIENT_PREFACE, b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"]), Preface::Done);
        // One byte, the magic alone, a SETTINGS frame cut short: not yet.
        assert_eq!(fed(&[b"P"]), Preface::Magic(1));
        assert!(!matches!(fed(&[CLIENT_PREFACE]), Preface::Done));
        assert!(!matches!(fed(&[&whole[..whole.len() - 1]]), Preface::Done));
        // Not a preface (a TLS ClientHello, another frame first): never.
        assert_eq!(fed(&[b"\x16\x03\x01\x02\x00"]), Preface::Wrong);
        assert_eq!(fed(&[CLIENT_PREFACE, b"\x00\x00\x00\x01\x00\x00\x00\x00\x01", SETTINGS_FRAME]), Preface::Wrong);
    }
}
