//! The MCP front door (docs/architecture.md, "Front doors"): MCP clients
//! (over streamable HTTP, [`http`], or stdio) reach the same core as gRPC
//! callers: `tools/list` is the caller's tools (one toolset of them on
//! `/mcp/toolsets/NAME`), `tools/call` runs [`crate::exec::Executor::execute`]
//! with the emitted name and arguments, so a call is repaired, validated,
//! bound, run once and counted exactly as over gRPC.
//!
//! Taken from rmcp: the protocol model, both eras of the transport (the
//! stateless 2026-07-28 revision with `server/discover` and per-request
//! `_meta`, and the session era with `initialize` and `Mcp-Session-Id`),
//! JSON-RPC framing and the checks of headers against bodies. Written here:
//! what a request means for toolgate (who calls, which tools, the result
//! and error mapping, `_meta`) and the HTTP edge (routing, `Origin`, who
//! calls, the connection guards every listener gets).

mod changes;
mod convert;
pub(crate) mod http;
pub(crate) mod limits;
mod listen;
mod observe;
mod read;
mod search;
mod sessions;
pub(crate) mod stdio;

use std::{
    borrow::Cow,
    pin::pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use crate::{
    exec::Call,
    identity::Caller,
    live::{Snapshot, SnapshotSlot},
};
use observe::Served;
use rmcp::{
    model::{
        CacheScope, CallToolRequestParams, CallToolResponse, ErrorCode, Extensions, Implementation, ListToolsResult,
        PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerCapabilities,
        ServerConfig, SubscriptionFilter, Tool,
    },
    service::{NotificationContext, Peer, RequestContext, SubscriptionContext},
    ErrorData, RoleServer, ServerHandler,
};
use tokio::sync::watch;

/// What this door calls itself in spans, metrics and audit lines.
pub(crate) const NAME: &str = "mcp";

/// The revisions served: the stateless one, and the session era (an older
/// client is offered 2025-06-18 by version negotiation).
const VERSIONS: &[ProtocolVersion] =
    &[ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2025_06_18];

/// What the edge found out about one request, for the handler: the snapshot
/// it works on, who sent it, the toolset its endpoint names, and whether
/// the endpoint is `/mcp/search` (which offers `find_tools` and
/// `call_tool`, [`search`]).
#[derive(Clone)]
pub(crate) struct Asked {
    pub(crate) snapshot: Arc<Snapshot>,
    pub(crate) caller: Caller,
    pub(crate) toolset: Option<String>,
    pub(crate) search: bool,
}

/// The arguments of a `tools/call` as sent over HTTP, taken out of the
/// message by the edge (as emitted: an object's text, or a string's
/// content) so that only the core parses them.
#[derive(Clone)]
pub(crate) struct SentArguments(pub(crate) String);

/// The current snapshot, and what changes with each swap of it.
#[derive(Clone)]
pub(crate) struct View {
    pub(crate) current: SnapshotSlot,
    pub(crate) swaps: watch::Receiver<u64>,
}

/// The handler of every MCP request: a view of the current snapshot. The
/// transport makes one per session (and per stateless request).
#[derive(Clone)]
pub(crate) struct Handler {
    view: View,
    /// The caller of every request, when the transport does not say (stdio:
    /// the process speaks for one caller), and whether it is offered the
    /// search's two tools instead of its own (`mcp-stdio --search`).
    fixed: Option<(Caller, bool)>,
    /// Dropped with this session's last clone of the door: what listens
    /// for changes on the session's behalf then stops.
    alive: Arc<watch::Sender<()>>,
    /// Something listens for changes on this session's behalf: a session
    /// has one listener, however often it says `notifications/initialized`.
    listening: Arc<AtomicBool>,
}

impl Handler {
    /// The door of an HTTP listener: each request says who calls.
    pub(crate) fn new(view: View) -> Self {
        Self { view, fixed: None, alive: Arc::new(watch::Sender::new(())), listening: Arc::default() }
    }

    /// The door of one process's stdio: every request is `caller`'s; with
    /// `search`, it offers `find_tools` and `call_tool` as `/mcp/search` does.
    pub(crate) fn for_caller(view: View, caller: Caller, search: bool) -> Self {
        Self { fixed: Some((caller, search)), ..Self::new(view) }
    }

    /// The door of a new session.
    pub(crate) fn session(&self) -> Self {
        Self { alive: Arc::new(watch::Sender::new(())), listening: Arc::default(), ..self.clone() }
    }

    /// The snapshot, caller and toolset of a request.
    fn asked(&self, extensions: &Extensions) -> Result<Asked, ErrorData> {
        if let Some((caller, search)) = &self.fixed {
            return Ok(Asked {
                snapshot: self.view.current.load_full(),
                caller: caller.clone(),
                toolset: None,
                search: *search,
            });
        }
        extensions
            .get::<::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Asked>())
            .cloned()
            .ok_or_else(|| ErrorData::new(ErrorCode::INTERNAL_ERROR, "the request came by no known way", None))
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolgate", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let asked = self.asked(&context.extensions)?;
        if asked.search {
            return Ok(ListToolsResult::with_all_items(search::tools()));
        }
        let observer = asked.snapshot.executor().observer().clone();
        let served = Served::start(&observer, observe::TOOLS_LIST, &context, &[Some(&context.meta.0 .0)], None);
        let listed = served.span().run(pin!(listing(&asked))).await;
        served.end(&observer, None, listed.as_ref().err().map(|_| "tools_list_failed"));
        let mut result = ListToolsResult::with_all_items(listed?);
        // What one caller sees is not what another may: with principals or
        // OAuth, only the caller's client may cache the list.
        let identity = &asked.snapshot.identity;
        if !identity.principals().is_empty() || identity.oauth().is_some() {
            result = result.with_cache_scope(CacheScope::Private);
        }
        Ok(result)
    }

    /// A stdio client is told when its tools change, for as long as the
    /// process lives: by one listener, started by the first
    /// `notifications/initialized` (a repeated one is a no-op). Over HTTP
    /// the edge's GET streams tell a session ([`listen`]), so a session's
    /// worker holds no listener.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if self.fixed.is_none() {
            return;
        }
        let Ok(asked) = self.asked(&context.extensions) else { return };
        if self.listening.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut alive = self.alive.subscribe();
        let ended = async move { while alive.changed().await.is_ok() {} };
        let peer = context.peer;
        let notify = move || {
            let peer = peer.clone();
            async move { peer.notify_tool_list_changed().await.is_ok() }
        };
        tokio::spawn(changes::tell(self.view.clone(), asked, ended, notify));
    }

    /// A 2026-07-28 client listens with `subscriptions/listen`: only for
    /// `tools/list_changed`.
    fn accepted_subscription_filter(&self, _requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let asked = self.asked(&subscription.request_context().extensions)?;
        let sink = subscription.sink().clone();
        let notify = move || {
            let sink = sink.clone();
            async move { sink.notify_tool_list_changed().await.is_ok() }
        };
        changes::tell(self.view.clone(), asked, subscription.cancelled(), notify).await;
        Ok(())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let asked = self.asked(&context.extensions)?;
        let sent = arguments(&request, &mut context.extensions);
        // On `/mcp/search`: a search, or a call of the tool it names.
        let (name, sent) = match (asked.search, request.name.as_ref()) {
            (false, _) => (request.name.to_string(), sent),
            (true, search::FIND_TOOLS) => return Ok(search::find(&asked, &sent).await.into()),
            (true, search::CALL_TOOL) => search::call(&sent).map_err(convert::request_error)?,
            (true, other) => return Err(search::unknown(other)),
        };
        // The request's `_meta` (rmcp hands it over in the context).
        let metas = [request.meta.as_ref().map(|m| &m.0 .0), Some(&context.meta.0 .0)];
        for meta in metas.iter().flatten() {
            convert::check_meta(meta)?;
        }
        let read = |key: &str| -> Option<String> {
            metas.iter().flatten().find_map(|meta| meta.get(key)?.as_str().map(str::to_owned))
        };
        let mcp_session = session_of(&context);
        let session = read(convert::META_SESSION_ID).or_else(|| mcp_session.clone()).unwrap_or_default();
        let observer = asked.snapshot.executor().observer().clone();
        let served = Served::start(&observer, observe::TOOLS_CALL, &context, &metas, mcp_session.as_deref());
        // A caller that asked for progress (its token in `_meta`) is told a
        // federated tool's, for as long as the call runs.
        let token =
            request.meta.as_ref().and_then(|m| m.get_progress_token()).or_else(|| context.meta.get_progress_token());
        let progress = token.map(|token| progress_to(token, context.peer.clone()));
        let call = Call {
            progress,
            tool: name.clone(),
            arguments_json: sent,
            tools: asked.toolset.iter().cloned().collect(),
            // With spans exported, backends are given the call's own span.
            traceparent: read("traceparent").filter(|_| observer.tracer.is_none()),
            idempotency_key: read(convert::META_IDEMPOTENCY_KEY).unwrap_or_default(),
            session_id: session,
            front_door: NAME,
            ..Call::default()
        }
        .by(asked.caller);
        // Cancellation (a closed stream, `notifications/cancelled`) drops the
        // call, as a gRPC cancellation does: a command tool's processes end.
        let executor = asked.snapshot.executor();
        let execute = pin!(executor.execute(&call));
        let outcome = tokio::select! {
            outcome = served.span().run(execute) => outcome,
            () = context.ct.cancelled() => {
                served.end(&observer, None, Some("cancelled"));
                return Err(ErrorData::new(ErrorCode::INTERNAL_ERROR, "the call was cancelled", None));
            }
        };
        answer(outcome, &name, served, &observer)
    }
}

