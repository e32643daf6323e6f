//! The door's own connections to a model server it reaches over plain
//! HTTP/1.1 with no proxy (a `base_url` of `http://…` and no `proxy`, the
//! usual local vLLM, SGLang or Ollama): each idle connection kept in a
//! pool, and driven by the request that uses it, in that request's task,
//! through hyper's connection API. A pooled client (reqwest's) gives each
//! connection a task of its own and hands every request and answer over
//! between the two; on a busy door that hand-over cost about a tenth of
//! the requests a second at 16 in flight (docs/benchmarks.md, "The model
//! door"). Every other upstream (`https://`, a proxy) is reached through
//! reqwest, as are, for every upstream, `GET /v1/models` and the second
//! chance's requests (rare next to the requests it follows).
//!
//! The answer is handed on as a [`reqwest::Response`] whose body drives
//! the connection as it is read, so what reads answers reads both alike; a
//! connection goes back to the pool when its answer was read to the end,
//! and is closed when the answer is dropped before (the request that
//! stopped reading owns it). A pooled connection the model server closed
//! while idle is noticed before it is used; a request a pooled connection
//! could not carry (closed before the request was written, or before any
//! of an answer came: the model server's keep-alive timeout met it) is sent
//! again on a new connection, once; a new connection's failure is the
//! answer.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use futures::{FutureExt, Stream};
use http_body::Body as _;
use hyper::{
    body::Incoming,
    client::conn::http1::{handshake, Connection, SendRequest},
    header, Request,
};
use hyper_util::rt::TokioIo;
use tokio::{net::TcpStream, time::Sleep};

use crate::{
    config::{Upstream, UpstreamProxy},
    server::threads,
};

/// The most idle connections kept for one model server; past them, a
/// connection whose answer ends is closed.
const MOST_IDLE: usize = 256;

/// How long a connection is kept idle (as reqwest's pool keeps one).
const IDLE_FOR: Duration = Duration::from_secs(90);

/// One connection to the model server, idle.
struct Idle {
    send: SendRequest<reqwest::Body>,
    connection: Pin<Box<Connection<TokioIo<TcpStream>, reqwest::Body>>>,
    /// When its last answer ended.
    since: std::time::Instant,
    /// The connection thread it was made on, whose runtime its socket is
    /// registered with ([`threads::home`]): only a request on that thread
    /// takes it, so its wake-ups stay there.
    home: Option<usize>,
}

/// The connections to one model server reached over plain HTTP.
pub(super) struct Driven {
    /// `host:port`, as the door connects.
    authority: String,
    /// The `Host` header its requests carry.
    host: header::HeaderValue,
    /// The path of its `base_url` (`/v1`), which a request's path follows.
    base_path: String,
    idle: Mutex<Vec<Idle>>,
}

/// A request to an upstream, as the door sends it on either path (a
/// driven connection, or reqwest's client).
#[derive(Clone)]
pub(super) struct Outgoing {
    pub(super) method: hyper::Method,
    /// The path and query under the upstream's `base_url`
    /// (`/chat/completions?…`).
    pub(super) path: String,
    pub(super) headers: header::HeaderMap,
    /// Empty for none (a `GET`).
    pub(super) body: Bytes,
    /// For the whole exchange, the answer's body included.
    pub(super) timeout: Duration,
}

/// Why no answer came: reqwest's error, or a driven connection's.
pub(super) enum Unanswered {
    Client(reqwest::Error),
    Driven(io::Error),
}

impl Unanswered {
    /// Whether the model server did not answer within the upstream's
    /// timeout.
    pub(super) fn is_timeout(&self) -> bool {
        match self {
            Unanswered::Client(err) => err.is_timeout(),
            Unanswered::Driven(err) => err.kind() == io::ErrorKind::TimedOut,
        }
    }

    /// The innermost cause, for a message.
    pub(super) fn cause(&self) -> String {
        let mut inner: &(dyn std::error::Error + 'static) = match self {
            Unanswered::Client(err) => err,
            Unanswered::Driven(err) => err,
        };
        while let Some(source) = inner.source() {
            inner = source;
        }
        inner.to_string()
    }
}

