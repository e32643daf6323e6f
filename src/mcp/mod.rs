//! MCP servers as tool backends, through rmcp (the official Rust SDK).
//!
//! A [`McpPool`] keeps one connection per server named in the catalogue:
//! a child process speaking MCP on stdio (in its own process group, so that
//! ending it ends everything it started) or a streamable HTTP session. It
//! lists tools (following pagination), calls them, reconnects on the next use
//! after a server died, and reports `notifications/tools/list_changed`. On a
//! reload ([`McpPool::plan`]) servers whose connection settings did not
//! change keep their connections; new or changed ones are connected and
//! listed before the new catalogue is accepted.
//! Turning listings into catalogue tools is the catalogue's job; keeping the
//! catalogue current is the `live` module's; wording a failure for a model is
//! the executor's.
//!
//! A leaf client: it knows catalogue types and child processes, nothing of
//! the executor, and answers with its own [`McpError`].

mod client;
mod result;

use std::{collections::HashMap, sync::Arc};

use futures::future::join_all;
use futures::StreamExt;
use rmcp::{handler::client::progress::ProgressDispatcher, model::CallToolRequestParams, service::ServiceError};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, Mutex};

use crate::{
    catalog::{McpListing, McpServer, McpToolInfo},
    process::Inherited,
};
use client::Connection;

/// The `_meta` keys that tell a tool who calls.
pub(crate) const PRINCIPAL_META: &str = "toolgate/principal";
pub(crate) const USER_META: &str = "toolgate/user";
/// The issuer of the user's token, beside [`USER_META`].
pub(crate) const USER_ISSUER_META: &str = "toolgate/user_issuer";

/// What a call's `_meta` carries: the trace context, and who calls.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CallMeta<'a> {
    pub(crate) traceparent: Option<&'a str>,
    pub(crate) principal: Option<&'a str>,
    pub(crate) user: Option<&'a str>,
    pub(crate) user_issuer: Option<&'a str>,
}

/// A call's progress, as its tool reports it (`notifications/progress`).
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where a call's progress goes: to an MCP caller's own progress token. A
/// caller that does not keep up loses updates, never holds the call up.
#[derive(Clone, Debug)]
pub struct ProgressSink(mpsc::Sender<Progress>);

impl ProgressSink {
    /// A sink, and what its updates arrive on.
    pub(crate) fn channel() -> (Self, mpsc::Receiver<Progress>) {
        let (sender, receiver) = mpsc::channel(64);
        (Self(sender), receiver)
    }

    fn send(&self, update: rmcp::model::ProgressNotificationParam) {
        let progress = Progress { progress: update.progress, total: update.total, message: update.message };
        let _ = self.0.try_send(progress);
    }
}

/// A call the server is told was cancelled when this is dropped before
/// the answer came (`notifications/cancelled`, sent from a task of its own).
struct CancelOnDrop(Option<(rmcp::Peer<rmcp::RoleClient>, rmcp::model::RequestId)>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some((peer, id)) = self.0.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            let reason = Some("the caller cancelled the call".to_owned());
            let params = rmcp::model::CancelledNotificationParam::new(Some(id), reason);
            let _ = peer.notify_cancelled(params).await;
        });
    }
}

/// Why a `tools/call` gave no result.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum McpError {
    /// The tool answered `isError: true`: its own refusal, its text
    /// unchanged, and the result as the server sent it.
    #[error("{0}")]
    Refused(String, Box<Value>),
    /// The server failed the call or stopped during it; the text is safe to
    /// show a model (no command line, URL or host).
    #[error("{0}")]
    Crashed(String),
    /// The server cannot be reached.
    #[error("the MCP server cannot be reached")]
    Unavailable,
}

/// Something a server told us without being asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// `notifications/tools/list_changed`, or a reconnect after the server
    /// died: its tools may differ.
    ToolsChanged(String),
}

/// The connections to every MCP server of a catalogue.
pub(crate) struct McpPool {
    servers: std::sync::RwLock<HashMap<String, Arc<Server>>>,
    events: mpsc::UnboundedSender<Event>,
    /// What a stdio server inherits from the gateway's environment.
    inherited: Inherited,
}

struct Server {
    spec: McpServer,
    connection: Mutex<Option<Connection>>,
    events: mpsc::UnboundedSender<Event>,
    inherited: Inherited,
    /// Progress of calls in flight, by the token each was sent with.
    progress: ProgressDispatcher,
}

/// The servers of a new catalogue against the pool's: which keep their
/// connections, which are new (or changed) and connected but not yet in the
/// pool, which go. Applied with [`McpPool::apply`] or dropped with
/// [`Plan::abandon`].
pub(crate) struct Plan {
    kept: Vec<String>,
    fresh: HashMap<String, Arc<Server>>,
}

impl Plan {
    /// The servers that keep their connections (their listings stay).
    pub(crate) fn kept(&self) -> &[String] {
        &self.kept
    }

