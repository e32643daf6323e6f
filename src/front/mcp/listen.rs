//! GET streams of session-era sessions, served by the edge rather than by a
//! session's worker, so that a client listening on an idle session keeps no
//! worker running (see [`super::sessions`]). What a session is sent
//! outside its requests is `notifications/tools/list_changed` (the gateway
//! asks its clients nothing and relays no logging): each stream opens with
//! a priming event (`id: 0`, `retry: 3000`, as rmcp's streams do), carries
//! one event per change of what its caller sees ([`super::changes`]) and a
//! keep-alive comment every 15 seconds, and ends when the session ends or
//! the client goes. A `Last-Event-ID` of such a stream opens a new one: a
//! missed change is told by listing the tools again, so none is replayed.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use futures::StreamExt;
use http_body_util::BodyExt;
use hyper::{Response, StatusCode};
use sse_stream::{KeepAlive, Sse, SseBody, Timer};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::{changes, Asked, View};
use crate::server::http::Reply;

/// A keep-alive comment this often, as rmcp's streams have.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How long a client waits before reconnecting, as rmcp's streams say.
const RETRY: Duration = Duration::from_secs(3);

/// The notification each change sends.
const LIST_CHANGED: &str = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;

/// Whether a GET is one the edge serves: a new stream, or one resuming a
/// stream of this kind (its event ids have no `/`; a call's stream's do,
/// and its resumption goes to the session's worker).
pub(super) fn served_here(last_event_id: Option<&str>) -> bool {
    last_event_id.is_none_or(|id| !id.contains('/'))
}

/// The stream of `asked`'s changes under `view`, until `ended`.
pub(super) fn stream(view: View, asked: Asked, ended: CancellationToken) -> Reply {
    let (changed, changes) = mpsc::channel::<()>(1);
    let gone = changed.clone();
    // A change not yet sent is as good as two.
    let notify = move || {
        let changed = changed.clone();
        async move { !matches!(changed.try_send(()), Err(TrySendError::Closed(()))) }
    };
    let until = async move {
        tokio::select! {
            () = ended.cancelled() => {}
            () = gone.closed() => {}
        }
    };
    tokio::spawn(changes::tell(view, asked, until, notify));
    let priming = Sse::default().id("0").retry_duration(RETRY).data("");
    let events = ReceiverStream::new(changes)
        .enumerate()
        .map(|(n, ())| Sse::default().id((n + 1).to_string()).data(LIST_CHANGED));
    let events = futures::stream::once(async { priming }).chain(events).map(Ok::<_, Infallible>);
    let body = SseBody::new(events).with_keep_alive::<Tick>(KeepAlive::new().interval(KEEP_ALIVE));
    Response::builder()
        .status(StatusCode::OK)
        .header(hyper::header::CONTENT_TYPE, "text/event-stream")
        .header(hyper::header::CACHE_CONTROL, "no-cache")
        .body(body.boxed())
        .expect("a valid response")
}

/// The keep-alive's timer.
struct Tick(Pin<Box<tokio::time::Sleep>>);

impl Future for Tick {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl Timer for Tick {
    fn from_duration(duration: Duration) -> Self {
        Self(Box::pin(tokio::time::sleep(duration)))
    }

    fn reset(mut self: Pin<&mut Self>, when: std::time::Instant) {
        self.0.as_mut().reset(tokio::time::Instant::from_std(when));
    }
}
