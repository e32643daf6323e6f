//! One accepted connection: closed when it has not sent the HTTP/2 preface
//! (or an HTTP/1.1 request head, where taken) within the handshake
//! timeout, or has had no call for the idle timeout.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    sync::OwnedSemaphorePermit,
    time::Sleep,
};
use tonic::transport::server::{Connected, TcpConnectInfo};

use super::{
    calls::{now_millis, Calls},
    ConnectionSettings, Registry,
};

/// How often a connection's idle time is looked at when it has calls.
const RECHECK: Duration = Duration::from_secs(1);
/// How long a connection marked to close waits after its last answer.
const CLOSING_GRACE: Duration = Duration::from_millis(500);

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

    /// The stream it watches.
    pub(crate) fn get_ref(&self) -> &S {
        &self.inner
    }

    pub(crate) fn get_mut(&mut self) -> &mut S {
        &mut self.inner
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
    /// A connection accepted from `peer`, counted in `registry`, with no
    /// call yet, holding its place under the cap (`permit`); the
    /// handshake deadline starts now.
    pub(super) fn new(
        io: TcpStream,
        peer: SocketAddr,
        registry: Arc<Registry>,
        settings: Arc<ConnectionSettings>,
        http1: bool,
        permit: OwnedSemaphorePermit,
    ) -> Self {
        let connect_info = io.connect_info();
        let calls = Arc::new(Calls {
            active: AtomicUsize::new(0),
            idle_since: AtomicU64::new(now_millis()),
            budget: settings.budget.clone(),
            per_principal: settings.per_principal(),
            ..Calls::default()
        });
        settings.budget.enlist(&calls);
        registry.open.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + settings.handshake_timeout;
        Self {
            io,
            connect_info,
            peer,
            calls,
            registry,
            settings,
            preface: Preface::default(),
            http1,
            watch: Watch::Bytes,
            timer: Box::pin(tokio::time::sleep_until(deadline.into())),
            _permit: permit,
        }
    }

    /// Moves the socket and the connection's timer to the runtime this is
    /// called on (a connection thread's, [`crate::server::threads`]): the
    /// socket is registered there under a copy of its descriptor, and the
    /// timer set there for the same instant. Nothing read or written is lost:
    /// the socket itself stays open, and a registration reports what is
    /// already waiting to be read.
    pub(crate) fn rehome(&mut self) -> io::Result<()> {
        let copy: std::net::TcpStream = socket2::SockRef::from(&self.io).try_clone()?.into();
        copy.set_nonblocking(true)?;
        drop(std::mem::replace(&mut self.io, TcpStream::from_std(copy)?));
        self.timer = Box::pin(tokio::time::sleep_until(self.timer.deadline()));
        Ok(())
    }

    /// The peer's address.
    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Whether `TCP_NODELAY` is set on the socket.
    #[cfg(test)]
    pub(crate) fn nodelay(&self) -> io::Result<bool> {
        self.io.nodelay()
    }

    /// The socket, for its options.
    #[cfg(test)]
    pub(crate) fn socket(&self) -> socket2::SockRef<'_> {
        socket2::SockRef::from(&self.io)
    }

    /// Its calls in flight, which its requests carry.
    pub(crate) fn calls(&self) -> &Arc<Calls> {
        &self.calls
    }

    /// Whether an HTTP/1.1 request head counts as a preface here.
    pub(crate) fn http1(&self) -> bool {
        self.http1
    }

    /// The first byte the client sent, left unread; none when it closed
    /// first.
    pub(crate) async fn first_byte(&self) -> io::Result<Option<u8>> {
        let mut byte = [0u8; 1];
        Ok((self.io.peek(&mut byte).await? == 1).then_some(byte[0]))
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
        self.calls.waker.register(cx.waker());
        if self.calls.closing.load(Ordering::Acquire) && self.calls.active.load(Ordering::Acquire) == 0 {
            // Its last answer has had a moment to leave first.
            let since = self.calls.idle_since.load(Ordering::Acquire);
            let idle = Duration::from_millis(now_millis().saturating_sub(since));
            if idle >= CLOSING_GRACE {
                tracing::debug!(peer = %self.peer, "closing a connection to make room");
                return Some(Ok(()));
            }
            self.timer.as_mut().reset((Instant::now() + (CLOSING_GRACE - idle)).into());
            let _ = self.timer.as_mut().poll(cx);
            return None;
        }
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
        if let Some(principal) = self.calls.principal.get() {
            self.settings.budget.leave(principal);
        }
        self.registry.open.fetch_sub(1, Ordering::Relaxed);
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
