//! The tracer: the OpenTelemetry SDK's, with its batch span processor
//! shipping ended spans from a thread of its own through an exporter
//! (`export.rs` makes the OTLP one).
//!
//! What the gateway adds is only what it chose: the sizes of the queue and
//! of a batch ([`Batching`]), and, in [`Tracer::start`], that a span's
//! attributes are built only when the sampler chose to record it.

use std::time::Duration;

use opentelemetry::{
    trace::{SpanBuilder, SpanContext, SpanKind, TraceContextExt, Tracer as _, TracerProvider as _},
    Context, KeyValue,
};
use opentelemetry_sdk::{
    trace::{
        BatchConfig, BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, ShouldSample, Span,
        SpanExporter, SpanLimits,
    },
    Resource,
};

use crate::env::Env;

/// The name of the tracer's instrumentation scope.
const SCOPE: &str = "toolgate";

/// Makes spans and ships the ended ones; cloned into every observer.
#[derive(Clone, Debug)]
pub struct Tracer {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

/// The batch span processor's sizes. The SDK's `OTEL_BSP_*` variables
/// apply as the SDK reads them (`OTEL_BSP_SCHEDULE_DELAY`, 5000 ms;
/// `OTEL_BSP_EXPORT_TIMEOUT`, 30000 ms), but the queue and a batch default
/// to four times the SDK's: 8192 spans queued and batches of 2048, where
/// the SDK has 2048 and 512. In batches of 512 about two thirds of what the
/// export thread spent went to the exports as such (waking, the request,
/// its answer), not to their spans, and batches four times as large halved
/// what the export thread and the collector took of the gateway's cores
/// (docs/benchmarks.md, "Batches of 2048"). The queue keeps room for three
/// batches beyond the one filling, as the SDK's does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Batching {
    pub max_queue_size: usize,
    pub max_export_batch_size: usize,
}

impl Default for Batching {
    fn default() -> Self {
        Self { max_queue_size: 8192, max_export_batch_size: 2048 }
    }
}

impl Batching {
    /// The defaults, or what `OTEL_BSP_MAX_QUEUE_SIZE` and
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` set (a value that is not a number
    /// leaves the default, as the SDK does).
    pub(crate) fn from_env(env: &Env) -> Self {
        let number = |name: &str| env.get(name).and_then(|v| v.trim().parse::<usize>().ok());
        let default = Self::default();
        Self {
            max_queue_size: number("OTEL_BSP_MAX_QUEUE_SIZE").unwrap_or(default.max_queue_size),
            max_export_batch_size: number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE").unwrap_or(default.max_export_batch_size),
        }
    }

    /// The SDK's batch settings from the environment, with these sizes (a
    /// batch is at most the queue).
    fn config(self) -> BatchConfig {
        BatchConfigBuilder::default()
            .with_max_queue_size(self.max_queue_size.max(1))
            .with_max_export_batch_size(self.max_export_batch_size.max(1))
            .build()
    }
}

impl Tracer {
    /// Spans sampled by `sampler` and held to `limits`, of `resource`,
    /// exported in batches through `exporter` by the SDK's batch processor.
    pub fn new(
        sampler: Box<dyn ShouldSample>,
        limits: SpanLimits,
        exporter: impl SpanExporter + 'static,
        resource: &Resource,
        batching: Batching,
    ) -> Self {
        let processor = BatchSpanProcessor::builder(exporter).with_batch_config(batching.config()).build();
        let provider = SdkTracerProvider::builder()
            .with_sampler(sampler)
            .with_span_limits(limits)
            .with_resource(resource.clone())
            .with_span_processor(processor)
            .build();
        let tracer = provider.tracer(SCOPE);
        Self { provider, tracer }
    }

    /// As [`Tracer::new`] with the sampler and span limits the SDK reads from
    /// the environment (`OTEL_TRACES_SAMPLER` and `_ARG`, default
    /// `parentbased_always_on`; `OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`,
    /// `OTEL_SPAN_EVENT_COUNT_LIMIT`, `OTEL_SPAN_LINK_COUNT_LIMIT`, 128 each).
    pub(crate) fn configured_by_env(
        exporter: impl SpanExporter + 'static,
        resource: &Resource,
        batching: Batching,
    ) -> Self {
        let opentelemetry_sdk::trace::Config { sampler, span_limits, .. } = Default::default();
        Self::new(sampler, span_limits, exporter, resource, batching)
    }

    /// Starts a span under `parent` (the caller's context: empty, or a
    /// remote span), recording when the sampler says so (`attributes` is
    /// called only then; the samplers the environment configures decide by
    /// the trace id and the parent, never by attributes). None under a span
    /// of this process that was not sampled: a child would not be either.
    /// `capacity` is how many attributes the span usually ends with.
    pub(crate) fn start<A: IntoIterator<Item = KeyValue>>(
        &self,
        parent: &Context,
        name: &'static str,
        kind: SpanKind,
        capacity: usize,
        attributes: impl FnOnce() -> A,
    ) -> Option<Span> {
        let parent_span = parent.span();
        let ids = parent_span.span_context();
        if ids.is_valid() && !ids.is_remote() && !parent_span.is_recording() {
            return None;
        }
        Some(self.build(parent, name, kind, capacity, attributes))
    }

    /// Starts a span under a span of this process that records.
    pub(crate) fn start_child<A: IntoIterator<Item = KeyValue>>(
        &self,
        parent: &SpanContext,
        name: &'static str,
        kind: SpanKind,
        capacity: usize,
        attributes: impl FnOnce() -> A,
    ) -> Span {
        let parent = Context::new().with_remote_span_context(parent.clone());
        self.build(&parent, name, kind, capacity, attributes)
    }

    fn build<A: IntoIterator<Item = KeyValue>>(
        &self,
        parent: &Context,
        name: &'static str,
        kind: SpanKind,
        capacity: usize,
        attributes: impl FnOnce() -> A,
    ) -> Span {
        let builder = SpanBuilder::from_name(name).with_kind(kind).with_attributes(Vec::with_capacity(capacity));
        let mut span = self.tracer.build_with_context(builder, parent);
        if opentelemetry::trace::Span::is_recording(&span) {
            opentelemetry::trace::Span::set_attributes(&mut span, attributes());
        }
        span
    }

    /// Exports what has ended and waits for it (tests; at most the SDK's
    /// five seconds).
    pub fn force_flush(&self) {
        let _ = self.provider.force_flush();
    }

    /// Exports what is queued and stops the export thread; what ends after
    /// is not exported.
    pub fn shutdown(&self) {
        let _ = self.provider.shutdown_with_timeout(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_sizes_default_to_four_times_the_sdks_and_the_variables_set_them() {
        assert_eq!(Batching::from_env(&Env::default()), Batching { max_queue_size: 8192, max_export_batch_size: 2048 });
        let env = Env::from_pairs([("OTEL_BSP_MAX_QUEUE_SIZE", " 100 "), ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "x")]);
        assert_eq!(Batching::from_env(&env), Batching { max_queue_size: 100, max_export_batch_size: 2048 });
    }
}
