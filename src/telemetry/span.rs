//! The gateway's spans: two per Execute (SERVER and `execute_tool`), on
//! the hot path, made by the SDK's tracer ([`Tracer`]). When traces are not
//! exported there is no tracer and a [`Span`] is nothing: no attribute is
//! even built.
//!
//! A span is owned by the code it measures, not by an OpenTelemetry
//! context: while [`Span::run`] polls a future, a scoped thread-local names
//! the span, and what runs inside finds its parent there
//! ([`Span::child`]), its events' span ([`current_event`]) and the
//! `traceparent` it gives backends ([`current`]). Measured
//! (docs/benchmarks.md, "Spans outside the context"), the context's box,
//! shared pointer and stack of contexts, on every span and every poll, were
//! about a quarter of the instructions exporting every span adds to a call.

use std::{
    future::Future,
    pin::Pin,
    sync::{Mutex, MutexGuard},
    task::Poll,
};

use opentelemetry::{
    trace::{Span as _, SpanContext, SpanKind, Status},
    Context, KeyValue, Value,
};
use opentelemetry_sdk::trace::Span as Recording;

use super::traces::Tracer;

scoped_tls::scoped_thread_local!(static CURRENT: Live);

/// A span being recorded, or none.
pub(crate) struct Span(Option<Live>);

/// A span of this process: its ids, whether it records, and its data under
/// a lock (what runs under it adds events from wherever it is polled).
struct Live {
    context: SpanContext,
    records: bool,
    recording: Mutex<Recording>,
}

impl Live {
    fn of(recording: Recording) -> Self {
        Self {
            context: recording.span_context().clone(),
            records: recording.is_recording(),
            recording: Mutex::new(recording),
        }
    }

    fn recording(&self) -> MutexGuard<'_, Recording> {
        crate::lock::lock(&self.recording)
    }
}

impl Span {
    /// Starts a span under `parent`, the caller's context (empty, or a
    /// remote span), when there is a tracer; `parent` is called only then,
    /// and `attributes` only when the sampler chose to record the span: at
    /// 10 % sampling nine calls in ten build none (the samplers the
    /// environment configures decide on the trace id and the parent, never
    /// on attributes).
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
        Self(tracer.and_then(|tracer| tracer.start(&parent(), name, kind, capacity, attributes)).map(Live::of))
    }

    /// Starts a span under the current one (see [`Span::run`]), or a new
    /// trace when there is none; none under a current span that does not
    /// record (a child would not be sampled either).
    pub(crate) fn child<A: IntoIterator<Item = KeyValue>>(
        tracer: Option<&Tracer>,
        name: &'static str,
        kind: SpanKind,
        capacity: usize,
        attributes: impl FnOnce() -> A,
    ) -> Self {
        let Some(tracer) = tracer else { return Self(None) };
        let recording = match CURRENT.is_set() {
            true => CURRENT.with(|parent| {
                parent.records.then(|| tracer.start_child(&parent.context, name, kind, capacity, attributes))
            }),
            false => tracer.start(&Context::new(), name, kind, capacity, attributes),
        };
        Self(recording.map(Live::of))
    }

    /// `future` with this span current while it is polled: spans started
    /// inside are its children and [`current`] names it.
    ///
    /// `future` is pinned where it was made (`std::pin::pin!`) and run
    /// through its pointer: a future passed by value into another is laid
    /// out twice in the caller's state, and the Execute path's futures are
    /// kilobytes, copied on every move and allocated with the request.
    pub(crate) fn run<'a, F: Future>(&'a self, future: Pin<&'a mut F>) -> Current<'a, F> {
        Current { span: self.0.as_ref(), future }
    }

    /// Whether anything put on this span is recorded.
    pub(crate) fn is_recording(&self) -> bool {
        self.0.as_ref().is_some_and(|live| live.records)
    }

    /// The span's data, while it records.
    fn recording(&self) -> Option<MutexGuard<'_, Recording>> {
        self.0.as_ref().filter(|live| live.records).map(Live::recording)
    }

    /// Sets an attribute when the span records.
    pub(crate) fn set(&self, key: &'static str, value: impl Into<Value>) {
        if let Some(mut recording) = self.recording() {
            recording.set_attribute(KeyValue::new(key, value));
        }
    }

    /// Sets several attributes under one taking of the span's lock.
    pub(crate) fn set_all(&self, attributes: impl IntoIterator<Item = KeyValue>) {
        if let Some(mut recording) = self.recording() {
            recording.set_attributes(attributes);
        }
    }

    pub(crate) fn rename(&self, name: impl FnOnce() -> String) {
        if let Some(mut recording) = self.recording() {
            recording.update_name(name());
        }
    }

    /// Adds an event; `attributes` is called only when the span records.
    pub(crate) fn event(&self, name: &'static str, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(mut recording) = self.recording() {
            recording.add_event(name, attributes());
        }
    }

    /// Marks the span failed.
    pub(crate) fn failed(&self) {
        if let Some(mut recording) = self.recording() {
            recording.set_status(Status::error(""));
        }
    }

    pub(crate) fn end(self) {
        if let Some(live) = self.0 {
            live.recording().end();
        }
    }
}

/// A future run with a span current (see [`Span::run`]).
pub(crate) struct Current<'a, F> {
    span: Option<&'a Live>,
    future: Pin<&'a mut F>,
}