impl From<reqwest::Error> for Unanswered {
    fn from(err: reqwest::Error) -> Self {
        Unanswered::Client(err)
    }
}

impl Driven {
    /// The driven connections of `upstream`, when it is reached over plain
    /// HTTP without a proxy.
    pub(super) fn of(upstream: &Upstream) -> Option<Arc<Self>> {
        if upstream.proxy != UpstreamProxy::None {
            return None;
        }
        let url = reqwest::Url::parse(&upstream.base_url).ok()?;
        if url.scheme() != "http" {
            return None;
        }
        let authority = format!("{}:{}", url.host_str()?, url.port_or_known_default()?);
        let host = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str()?),
            None => url.host_str()?.to_owned(),
        };
        let host = header::HeaderValue::from_str(&host).ok()?;
        let base_path = url.path().trim_end_matches('/').to_owned();
        Some(Arc::new(Self { authority, host, base_path, idle: Mutex::new(Vec::new()) }))
    }

    /// `outgoing` sent on an idle connection or a new one, within its
    /// timeout; the answer's head, its body read as the caller reads it.
    pub(super) async fn execute(self: &Arc<Self>, outgoing: Outgoing) -> Result<reqwest::Response, Unanswered> {
        let timeout = outgoing.timeout;
        // One timer for the whole exchange, the answer's body included.
        let mut deadline = Box::pin(tokio::time::sleep(timeout));
        let mut request = self.request(&outgoing)?;
        // Kept for a second try (the body is shared, not copied).
        let mut spare = Some(outgoing);
        let mut pooled = true;
        loop {
            let taken = if pooled { self.take() } else { None };
            let reused = taken.is_some();
            let mut idle = match taken {
                Some(idle) => idle,
                None => self.connect(deadline.as_mut(), timeout).await?,
            };
            let mut sending = std::pin::pin!(idle.send.try_send_request(request));
            // The connection first: what it reads settles the sending in
            // the same poll, with no wake-up in between.
            let first = tokio::select! {
                biased;
                _ = idle.connection.as_mut() => None,
                answer = &mut sending => Some(answer),
                () = deadline.as_mut() => return Err(timed_out(timeout)),
            };
            let (answer, idle) = match first {
                Some(answer) => (answer, Some(idle)),
                // The connection ended: closed, it settles the request
                // (sent or not) as it goes.
                None => {
                    drop(idle);
                    tokio::select! {
                        answer = &mut sending => (answer, None),
                        () = deadline.as_mut() => return Err(timed_out(timeout)),
                    }
                }
            };
            let mut failed = match answer {
                Ok(answer) => return Ok(self.answer(answer, idle, deadline, timeout)),
                Err(failed) => failed,
            };
            // A pooled connection that could not carry the request (the
            // model server closed it as it idled: before the request was
            // written, or before any of an answer came) is left for a new
            // connection, once.
            let again = match failed.take_message() {
                Some(unsent) => Some(unsent),
                None if failed.error().is_incomplete_message() => spare.take().map(|o| self.request(&o)).transpose()?,
                None => None,
            };
            match again {
                Some(again) if reused => {
                    request = again;
                    pooled = false;
                }
                _ => return Err(Unanswered::Driven(io::Error::other(failed.into_error()))),
            }
        }
    }

    /// `outgoing` as hyper sends it on a connection: the base URL's path
    /// and the request's, a `Host` header, `Accept: */*` unless it says
    /// otherwise, its body.
    fn request(&self, outgoing: &Outgoing) -> Result<Request<reqwest::Body>, Unanswered> {
        let target = format!("{}{}", self.base_path, outgoing.path);
        let mut request = Request::new(reqwest::Body::from(outgoing.body.clone()));
        *request.method_mut() = outgoing.method.clone();
        *request.uri_mut() = target.parse().map_err(|err| Unanswered::Driven(io::Error::other(err)))?;
        let headers = request.headers_mut();
        headers.clone_from(&outgoing.headers);
        headers.insert(header::HOST, self.host.clone());
        headers.entry(header::ACCEPT).or_insert(header::HeaderValue::from_static("*/*"));
        Ok(request)
    }

    /// An idle connection of this thread still open, if one is kept.
    fn take(&self) -> Option<Idle> {
        let home = threads::home();
        loop {
            let mut idle = {
                let mut kept = crate::lock::lock(&self.idle);
                let last = kept.iter().rposition(|idle| idle.home == home)?;
                kept.remove(last)
            };
            // Polled once: a close the model server sent while it idled
            // ends it now, before a request is written to it.
            if idle.connection.as_mut().now_or_never().is_none() && !idle.send.is_closed() {
                return Some(idle);
            }
        }
    }

    async fn connect(&self, deadline: Pin<&mut Sleep>, timeout: Duration) -> Result<Idle, Unanswered> {
        let connecting = async {
            let stream = TcpStream::connect(&self.authority).await?;
            stream.set_nodelay(true)?;
            let (send, connection) = handshake(TokioIo::new(stream)).await.map_err(io::Error::other)?;
            let (since, home) = (std::time::Instant::now(), threads::home());
            Ok::<_, io::Error>(Idle { send, connection: Box::pin(connection), since, home })
        };
        tokio::select! {
            connected = connecting => connected.map_err(Unanswered::Driven),
            () = deadline => Err(timed_out(timeout)),
        }
    }

    /// The answer as reqwest's, its body driving `idle` as it is read.
    fn answer(
        self: &Arc<Self>,
        answer: hyper::Response<Incoming>,
        idle: Option<Idle>,
        deadline: Pin<Box<Sleep>>,
        timeout: Duration,
    ) -> reqwest::Response {
        let (parts, body) = answer.into_parts();
        let body = Answer { body, idle, driven: Arc::clone(self), deadline, timeout };
        reqwest::Response::from(hyper::Response::from_parts(parts, reqwest::Body::wrap_stream(body)))
    }

    /// `idle` kept for another request; those idle past [`IDLE_FOR`]
    /// closed.
    fn keep(&self, mut idle: Idle) {
        let now = std::time::Instant::now();
        idle.since = now;
        let mut kept = crate::lock::lock(&self.idle);
        // Kept in the order they went idle: the oldest first.
        let stale = kept.iter().take_while(|old| now.duration_since(old.since) > IDLE_FOR).count();
        kept.drain(..stale);
        if kept.len() < MOST_IDLE {
            kept.push(idle);
        }
    }
}

