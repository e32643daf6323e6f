//! The gateway's spans, made with the OpenTelemetry API directly: two per
//! Execute (SERVER and `execute_tool`), on the hot path, so they cost what
//! the SDK costs and no more. When traces are not exported there is no
//! tracer and a [`Span`] is nothing: no attribute is even built.

use std::future::Future;

use futures::future::Either;
use opentelemetry::{
    context::{FutureExt, WithContext},
    trace::{SpanKind, Status, TraceContextExt, Tracer as _},
    Context, KeyValue, Value,
};
use opentelemetry_sdk::trace::SdkTracer;

/// A span being recorded, or none.
pub(crate) struct Span(Option<Context>);

impl Span {
    /// Starts a span under `parent` when there is a tracer; `parent` and
    /// `attributes` are called only then.
    pub(crate) fn start(
        tracer: Option<&SdkTracer>,
        name: &'static str,
        kind: SpanKind,
        parent: impl FnOnce() -> Context,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Self {
        Self(tracer.map(|tracer| {
            let parent = parent();
            let span = tracer
                .span_builder(name)
                .with_kind(kind)
                .with_attributes(attributes())
                .start_with_context(tracer, &parent);
            parent.with_span(span)
        }))
    }

    /// `future` with this span current while it runs: spans started inside
    /// are its children and [`super::propagation::current_traceparent`]
    /// names it. (Not an `async fn`, which would hold `future` twice.)
    pub(crate) fn run<F: Future>(&self, future: F) -> Either<WithContext<F>, F> {
        match &self.0 {
            Some(cx) => Either::Left(future.with_context(cx.clone())),
            None => Either::Right(future),
        }
    }

    /// Whether anything put on this span is recorded.
    pub(crate) fn is_recording(&self) -> bool {
        self.0.as_ref().is_some_and(|cx| cx.span().is_recording())
    }

    pub(crate) fn set(&self, key: &'static str, value: impl Into<Value>) {
        if let Some(cx) = &self.0 {
            cx.span().set_attribute(KeyValue::new(key, value));
        }
    }

    pub(crate) fn rename(&self, name: impl FnOnce() -> String) {
        if let Some(cx) = &self.0 {
            cx.span().update_name(name());
        }
    }

    /// Adds an event; `attributes` is called only when the span records.
    pub(crate) fn event(&self, name: &'static str, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(cx) = self.0.as_ref().filter(|cx| cx.span().is_recording()) {
            cx.span().add_event(name, attributes());
        }
    }

    /// Marks the span failed.
    pub(crate) fn failed(&self) {
        if let Some(cx) = &self.0 {
            cx.span().set_status(Status::error(""));
        }
    }

    pub(crate) fn end(self) {
        if let Some(cx) = self.0 {
            cx.span().end();
        }
    }
}

/// Adds an event to the span current on this thread (see [`Span::run`]), if
/// one is recording.
pub(crate) fn current_event(name: &'static str, attributes: impl FnOnce() -> Vec<KeyValue>) {
    Context::map_current(|cx| {
        let span = cx.span();
        if span.is_recording() {
            span.add_event(name, attributes());
        }
    });
}
