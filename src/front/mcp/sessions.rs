//! Session-era sessions, bound and bounded. A session belongs to the
//! caller that made it (its principal and user, [`Owner`]): any other
//! caller naming its id is answered as if it did not exist (404), so no one
//! else can use, cancel, resume or end it. At most [`MAX_SESSIONS`] live in
//! this process, and at most `sessions_per_principal` of one principal
//! (all anonymous callers are one principal). A principal past its bound,
//! or a new session when the process is full, ends that principal's own
//! session idle longest (no call in flight; an open GET stream is not a
//! call); another principal's session is never ended to make room. With
//! none of its own idle, the new session is refused (429 past the
//! principal's bound, 503 when the process is full). A session idle for
//! five minutes ends anyway (rmcp's keep-alive). Sessions live in the
//! replica that made them: a load balancer in front of several replicas
//! must keep a session's requests on one (sticky sessions); 2026-07-28
//! requests carry no session and need no affinity.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use futures::{Stream, StreamExt};
use rmcp::{
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::{
        common::server_side_http::{ServerSseMessage, SessionId},
        streamable_http_server::session::{
            local::{LocalSessionManager, LocalSessionManagerError},
            SessionManager,
        },
        WorkerTransport,
    },
};

use crate::{
    identity::Caller,
    telemetry::throttle::{self, Throttle},
};

/// Session-era sessions kept at most.
pub(crate) const MAX_SESSIONS: usize = 10_000;

/// Who a session belongs to: the principal and the user (issuer and
/// subject) of the caller that made it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) principal: Option<Arc<str>>,
    user: Option<String>,
}

impl Owner {
    pub(crate) fn of(caller: &Caller) -> Self {
        Self { principal: caller.principal.clone(), user: caller.user.as_ref().map(|user| user.key()) }
    }
}

tokio::task_local! {
    /// The owner of a session the transport makes while handling a request
    /// (rmcp's `create_session` is told nothing of the request).
    pub(crate) static OWNER: Owner;
}

/// How one session is used: by whom, when it was last asked something, and
/// how many of its calls are in flight.
struct Use {
    owner: Owner,
    last: Instant,
    calls: Arc<AtomicUsize>,
}

/// rmcp's in-memory sessions, at most `cap` of them and `per_principal` of
/// one principal.
pub(crate) struct Sessions {
    inner: LocalSessionManager,
    cap: usize,
    per_principal: usize,
    used: Mutex<HashMap<SessionId, Use>>,
    /// "The bound was reached" is logged at WARN once a minute at most.
    full: Throttle,
}

/// Why there is no room for a new session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoRoom {
    #[error("this principal has {0} MCP sessions open, each with a call in flight: end one (DELETE) or try later")]
    Principal(usize),
    #[error("{0} MCP sessions are open: try again later")]
    Full(usize),
}

impl Sessions {
    pub(crate) fn new(cap: usize, per_principal: usize) -> Self {
        Self {
            inner: LocalSessionManager::default(),
            cap,
            per_principal,
            used: Mutex::default(),
            full: Throttle::new(Duration::from_secs(60)),
        }
    }

