//! W3C trace context in and out: the caller's `traceparent` metadata becomes
//! the parent of the server span (a malformed one starts a new trace), and
//! backends get the `traceparent` of the span current when they are called.

use opentelemetry::{
    propagation::{Extractor, TextMapPropagator},
    trace::{SpanContext, TraceContextExt},
    Context,
};
use opentelemetry_sdk::propagation::TraceContextPropagator;

const TRACEPARENT: &str = "traceparent";
/// The same name, parsed once: looked up on every call.
const TRACEPARENT_HEADER: http::HeaderName = http::HeaderName::from_static(TRACEPARENT);

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// A lone `traceparent` value.
struct One<'a>(&'a str);

impl Extractor for One<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        (key == TRACEPARENT).then_some(self.0)
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT]
    }
}

/// The caller's trace context, from `traceparent` in `headers`; empty when
/// it is absent or malformed (a span under it starts a new trace). Most
/// calls carry none, and then the propagator is not asked (what it would
/// answer, an empty context, costs it a copy of the context it is given).
pub(crate) fn caller(headers: &http::HeaderMap) -> Context {
    match headers.contains_key(&TRACEPARENT_HEADER) {
        true => TraceContextPropagator::new().extract_with_context(&Context::new(), &Headers(headers)),
        false => Context::new(),
    }
}

/// The caller's `traceparent` header as sent (checked when it is passed on,
/// see [`checked`]), when spans are not exported; when they are, backends
/// get the context of the call's own span and this is not needed.
pub(crate) fn caller_header(headers: &http::HeaderMap, exporting: bool) -> Option<String> {
    match exporting {
        true => None,
        false => headers.get(&TRACEPARENT_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned),
    }
}

/// `value` if it is a well-formed `traceparent`.
pub(crate) fn checked(value: &str) -> Option<String> {
    let context = TraceContextPropagator::new().extract_with_context(&Context::new(), &One(value));
    traceparent_of(context.span().span_context())
}

/// The `traceparent` of the current span (see
/// [`super::span::Span::run`]), when spans are exported.
pub(crate) fn current_traceparent() -> Option<String> {
    super::span::current(traceparent_of).flatten()
}

fn traceparent_of(span_context: &SpanContext) -> Option<String> {
    span_context.is_valid().then(|| {
        format!("00-{}-{}-{:02x}", span_context.trace_id(), span_context.span_id(), span_context.trace_flags().to_u8())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        map.insert("traceparent", value.parse().unwrap());
        map
    }

    fn caller_traceparent(headers: &http::HeaderMap) -> Option<String> {
        caller_header(headers, false).as_deref().and_then(checked)
    }

    #[test]
    fn a_callers_traceparent_is_checked() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(caller_traceparent(&headers(good)).as_deref(), Some(good));
        assert_eq!(caller_header(&headers(good), true), None, "exported spans carry the context instead");
        for bad in [
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "garbage",
        ] {
            assert_eq!(caller_traceparent(&headers(bad)), None, "{bad}");
        }
        assert_eq!(caller_traceparent(&http::HeaderMap::new()), None);
    }
}
