//! What an Execute call leaves behind for operators: its `execute_tool` span
//! (GenAI conventions), a `toolgate.repair` event per repair and a
//! `toolgate.hint` event per hint, and the call metrics. An emitted name
//! appears only as an event attribute (the repair's `from`), never in a span
//! name or a metric label. Argument text and results are recorded only with
//! the opt-in switch.

use std::time::Duration;

use opentelemetry::trace::TraceContextExt;
use tracing::{field::Empty, Level, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{Call, ErrorKind, Outcome, RepairKind};
use crate::{
    catalog::{Backend, Catalog},
    telemetry::{names, Observer},
};

/// Content put on spans is cut to this many characters.
const MAX_CONTENT: usize = 4096;

/// The span of one call; its name gets the tool once it is resolved.
pub fn span(call: &Call) -> Span {
    tracing::debug_span!(
        target: names::TARGET,
        "execute_tool",
        otel.name = names::EXECUTE_TOOL,
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = names::EXECUTE_TOOL,
        gen_ai.tool.name = Empty,
        gen_ai.tool.call.id = call.call_id.as_str(),
        gen_ai.tool.type = Empty,
        error.type = Empty,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
    )
}

/// Records the outcome of a call on its span and in the metrics.
pub fn finished(span: &Span, observer: &Observer, catalog: &Catalog, call: &Call, outcome: &Outcome, took: Duration) {
    let metrics = &observer.metrics;
    let tool = outcome.tool.as_deref();
    if let Some(name) = tool {
        // The OpenTelemetry span may have started (its context went to an
        // HTTP or MCP backend), so it is renamed directly, not through
        // `otel.name`, which only names spans not yet started.
        span.context().span().update_name(format!("{} {name}", names::EXECUTE_TOOL));
        span.record("gen_ai.tool.name", name);
        let kind = catalog.lookup(name).and_then(|n| match n {
            crate::catalog::Name::Tool(id) => Some(&catalog.tool(id).backend),
            _ => None,
        });
        span.record("gen_ai.tool.type", if matches!(kind, Some(Backend::Mcp(_))) { "extension" } else { "function" });
    }
    if observer.record_content {
        span.record("gen_ai.tool.call.arguments", cut(&call.arguments_json));
        if let Ok(Some(result)) = &outcome.result {
            span.record("gen_ai.tool.call.result", cut(result));
        }
    }
    span.in_scope(|| {
        for repair in &outcome.repairs {
            let kind = repair.kind.label();
            // Argument text is content: its before and after only on opt-in.
            if repair.kind != RepairKind::ArgumentsJson || observer.record_content {
                tracing::event!(
                    target: names::TARGET,
                    Level::DEBUG,
                    toolgate.repair.kind = kind,
                    toolgate.repair.from = cut(&repair.original),
                    toolgate.repair.to = cut(&repair.repaired),
                    "toolgate.repair"
                );
            } else {
                tracing::event!(target: names::TARGET, Level::DEBUG, toolgate.repair.kind = kind, "toolgate.repair");
            }
            metrics.repair(tool, kind);
        }
        let Err(error) = &outcome.result else { return };
        let hint = |kind: &'static str, suggested: &str| {
            tracing::event!(
                target: names::TARGET,
                Level::DEBUG,
                toolgate.hint.kind = kind,
                toolgate.hint.suggestions = cut(suggested),
                "toolgate.hint"
            );
            metrics.hint(tool, kind);
        };
        if !error.suggestions.is_empty() {
            hint("did_you_mean", &error.suggestions.join(","));
        }
        if error.kind == ErrorKind::UnknownTool {
            hint("available_tools", &error.available_tools.join(","));
        }
        if let Some(expected) = &error.expected_parameters {
            let all: Vec<&str> = expected.required.iter().chain(&expected.optional).map(String::as_str).collect();
            hint("expected_parameters", &all.join(","));
        }
        if !error.violations.is_empty() {
            let fields: Vec<&str> = error.violations.iter().map(|v| v.field.as_str()).collect();
            hint("violations", &fields.join(","));
            metrics.violations(tool, error.violations.len());
        }
    });
    let (label, error_type) = match &outcome.result {
        Ok(_) => ("ok", None),
        Err(error) => {
            span.record("error.type", error.kind.error_type());
            span.record("otel.status_code", "ERROR");
            (error.kind.label(), Some(error.kind.error_type()))
        }
    };
    metrics.call(tool, label, error_type, took.as_secs_f64());
}

fn cut(text: &str) -> &str {
    match text.char_indices().nth(MAX_CONTENT) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}