    fn used(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Use>> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `id` names a session of someone other than `owner` (an
    /// unknown id is no one's: the transport answers it).
    pub(crate) fn foreign(&self, id: &str, owner: &Owner) -> bool {
        self.used().get(id).is_some_and(|session| &session.owner != owner)
    }

    /// Room for one more session of `owner`: past the principal's bound, or
    /// with the process full, that principal's own session idle longest
    /// ends; with none idle, no room.
    pub(crate) async fn make_room(&self, owner: &Owner) -> Result<(), NoRoom> {
        loop {
            let victim = {
                let used = self.used();
                let mine = || used.iter().filter(|(_, u)| u.owner.principal == owner.principal);
                let why = match mine().count() {
                    n if n >= self.per_principal => NoRoom::Principal(n),
                    _ if used.len() >= self.cap => NoRoom::Full(self.cap),
                    _ => return Ok(()),
                };
                let idle = mine().filter(|(_, u)| u.calls.load(Ordering::Acquire) == 0);
                match idle.min_by_key(|(_, u)| u.last) {
                    Some((id, _)) => id.clone(),
                    None => return Err(why),
                }
            };
            if let Some(skipped) = self.full.allow() {
                tracing::warn!(
                    principal = owner.principal.as_deref().unwrap_or("-"),
                    "MCP sessions at their bound: the principal's session idle longest is ended for a new one{}",
                    throttle::more(skipped)
                );
            }
            // Ended by now, or by another request meanwhile.
            let _ = self.close_session(&victim).await;
        }
    }

    /// Marks a request of `id`; for a call, counts it in flight until the
    /// guard drops (with its response stream).
    fn touch(&self, id: &SessionId, call: bool) -> Option<InFlight> {
        let mut used = self.used();
        let session = used.get_mut(id)?;
        session.last = Instant::now();
        call.then(|| InFlight::new(Arc::clone(&session.calls)))
    }
}

/// A call in flight in a session.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(calls: Arc<AtomicUsize>) -> Self {
        calls.fetch_add(1, Ordering::AcqRel);
        Self(calls)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a session could not be made or used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError {
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<rmcp::transport::streamable_http_server::session::local::LocalSessionWorker>;

    /// A session of the request's [`OWNER`]; the edge made room for it
    /// ([`Sessions::make_room`]).
    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let owner = OWNER.try_with(Owner::clone).unwrap_or_default();
        let (id, transport) = self.inner.create_session().await?;
        self.used().insert(id.clone(), Use { owner, last: Instant::now(), calls: Arc::default() });
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let _call = self.touch(id, true);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.used().remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let call = self.touch(id, true);
        let stream = self.inner.create_stream(id, message).await?;
        Ok(stream.map(move |message| {
            let _in_flight = &call;
            message
        }))
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.touch(id, false);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id, false);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id, false);
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(principal: &str) -> Owner {
        Owner { principal: Some(Arc::from(principal)), user: None }
    }

    /// A new session of `owner`, as the edge and the transport make it.
    async fn open(sessions: &Sessions, owner: &Owner) -> Result<SessionId, NoRoom> {
        sessions.make_room(owner).await?;
        let (id, _transport) = OWNER.scope(owner.clone(), sessions.create_session()).await.unwrap();
        Ok(id)
    }

    #[tokio::test]
    async fn past_a_bound_only_the_principals_own_idle_session_ends() {
        let sessions = Sessions::new(3, 2);
        let (a, b, c) = (owner("a"), owner("b"), owner("c"));
        let a1 = open(&sessions, &a).await.unwrap();
        let a2 = open(&sessions, &a).await.unwrap();
        let call = sessions.touch(&a1, true);
        // Past a's bound: a's idle one ends, never the one with a call.
        let a3 = open(&sessions, &a).await.unwrap();
        assert!(sessions.has_session(&a1).await.unwrap());
        assert!(!sessions.has_session(&a2).await.unwrap());
        let b1 = open(&sessions, &b).await.unwrap();
        // The process is full: b's own session makes room, a's stay.
        let b2 = open(&sessions, &b).await.unwrap();
        assert!(!sessions.has_session(&b1).await.unwrap());
        for kept in [&a1, &a3, &b2] {
            assert!(sessions.has_session(kept).await.unwrap());
        }
        // Every session of a busy: a gets none; c, with none to end, neither.
        let _other = sessions.touch(&a3, true);
        assert_eq!(open(&sessions, &a).await, Err(NoRoom::Principal(2)));
        assert_eq!(open(&sessions, &c).await, Err(NoRoom::Full(3)));
        // A session is its owner's alone.
        assert!(sessions.foreign(&a1, &b) && !sessions.foreign(&a1, &a));
        drop(call);
        open(&sessions, &a).await.unwrap();
        assert!(!sessions.has_session(&a1).await.unwrap());
    }
}