/// What `tools/call` answers for the outcome of a call of `name`, its span
/// and metrics ended with the error type (none for a result).
fn answer(
    outcome: Result<crate::exec::Outcome, crate::exec::RequestError>,
    name: &str,
    served: Served,
    observer: &crate::telemetry::Observer,
) -> Result<CallToolResponse, ErrorData> {
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(err) => {
            served.end(observer, None, Some("invalid_request"));
            return Err(convert::request_error(err));
        }
    };
    if let Some(error) = convert::is_unknown_tool(&outcome) {
        served.end(observer, None, Some("unknown_tool"));
        return Err(convert::unknown_tool(name, error));
    }
    let error = outcome.result.as_ref().err().map(|error| error.kind.error_type());
    served.end(observer, outcome.tool.as_deref(), error);
    Ok(convert::result(outcome).into())
}

/// A progress sink whose updates reach `peer` as progress notifications
/// for `token`, for as long as the call runs.
fn progress_to(token: ProgressToken, peer: Peer<RoleServer>) -> crate::mcp::ProgressSink {
    let (sink, mut updates) = crate::mcp::ProgressSink::channel();
    tokio::spawn(async move {
        while let Some(update) = updates.recv().await {
            let mut params = ProgressNotificationParam::new(token.clone(), update.progress);
            params.total = update.total;
            params.message = update.message;
            if peer.notify_progress(params).await.is_err() {
                break;
            }
        }
    });
    sink
}

