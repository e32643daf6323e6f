//! W3C trace context in and out: the caller's `traceparent` metadata becomes
//! the parent of the server span (a malformed one starts a new trace), and
//! backends get the `traceparent` of the span current when they are called.

use opentelemetry::{
    propagation::{Extractor, TextMapPropagator},
    trace::TraceContextExt,
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Makes the caller's trace (from `traceparent` in `headers`) the parent of `span`.
pub fn set_parent(span: &tracing::Span, headers: &http::HeaderMap) {
    let parent = TraceContextPropagator::new().extract(&Headers(headers));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// The `traceparent` of the current span, when spans are exported.
pub fn current_traceparent() -> Option<String> {
    let context = tracing::Span::current().context();
    let span = context.span();
    let span_context = span.span_context();
    span_context.is_valid().then(|| {
        format!("00-{}-{}-{:02x}", span_context.trace_id(), span_context.span_id(), span_context.trace_flags().to_u8())
    })
}
