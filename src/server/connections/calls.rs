//! The calls of each connection, counted from the request to the end of
//! its response body (a tower layer for gRPC, a guard for other doors), so
//! that a connection can tell idle from busy.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        Arc, OnceLock,
    },
    task::{Context, Poll},
    time::Instant,
};

use crate::server::Peer;

/// How many connections are open; each counts itself in while it lives.
#[derive(Default)]
pub(crate) struct Registry {
    pub(super) open: AtomicUsize,
}

impl Registry {
    /// Connections open now.
    pub(crate) fn len(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

/// The calls of one connection: how many are in flight, and since when
/// there have been none. Every request of the connection carries it (in
/// its [`Peer`]), so counting a call looks nothing up.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    pub(super) active: AtomicUsize,
    /// Milliseconds since [`epoch`] at which `active` last fell to 0 (or
    /// the connection opened).
    pub(super) idle_since: AtomicU64,
    /// The principal of its first authenticated request, once counted for
    /// it ([`super::Budget::join`]).
    pub(super) principal: OnceLock<Arc<str>>,
    /// The connection is to close (made room for, or over its principal's
    /// bound); its task is woken through `waker`.
    pub(super) closing: AtomicBool,
    pub(super) waker: futures::task::AtomicWaker,
    /// The budget it counts in, and a principal's bound there.
    pub(super) budget: super::Budget,
    pub(super) per_principal: usize,
}

impl Calls {
    /// The connection closes: at once when idle, else when its calls end
    /// and it is next read.
    pub(super) fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// The connection counts for `principal` from its first authenticated
    /// request on; `false` when that principal already holds as many
    /// connections as it may (the connection is then closed).
    pub(crate) fn authenticated(&self, principal: Option<&Arc<str>>) -> bool {
        let Some(principal) = principal else { return true };
        if self.principal.get().is_some() {
            return true;
        }
        if !self.budget.join(principal, self.per_principal) {
            self.close();
            return false;
        }
        // Another request of the connection counted it meanwhile.
        if self.principal.set(Arc::clone(principal)).is_err() {
            self.budget.leave(principal);
        }
        true
    }

    /// A call in flight on this connection until the guard drops (with
    /// the response body): the connection is not idle meanwhile.
    pub(crate) fn call(self: &Arc<Self>) -> CallGuard {
        self.active.fetch_add(1, Ordering::AcqRel);
        CallGuard(Arc::clone(self))
    }
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

pub(super) fn now_millis() -> u64 {
    epoch().elapsed().as_millis() as u64
}

/// A tower layer counting each connection's calls in flight, from the
/// request to the end of its response body, so that [`Conn`](super::Conn)
/// can tell an idle connection from a busy one.
#[derive(Clone, Copy, Default)]
pub(crate) struct TrackCalls;

impl<S> tower::Layer<S> for TrackCalls {
    type Service = Tracked<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Tracked { inner }
    }
}

#[derive(Clone)]
pub(crate) struct Tracked<S> {
    inner: S,
}

/// One call in flight on a connection; dropped with the response body.
pub(crate) struct CallGuard(Arc<Calls>);

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
        let guard = request.extensions().get::<Peer>().and_then(Peer::call);
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

/// A response body that holds its call's [`CallGuard`] (or whatever else a
/// call holds while it runs: `G`) until it is done.
pub(crate) struct Guarded<B = tonic::body::Body, G = Option<CallGuard>> {
    body: B,
    _guard: G,
}

impl<B, G> Guarded<B, G> {
    pub(crate) fn new(body: B, guard: G) -> Self {
        Self { body, _guard: guard }
    }
}

impl<B: http_body::Body + Unpin, G: Unpin> http_body::Body for Guarded<B, G> {
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
