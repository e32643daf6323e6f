//! Session-era sessions: bound, bounded, and light while idle.
//!
//! **Whose.** A session belongs to the caller that made it (its principal
//! and user, [`Owner`]): any other caller naming its id is answered as if it
//! did not exist (404), so no one else can use, cancel, resume or end it.
//!
//! **How many.** At most [`MAX_SESSIONS`] live in this process, and at most
//! `sessions_per_principal` of one principal (all anonymous callers are one
//! principal). A principal past its bound, or a new session when the
//! process is full, ends that principal's own session idle longest (no
//! request in flight; an open GET stream is not a request); another
//! principal's session is never ended to make room. With none of its own
//! idle, the new session is refused (429 past the principal's bound, 503
//! when the process is full).
//!
//! **Parked while idle.** A session is what its client said in `initialize`
//! plus whose it is: a few hundred bytes. What answers its requests (rmcp's
//! session worker, its channels and the handler's task, some 80 KiB) runs
//! only while it is used: [`PARK_AFTER`] after its last request ended, the
//! worker is closed and the session parked; its next request starts a new
//! worker, which is given the client's `initialize` again before the
//! request. A parked session's `notifications/cancelled` has nothing to
//! cancel and is dropped. GET streams (which carry `tools/list_changed`)
//! are the edge's own ([`super::listen`]) and never keep a worker. A session
//! with no request and no GET stream for [`END_AFTER`] ends.
//!
//! Sessions live in the replica that made them: a load balancer in front of
//! several replicas must keep a session's requests on one (sticky
//! sessions); 2026-07-28 requests carry no session and need no affinity.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, Weak},
    time::Duration,
};

use futures::Stream;
use rmcp::{
    model::{
        ClientJsonRpcMessage, ClientNotification, ClientRequest, InitializeRequest, InitializeRequestParams,
        InitializedNotification, NumberOrString, ServerJsonRpcMessage,
    },
    transport::{
        common::server_side_http::{self, ServerSseMessage, SessionId},
        streamable_http_server::session::{
            local::{
                create_local_session, EventId, LocalSessionHandle, LocalSessionWorker, SessionConfig, SessionError,
            },
            SessionManager,
        },
        WorkerTransport,
    },
    ServerHandler,
};
use tokio::{sync::watch, time::Instant};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::Handler;
use crate::{
    identity::Caller,
    telemetry::throttle::{self, Throttle},
};

/// Session-era sessions kept at most.
pub(crate) const MAX_SESSIONS: usize = 10_000;

/// How long after its last request a session's worker is closed.
pub(crate) const PARK_AFTER: Duration = Duration::from_secs(10);

/// How long a session with no request and no GET stream lives.
pub(crate) const END_AFTER: Duration = Duration::from_secs(60 * 60);

/// How often sessions are looked over for parking and ending.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

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

    /// The principal and the user as one key (a NUL between them, which
    /// neither holds).
    pub(crate) fn key(&self) -> Arc<str> {
        let (principal, user) = (self.principal.as_deref().unwrap_or(""), self.user.as_deref().unwrap_or(""));
        Arc::from(format!("{principal}\0{user}"))
    }
}

tokio::task_local! {
    /// The owner of a session the transport makes while handling a request
    /// (rmcp's `create_session` is told nothing of the request).
    pub(crate) static OWNER: Owner;
}

/// One session.
struct Session {
    owner: Owner,
    /// When a request last began or ended.
    last: Instant,
    /// Requests being handled (the edge's [`Hold`]s).
    busy: usize,
    /// GET streams open on it (the edge's [`Listening`]s).
    listening: usize,
    /// The client's `initialize`, once answered: what a new worker is
    /// given. A session without it cannot be woken.
    init: Option<Box<InitializeRequestParams>>,
    /// Workers started so far (the transport's first is 0).
    workers: u32,
    worker: Option<Worker>,
    /// Cancelled when the session ends, for its GET streams; made by the
    /// first of them.
    ended: Option<CancellationToken>,
}

