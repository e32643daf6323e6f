//! What an Execute call leaves behind for operators: its `execute_tool` span
//! (GenAI conventions), a `toolgate.repair` event per repair and a
//! `toolgate.hint` event per hint, and the call metrics. An emitted name
//! appears only as an event attribute (the repair's `from`), never in a span
//! name or a metric label. Argument text and results are recorded only with
//! the opt-in switch.

use std::time::Duration;

use opentelemetry::{trace::SpanKind, KeyValue};

use super::{outcome::ToolType, Call, ErrorKind, Outcome, Repair, RepairKind, ToolError};
use crate::{
    catalog::Catalog,
    telemetry::{semconv, span::Span, Observer},
};

/// Content put on spans is cut to this many characters.
const MAX_CONTENT: usize = 4096;

/// The span of one call, under the current span (the RPC's); its name gets
/// the tool once it is resolved.
pub(crate) fn span(observer: &Observer, call: &Call) -> Span {
    // Room for the two always set, a call id, the tool's name and type, and
    // `error.type`.
    const USUAL: usize = 6;
    Span::child(observer.tracer.as_ref(), semconv::EXECUTE_TOOL, SpanKind::Internal, USUAL, || {
        let (principal, user) = call.caller.identity();
        let optional = [
            (!call.call_id.is_empty()).then(|| KeyValue::new(semconv::GEN_AI_TOOL_CALL_ID, call.call_id.clone())),
            principal.map(|principal| KeyValue::new(semconv::PRINCIPAL, principal.to_owned())),
            user.map(|user| KeyValue::new(semconv::USER_ID, user.to_owned())),
        ];
        [
            KeyValue::new(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL),
            KeyValue::new(semconv::FRONT_DOOR, call.front_door),
        ]
        .into_iter()
        .chain(optional.into_iter().flatten())
    })
}

/// Records the outcome of a call on its span, which it ends, and in the metrics.
pub(crate) fn finished(
    span: Span,
    observer: &Observer,
    catalog: &Catalog,
    call: &Call,
    outcome: &Outcome,
    took: Duration,
) {
    let tool = outcome.tool.as_deref();
    if let Some(name) = tool.filter(|_| span.is_recording()) {
        span.rename(|| [semconv::EXECUTE_TOOL, " ", name].concat());
        // Known where the call found its tool; looked up for an answer
        // replayed from the once-only store.
        let tool_type = outcome.tool_type.unwrap_or_else(|| match catalog.lookup(name) {
            Some(crate::catalog::Name::Tool(id)) => ToolType::of(catalog.tool(id)),
            _ => ToolType::Function,
        });
        span.set_all([
            KeyValue::new(semconv::GEN_AI_TOOL_NAME, name.to_owned()),
            KeyValue::new(semconv::GEN_AI_TOOL_TYPE, tool_type.label()),
        ]);
    }
    if outcome.replayed {
        span.set(semconv::REPLAYED, true);
    }
    if let Some(remaining) = outcome.rate_remaining {
        span.set(semconv::RATE_REMAINING, i64::from(remaining));
    }
    if let Some(remaining) = outcome.budget_remaining {
        span.set(semconv::BUDGET_REMAINING, remaining as i64);
    }
    if observer.record_content && span.is_recording() {
        span.set(semconv::GEN_AI_TOOL_CALL_ARGUMENTS, cut(&call.arguments_json).to_owned());
        if let Ok(Some(result)) = &outcome.result {
            span.set(semconv::GEN_AI_TOOL_CALL_RESULT, cut(result).to_owned());
        }
    }
    for repair in &outcome.repairs {
        repaired(&span, observer, tool, repair);
    }
    let (label, error_type) = match &outcome.result {
        Ok(_) => ("ok", None),
        Err(error) => {
            hinted(&span, observer, tool, error);
            span.set(semconv::ERROR_TYPE, error.kind.error_type());
            span.failed();
            (error.kind.label(), Some(error.kind.error_type()))
        }
    };
    span.end();
    let (principal, user) = call.caller.identity();
    observer.metrics.call(tool, principal, call.front_door, label, error_type, took.as_secs_f64());
    // The audit line: who ran what, and how it ended; never the arguments.
    // Only for calls with an identity: without principals or users there is
    // no one to audit, and a line per call costs a busy gateway about 7 µs
    // of CPU a call (docs/benchmarks.md).
    if principal.is_none() && user.is_none() {
        return;
    }
    tracing::info!(
        target: "toolgate::audit",
        principal = principal.unwrap_or("-"),
        auth = call.caller.proof.label(),
        front_door = call.front_door,
        user = user.unwrap_or("-"),
        tool = tool.unwrap_or("_unresolved"),
        outcome = label,
        repairs = outcome.repairs.len(),
        duration_ms = took.as_secs_f64() * 1000.0,
        "audit: execute"
    );
}

/// One repair: its span event and its count.
fn repaired(span: &Span, observer: &Observer, tool: Option<&str>, repair: &Repair) {
    let kind = repair.kind.label();
    span.event(semconv::REPAIR_EVENT, || {
        let mut attributes = vec![KeyValue::new(semconv::REPAIR_KIND, kind)];
        // Argument text is content: its before and after only on opt-in.
        if repair.kind != RepairKind::ArgumentsJson || observer.record_content {
            attributes.push(KeyValue::new(semconv::REPAIR_FROM, cut(&repair.original).to_owned()));
            attributes.push(KeyValue::new(semconv::REPAIR_TO, cut(&repair.repaired).to_owned()));
        }
        attributes
    });
    observer.metrics.repair(tool, kind);
}

/// The hints an error gives the model: a span event and a count each.
fn hinted(span: &Span, observer: &Observer, tool: Option<&str>, error: &ToolError) {
    let metrics = &observer.metrics;
    let hint = |kind: &'static str, suggested: &dyn Fn() -> String| {
        span.event(semconv::HINT_EVENT, || {
            vec![
                KeyValue::new(semconv::HINT_KIND, kind),
                KeyValue::new(semconv::HINT_SUGGESTIONS, cut(&suggested()).to_owned()),
            ]
        });
        metrics.hint(tool, kind);
    };
    if !error.suggestions.is_empty() {
        hint("did_you_mean", &|| error.suggestions.join(","));
    }
    if error.kind == ErrorKind::UnknownTool {
        hint("available_tools", &|| error.available_tools.join(","));
    }
    if let Some(expected) = &error.expected_parameters {
        hint("expected_parameters", &|| {
            let all: Vec<&str> = expected.required.iter().chain(&expected.optional).map(String::as_str).collect();
            all.join(",")
        });
    }
    if !error.violations.is_empty() {
        hint("violations", &|| {
            let fields: Vec<&str> = error.violations.iter().map(|v| v.field.as_str()).collect();
            fields.join(",")
        });
        metrics.violations(tool, error.violations.len());
    }
}

fn cut(text: &str) -> &str {
    match text.char_indices().nth(MAX_CONTENT) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}
