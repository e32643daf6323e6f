//! The SERVER span and duration of each MCP request the door answers
//! (OpenTelemetry's MCP conventions): named `{mcp.method.name} {tool}` once
//! the tool is resolved (an emitted name never names a span), joined to the
//! caller's trace by `_meta.traceparent` (or the HTTP `traceparent`
//! header), with the `execute_tool` span and its repair and hint events
//! below it as on gRPC.

use std::time::Instant;

use opentelemetry::{trace::SpanKind, KeyValue};
use rmcp::{service::RequestContext, RoleServer};
use serde_json::{Map, Value};

use crate::telemetry::{propagation, semconv, span::Span, Observer};

pub(super) const TOOLS_CALL: &str = "tools/call";
pub(super) const TOOLS_LIST: &str = "tools/list";

/// One request being served.
pub(super) struct Served {
    span: Span,
    method: &'static str,
    started: Instant,
}

impl Served {
    /// Starts the span of `method` under the caller's trace context: the
    /// request's `_meta` `traceparent`/`tracestate` (`metas`, first found
    /// wins), else the HTTP request's headers.
    pub(super) fn start(
        observer: &Observer,
        method: &'static str,
        context: &RequestContext<RoleServer>,
        metas: &[Option<&Map<String, Value>>],
        session: Option<&str>,
    ) -> Self {
        let span = Span::start(
            observer.tracer.as_ref(),
            method,
            SpanKind::Server,
            || propagation::caller(&carrier(context, metas)),
            // These five, the tool and `error.type`.
            7,
            || {
                let mut attributes = vec![
                    KeyValue::new(semconv::MCP_METHOD_NAME, method),
                    KeyValue::new(semconv::JSONRPC_REQUEST_ID, context.id.to_string()),
                    KeyValue::new(semconv::FRONT_DOOR, super::NAME),
                ];
                if let Some(version) = context.protocol_version() {
                    attributes.push(KeyValue::new(semconv::MCP_PROTOCOL_VERSION, version.to_string()));
                }
                if let Some(session) = session {
                    attributes.push(KeyValue::new(semconv::MCP_SESSION_ID, session.to_owned()));
                }
                attributes
            },
        );
        Self { span, method, started: Instant::now() }
    }

    /// The span, to run the request's work under.
    pub(super) fn span(&self) -> &Span {
        &self.span
    }

    /// Ends the span and records the duration: `tool` is the resolved tool
    /// (it names the span), `error` the `error.type` of a failed request.
    pub(super) fn end(self, observer: &Observer, tool: Option<&str>, error: Option<&'static str>) {
        if let Some(tool) = tool {
            self.span.rename(|| format!("{} {tool}", self.method));
            self.span.set(semconv::GEN_AI_TOOL_NAME, tool.to_owned());
        }
        if let Some(error) = error {
            self.span.set(semconv::ERROR_TYPE, error);
            self.span.failed();
        }
        self.span.end();
        observer.metrics.mcp(self.method, tool, error, self.started.elapsed().as_secs_f64());
    }
}

/// The trace context's carrier: `_meta`'s `traceparent` and `tracestate`
/// when it has them, else the HTTP request's headers.
fn carrier(context: &RequestContext<RoleServer>, metas: &[Option<&Map<String, Value>>]) -> http::HeaderMap {
    let from_meta = |key: &str| metas.iter().flatten().find_map(|meta| meta.get(key)?.as_str());
    if let Some(traceparent) = from_meta("traceparent") {
        let mut headers = http::HeaderMap::new();
        for (name, value) in [("traceparent", Some(traceparent)), ("tracestate", from_meta("tracestate"))] {
            if let Some(value) = value.and_then(|v| http::HeaderValue::from_str(v).ok()) {
                headers.insert(name, value);
            }
        }
        return headers;
    }
    context.extensions.get::<http::request::Parts>().map(|parts| parts.headers.clone()).unwrap_or_default()
}