/// The worker answering a session's requests.
struct Worker {
    number: u32,
    handle: LocalSessionHandle,
    /// `None` once it has its `initialize`; else it becomes `true` then (a
    /// woken worker), or its sender drops when it could not start.
    ready: Option<watch::Receiver<bool>>,
}

impl Session {
    /// Whether this session's worker may be closed now.
    fn parkable(&self, now: Instant) -> bool {
        let ready = self.worker.as_ref().is_some_and(|w| w.ready.as_ref().is_none_or(|ready| *ready.borrow()));
        ready && self.busy == 0 && self.init.is_some() && now.duration_since(self.last) >= PARK_AFTER
    }

    /// Whether this session ends now.
    fn over(&self, now: Instant) -> bool {
        let idle = now.duration_since(self.last);
        self.busy == 0 && self.listening == 0 && (idle >= END_AFTER || (self.init.is_none() && self.worker.is_none()))
    }
}

/// The sessions of the MCP door, at most `cap` of them and `per_principal`
/// of one principal: rmcp's session workers, started and closed here.
pub(crate) struct Sessions<S = Handler> {
    me: Weak<Sessions<S>>,
    /// Makes each woken worker's handler.
    make: Box<dyn Fn() -> S + Send + Sync>,
    cap: usize,
    per_principal: usize,
    /// Of one end user of a principal (within the principal's bound).
    per_user: usize,
    table: Mutex<HashMap<SessionId, Session>>,
    /// "The bound was reached" is logged at WARN once a minute at most.
    full: Throttle,
}

/// The bounds of the door's sessions: in the process, of one principal,
/// of one end user of a principal.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    pub(crate) cap: usize,
    pub(crate) per_principal: usize,
    pub(crate) per_user: usize,
}

/// Why there is no room for a new session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoRoom {
    #[error("this principal has {0} MCP sessions open, each with a request in flight: end one (DELETE) or try later")]
    Principal(usize),
    #[error("this user has {0} MCP sessions open, each with a request in flight: end one (DELETE) or try later")]
    User(usize),
    #[error("{0} MCP sessions are open: try again later")]
    Full(usize),
}

/// Why a session could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError {
    #[error("Session not found: {0}")]
    NotFound(SessionId),
    #[error("the session's worker could not be started")]
    NotStarted,
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("Invalid event id: {0}")]
    EventId(String),
}

