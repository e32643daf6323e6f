//! The gateway's spans: two per Execute (SERVER and `execute_tool`), on
//! the hot path, made by the gateway's own [`Tracer`]. When traces are not
//! exported there is no tracer and a [`Span`] is nothing: no attribute is
//! even built.

use std::{future::Future, pin::Pin};

use futures::future::Either;
use opentelemetry::{
    context::{FutureExt, WithContext},
    trace::{SpanKind, Status, TraceContextExt},
    Context, KeyValue, Value,
};

use super::tracer::Tracer;

/// A span being recorded, or none.
pub(crate) struct Span(Option<Context>);

impl Span {
    /// Starts a span under `parent` when there is a tracer; `parent` is
    /// called only then, and `attributes` only when the sampler chose to
    /// record the span: at 10 % sampling nine calls in ten build none (the
    /// samplers the environment configures decide on the trace id and the
    /// parent, never on attributes).
    ///
    /// `capacity` is how many attributes the span usually ends with (those
    /// of `attributes` and those [`Span::set`] adds later): the span's list
    /// is made that large once.
    pub(crate) fn start<A: IntoIterator<Item = KeyValue>>(
        tracer: Option<&Tracer>,
        name: &'static str,
        kind: SpanKind,
        parent: impl FnOnce() -> Context,
        capacity: usize,
        attributes: impl FnOnce() -> A,
    ) -> Self {
        Self(tracer.and_then(|tracer| {
            let parent = parent();
            let span = tracer.start(&parent, name, kind, capacity, attributes)?;
            Some(parent.with_span(span))
        }))
    }

    /// `future` with this span current while it runs: spans started inside
    /// are its children and [`super::propagation::current_traceparent`]
    /// names it. (Not an `async fn`, which would hold `future` twice.)
    ///
    /// `future` is pinned where it was made (`std::pin::pin!`) and run
    /// through its pointer: a future passed by value into another is laid
    /// out twice in the caller's state, and the Execute path's futures are
    /// kilobytes, copied on every move and allocated with the request.
    pub(crate) fn run<'a, F: Future>(
        &self,
        future: Pin<&'a mut F>,
    ) -> Either<WithContext<Pin<&'a mut F>>, Pin<&'a mut F>> {
        match &self.0 {
            Some(cx) => Either::Left(future.with_context(cx.clone())),
            None => Either::Right(future),
        }
    }

    /// Whether anything put on this span is recorded.
    pub(crate) fn is_recording(&self) -> bool {
        self.0.as_ref().is_some_and(|cx| cx.span().is_recording())
    }

    /// Sets an attribute when the span records (a span that does not
    /// ignores it: asking first would take the span's lock twice).
    pub(crate) fn set(&self, key: &'static str, value: impl Into<Value>) {
        if let Some(cx) = &self.0 {
            cx.span().set_attribute(KeyValue::new(key, value));
        }
    }

    /// Sets several attributes under one taking of the span's lock.
    pub(crate) fn set_all(&self, attributes: impl IntoIterator<Item = KeyValue>) {
        if let Some(cx) = &self.0 {
            cx.span().set_attributes(attributes);
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

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    use opentelemetry_sdk::{
        trace::{InMemorySpanExporter, Sampler, SpanLimits},
        Resource,
    };

    use super::*;
    use crate::telemetry::tracer::Batching;

    fn traced(sampler: Sampler) -> (Tracer, InMemorySpanExporter) {
        let exporter = InMemorySpanExporter::default();
        let resource = Resource::builder().build();
        let tracer =
            Tracer::new(Box::new(sampler), SpanLimits::default(), exporter.clone(), &resource, Batching::default());
        (tracer, exporter)
    }

    #[test]
    fn attributes_are_built_only_for_spans_that_record_and_unsampled_parents_get_no_children() {
        // Never sampled: no attributes built, and no child under the span.
        let (tracer, exporter) = traced(Sampler::AlwaysOff);
        let built = std::cell::Cell::new(0);
        let attributes = || {
            built.set(built.get() + 1);
            vec![KeyValue::new("k", "v")]
        };
        let server = Span::start(Some(&tracer), "server", SpanKind::Server, Context::new, 1, attributes);
        assert!(!server.is_recording());
        let parent = server.0.clone().expect("a root span is made, sampled or not");
        let child = Span::start(Some(&tracer), "child", SpanKind::Internal, || parent.clone(), 1, attributes);
        assert!(child.0.is_none(), "no child under a span of this process that was not sampled");
        assert_eq!(built.get(), 0);
        server.end();
        drop(parent);
        tracer.force_flush();
        assert!(exporter.get_finished_spans().unwrap().is_empty());

        // A remote parent that was not sampled still gets the SERVER span
        // (the sampler decides, here: always).
        let (tracer, exporter) = traced(Sampler::AlwaysOn);
        let remote =
            SpanContext::new(TraceId::from(7), SpanId::from(9), TraceFlags::default(), true, TraceState::default());
        let caller = Context::new().with_remote_span_context(remote);
        let server = Span::start(Some(&tracer), "server", SpanKind::Server, || caller.clone(), 1, attributes);
        assert!(server.is_recording());
        let parent = server.0.clone().unwrap();
        let child = Span::start(Some(&tracer), "child", SpanKind::Internal, || parent.clone(), 1, attributes);
        assert!(child.is_recording());
        assert_eq!(built.get(), 2);
        child.end();
        server.end();
        tracer.force_flush();
        let spans = exporter.get_finished_spans().unwrap();
        assert_eq!(spans.len(), 2);
        assert!(spans.iter().all(|s| s.attributes.contains(&KeyValue::new("k", "v"))));
        let (child, server) = (&spans[0], &spans[1]);
        assert_eq!((child.name.as_ref(), server.name.as_ref()), ("child", "server"));
        assert_eq!(server.span_context.trace_id(), TraceId::from(7), "the caller's trace");
        assert_eq!(server.parent_span_id, SpanId::from(9));
        assert!(server.parent_span_is_remote);
        assert_eq!(child.span_context.trace_id(), TraceId::from(7));
        assert_eq!(child.parent_span_id, server.span_context.span_id());
        assert!(!child.parent_span_is_remote);
        assert!(server.span_context.is_sampled() && server.start_time <= child.start_time);
        assert!(child.end_time <= server.end_time && server.start_time < server.end_time);
    }
}