/// The tools `asked` offers, as MCP lists them: in name order (the
/// catalogue's own order, which a toolset's expansion does not keep).
async fn listing(asked: &Asked) -> Result<Vec<Tool>, ErrorData> {
    let ids = listed(asked).await?;
    let catalog = asked.snapshot.executor().catalog();
    Ok(ids.into_iter().map(|id| convert::tool(catalog.tool(id))).collect())
}

/// The tools of [`listing`], as the snapshot's ids.
async fn listed(asked: &Asked) -> Result<Vec<crate::catalog::ToolId>, ErrorData> {
    let executor = asked.snapshot.executor();
    let names = asked.toolset.iter().cloned().collect();
    let mut ids = executor.list(&asked.caller, names).await.map_err(convert::request_error)?;
    ids.sort_unstable_by_key(|id| id.0);
    Ok(ids)
}

/// A call's arguments as the text the core parses: as the door took them
/// out of the message (taken, not copied: up to the argument limit of
/// text; over HTTP in the request's parts, over stdio in the message), else
/// as the transport parsed them.
fn arguments(request: &CallToolRequestParams, extensions: &mut Extensions) -> String {
    let sent = match extensions.remove::<SentArguments>() {
        Some(sent) => Some(sent),
        None => extensions.get_mut::<::http::request::Parts>().and_then(|parts| parts.extensions.remove()),
    };
    match sent {
        Some(SentArguments(text)) => text,
        None => convert::arguments_text(request.arguments.as_ref()),
    }
}

/// The session-era session of a request (`Mcp-Session-Id`), the default
/// conversation for retry budgets.
fn session_of(context: &RequestContext<RoleServer>) -> Option<String> {
    let parts = context.extensions.get::<::http::request::Parts>()?;
    let value = parts.headers.get("mcp-session-id")?.to_str().ok()?;
    Some(value.to_owned()).filter(|v| !v.is_empty())
}