impl<S: ServerHandler> Sessions<S> {
    /// The sessions of a door whose handlers `make` makes; they are looked
    /// over every few seconds while the door lives.
    pub(crate) fn new(bounds: Bounds, make: impl Fn() -> S + Send + Sync + 'static) -> Arc<Self> {
        let Bounds { cap, per_principal, per_user } = bounds;
        let sessions = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            make: Box::new(make),
            cap,
            per_principal,
            per_user,
            table: Mutex::default(),
            full: Throttle::new(Duration::from_secs(60)),
        });
        tokio::spawn(sweep(Arc::downgrade(&sessions)));
        sessions
    }

    /// A worker's settings: no idle timeout of its own (parking and
    /// [`END_AFTER`] decide).
    fn config() -> SessionConfig {
        let mut config = SessionConfig::default();
        config.keep_alive = None;
        config
    }

    /// Whether `id` names a session of someone other than `owner` (an
    /// unknown id is no one's: the transport answers it).
    pub(crate) fn foreign(&self, id: &str, owner: &Owner) -> bool {
        self.table().get(id).is_some_and(|session| &session.owner != owner)
    }

    /// Room for one more session of `owner`: past its user's bound, its
    /// principal's, or with the process full, that user's own session idle
    /// longest ends (never another user's); with none idle, no room.
    pub(crate) async fn make_room(&self, owner: &Owner) -> Result<(), NoRoom> {
        loop {
            let victim = {
                let table = self.table();
                let mine = || table.iter().filter(|(_, s)| s.owner == *owner);
                let principals = table.values().filter(|s| s.owner.principal == owner.principal).count();
                let why = match mine().count() {
                    n if n >= self.per_user => NoRoom::User(n),
                    _ if principals >= self.per_principal => NoRoom::Principal(principals),
                    _ if table.len() >= self.cap => NoRoom::Full(self.cap),
                    _ => return Ok(()),
                };
                let idle = mine().filter(|(_, s)| s.busy == 0);
                match idle.min_by_key(|(_, s)| s.last) {
                    Some((id, _)) => id.clone(),
                    None => return Err(why),
                }
            };
            if let Some(skipped) = self.full.allow() {
                tracing::warn!(
                    principal = owner.principal.as_deref().unwrap_or("-"),
                    "MCP sessions at their bound: the user's session idle longest is ended for a new one{}",
                    throttle::more(skipped)
                );
            }
            // Ended by now, or by another request meanwhile.
            self.end(&victim).await;
        }
    }

    /// Holds session `id` busy while one request of it is handled (until
    /// the guard drops, with the response's body): it is neither parked
    /// nor ended meanwhile. `None` for an unknown id.
    pub(crate) fn hold(&self, id: &str) -> Option<Hold<S>> {
        let mut table = self.table();
        let id = table.get_key_value(id)?.0.clone();
        let session = table.get_mut(&id)?;
        session.busy += 1;
        session.last = Instant::now();
        Some(Counted { sessions: self.me.clone(), id, count: |session| &mut session.busy })
    }

    /// A GET stream opens on session `id`: the token cancelled when the
    /// session ends, and the guard counting the stream. `None` for an
    /// unknown id or one that was never initialized.
    pub(crate) fn listen(&self, id: &str) -> Option<(CancellationToken, Listening<S>)> {
        let mut table = self.table();
        let id = table.get_key_value(id)?.0.clone();
        let session = table.get_mut(&id)?;
        // A session that never answered `initialize` has no stream.
        session.init.as_ref()?;
        session.listening += 1;
        let ended = session.ended.get_or_insert_with(CancellationToken::new).clone();
        Some((ended, Counted { sessions: self.me.clone(), id, count: |session| &mut session.listening }))
    }

    /// Ends session `id` (DELETE, or room made for another): its worker
    /// closes and its GET streams end. `false` for an unknown id.
    pub(crate) async fn end(&self, id: &str) -> bool {
        let Some(session) = self.table().remove(id) else { return false };
        if let Some(ended) = &session.ended {
            ended.cancel();
        }
        if let Some(worker) = session.worker {
            // A worker that already stopped has nothing to close.
            let _ = worker.handle.close().await;
        }
        true
    }

    /// Worker `number` of session `id` stopped (closed, or by itself): the
    /// session is parked, unless another worker already answers it.
    fn stopped(&self, id: &SessionId, number: u32) {
        let mut table = self.table();
        if let Some(session) = table.get_mut(id) {
            if session.worker.as_ref().is_some_and(|worker| worker.number == number) {
                session.worker = None;
            }
        }
    }

    /// The worker of session `id`, started (and given the client's
    /// `initialize` again) if the session is parked.
    async fn worker(&self, id: &SessionId) -> Result<LocalSessionHandle, SessionsError> {
        let (handle, ready) = {
            let mut table = self.table();
            let session = table.get_mut(id).ok_or_else(|| SessionsError::NotFound(id.clone()))?;
            match &session.worker {
                Some(worker) => (worker.handle.clone(), worker.ready.clone()),
                None => {
                    let init = session.init.clone().ok_or_else(|| SessionsError::NotFound(id.clone()))?;
                    session.workers += 1;
                    let number = session.workers;
                    let (handle, worker) = create_local_session(id.clone(), Self::config());
                    let (started, ready) = watch::channel(false);
                    session.worker = Some(Worker { number, handle: handle.clone(), ready: Some(ready.clone()) });
                    tracing::debug!("MCP session {id} woken");
                    let woken = Woken { sessions: self.me.clone(), id: id.clone(), number, handle: handle.clone() };
                    tokio::spawn(woken.run((self.make)(), worker, *init, started));
                    (handle, Some(ready))
                }
            }
        };
        if let Some(mut ready) = ready {
            ready.wait_for(|ready| *ready).await.map_err(|_| SessionsError::NotStarted)?;
        }
        Ok(handle)
    }

    /// Parks the sessions idle long enough and ends those idle longer.
    async fn look_over(&self) {
        let now = Instant::now();
        let mut closing = Vec::new();
        {
            let mut table = self.table();
            table.retain(|id, session| {
                if session.over(now) {
                    tracing::debug!("MCP session {id} ended, idle");
                    if let Some(ended) = &session.ended {
                        ended.cancel();
                    }
                    closing.extend(session.worker.take().map(|worker| worker.handle));
                    return false;
                }
                if session.parkable(now) {
                    tracing::debug!("MCP session {id} parked");
                    closing.extend(session.worker.take().map(|worker| worker.handle));
                }
                true
            });
        }
        for handle in closing {
            let _ = handle.close().await;
        }
    }
}

