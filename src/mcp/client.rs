//! One connection to one MCP server: started, used, ended.

use std::{collections::HashMap, time::Duration};

use process_wrap::tokio::ChildWrapper;
use rmcp::{
    handler::client::progress::ProgressDispatcher,
    model::{
        ClientConfig, Implementation, ProgressNotificationParam, ProtocolVersion, ServerNotification,
        SubscriptionFilter,
    },
    service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, NotificationContext, RunningService},
    transport::{
        async_rw::AsyncRwTransport, streamable_http_client::StreamableHttpClientTransportConfig,
        StreamableHttpClientTransport,
    },
    ClientHandler, Peer, RoleClient,
};
use tokio::sync::mpsc;

use super::Event;
use crate::{
    catalog::{McpServer, McpToolInfo, McpTransport},
    process::{self, Inherited},
};

/// The longest message read from a stdio server. Larger than any result the
/// gateway accepts, so that an oversized result is read and refused (rather
/// than dropped by the transport, leaving its call to time out).
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// How long a stdio server gets to exit after its stdin closes, and again
/// after SIGTERM, before its process group is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// Reports `notifications/tools/list_changed` as an [`Event`], and hands
/// `notifications/progress` to the call whose token it names.
#[derive(Clone)]
struct Notifier {
    server: String,
    events: mpsc::UnboundedSender<Event>,
    progress: ProgressDispatcher,
}

impl ClientHandler for Notifier {
    /// toolgate, proposing 2025-11-25 when it initializes (a session-era
    /// revision: 2026-07-28 has no `initialize`).
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info.client_info = Implementation::new("toolgate", env!("CARGO_PKG_VERSION"));
        info
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        tracing::info!(server = %self.server, "MCP server's tools changed");
        let _ = self.events.send(Event::ToolsChanged(self.server.clone()));
        std::future::ready(())
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.progress.handle_notification(params)
    }
}

pub(crate) struct Connection {
    service: RunningService<RoleClient, Notifier>,
    /// The stdio server's process (group leader); `None` over HTTP.
    child: Option<Box<dyn ChildWrapper>>,
    /// On a 2026-07-28 connection, what reads the server's change
    /// notifications; ended with the connection.
    listening: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(listening) = &self.listening {
            listening.abort();
        }
    }
}

impl Connection {
    /// Starts the server (or opens the HTTP session) and initializes it.
    pub(crate) async fn open(
        spec: &McpServer,
        inherited: &Inherited,
        events: mpsc::UnboundedSender<Event>,
        progress: ProgressDispatcher,
    ) -> Result<Self, String> {
        let notifier = Notifier { server: spec.name.clone(), events, progress };
        let http = matches!(spec.transport, McpTransport::Http { .. });
        let mut connection = match Self::start(spec, inherited, notifier.clone(), lifecycle()).await {
            Ok(connection) => connection,
            // A server that answered `server/discover` with something that
            // is neither a discovery nor a session-era refusal (an empty
            // result, an HTTP error) is initialized afresh: over HTTP after
            // any failure (a connection is cheap), over stdio (a new process)
            // only when it did answer.
            Err(failed) if http || failed.answered => {
                tracing::debug!(server = %spec.name, "server/discover failed ({}); initializing", failed.why);
                Self::start(spec, inherited, notifier.clone(), ClientLifecycleMode::Initialize)
                    .await
                    .map_err(|failed| failed.why)?
            }
            Err(failed) => return Err(failed.why),
        };
        let peer = connection.peer();
        let modern = peer.peer_info().is_some_and(|info| info.protocol_version >= ProtocolVersion::V_2026_07_28);
        if modern {
            connection.listening = Some(tokio::spawn(listen(peer, notifier)));
        }
        Ok(connection)
    }