    /// Connects every new or changed server and lists its tools, all at
    /// once, each within its startup timeout.
    pub(crate) async fn list_fresh(&self) -> Vec<McpListing> {
        let listings =
            self.fresh.iter().map(|(name, server)| async move { McpListing::new(name.clone(), server.list().await) });
        join_all(listings).await
    }

    /// Ends the connections of a plan that is not applied.
    pub(crate) async fn abandon(self) {
        join_all(self.fresh.values().map(|server| server.disconnect())).await;
    }
}

/// Servers taken out of the pool, to end once nothing uses them.
pub(crate) struct Retired(Vec<Arc<Server>>);

impl Retired {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names of the servers, for the log.
    pub(crate) fn names(&self) -> Vec<String> {
        self.0.iter().map(|s| s.spec.name.clone()).collect()
    }

    /// Ends their connections, as on exit.
    pub(crate) async fn end(self) {
        join_all(self.0.iter().map(|server| server.disconnect())).await;
    }
}

impl McpPool {
    /// A pool for `servers`; nothing connects until asked. Events arrive on
    /// the receiver. Stdio servers get `inherited` and their own `env`.
    pub(crate) fn new(servers: &[McpServer], inherited: &Inherited) -> (Arc<Self>, mpsc::UnboundedReceiver<Event>) {
        let (events, receiver) = mpsc::unbounded_channel();
        let pool = Self { servers: Default::default(), events, inherited: inherited.clone() };
        let servers = servers.iter().map(|spec| (spec.name.clone(), pool.server(spec))).collect();
        *crate::lock::write(&pool.servers) = servers;
        (Arc::new(pool), receiver)
    }

    fn server(&self, spec: &McpServer) -> Arc<Server> {
        Arc::new(Server {
            spec: spec.clone(),
            connection: Mutex::new(None),
            events: self.events.clone(),
            inherited: self.inherited.clone(),
            progress: ProgressDispatcher::new(),
        })
    }

    /// Whether the pool has a server of this name.
    pub(crate) fn has(&self, name: &str) -> bool {
        crate::lock::read(&self.servers).contains_key(name)
    }

    fn get(&self, name: &str) -> Option<Arc<Server>> {
        crate::lock::read(&self.servers).get(name).cloned()
    }

    /// Connects to every server and lists its tools, all at once, each within
    /// its startup timeout.
    pub(crate) async fn list_all(&self) -> Vec<McpListing> {
        let servers: Vec<(String, Arc<Server>)> =
            crate::lock::read(&self.servers).iter().map(|(n, s)| (n.clone(), Arc::clone(s))).collect();
        let listings =
            servers.into_iter().map(|(name, server)| async move { McpListing::new(name, server.list().await) });
        join_all(listings).await
    }

    /// Connects (if needed) and lists one server's tools, within its startup
    /// timeout. The error says why, for the operator's log.
    pub(crate) async fn list(&self, name: &str) -> Result<Vec<McpToolInfo>, String> {
        let server = self.get(name).ok_or_else(|| format!("no MCP server named '{name}'"))?;
        server.list().await
    }

    /// What moving to `specs` means: a server whose transport and startup
    /// timeout are unchanged keeps its connection; a new or changed one gets
    /// a fresh, unconnected server outside the pool.
    pub(crate) fn plan(&self, specs: &[McpServer]) -> Plan {
        let current = crate::lock::read(&self.servers);
        let mut plan = Plan { kept: Vec::new(), fresh: HashMap::new() };
        for spec in specs {
            match current.get(&spec.name) {
                Some(old)
                    if old.spec.transport == spec.transport && old.spec.startup_timeout == spec.startup_timeout =>
                {
                    plan.kept.push(spec.name.clone())
                }
                _ => {
                    plan.fresh.insert(spec.name.clone(), self.server(spec));
                }
            }
        }
        plan
    }

    /// Makes the plan's servers the pool's; the servers that left it
    /// (removed, or replaced by a changed one) are returned, still connected,
    /// for calls in flight on them to finish.
    pub(crate) fn apply(&self, plan: Plan) -> Retired {
        let mut servers = crate::lock::write(&self.servers);
        let mut next: HashMap<String, Arc<Server>> = HashMap::new();
        for name in plan.kept {
            if let Some(server) = servers.remove(&name) {
                next.insert(name, server);
            }
        }
        next.extend(plan.fresh);
        let retired = std::mem::replace(&mut *servers, next).into_values().collect();
        Retired(retired)
    }