impl<F: Future> Future for Current<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        match this.span {
            Some(live) => CURRENT.set(live, || this.future.as_mut().poll(cx)),
            None => this.future.as_mut().poll(cx),
        }
    }
}

/// Adds an event to the span current on this thread (see [`Span::run`]), if
/// one is recording.
pub(crate) fn current_event(name: &'static str, attributes: impl FnOnce() -> Vec<KeyValue>) {
    if CURRENT.is_set() {
        CURRENT.with(|live| {
            if live.records {
                live.recording().add_event(name, attributes());
            }
        });
    }
}

/// What `f` makes of the ids of the span current on this thread (see
/// [`Span::run`]), if there is one.
pub(crate) fn current<R>(f: impl FnOnce(&SpanContext) -> R) -> Option<R> {
    CURRENT.is_set().then(|| CURRENT.with(|live| f(&live.context)))
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
    use opentelemetry_sdk::{
        trace::{InMemorySpanExporter, Sampler, SpanLimits},
        Resource,
    };

    use std::pin::pin;

    use futures::executor::block_on;

    use super::*;
    use crate::telemetry::{propagation, traces::Batching};

    fn traced(sampler: Sampler) -> (Tracer, InMemorySpanExporter) {
        let exporter = InMemorySpanExporter::default();
        let resource = Resource::builder().build();
        let tracer =
            Tracer::new(Box::new(sampler), SpanLimits::default(), exporter.clone(), &resource, Batching::default());
        (tracer, exporter)
    }

    #[test]
    fn attributes_are_built_only_for_spans_that_record_and_unsampled_parents_get_no_children() {
        // Never sampled: no attributes built, and no child under the span,
        // but backends still get its ids.
        let (tracer, exporter) = traced(Sampler::AlwaysOff);
        let built = std::cell::Cell::new(0);
        let attributes = || {
            built.set(built.get() + 1);
            vec![KeyValue::new("k", "v")]
        };
        let server = Span::start(Some(&tracer), "server", SpanKind::Server, Context::new, 1, attributes);
        assert!(!server.is_recording());
        let ids = server.0.as_ref().expect("a root span is made, sampled or not").context.clone();
        let inside = block_on(server.run(pin!(async {
            let child = Span::child(Some(&tracer), "child", SpanKind::Internal, 1, attributes);
            (child.0.is_none(), propagation::current_traceparent())
        })));
        assert!(inside.0, "no child under a span of this process that was not sampled");
        assert_eq!(inside.1, Some(format!("00-{}-{}-00", ids.trace_id(), ids.span_id())));
        assert_eq!(built.get(), 0);
        server.end();
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
        let server_ids = server.0.as_ref().unwrap().context.clone();
        let child_ids = block_on(server.run(pin!(async {
            current_event("hint", || vec![KeyValue::new("on", "server")]);
            let child = Span::child(Some(&tracer), "child", SpanKind::Internal, 1, attributes);
            assert!(child.is_recording());
            let named = child.run(pin!(async { propagation::current_traceparent() })).await;
            assert_eq!(propagation::current_traceparent(), traceparent(&server_ids), "the server's again");
            let ids = child.0.as_ref().unwrap().context.clone();
            assert_eq!(named, traceparent(&ids), "backends called under the child get the child");
            child.end();
            ids
        })));
        assert_eq!(current(|_| ()), None, "no span is current once the future is polled");
        assert_eq!(built.get(), 2);
        server.end();
        tracer.force_flush();
        let spans = exporter.get_finished_spans().unwrap();
        assert_eq!(spans.len(), 2);
        assert!(spans.iter().all(|s| s.attributes.contains(&KeyValue::new("k", "v"))));
        let (child, server) = (&spans[0], &spans[1]);
        assert_eq!((child.name.as_ref(), server.name.as_ref()), ("child", "server"));
        assert_eq!(server.span_context, server_ids);
        assert_eq!(child.span_context, child_ids);
        assert_eq!(server.span_context.trace_id(), TraceId::from(7), "the caller's trace");
        assert_eq!(server.parent_span_id, SpanId::from(9));
        assert!(server.parent_span_is_remote);
        assert_eq!(child.span_context.trace_id(), TraceId::from(7));
        assert!(child.span_context.is_sampled(), "a sampled parent's child is sampled");
        assert_eq!(child.parent_span_id, server.span_context.span_id());
        assert!(!child.parent_span_is_remote);
        assert_eq!(server.events.len(), 1, "the event went to the span current when it was added");
        assert!(child.events.is_empty());
        assert!(server.span_context.is_sampled() && server.start_time <= child.start_time);
        assert!(child.end_time <= server.end_time && server.start_time < server.end_time);
    }

    #[test]
    fn a_span_without_a_current_one_starts_a_trace() {
        let (tracer, exporter) = traced(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)));
        let alone = Span::child(Some(&tracer), "alone", SpanKind::Internal, 1, Vec::new);
        assert!(alone.is_recording());
        alone.end();
        assert!(Span::child(None, "untraced", SpanKind::Internal, 1, Vec::new).0.is_none());
        tracer.force_flush();
        let spans = exporter.get_finished_spans().unwrap();
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].parent_span_id, SpanId::INVALID);
    }

    fn traceparent(ids: &SpanContext) -> Option<String> {
        Some(format!("00-{}-{}-01", ids.trace_id(), ids.span_id()))
    }
}