    async fn start(
        spec: &McpServer,
        inherited: &Inherited,
        notifier: Notifier,
        lifecycle: ClientLifecycleMode,
    ) -> Result<Self, Failed> {
        match &spec.transport {
            McpTransport::Stdio { program, args, cwd, env } => {
                let env = env.iter().map(|(k, v)| (k.as_str(), v.expose()));
                let mut child = process::spawn(program, args, cwd, inherited, env)
                    .map_err(|err| Failed::before(format!("cannot start {}: {err}", program.display())))?;
                let (Some(stdin), Some(stdout), Some(stderr)) =
                    (child.stdin().take(), child.stdout().take(), child.stderr().take())
                else {
                    return Err(Failed::before("the server's stdio could not be captured".to_owned()));
                };
                let server = spec.name.clone();
                tokio::spawn(process::log_lines(
                    stderr,
                    64 * 1024,
                    move |line| tracing::info!(server = %server, "stderr: {line}"),
                ));
                let transport = AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_MESSAGE_BYTES);
                match notifier.serve_with_lifecycle(transport, lifecycle).await {
                    Ok(service) => Ok(Self { service, child: Some(child), listening: None }),
                    Err(err) => {
                        end(child).await;
                        Err(Failed::from(err))
                    }
                }
            }
            McpTransport::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let name = name.parse().map_err(|_| Failed::before(format!("invalid header name '{name}'")))?;
                    let value =
                        value.expose().parse().map_err(|_| Failed::before("a header value is not valid".to_owned()))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
                // Connections kept and reused between calls (a new one per
                // call cost the upstream ~0.15 ms of CPU and the caller
                // ~0.2 ms at p50 against a Python server, docs/benchmarks.md; a
                // response left unread closes its connection rather than
                // returning it), no redirects (the session id and headers go
                // to this server only), and the gateway's trust roots.
                let client = crate::tls::client_builder()
                    .pool_idle_timeout(Duration::from_secs(30))
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|err| Failed::before(format!("cannot build the HTTP client: {err}")))?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                let service = notifier.serve_with_lifecycle(transport, lifecycle).await.map_err(Failed::from)?;
                Ok(Self { service, child: None, listening: None })
            }
        }
    }

    pub(crate) fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Ends the connection. A stdio server's stdin is closed; it gets
    /// [`EXIT_GRACE`] to exit, then SIGTERM and as long again; then its whole
    /// process group is killed, so nothing it started outlives it.
    pub(crate) async fn close(mut self) {
        let _ = self.service.close().await;
        if let Some(child) = self.child.take() {
            end(child).await;
        }
    }
}

/// Ends a stdio server and everything in its process group.
async fn end(mut child: Box<dyn ChildWrapper>) {
    drop(child.stdin().take());
    if tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_err() {
        let _ = child.signal(libc::SIGTERM);
        let _ = tokio::time::timeout(EXIT_GRACE, child.wait()).await;
    }
    // The leader may be gone; what it started may not be.
    let _ = child.start_kill();
    let _ = tokio::time::timeout(EXIT_GRACE, child.wait()).await;
}

/// Why a connection could not be made, and whether the server answered.
struct Failed {
    why: String,
    answered: bool,
}

impl Failed {
    /// Nothing was sent to the server.
    fn before(why: String) -> Self {
        Self { why, answered: false }
    }
}

impl From<ClientInitializeError> for Failed {
    fn from(err: ClientInitializeError) -> Self {
        let answered = matches!(
            err,
            ClientInitializeError::ExpectedInitResponse(_)
                | ClientInitializeError::ExpectedInitResult(_)
                | ClientInitializeError::ConflictInitResponseId(..)
                | ClientInitializeError::UncorrelatedErrorResponse { .. }
                | ClientInitializeError::JsonRpcError(_)
                | ClientInitializeError::NoCompatibleProtocolVersion { .. }
        );
        Self { why: format!("initialize failed: {err}"), answered }
    }
}

/// Reads the change notifications of a 2026-07-28 server, which sends them
/// only on a `subscriptions/listen` stream, for as long as the connection
/// lives (a stream the server ends is opened again, after a pause). A
/// server that does not offer `subscriptions/listen` sends none to miss.
async fn listen(peer: Peer<RoleClient>, notifier: Notifier) {
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    while !peer.is_transport_closed() {
        let mut subscription = match peer.listen(filter.clone()).await {
            Ok(subscription) => subscription,
            Err(err) => {
                tracing::debug!(server = %notifier.server, "MCP server takes no subscriptions/listen: {err}");
                return;
            }
        };
        while let Ok(Some(notification)) = subscription.next().await {
            if matches!(notification, ServerNotification::ToolListChangedNotification(_)) {
                tracing::info!(server = %notifier.server, "MCP server's tools changed");
                let _ = notifier.events.send(Event::ToolsChanged(notifier.server.clone()));
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// How a connection starts: `server/discover` (2026-07-28) first; a server
/// that answers it as a session-era server would (or not within 10 s) is
/// initialized with 2025-11-25, which it may negotiate down.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// A listed tool, as the catalogue takes it.
pub(crate) fn tool_info(tool: &rmcp::model::Tool) -> McpToolInfo {
    let hints = tool.annotations.as_ref();
    let hint = |f: fn(&rmcp::model::ToolAnnotations) -> Option<bool>| hints.and_then(f).unwrap_or(false);
    McpToolInfo::new(
        tool.name.to_string(),
        tool.title.clone().or_else(|| hints.and_then(|h| h.title.clone())),
        tool.description.as_deref().map(str::to_owned),
        serde_json::Value::Object((*tool.input_schema).clone()),
        hint(|h| h.idempotent_hint) || hint(|h| h.read_only_hint),
        std::sync::Arc::new(crate::catalog::Presentation {
            title: tool.title.clone(),
            annotations: tool.annotations.as_ref().and_then(|a| match serde_json::to_value(a) {
                Ok(serde_json::Value::Object(map)) => Some(map),
                _ => None,
            }),
            output_schema: tool.output_schema.as_deref().cloned(),
            icons: tool.icons.as_ref().and_then(|icons| serde_json::to_value(icons).ok()),
        }),
    )
}