fn timed_out(timeout: Duration) -> Unanswered {
    Unanswered::Driven(no_answer(timeout))
}

/// The error of an exchange that outlasted `timeout`.
fn no_answer(timeout: Duration) -> io::Error {
    let what = format!("no answer within {}", humantime::format_duration(timeout));
    io::Error::new(io::ErrorKind::TimedOut, what)
}

/// An answer's body, read: each poll drives the connection first, then
/// takes what it brought; the connection is kept for another request once
/// the body ended, and closed with the body otherwise.
struct Answer {
    body: Incoming,
    idle: Option<Idle>,
    driven: Arc<Driven>,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
}

impl Stream for Answer {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.idle = None;
            return Poll::Ready(Some(Err(no_answer(this.timeout))));
        }
        if let Some(idle) = &mut this.idle {
            if idle.connection.as_mut().poll(cx).is_ready() {
                // Closed: what it brought is still read from the body.
                this.idle = None;
            }
        }
        loop {
            return match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => Poll::Ready(Some(Ok(data))),
                    // Trailers: nothing to pass.
                    Err(_) => continue,
                },
                Poll::Ready(Some(Err(err))) => {
                    this.idle = None;
                    Poll::Ready(Some(Err(io::Error::other(err))))
                }
                Poll::Ready(None) => {
                    if let Some(idle) = this.idle.take() {
                        this.driven.keep(idle);
                    }
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            };
        }
    }
}
