//! One connection to one MCP server: started, used, ended.

use std::{collections::HashMap, time::Duration};

use process_wrap::tokio::ChildWrapper;
use rmcp::{
    service::{NotificationContext, RunningService},
    transport::{
        async_rw::AsyncRwTransport, streamable_http_client::StreamableHttpClientTransportConfig,
        StreamableHttpClientTransport,
    },
    ClientHandler, Peer, RoleClient, ServiceExt,
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

/// Reports `notifications/tools/list_changed` as an [`Event`].
#[derive(Clone)]
struct Notifier {
    server: String,
    events: mpsc::UnboundedSender<Event>,
}

impl ClientHandler for Notifier {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        tracing::info!(server = %self.server, "MCP server's tools changed");
        let _ = self.events.send(Event::ToolsChanged(self.server.clone()));
        std::future::ready(())
    }
}

pub(crate) struct Connection {
    service: RunningService<RoleClient, Notifier>,
    /// The stdio server's process (group leader); `None` over HTTP.
    child: Option<Box<dyn ChildWrapper>>,
}

impl Connection {
    /// Starts the server (or opens the HTTP session) and initializes it.
    pub(crate) async fn open(
        spec: &McpServer,
        inherited: &Inherited,
        events: mpsc::UnboundedSender<Event>,
    ) -> Result<Self, String> {
        let notifier = Notifier { server: spec.name.clone(), events };
        match &spec.transport {
            McpTransport::Stdio { program, args, cwd, env } => {
                let env = env.iter().map(|(k, v)| (k.as_str(), v.expose()));
                let mut child = process::spawn(program, args, cwd, inherited, env)
                    .map_err(|err| format!("cannot start {}: {err}", program.display()))?;
                let (Some(stdin), Some(stdout), Some(stderr)) =
                    (child.stdin().take(), child.stdout().take(), child.stderr().take())
                else {
                    return Err("the server's stdio could not be captured".to_owned());
                };
                let server = spec.name.clone();
                tokio::spawn(process::log_lines(
                    stderr,
                    64 * 1024,
                    move |line| tracing::info!(server = %server, "stderr: {line}"),
                ));
                let transport = AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_MESSAGE_BYTES);
                match notifier.serve(transport).await {
                    Ok(service) => Ok(Self { service, child: Some(child) }),
                    Err(err) => {
                        end(child).await;
                        Err(format!("initialize failed: {err}"))
                    }
                }
            }
            McpTransport::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let name = name.parse().map_err(|_| format!("invalid header name '{name}'"))?;
                    let value = value.expose().parse().map_err(|_| "a header value is not valid".to_owned())?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
                // No idle pooling (as rmcp's own client: a reused connection
                // whose last body was left unread stalls on delayed ACKs), no
                // redirects (the session id and headers go to this server
                // only), and the gateway's trust roots.
                let client = crate::tls::client_builder()
                    .pool_max_idle_per_host(0)
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|err| format!("cannot build the HTTP client: {err}"))?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                let service = notifier.serve(transport).await.map_err(|err| format!("initialize failed: {err}"))?;
                Ok(Self { service, child: None })
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

/// A listed tool, as the catalogue takes it.
pub(crate) fn tool_info(tool: &rmcp::model::Tool) -> McpToolInfo {
    let hints = tool.annotations.as_ref();
    let hint = |f: fn(&rmcp::model::ToolAnnotations) -> Option<bool>| hints.and_then(f).unwrap_or(false);
    McpToolInfo {
        name: tool.name.to_string(),
        title: tool.title.clone().or_else(|| hints.and_then(|h| h.title.clone())),
        description: tool.description.as_deref().map(str::to_owned),
        input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
        idempotent: hint(|h| h.idempotent_hint) || hint(|h| h.read_only_hint),
        presentation: std::sync::Arc::new(crate::catalog::Presentation {
            title: tool.title.clone(),
            annotations: tool.annotations.as_ref().and_then(|a| match serde_json::to_value(a) {
                Ok(serde_json::Value::Object(map)) => Some(map),
                _ => None,
            }),
            output_schema: tool.output_schema.as_deref().cloned(),
            icons: tool.icons.as_ref().and_then(|icons| serde_json::to_value(icons).ok()),
        }),
    }
}
