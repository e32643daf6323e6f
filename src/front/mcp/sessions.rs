//! Session-era sessions, bounded: at most [`MAX_SESSIONS`] live in this
//! process. A new session past the bound ends the one that has been idle
//! longest (no call in flight; a client's open GET stream does not count
//! as a call), so clients that initialize and leave without DELETE cannot
//! exhaust memory. A session idle for five minutes ends anyway (rmcp's
//! keep-alive). Sessions live in the replica that made them: a load
//! balancer in front of several replicas must keep a session's requests on
//! one (sticky sessions); 2026-07-28 requests carry no session and need no
//! affinity.

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

use crate::telemetry::throttle::{self, Throttle};

/// Session-era sessions kept at most.
pub(crate) const MAX_SESSIONS: usize = 10_000;

/// How one session is used: when it was last asked something, and how
/// many of its calls are in flight.
struct Use {
    last: Instant,
    calls: Arc<AtomicUsize>,
}

/// rmcp's in-memory sessions, at most `cap` of them.
pub(crate) struct Sessions {
    inner: LocalSessionManager,
    cap: usize,
    used: Mutex<HashMap<SessionId, Use>>,
    /// "The bound was reached" is logged at WARN once a minute at most.
    full: Throttle,
}

impl Sessions {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            inner: LocalSessionManager::default(),
            cap,
            used: Mutex::default(),
            full: Throttle::new(Duration::from_secs(60)),
        }
    }

    fn used(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Use>> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks a request of `id`; for a call, counts it in flight until the
    /// guard drops (with its response stream).
    fn touch(&self, id: &SessionId, call: bool) -> Option<InFlight> {
        let mut used = self.used();
        let session = used.get_mut(id)?;
        session.last = Instant::now();
        call.then(|| InFlight::new(Arc::clone(&session.calls)))
    }

    /// The session idle longest, if one is.
    fn oldest_idle(&self) -> Option<SessionId> {
        let used = self.used();
        let idle = used.iter().filter(|(_, u)| u.calls.load(Ordering::Acquire) == 0);
        idle.min_by_key(|(_, u)| u.last).map(|(id, _)| id.clone())
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
    #[error("{0} MCP sessions are open, each with a call in flight: try again later")]
    Full(usize),
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<rmcp::transport::streamable_http_server::session::local::LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        while self.used().len() >= self.cap {
            let Some(oldest) = self.oldest_idle() else { return Err(SessionsError::Full(self.cap)) };
            if let Some(skipped) = self.full.allow() {
                tracing::warn!(
                    "{} MCP sessions are open: the one idle longest is ended for a new one{}",
                    self.cap,
                    throttle::more(skipped)
                );
            }
            self.close_session(&oldest).await?;
        }
        let (id, transport) = self.inner.create_session().await?;
        self.used().insert(id.clone(), Use { last: Instant::now(), calls: Arc::default() });
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

    #[tokio::test]
    async fn past_the_bound_the_session_idle_longest_ends_and_one_with_a_call_stays() {
        let sessions = Sessions::new(2);
        let (first, _t1) = sessions.create_session().await.unwrap();
        let (second, _t2) = sessions.create_session().await.unwrap();
        // The first has a call in flight: the second, idle, is ended.
        let call = sessions.touch(&first, true);
        let (third, _t3) = sessions.create_session().await.unwrap();
        assert!(sessions.has_session(&first).await.unwrap());
        assert!(!sessions.has_session(&second).await.unwrap());
        // Every session busy: no new one.
        let _other = sessions.touch(&third, true);
        assert!(matches!(sessions.create_session().await, Err(SessionsError::Full(2))));
        // The call ends: the first is now the one idle longest.
        drop(call);
        let (_fourth, _t4) = sessions.create_session().await.unwrap();
        assert!(!sessions.has_session(&first).await.unwrap());
        assert!(sessions.has_session(&third).await.unwrap());
    }
}