impl<S> Sessions<S> {
    fn table(&self) -> MutexGuard<'_, HashMap<SessionId, Session>> {
        crate::lock::lock(&self.table)
    }
}

/// Looks the sessions over every [`SWEEP_EVERY`] while they exist.
async fn sweep<S: ServerHandler>(sessions: Weak<Sessions<S>>) {
    let mut every = tokio::time::interval(SWEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        every.tick().await;
        let Some(sessions) = sessions.upgrade() else { return };
        sessions.look_over().await;
    }
}

/// A worker started for a parked session.
struct Woken<S> {
    sessions: Weak<Sessions<S>>,
    id: SessionId,
    number: u32,
    handle: LocalSessionHandle,
}

impl<S: ServerHandler> Woken<S> {
    /// Serves the session with `service` until the worker stops, after
    /// giving it `init` and `notifications/initialized` as the client once
    /// did; `started` says when requests may follow.
    async fn run(
        self,
        service: S,
        worker: LocalSessionWorker,
        init: InitializeRequestParams,
        started: watch::Sender<bool>,
    ) {
        let initialize = ClientJsonRpcMessage::request(
            ClientRequest::InitializeRequest(InitializeRequest::new(init)),
            NumberOrString::Number(0),
        );
        let initialized = ClientJsonRpcMessage::notification(ClientNotification::InitializedNotification(
            InitializedNotification::default(),
        ));
        let handshake = async {
            self.handle.initialize(initialize).await?;
            self.handle.push_message(initialized, None).await
        };
        let (served, handshake) = tokio::join!(rmcp::serve_server(service, WorkerTransport::spawn(worker)), handshake);
        match (served, handshake) {
            (Ok(running), Ok(())) => {
                let _ = started.send(true);
                let _ = running.waiting().await;
            }
            (served, handshake) => {
                tracing::warn!(
                    served = served.err().map(|e| e.to_string()),
                    handshake = handshake.err().map(|e| e.to_string()),
                    "an MCP session's worker could not be started again"
                );
            }
        }
        drop(started);
        if let Some(sessions) = self.sessions.upgrade() {
            sessions.stopped(&self.id, self.number);
        }
    }
}

/// Something of a session counted while it lasts: a request being handled
/// ([`Sessions::hold`]) or an open GET stream ([`Sessions::listen`]). When
/// it ends, the count goes down and the session was last used now.
pub(crate) struct Counted<S = Handler> {
    sessions: Weak<Sessions<S>>,
    id: SessionId,
    count: fn(&mut Session) -> &mut usize,
}

/// A request of a session being handled.
pub(crate) type Hold<S = Handler> = Counted<S>;

/// A GET stream open on a session.
pub(crate) type Listening<S = Handler> = Counted<S>;

impl<S> Drop for Counted<S> {
    fn drop(&mut self) {
        let Some(sessions) = self.sessions.upgrade() else { return };
        let mut table = sessions.table();
        if let Some(session) = table.get_mut(&self.id) {
            let count = (self.count)(session);
            *count = count.saturating_sub(1);
            session.last = Instant::now();
        }
    }
}

/// The parameters of an `initialize` request.
fn initialize_params(message: &ClientJsonRpcMessage) -> Option<&InitializeRequestParams> {
    match message {
        ClientJsonRpcMessage::Request(request) => match &request.request {
            ClientRequest::InitializeRequest(initialize) => Some(&initialize.params),
            _ => None,
        },
        _ => None,
    }
}