    /// Calls `tool` on `server` with validated arguments. The result is JSON
    /// text, with the result as sent; an `isError` result is the tool's own
    /// refusal.
    pub(crate) async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: &Map<String, Value>,
        meta: CallMeta<'_>,
        progress: Option<&ProgressSink>,
    ) -> Result<result::Answered, McpError> {
        let Some(server) = self.get(server) else { return Err(McpError::Unavailable) };
        let peer = match server.peer().await {
            Ok(peer) => peer,
            Err(why) => {
                tracing::warn!(server = %server.spec.name, "MCP server unavailable: {why}");
                return Err(McpError::Unavailable);
            }
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments.clone());
        let mut object = rmcp::model::MetaObject::new();
        if let Some(traceparent) = meta.traceparent {
            object.set_traceparent(traceparent);
        }
        let identity = [(PRINCIPAL_META, meta.principal), (USER_META, meta.user), (USER_ISSUER_META, meta.user_issuer)];
        for (key, value) in identity {
            if let Some(value) = value {
                object.insert(key.to_owned(), Value::String(value.to_owned()));
            }
        }
        if !object.is_empty() {
            params.meta = Some(rmcp::model::RequestMetaObject(object));
        }
        let request = rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        let options = rmcp::service::PeerRequestOptions::no_options();
        let called = async {
            let handle = peer.send_cancellable_request(request, options).await?;
            // Cancelled (the call's future dropped, as when its caller
            // cancels): the server is told, in both eras.
            let mut cancel = CancelOnDrop(Some((handle.peer.clone(), handle.id.clone())));
            let mut relayed = match progress {
                Some(_) => Some(server.progress.subscribe(handle.progress_token.clone()).await),
                None => None,
            };
            let response = handle.await_response();
            tokio::pin!(response);
            let answered = loop {
                tokio::select! {
                    answered = &mut response => break answered,
                    Some(update) = async { relayed.as_mut()?.next().await }, if relayed.is_some() => {
                        if let Some(sink) = progress {
                            sink.send(update);
                        }
                    }
                }
            };
            cancel.0 = None;
            answered
        };
        match called.await {
            Ok(rmcp::model::ServerResult::CallToolResult(result)) => result::answer(&result),
            Ok(_) => Err(McpError::Crashed(format!(
                "the MCP server '{}' answered the call with something else than a result",
                server.spec.name
            ))),
            Err(ServiceError::McpError(error)) => {
                tracing::warn!(server = %server.spec.name, tool, code = error.code.0, "MCP call failed: {}", error.message);
                Err(McpError::Crashed(format!(
                    "the MCP server '{}' failed the call (error {})",
                    server.spec.name, error.code.0
                )))
            }
            Err(err) => {
                tracing::warn!(server = %server.spec.name, tool, "MCP call broke: {err}");
                server.disconnect_if_closed().await;
                Err(McpError::Crashed(format!("the MCP server '{}' stopped during the call", server.spec.name)))
            }
        }
    }

    /// Ends every connection; child processes are asked to exit, then killed.
    pub(crate) async fn shutdown(&self) {
        let servers: Vec<Arc<Server>> = crate::lock::read(&self.servers).values().cloned().collect();
        join_all(servers.iter().map(|server| server.disconnect())).await;
    }
}

impl Server {
    /// Connects (if needed) and lists the tools, within the startup timeout.
    async fn list(&self) -> Result<Vec<McpToolInfo>, String> {
        let limit = self.spec.startup_timeout;
        let listed = tokio::time::timeout(limit, async {
            let peer = self.peer().await?;
            let tools = peer.list_all_tools().await;
            match tools {
                Ok(tools) => Ok(tools.iter().map(client::tool_info).collect()),
                Err(err) => {
                    self.disconnect_if_closed().await;
                    Err(format!("tools/list failed: {err}"))
                }
            }
        })
        .await;
        match listed {
            Ok(result) => result,
            Err(_) => {
                // A server that hangs is ended, not left half-connected.
                self.disconnect().await;
                Err(format!("no answer within {}", humantime::format_duration(limit)))
            }
        }
    }

    /// The live connection's peer, connecting first if there is none (a
    /// server that died is restarted here, on its next use).
    async fn peer(&self) -> Result<rmcp::Peer<rmcp::RoleClient>, String> {
        let mut connection = self.connection.lock().await;
        if let Some(live) = connection.as_ref() {
            if !live.is_closed() {
                return Ok(live.peer());
            }
            tracing::warn!(server = %self.spec.name, "MCP server connection closed; reconnecting");
            if let Some(dead) = connection.take() {
                dead.close().await;
            }
            let _ = self.events.send(Event::ToolsChanged(self.spec.name.clone()));
        }
        let live = Connection::open(&self.spec, &self.inherited, self.events.clone(), self.progress.clone()).await?;
        let peer = live.peer();
        *connection = Some(live);
        Ok(peer)
    }

    async fn disconnect(&self) {
        if let Some(live) = self.connection.lock().await.take() {
            live.close().await;
        }
    }

    async fn disconnect_if_closed(&self) {
        let mut connection = self.connection.lock().await;
        if connection.as_ref().is_some_and(Connection::is_closed) {
            if let Some(dead) = connection.take() {
                dead.close().await;
            }
        }
    }
}