impl<S: ServerHandler> SessionManager for Sessions<S> {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    /// A session of the request's [`OWNER`]; the edge made room for it
    /// ([`Sessions::make_room`]). Its first worker is served by the
    /// transport, which says when it stopped ([`Self::close_session`]).
    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let owner = OWNER.try_with(Owner::clone).unwrap_or_default();
        let id = server_side_http::session_id();
        let (handle, worker) = create_local_session(id.clone(), Self::config());
        let session = Session {
            owner,
            last: Instant::now(),
            busy: 0,
            listening: 0,
            init: None,
            workers: 0,
            worker: Some(Worker { number: 0, handle, ready: None }),
            ended: None,
        };
        self.table().insert(id.clone(), session);
        Ok((id, WorkerTransport::spawn(worker)))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let init = initialize_params(&message).cloned().map(Box::new);
        let handle = self.worker(id).await?;
        let response = handle.initialize(message).await?;
        if let Some(session) = self.table().get_mut(id) {
            session.init = init;
        }
        Ok(response)
    }

    /// A session exists while it is known here, parked or not (a parked
    /// one is woken by its next request).
    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.table().get(id).is_some_and(|s| s.worker.is_some() || s.init.is_some()))
    }

    /// The transport's worker of session `id` stopped (or, had the edge
    /// not answered it, a DELETE): the session is parked, not ended
    /// ([`Sessions::end`] ends one).
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.stopped(id, 0);
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let handle = self.worker(id).await?;
        let receiver = handle.establish_request_wise_channel().await?;
        handle.push_message(message, receiver.http_request_id).await?;
        Ok(ReceiverStream::new(receiver.inner))
    }

    /// A notification (or a response) for the session: to its worker; for a
    /// parked session (no request in flight, so nothing to cancel), none.
    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        let awake = {
            let table = self.table();
            let session = table.get(id).ok_or_else(|| SessionsError::NotFound(id.clone()))?;
            session.worker.is_some()
        };
        if awake {
            self.worker(id).await?.push_message(message, None).await?;
        }
        Ok(())
    }

    /// The worker's own GET stream: not used by the edge, which serves GET
    /// streams itself ([`super::listen`]).
    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let receiver = self.worker(id).await?.establish_common_channel().await?;
        Ok(ReceiverStream::new(receiver.inner))
    }

    /// A call's stream resumed: only while its worker runs (a parked
    /// session has none in flight, and kept none).
    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let event: EventId = last_event_id.parse().map_err(|_| SessionsError::EventId(last_event_id))?;
        let awake = self.table().get(id).is_some_and(|s| s.worker.is_some());
        if !awake {
            return Err(SessionsError::NotFound(id.clone()));
        }
        let receiver = self.worker(id).await?.resume(event).await?;
        Ok(ReceiverStream::new(receiver.inner))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use rmcp::model::{ClientConfig, PingRequest};

    use super::*;

    /// A handler that answers what every server answers.
    struct Quiet;

    impl ServerHandler for Quiet {}

    fn owner(principal: &str) -> Owner {
        Owner { principal: Some(Arc::from(principal)), user: None }
    }

    /// A new session of `owner`, as the edge and the transport make it.
    async fn open(sessions: &Sessions<Quiet>, owner: &Owner) -> Result<SessionId, NoRoom> {
        sessions.make_room(owner).await?;
        let (id, _transport) = OWNER.scope(owner.clone(), sessions.create_session()).await.unwrap();
        Ok(id)
    }

    /// A session the transport made, served and initialized as rmcp's
    /// transport does it.
    async fn initialized(sessions: &Arc<Sessions<Quiet>>) -> SessionId {
        let (id, transport) = OWNER.scope(owner("a"), sessions.create_session()).await.unwrap();
        let (manager, served) = (Arc::clone(sessions), id.clone());
        tokio::spawn(async move {
            if let Ok(running) = rmcp::serve_server(Quiet, transport).await {
                let _ = running.waiting().await;
            }
            manager.close_session(&served).await.unwrap();
        });
        let init = InitializeRequest::new(ClientConfig::default());
        let initialize =
            ClientJsonRpcMessage::request(ClientRequest::InitializeRequest(init), NumberOrString::Number(0));
        sessions.initialize_session(&id, initialize).await.unwrap();
        let initialized = ClientNotification::InitializedNotification(InitializedNotification::default());
        sessions.accept_message(&id, ClientJsonRpcMessage::notification(initialized)).await.unwrap();
        id
    }

    fn awake(sessions: &Sessions<Quiet>, id: &SessionId) -> bool {
        sessions.table().get(id).is_some_and(|session| session.worker.is_some())
    }

    #[tokio::test]
    async fn past_a_bound_only_the_principals_own_idle_session_ends() {
        let sessions = Sessions::new(Bounds { cap: 3, per_principal: 2, per_user: 3 }, || Quiet);
        let (a, b, c) = (owner("a"), owner("b"), owner("c"));
        let a1 = open(&sessions, &a).await.unwrap();
        let a2 = open(&sessions, &a).await.unwrap();
        let call = sessions.hold(&a1);
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
        let _other = sessions.hold(&a3);
        assert_eq!(open(&sessions, &a).await, Err(NoRoom::Principal(2)));
        assert_eq!(open(&sessions, &c).await, Err(NoRoom::Full(3)));
        // A session is its owner's alone.
        assert!(sessions.foreign(&a1, &b) && !sessions.foreign(&a1, &a));
        drop(call);
        open(&sessions, &a).await.unwrap();
        assert!(!sessions.has_session(&a1).await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_session_is_parked_and_its_next_request_wakes_it() {
        let sessions = Sessions::new(Bounds { cap: 10, per_principal: 10, per_user: 10 }, || Quiet);
        let id = initialized(&sessions).await;
        assert!(awake(&sessions, &id));
        // A request in flight keeps the worker, however long.
        let hold = sessions.hold(&id).unwrap();
        tokio::time::sleep(PARK_AFTER + 2 * SWEEP_EVERY).await;
        assert!(awake(&sessions, &id));
        drop(hold);
        tokio::time::sleep(PARK_AFTER + 2 * SWEEP_EVERY).await;
        assert!(!awake(&sessions, &id), "parked");
        assert!(sessions.has_session(&id).await.unwrap(), "a parked session is still there");
        // Its notifications have nothing to reach; its next request wakes it.
        let cancelled = ClientJsonRpcMessage::notification(ClientNotification::CancelledNotification(
            rmcp::model::CancelledNotification::new(rmcp::model::CancelledNotificationParam::new(
                Some(NumberOrString::Number(7)),
                None,
            )),
        ));
        sessions.accept_message(&id, cancelled).await.unwrap();
        assert!(!awake(&sessions, &id));
        for round in 1..=2 {
            let ping = ClientJsonRpcMessage::request(
                ClientRequest::PingRequest(PingRequest::default()),
                NumberOrString::Number(round),
            );
            // After a priming event (no message), the answer.
            let answers = sessions.create_stream(&id, ping).await.unwrap();
            let mut answers = Box::pin(answers.filter_map(|event| async move { event.message }));
            let answer = answers.next().await.expect("an answer");
            assert!(matches!(&*answer, ServerJsonRpcMessage::Response(r) if r.id == NumberOrString::Number(round)));
            assert!(awake(&sessions, &id));
            tokio::time::sleep(PARK_AFTER + 2 * SWEEP_EVERY).await;
            assert!(!awake(&sessions, &id), "parked again");
        }
        // Ended after an idle hour, and then unknown.
        let (ended, listening) = sessions.listen(&id).unwrap();
        tokio::time::sleep(END_AFTER + SWEEP_EVERY).await;
        assert!(!ended.is_cancelled(), "a GET stream keeps it");
        drop(listening);
        tokio::time::sleep(END_AFTER + 2 * SWEEP_EVERY).await;
        assert!(ended.is_cancelled());
        assert!(!sessions.has_session(&id).await.unwrap());
    }
}
