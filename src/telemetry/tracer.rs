//! The gateway's tracer: it makes the spans of [`super::span`], and a
//! thread of its own ships them in batches through an exporter.
//!
//! Why not the OpenTelemetry SDK's tracer and batch processor: measured
//! from outside (docs/benchmarks.md, "The gateway's own tracer"), making
//! and ending the SDK's spans on the request threads, and its queue's moves
//! on its thread, cost more than these: exporting every span left 0.71–0.83
//! of the requests a second at 16 × 4 with the SDK's, 0.84–0.88 with these
//! in the same runs. (What is left splits into making the spans, 4–5
//! points, and encoding and sending them, 3–8: "Making against
//! shipping".) A span here is its [`SpanData`] being filled in, under the
//! lock of the [`super::span::Span`] that owns it (not in an OpenTelemetry
//! context). When it ends, the OTLP exporter's writer writes it, on the
//! thread that ended it ([`Tracer::writing`]), and its bytes are copied
//! onto a plain locked list (an SDK exporter's spans go onto it whole); a
//! busy worker of `serve` copies a handful at a time ([`worker_idle`]).
//! The list is swapped whole for an empty one when it is shipped, and the
//! thread that ships it runs the exports in a runtime of its own, so the
//! gateway's workers never wait on the collector.
//!
//! What is kept of the SDK: its sampler and span limits, built from the
//! environment as the SDK builds them (`OTEL_TRACES_SAMPLER`, `_ARG`,
//! default `parentbased_always_on`; `OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`,
//! `OTEL_SPAN_EVENT_COUNT_LIMIT`, `OTEL_SPAN_LINK_COUNT_LIMIT`, default 128
//! each), its id generator, its span data and events, and its exporter
//! interface. The batch settings are the SDK's variables
//! (`OTEL_BSP_MAX_QUEUE_SIZE`, default 8192 where the SDK's is 2048;
//! `OTEL_BSP_SCHEDULE_DELAY`, 5000 ms; `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`,
//! 2048 where the SDK's is 512, at most the queue size;
//! `OTEL_BSP_EXPORT_TIMEOUT`, 30000 ms; see [`Batching`]), and so are its
//! two reports, under
//! the SDK's names so that what watched its log still matches: a warning
//! when the first span is dropped because the queue is full, and the
//! number dropped at shutdown.

use std::{
    borrow::Cow,
    cell::RefCell,
    future::Future,
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError,
    },
    thread::JoinHandle,
    time::{Duration, Instant, SystemTime},
};

use opentelemetry::{
    trace::{Event, Link, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags},
    Context, InstrumentationScope, KeyValue,
};
use opentelemetry_sdk::{
    error::OTelSdkResult,
    trace::{
        Config, IdGenerator, RandomIdGenerator, SamplingDecision, ShouldSample, SpanData, SpanEvents, SpanExporter,
        SpanLimits, SpanLinks,
    },
    Resource,
};

use crate::env::Env;

/// Makes spans and ships the ended ones; cloned into every observer.
#[derive(Clone)]
pub struct Tracer(Arc<Inner>);

struct Inner {
    sampler: Box<dyn ShouldSample>,
    limits: SpanLimits,
    ids: RandomIdGenerator,
    scope: InstrumentationScope,
    /// Shared with the shipping thread, which holds nothing else of the
    /// tracer: the last clone dropped stops it.
    queue: Arc<Queue>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    /// A tracer dropped without [`Tracer::shutdown`] ships what is queued
    /// and stops its thread, as the SDK's provider did.
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").finish_non_exhaustive()
    }
}

/// The batch processor's settings: the SDK's `OTEL_BSP_*` variables, and
/// two bounds of bytes of the gateway's own.
///
/// The defaults of the queue and of a batch are four times the SDK's
/// (8192 and 2048 spans, where the SDK has 2048 and 512): in batches of
/// 512, about two thirds of what the shipping thread spent went to the
/// exports as such (waking, the request, its answer), not to their spans,
/// and batches four times as large halved what the shipping thread and
/// the collector took of the gateway's cores, measured from outside
/// (docs/benchmarks.md, "Batches of 2048"). The queue keeps room for three
/// batches beyond the one being filled, as the SDK's does; its bytes are
/// bounded by `MAX_QUEUE_BYTES` too. Set, the variables mean what they
/// mean to the SDK.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Batching {
    pub max_queue_size: usize,
    pub scheduled_delay: Duration,
    pub max_export_batch_size: usize,
    pub export_timeout: Duration,
    /// The most bytes of written spans one export carries
    /// (`MAX_EXPORT_BYTES`); not one of the SDK's variables.
    pub max_export_bytes: usize,
    /// The most bytes of written spans queued (`MAX_QUEUE_BYTES`).
    pub max_queue_bytes: usize,
}

/// The most bytes of written spans in one export: gRPC servers, an
/// OpenTelemetry Collector's receiver among them, refuse a message past
/// 4 MiB unless told otherwise, and a refused export loses its batch
/// whole. A batch of 512 spans recorded with their content
/// (`TOOLGATE_TRACE_CONTENT`, up to 4,096 characters of arguments and as
/// many of result a span) can pass it, so a batch also ends where its bytes
/// would: 64 KiB are left for the resource and scope around the spans. A
/// span larger than this alone goes alone.
pub(crate) const MAX_EXPORT_BYTES: usize = 4 * 1024 * 1024 - 64 * 1024;

/// The most bytes of written spans queued: spans past it are dropped and
/// counted as spans past a full queue are. Most spans are a few hundred
/// bytes, and the queue's 8192 fill long before; spans recorded with their
/// content can be kilobytes each, and a queue of them waiting for a
/// collector that is down holds about this much at most (a worker's
/// handful of held spans can pass it).
pub(crate) const MAX_QUEUE_BYTES: usize = 16 * 1024 * 1024;

impl Default for Batching {
    fn default() -> Self {
        Self {
            max_queue_size: 8192,
            scheduled_delay: Duration::from_millis(5000),
            max_export_batch_size: 2048,
            export_timeout: Duration::from_millis(30_000),
            max_export_bytes: MAX_EXPORT_BYTES,
            max_queue_bytes: MAX_QUEUE_BYTES,
        }
    }
}

impl Batching {
    /// The `OTEL_BSP_*` variables, as the SDK reads them: a value that is
    /// not a number leaves the default; the batch is at most the queue.
    pub(crate) fn from_env(env: &Env) -> Self {
        let number = |name: &str| env.get(name).and_then(|v| v.trim().parse::<u64>().ok());
        let default = Self::default();
        let max_queue_size = number("OTEL_BSP_MAX_QUEUE_SIZE").map_or(default.max_queue_size, |n| n as usize);
        let max_export_batch_size =
            number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE").map_or(default.max_export_batch_size, |n| n as usize);
        Self {
            max_queue_size,
            scheduled_delay: number("OTEL_BSP_SCHEDULE_DELAY").map_or(default.scheduled_delay, Duration::from_millis),
            max_export_batch_size: max_export_batch_size.min(max_queue_size).max(1),
            export_timeout: number("OTEL_BSP_EXPORT_TIMEOUT").map_or(default.export_timeout, Duration::from_millis),
            ..default
        }
    }
}

/// The name of the tracer's one instrumentation scope: every span it
/// makes is of this scope.
pub(crate) const SCOPE: &str = "toolgate";

/// What the shipping thread sends batches through.
pub(crate) trait Exporter: Send + 'static {
    fn export(&self, batch: Batch) -> impl Future<Output = OTelSdkResult>;
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult;
}

/// A batch of ended spans, as the exporter takes them.
pub(crate) enum Batch {
    /// Their data ([`Tracer::new`]).
    Data(Vec<SpanData>),
    /// What a [`Writer`] wrote of them, one after the other ([`Tracer::writing`]).
    Written(Vec<u8>),
}

/// Writes an ended span as its exporter sends it, at the end of the list.
pub(crate) type Writer = fn(&SpanData, &mut Vec<u8>);

/// An SDK exporter: it takes the spans' data.
struct Sdk<E>(E);

impl<E: SpanExporter + 'static> Exporter for Sdk<E> {
    async fn export(&self, batch: Batch) -> OTelSdkResult {
        match batch {
            Batch::Data(spans) => self.0.export(spans).await,
            Batch::Written(_) => unreachable!("spans are written only for an exporter made to send them"),
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
}

impl Tracer {
    /// Spans sampled by `sampler` and held to `limits`, exported through
    /// `exporter` on a thread of its own, in a runtime of that thread's.
    pub fn new(
        sampler: Box<dyn ShouldSample>,
        limits: SpanLimits,
        mut exporter: impl SpanExporter + 'static,
        resource: &Resource,
        batching: Batching,
    ) -> Self {
        exporter.set_resource(resource);
        Self::shipping(sampler, limits, Sdk(exporter), None, batching)
    }

    /// As [`Tracer::new`], through an exporter that sends spans as
    /// `writer` writes them: each span is written by the thread that ends
    /// it, where its data is still in that core's cache, and freed there;
    /// the shipping thread only sends the bytes. Measured
    /// (docs/benchmarks.md, "Spans written where they end"), that took up
    /// to 2 µs of the gateway's CPU off every call exporting every span,
    /// though callgrind counts a few hundred instructions more.
    pub(crate) fn writing(
        sampler: Box<dyn ShouldSample>,
        limits: SpanLimits,
        exporter: impl Exporter,
        writer: Writer,
        batching: Batching,
    ) -> Self {
        Self::shipping(sampler, limits, exporter, Some(writer), batching)
    }

    fn shipping(
        sampler: Box<dyn ShouldSample>,
        limits: SpanLimits,
        exporter: impl Exporter,
        writer: Option<Writer>,
        batching: Batching,
    ) -> Self {
        let inner = Arc::new(Inner {
            sampler,
            limits,
            ids: RandomIdGenerator::default(),
            scope: InstrumentationScope::builder(SCOPE).build(),
            queue: Arc::new(Queue::new(batching, writer)),
            thread: Mutex::new(None),
        });
        let shipping = Arc::clone(&inner.queue);
        let thread = std::thread::Builder::new()
            .name("OpenTelemetry.Traces.BatchProcessor".into())
            .spawn(move || {
                // The exports run in a runtime of this thread's own, so that
                // their connection's work never lands on the gateway's
                // workers: it runs while an export waits for its answer.
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the span export runtime starts");
                shipping.ship(&exporter, &runtime);
            })
            .expect("the span export thread starts");
        let _ = inner.queue.thread.set(thread.thread().clone());
        *locked(&inner.thread) = Some(thread);
        Self(inner)
    }

    /// The sampler and span limits of the environment, as the SDK builds
    /// them.
    pub fn configured_by_env() -> (Box<dyn ShouldSample>, SpanLimits) {
        let Config { sampler, span_limits, .. } = Config::default();
        (sampler, span_limits)
    }

    /// Starts a span under `parent` (the caller's context: empty, or a
    /// remote span): a recording one when the sampler records it
    /// (`attributes` called only then), else one that only carries its ids
    /// (so the trace goes on to backends). None under a span of this
    /// process that was not sampled: a child would not be either (every
    /// sampler the environment configures decides by the trace id or by the
    /// parent). Spans under a span of this process are made by
    /// [`Tracer::start_child`].
    pub(crate) fn start<A: IntoIterator<Item = KeyValue>>(
        &self,
        parent: &Context,
        name: &'static str,
        kind: SpanKind,
        capacity: usize,
        attributes: impl FnOnce() -> A,
    ) -> Option<Recording> {
        let inner = &self.0;
        let parent_span = parent.span();
        let parent_context = parent_span.span_context();
        if parent_context.is_valid() && !parent_context.is_remote() && !parent_span.is_recording() {
            return None;
        }
        let trace_id = match parent_context.is_valid() {
            true => parent_context.trace_id(),
            false => inner.ids.new_trace_id(),
        };
        let sampled = inner.sampler.should_sample(Some(parent), trace_id, name, &kind, &[], &[]);
        let flags = match sampled.decision {
            SamplingDecision::RecordAndSample => TraceFlags::SAMPLED,
            _ => TraceFlags::default(),
        };
        let context = SpanContext::new(trace_id, inner.ids.new_span_id(), flags, false, sampled.trace_state);
        let data = (sampled.decision != SamplingDecision::Drop).then(|| {
            let attributes = || attributes().into_iter().chain(sampled.attributes);
            self.data(&context, parent_context, name, kind, capacity, attributes)
        });
        Some(Recording { context, data, tracer: self.clone() })
    }

    /// Starts a span under `parent`, a span of this process that records
    /// and was sampled. The sampler is not asked: every sampler the
    /// environment configures would sample it too, with the parent's trace
    /// state (the parent-based ones follow a sampled parent of this
    /// process; the ratio decides by the trace id, which is the parent's),
    /// and none of them adds attributes.
    pub(crate) fn start_child<A: IntoIterator<Item = KeyValue>>(
        &self,
        parent: &SpanContext,
        name: &'static str,
        kind: SpanKind,
        capacity: usize,
        attributes: impl FnOnce() -> A,
    ) -> Recording {
        let context = SpanContext::new(
            parent.trace_id(),
            self.0.ids.new_span_id(),
            parent.trace_flags(),
            false,
            parent.trace_state().clone(),
        );
        let data = Some(self.data(&context, parent, name, kind, capacity, attributes));
        Recording { context, data, tracer: self.clone() }
    }

    /// The data of the span `context` under `parent`, as it starts.
    fn data<A: IntoIterator<Item = KeyValue>>(
        &self,
        context: &SpanContext,
        parent: &SpanContext,
        name: &'static str,
        kind: SpanKind,
        capacity: usize,
        attributes: impl FnOnce() -> A,
    ) -> Box<SpanData> {
        let inner = &self.0;
        let mut list = Vec::with_capacity(capacity);
        list.extend(attributes());
        let dropped_attributes_count = capped(&mut list, inner.limits.max_attributes_per_span);
        Box::new(SpanData {
            span_context: context.clone(),
            parent_span_id: if parent.is_valid() { parent.span_id() } else { SpanId::INVALID },
            parent_span_is_remote: parent.is_valid() && parent.is_remote(),
            span_kind: kind,
            name: Cow::Borrowed(name),
            start_time: opentelemetry::time::now(),
            end_time: SystemTime::UNIX_EPOCH,
            attributes: list,
            dropped_attributes_count,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: inner.scope.clone(),
        })
    }

    /// Ships what is queued now, and returns once it is shipped (or the
    /// export timeout has passed).
    pub fn force_flush(&self) {
        let queue = &self.0.queue;
        let mut flushes = locked(&queue.flushes);
        flushes.requested += 1;
        let wanted = flushes.requested;
        if let Some(thread) = queue.thread.get() {
            thread.unpark();
        }
        let deadline = Instant::now() + queue.batching.export_timeout;
        while flushes.done < wanted && !queue.stopping.load(Ordering::Acquire) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { return };
            flushes = queue.flushed.wait_timeout(flushes, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Ships what is queued and stops the thread; then says how many spans
    /// were dropped, if any.
    pub fn shutdown(&self) {
        self.0.shutdown();
    }
}

/// How long shutdown waits for busy workers to queue the spans they hold
/// (at most the export timeout): a worker does as it goes idle, and one
/// still busy past this keeps them, unshipped.
const HELD_WAIT: Duration = Duration::from_millis(500);

impl Inner {
    fn shutdown(&self) {
        let Some(thread) = locked(&self.thread).take() else { return };
        // What this thread holds, then what workers still busy hold: each
        // queues it as it goes idle or stops.
        release_held();
        let deadline = Instant::now() + HELD_WAIT.min(self.queue.batching.export_timeout);
        while self.queue.holding.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.queue.stopping.store(true, Ordering::Release);
        thread.thread().unpark();
        let _ = thread.join();
        let dropped = self.queue.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(
                name = "BatchSpanProcessor.SpansDropped",
                dropped_span_count = dropped,
                max_queue_size = self.queue.batching.max_queue_size,
                "spans were dropped because the export queue was full: raise OTEL_BSP_MAX_QUEUE_SIZE, or sample"
            );
        }
    }
}

/// The spans ended and not yet shipped.
struct Queue {
    batching: Batching,
    /// Writes each span where it ends, when the exporter sends what it
    /// writes.
    writer: Option<Writer>,
    spans: Mutex<Pending>,
    dropped: AtomicU64,
    /// How many threads hold spans of this queue ([`Held`]): shutdown
    /// waits for them to queue those first.
    holding: AtomicUsize,
    stopping: AtomicBool,
    /// The shipping thread, woken when a batch is full.
    thread: OnceLock<std::thread::Thread>,
    flushes: Mutex<Flushes>,
    flushed: Condvar,
}

/// Flushes asked for, and flushes done (each ships what was queued when it
/// was asked for).
#[derive(Default)]
struct Flushes {
    requested: u64,
    done: u64,
}

/// Ended spans not yet shipped: their data, or, with a writer, what it
/// wrote of them and where each one's bytes end.
#[derive(Default)]
struct Pending {
    data: Vec<SpanData>,
    written: Vec<u8>,
    ends: Vec<usize>,
}

impl Pending {
    /// Room for `spans` spans, and with a writer `bytes` bytes of them.
    fn with_capacity(writes: bool, spans: usize, bytes: usize) -> Self {
        match writes {
            false => Self { data: Vec::with_capacity(spans), ..Self::default() },
            true => Self { written: Vec::with_capacity(bytes), ends: Vec::with_capacity(spans), ..Self::default() },
        }
    }

    fn len(&self) -> usize {
        self.data.len() + self.ends.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether these spans make a whole batch: `size` spans, or with a
    /// writer `bytes` bytes of them.
    fn full(&self, size: usize, bytes: usize) -> bool {
        self.len() >= size || self.written.len() >= bytes
    }

    /// How many of the first spans go in one batch: at most `size`, and
    /// with a writer as many as fit in `bytes` bytes, but always one.
    fn fitting(&self, size: usize, bytes: usize) -> usize {
        let n = self.len().min(size);
        match self.ends.get(n.wrapping_sub(1)) {
            Some(&end) if end > bytes => self.ends[..n].partition_point(|&end| end <= bytes).max(1),
            _ => n,
        }
    }

    /// Keeps the first `n` spans (fewer than there are) and returns the rest.
    fn split_off(&mut self, n: usize) -> Self {
        if self.ends.is_empty() {
            return Self { data: self.data.split_off(n), ..Self::default() };
        }
        let at = self.ends[n - 1];
        let ends = self.ends.split_off(n).into_iter().map(|end| end - at).collect();
        Self { written: self.written.split_off(at), ends, ..Self::default() }
    }

    /// Puts these spans in front of `later`'s.
    fn put_before(self, later: &mut Self) {
        later.data.splice(0..0, self.data);
        let shift = self.written.len();
        later.written.splice(0..0, self.written);
        later.ends.iter_mut().for_each(|end| *end += shift);
        later.ends.splice(0..0, self.ends);
    }

    fn batch(self) -> Batch {
        match self.ends.is_empty() {
            true => Batch::Data(self.data),
            false => Batch::Written(self.written),
        }
    }
}

/// How many written spans a worker thread holds before it moves them onto
/// their queue.
const HOLD: usize = 16;

thread_local! {
    /// The spans this thread has written and not yet moved onto their
    /// queue.
    static HELD: RefCell<Held> = const {
        RefCell::new(Held { holds: false, queue: None, bytes: Vec::new(), ends: Vec::new(), counted: false })
    };
}

/// Written spans a thread holds: moved onto the queue together, under one
/// lock, so that the queue's lock and its last bytes go from one core's
/// cache to the other's once every [`HOLD`] spans, not once a span, where
/// both workers end spans in turn. Measured from outside
/// (docs/benchmarks.md, "Spans held by their thread"), the gain is within
/// the machine's noise: 0.99–1.05 of the requests a second, round by round.
#[derive(Default)]
struct Held {
    /// Whether this thread holds spans at all: only once a runtime's park
    /// hook has called [`worker_idle`] on it, as it then does each time the
    /// thread goes idle.
    holds: bool,
    /// The queue of the spans held (a span of another queue moves them on).
    queue: Option<Arc<Queue>>,
    bytes: Vec<u8>,
    /// Where each held span's bytes end.
    ends: Vec<usize>,
    /// Whether this thread is counted among those holding spans of its
    /// queue: from the first span it holds until it releases them. Counted
    /// once a handful, not once a span, so that the workers do not trade
    /// the counter's cache line on every call.
    counted: bool,
}

impl Held {
    /// Moves the spans held onto their queue.
    fn release(&mut self) {
        if let (Some(queue), false) = (&self.queue, self.ends.is_empty()) {
            let (bytes, ends) = (&self.bytes, &self.ends);
            if !queue.stopping.load(Ordering::Relaxed) {
                queue.add(ends.len(), |pending, n| {
                    let at = pending.written.len();
                    pending.written.extend_from_slice(&bytes[..ends[n - 1]]);
                    pending.ends.extend(ends[..n].iter().map(|end| at + end));
                });
            }
        }
        if std::mem::take(&mut self.counted) {
            if let Some(queue) = &self.queue {
                queue.holding.fetch_sub(1, Ordering::Release);
            }
        }
        self.bytes.clear();
        self.ends.clear();
    }
}

impl Drop for Held {
    /// A thread that ends without a runtime's stop hook still queues what
    /// it holds, as its locals are torn down.
    fn drop(&mut self) {
        self.release();
    }
}

/// A runtime's park hook (`serve` sets it): moves the spans this worker
/// holds onto their queue as it goes idle, and from then on it holds up to
/// [`HOLD`] of the spans it ends. So a worker holds spans only while it is
/// busy, and the shipping thread's timer and flushes see them once it is
/// not. A thread without the hook queues each span as it ends.
pub(crate) fn worker_idle() {
    with_held(|held| {
        held.holds = true;
        held.release();
    });
}

/// Moves the spans this thread holds onto their queue: a runtime's stop
/// hook, as a worker stops.
pub(crate) fn release_held() {
    with_held(Held::release);
}

fn with_held(f: impl FnOnce(&mut Held)) {
    // A thread being torn down has no held spans left to move.
    let _ = HELD.try_with(|held| f(&mut held.borrow_mut()));
}

impl Queue {
    fn new(batching: Batching, writer: Option<Writer>) -> Self {
        Self {
            batching,
            writer,
            spans: Mutex::new(Pending::with_capacity(writer.is_some(), batching.max_export_batch_size, 0)),
            dropped: AtomicU64::new(0),
            holding: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            thread: OnceLock::new(),
            flushes: Mutex::default(),
            flushed: Condvar::new(),
        }
    }

    /// Queues an ended span (written first, when there is a writer), or
    /// drops it when the queue is full (the first drop is reported once).
    /// A written span may be held on its thread first ([`release_held`]).
    fn push(self: &Arc<Self>, span: Box<SpanData>) {
        if self.stopping.load(Ordering::Relaxed) {
            // Ended after shutdown: nothing ships it any more, as with the SDK.
            return;
        }
        let Some(write) = self.writer else {
            return self.add(1, |pending, _| pending.data.push(*span));
        };
        let hold = |held: &mut Held, span: Box<SpanData>| {
            if held.queue.as_ref().is_some_and(|queue| !Arc::ptr_eq(queue, self)) {
                held.release();
                held.queue = None;
            }
            held.queue.get_or_insert_with(|| Arc::clone(self));
            write(&span, &mut held.bytes);
            // Freed here, where it was made, not by the shipping thread.
            drop(span);
            held.ends.push(held.bytes.len());
            if !held.holds || held.ends.len() >= HOLD {
                held.release();
            } else if !held.counted {
                held.counted = true;
                self.holding.fetch_add(1, Ordering::AcqRel);
            }
        };
        let mut span = Some(span);
        if HELD.try_with(|held| hold(&mut held.borrow_mut(), span.take().expect("taken once"))).is_err() {
            // Ended while this thread is torn down: queued at once.
            if let Some(span) = span {
                hold(&mut Held::default(), span);
            }
        }
    }

    /// Adds `n` spans with `put`, or as many as there is room for: `put`
    /// gets how many that is (none when the queue is full, of spans or of
    /// bytes, and `put` is not called). The rest are dropped and counted,
    /// the first drop reported.
    fn add(&self, n: usize, put: impl FnOnce(&mut Pending, usize)) {
        let (size, bytes) = (self.batching.max_export_batch_size, self.batching.max_export_bytes);
        let mut pending = locked(&self.spans);
        let (before, was_full) = (pending.len(), pending.full(size, bytes));
        let room = match pending.written.len() < self.batching.max_queue_bytes {
            true => self.batching.max_queue_size.saturating_sub(before).min(n),
            false => 0,
        };
        if room > 0 {
            put(&mut pending, room);
        }
        let full = !was_full && pending.full(size, bytes);
        drop(pending);
        if room < n && self.dropped.fetch_add((n - room) as u64, Ordering::Relaxed) == 0 {
            tracing::warn!(
                name = "BatchSpanProcessor.SpanDroppingStarted",
                "a span was dropped because the export queue is full; the number dropped is reported at shutdown"
            );
        }
        if full {
            if let Some(thread) = self.thread.get() {
                thread.unpark();
            }
        }
    }

    /// The shipping thread: a batch whenever one is full, and whatever is
    /// queued every scheduled delay and at shutdown.
    fn ship(&self, exporter: &impl Exporter, runtime: &tokio::runtime::Runtime) {
        let Batching { scheduled_delay, max_export_batch_size: size, export_timeout, max_export_bytes: bytes, .. } =
            self.batching;
        let mut next = Instant::now() + scheduled_delay;
        // The most spans (and bytes of them) the list has held when it was
        // taken: the list put in its place is made that large, so that the
        // request threads do not grow it again (copying every span in it)
        // each time this thread comes late. It stays below twice the queue
        // size (the list grows by doubling), where the SDK's queue
        // allocated a slot for every span of the queue size from the start.
        let writes = self.writer.is_some();
        let (mut capacity, mut written) = (size, 0);
        let mut spare = Pending::with_capacity(writes, capacity, written);
        loop {
            // The flush asked for and not yet done, if any.
            let flush = || {
                let flushes = locked(&self.flushes);
                (flushes.requested > flushes.done).then_some(flushes.requested)
            };
            let now = Instant::now();
            if now < next && !self.stopping.load(Ordering::Acquire) && flush().is_none() {
                std::thread::park_timeout(next - now);
            }
            let stopping = self.stopping.load(Ordering::Acquire);
            let flush = flush();
            let timer = Instant::now() >= next;
            let due = stopping || timer || flush.is_some();
            loop {
                // The whole queue at once, swapped for an empty list made
                // beforehand: the lock is held for a swap, never for a copy.
                let mut taken = {
                    let mut spans = locked(&self.spans);
                    if spans.full(size, bytes) || (due && !spans.is_empty()) {
                        capacity = capacity.max(spans.data.capacity()).max(spans.ends.capacity());
                        written = written.max(spans.written.capacity());
                        std::mem::replace(&mut *spans, std::mem::take(&mut spare))
                    } else {
                        break;
                    }
                };
                while !taken.is_empty() {
                    if !taken.full(size, bytes) && !due {
                        // Not a whole batch, and not yet time: back in front
                        // of what was queued meanwhile.
                        taken.put_before(&mut locked(&self.spans));
                        break;
                    }
                    let n = taken.fitting(size, bytes);
                    let rest = match taken.len() > n {
                        true => taken.split_off(n),
                        false => Pending::default(),
                    };
                    let export = exporter.export(taken.batch());
                    // A failed export is the exporter's to report (export.rs).
                    let _ = runtime.block_on(async { tokio::time::timeout(export_timeout, export).await });
                    taken = rest;
                }
                spare = Pending::with_capacity(writes, capacity, written);
            }
            if timer {
                next = Instant::now() + scheduled_delay;
            }
            if let Some(flush) = flush {
                locked(&self.flushes).done = flush;
                self.flushed.notify_all();
            }
            if stopping {
                let _ = exporter.shutdown_with_timeout(export_timeout);
                return;
            }
        }
    }
}

/// Keeps the first `limit` attributes of `list`; says how many it dropped.
fn capped(list: &mut Vec<KeyValue>, limit: u32) -> u32 {
    let dropped = list.len().saturating_sub(limit as usize);
    list.truncate(limit as usize);
    dropped as u32
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A span being made: its data, while it records, or only its ids. A
/// [`super::span::Span`] holds it (under its lock) while it is made; its
/// data moves into the queue when it ends.
pub(crate) struct Recording {
    context: SpanContext,
    /// Boxed, so that the span moves as a few words: its data is
    /// hundreds of bytes, copied on each move.
    data: Option<Box<SpanData>>,
    tracer: Tracer,
}

impl Recording {
    fn end_at(&mut self, at: SystemTime) {
        if let Some(mut data) = self.data.take() {
            data.end_time = at;
            self.tracer.0.queue.push(data);
        }
    }
}

impl opentelemetry::trace::Span for Recording {
    fn add_event_with_timestamp<T>(&mut self, name: T, timestamp: SystemTime, attributes: Vec<KeyValue>)
    where
        T: Into<Cow<'static, str>>,
    {
        let limits = self.tracer.0.limits;
        if let Some(data) = &mut self.data {
            match data.events.events.len() < limits.max_events_per_span as usize {
                true => {
                    let mut attributes = attributes;
                    let dropped = capped(&mut attributes, limits.max_attributes_per_event);
                    data.events.events.push(Event::new(name, timestamp, attributes, dropped));
                }
                false => data.events.dropped_count += 1,
            }
        }
    }

    fn span_context(&self) -> &SpanContext {
        &self.context
    }

    fn is_recording(&self) -> bool {
        self.data.is_some()
    }

    fn set_attribute(&mut self, attribute: KeyValue) {
        let limit = self.tracer.0.limits.max_attributes_per_span as usize;
        if let Some(data) = &mut self.data {
            match data.attributes.len() < limit {
                true => data.attributes.push(attribute),
                false => data.dropped_attributes_count += 1,
            }
        }
    }

    fn set_status(&mut self, status: Status) {
        if let Some(data) = &mut self.data {
            // Ok > Error > Unset, as the SDK orders them.
            if status > data.status {
                data.status = status;
            }
        }
    }

    fn update_name<T>(&mut self, new_name: T)
    where
        T: Into<Cow<'static, str>>,
    {
        if let Some(data) = &mut self.data {
            data.name = new_name.into();
        }
    }

    fn add_link(&mut self, span_context: SpanContext, attributes: Vec<KeyValue>) {
        let limits = self.tracer.0.limits;
        if let Some(data) = &mut self.data {
            match data.links.links.len() < limits.max_links_per_span as usize {
                true => {
                    let mut attributes = attributes;
                    let dropped = capped(&mut attributes, limits.max_attributes_per_link);
                    data.links.links.push(Link::new(span_context, attributes, dropped));
                }
                false => data.links.dropped_count += 1,
            }
        }
    }

    fn end_with_timestamp(&mut self, timestamp: SystemTime) {
        self.end_at(timestamp);
    }
}

impl Drop for Recording {
    /// A span dropped without being ended (its call was cancelled) ends now,
    /// as the SDK's did.
    fn drop(&mut self) {
        if self.data.is_some() {
            self.end_at(opentelemetry::time::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::Span as _;
    use opentelemetry_sdk::{error::OTelSdkResult, trace::Sampler};

    use super::*;

    /// The SDK's default limits: attributes a span and an event, events a span.
    const MAX_ATTRIBUTES: usize = 128;
    const MAX_EVENTS: usize = 128;

    /// Keeps every batch it is given, and is told of its shutdown.
    #[derive(Clone, Debug, Default)]
    struct Kept {
        batches: Arc<Mutex<Vec<Vec<SpanData>>>>,
        shut: Arc<AtomicBool>,
    }

    impl SpanExporter for Kept {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            locked(&self.batches).push(batch);
            Ok(())
        }

        fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
            self.shut.store(true, Ordering::Relaxed);
            Ok(())
        }
    }

    impl Kept {
        fn sizes(&self) -> Vec<usize> {
            locked(&self.batches).iter().map(Vec::len).collect()
        }

        fn spans(&self) -> Vec<SpanData> {
            locked(&self.batches).iter().flatten().cloned().collect()
        }
    }

    fn tracer(batching: Batching) -> (Tracer, Kept) {
        limited(batching, SpanLimits::default())
    }

    fn limited(batching: Batching, limits: SpanLimits) -> (Tracer, Kept) {
        let kept = Kept::default();
        let tracer =
            Tracer::new(Box::new(Sampler::AlwaysOn), limits, kept.clone(), &Resource::builder().build(), batching);
        (tracer, kept)
    }

    fn span(tracer: &Tracer, name: &'static str) -> Recording {
        tracer.start(&Context::new(), name, SpanKind::Internal, 1, || [KeyValue::new("k", name)]).expect("a root span")
    }

    #[test]
    fn a_full_batch_ships_at_once_and_the_rest_at_shutdown() {
        let batching =
            Batching { max_export_batch_size: 2, scheduled_delay: Duration::from_secs(60), ..Batching::default() };
        let (tracer, kept) = tracer(batching);
        for name in ["a", "b", "c", "d", "e"] {
            span(&tracer, name).end();
        }
        let waited = Instant::now();
        while kept.sizes().len() < 2 && waited.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(kept.sizes(), [2, 2], "two full batches, long before the scheduled delay");
        tracer.shutdown();
        assert_eq!(kept.sizes(), [2, 2, 1], "what was left, at shutdown");
        assert!(kept.shut.load(Ordering::Relaxed), "the exporter is shut down");
        let names: Vec<String> = kept.spans().iter().map(|s| s.name.to_string()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
        // A span ended after shutdown is not shipped, and not counted as dropped.
        span(&tracer, "late").end();
        assert_eq!(kept.spans().len(), 5);
        assert_eq!(tracer.0.queue.dropped.load(Ordering::Relaxed), 0);
    }

    /// Holds its first export until opened, and says when it holds it.
    #[derive(Clone, Debug, Default)]
    struct Gate {
        kept: Kept,
        state: Arc<(Mutex<(bool, bool)>, Condvar)>,
    }

    impl Gate {
        /// In an export: says it holds one, and waits until opened.
        fn pass(&self) {
            let (state, changed) = &*self.state;
            let mut state = locked(state);
            state.0 = true;
            changed.notify_all();
            while !state.1 {
                state = changed.wait(state).unwrap();
            }
        }

        /// Waits until an export is held, runs `meanwhile`, and opens.
        fn open_after(&self, meanwhile: impl FnOnce()) {
            let (state, changed) = &*self.state;
            let mut held = locked(state);
            while !held.0 {
                held = changed.wait(held).unwrap();
            }
            meanwhile();
            held.1 = true;
            changed.notify_all();
        }

        /// Lets every export through.
        fn open(&self) {
            let (state, changed) = &*self.state;
            locked(state).1 = true;
            changed.notify_all();
        }
    }

    impl SpanExporter for Gate {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.pass();
            self.kept.export(batch).await
        }
    }

    /// Batches of two, a queue of `queue` spans, shipped only when full.
    fn pairs_queued(queue: usize) -> Batching {
        Batching {
            max_queue_size: queue,
            max_export_batch_size: 2,
            scheduled_delay: Duration::from_secs(60),
            ..Batching::default()
        }
    }

    #[test]
    fn spans_past_a_full_queue_are_dropped_and_counted() {
        let batching = pairs_queued(2);
        let gate = Gate::default();
        let tracer = Tracer::new(
            Box::new(Sampler::AlwaysOn),
            SpanLimits::default(),
            gate.clone(),
            &Resource::builder().build(),
            batching,
        );
        // Two fill a batch, which the thread takes and holds in its export.
        span(&tracer, "1").end();
        span(&tracer, "2").end();
        gate.open_after(|| {
            // Two fill the queue again; three find it full.
            for name in ["3", "4", "5", "6", "7"] {
                span(&tracer, name).end();
            }
            assert_eq!(tracer.0.queue.dropped.load(Ordering::Relaxed), 3);
        });
        tracer.shutdown();
        let names: Vec<String> = gate.kept.spans().iter().map(|s| s.name.to_string()).collect();
        assert_eq!(names, ["1", "2", "3", "4"], "what the queue held is shipped, the rest counted");
    }

    /// Keeps each written batch, holding the first until opened.
    #[derive(Clone, Default)]
    struct Lines {
        batches: Arc<Mutex<Vec<String>>>,
        gate: Gate,
    }

    impl Exporter for Lines {
        async fn export(&self, batch: Batch) -> OTelSdkResult {
            let Batch::Written(bytes) = batch else { panic!("a writing tracer's batches are written") };
            self.gate.pass();
            locked(&self.batches).push(String::from_utf8(bytes).unwrap());
            Ok(())
        }

        fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    /// A span written as its name on a line.
    fn line(data: &SpanData, out: &mut Vec<u8>) {
        out.extend_from_slice(data.name.as_bytes());
        out.push(b'\n');
    }

    #[test]
    fn written_spans_ship_in_whole_batches_split_where_spans_end() {
        let batching = pairs_queued(5);
        let lines = Lines::default();
        let tracer = Tracer::writing(Box::new(Sampler::AlwaysOn), SpanLimits::default(), lines.clone(), line, batching);
        // Two fill a batch, which the thread takes and holds in its export.
        span(&tracer, "1").end();
        span(&tracer, "2").end();
        lines.gate.open_after(|| {
            // Five fill the queue; the sixth is dropped.
            for name in ["3", "4", "5", "6", "7", "8"] {
                span(&tracer, name).end();
            }
            assert_eq!(tracer.0.queue.dropped.load(Ordering::Relaxed), 1);
        });
        // The five go as two whole batches, the last one back in the queue,
        // in front of the one ended next.
        let waited = Instant::now();
        while locked(&lines.batches).len() < 3 && waited.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        span(&tracer, "9").end();
        tracer.shutdown();
        assert_eq!(*locked(&lines.batches), ["1\n2\n", "3\n4\n", "5\n6\n", "7\n9\n"]);
    }

    #[test]
    fn a_batch_also_ends_where_its_bytes_would_pass_the_most_one_export_carries() {
        // Room for a hundred spans, but five bytes: two spans of two bytes.
        let batching = Batching {
            max_export_batch_size: 100,
            max_export_bytes: 5,
            scheduled_delay: Duration::from_secs(60),
            ..Batching::default()
        };
        let (tracer, lines) = writing(batching);
        for name in ["1", "2", "3", "a-long-name", "4", "5", "6"] {
            span(&tracer, name).end();
        }
        // A span larger than the most goes alone; what is left of a batch
        // waits (shipped here at shutdown).
        let waited = Instant::now();
        let shipped = || locked(&lines.batches).len();
        while (shipped() < 4 || queued(&tracer) != 1) && waited.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!((shipped(), queued(&tracer)), (4, 1), "the last span waits for more, as a batch not yet full does");
        tracer.shutdown();
        assert_eq!(*locked(&lines.batches), ["1\n2\n", "3\n", "a-long-name\n", "4\n5\n", "6\n"]);
    }

    #[test]
    fn spans_past_the_most_bytes_queued_are_dropped_and_counted() {
        let batching = Batching { max_queue_bytes: 5, scheduled_delay: Duration::from_secs(60), ..Batching::default() };
        let (tracer, lines) = writing(batching);
        for name in ["1", "2", "3", "4"] {
            span(&tracer, name).end();
        }
        // Six bytes queued are past five: the fourth span has no room.
        assert_eq!(tracer.0.queue.dropped.load(Ordering::Relaxed), 1);
        tracer.shutdown();
        assert_eq!(*locked(&lines.batches), ["1\n2\n3\n"]);
    }

    /// Spans in the queue of `tracer`, not yet taken to be shipped.
    fn queued(tracer: &Tracer) -> usize {
        locked(&tracer.0.queue.spans).len()
    }

    /// A writing tracer whose batches go to the lines it returns, shipped
    /// at shutdown (or when `batching` says).
    fn writing(batching: Batching) -> (Tracer, Lines) {
        let lines = Lines::default();
        lines.gate.open();
        (Tracer::writing(Box::new(Sampler::AlwaysOn), SpanLimits::default(), lines.clone(), line, batching), lines)
    }

    #[test]
    fn a_worker_holds_its_spans_while_busy_and_queues_them_idle_or_a_handful_at_a_time() {
        let batching = Batching { scheduled_delay: Duration::from_secs(60), ..Batching::default() };
        let (tracer, lines) = writing(batching);
        let (other, other_lines) = writing(batching);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // Before a runtime's park hook has run, each span is queued as it ends.
                span(&tracer, "a").end();
                assert_eq!(queued(&tracer), 1);
                worker_idle();
                span(&tracer, "b").end();
                span(&tracer, "c").end();
                assert_eq!(queued(&tracer), 1, "held while the worker is busy");
                worker_idle();
                assert_eq!(queued(&tracer), 3, "queued as it goes idle");
                for _ in 1..HOLD {
                    span(&tracer, "h").end();
                }
                assert_eq!(queued(&tracer), 3);
                span(&tracer, "h").end();
                assert_eq!(queued(&tracer), 3 + HOLD, "a handful queued together");
                // A span of another tracer first sends the held ones to their queue.
                span(&tracer, "d").end();
                span(&other, "x").end();
                assert_eq!((queued(&tracer), queued(&other)), (4 + HOLD, 0));
                release_held();
                assert_eq!(queued(&other), 1);
            });
        });
        tracer.shutdown();
        other.shutdown();
        assert_eq!(locked(&lines.batches).concat(), format!("a\nb\nc\n{}d\n", "h\n".repeat(HOLD)));
        assert_eq!(locked(&other_lines.batches).concat(), "x\n");
    }

    #[test]
    fn held_spans_past_a_full_queue_are_dropped_and_counted() {
        let batching = Batching {
            max_queue_size: 5,
            max_export_batch_size: 5,
            scheduled_delay: Duration::from_secs(60),
            ..Batching::default()
        };
        let (tracer, lines) = writing(batching);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                worker_idle();
                for name in ["1", "2", "3", "4", "5", "6", "7"] {
                    span(&tracer, name).end();
                }
                release_held();
            });
        });
        tracer.shutdown();
        assert_eq!(tracer.0.queue.dropped.load(Ordering::Relaxed), 2);
        assert_eq!(locked(&lines.batches).concat(), "1\n2\n3\n4\n5\n");
    }

    #[test]
    fn shutdown_waits_for_a_busy_worker_to_queue_what_it_holds_but_not_forever() {
        let batching = Batching { scheduled_delay: Duration::from_secs(60), ..Batching::default() };
        let (tracer, lines) = writing(batching);
        let (held, shutting) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                worker_idle();
                span(&tracer, "held").end();
                held.send(()).unwrap();
                // Still busy as shutdown begins; idle a moment later.
                std::thread::sleep(Duration::from_millis(50));
                worker_idle();
            });
            shutting.recv().unwrap();
            tracer.shutdown();
        });
        assert_eq!(locked(&lines.batches).concat(), "held\n", "queued while shutdown waited, then shipped");
        assert_eq!(tracer.0.queue.holding.load(Ordering::Relaxed), 0);

        // A worker that stays busy holds shutdown up for the export timeout
        // at most; what it holds is not shipped.
        let batching = Batching { export_timeout: Duration::from_millis(100), ..batching };
        let (tracer, lines) = writing(batching);
        let (held, shutting) = std::sync::mpsc::channel();
        let (shut, done) = std::sync::mpsc::channel();
        let busy = &tracer;
        std::thread::scope(|scope| {
            scope.spawn(move || {
                worker_idle();
                span(busy, "kept").end();
                held.send(()).unwrap();
                done.recv().unwrap();
                worker_idle();
            });
            shutting.recv().unwrap();
            tracer.shutdown();
            shut.send(()).unwrap();
        });
        assert!(locked(&lines.batches).is_empty());

        // A thread that ends without the stop hook queues what it holds.
        // Joined, not scoped: a scope may end before the thread's locals
        // are torn down, a join waits for it.
        let (tracer, lines) = writing(Batching { scheduled_delay: Duration::from_secs(60), ..Batching::default() });
        let ending = tracer.clone();
        std::thread::spawn(move || {
            worker_idle();
            span(&ending, "ended").end();
        })
        .join()
        .unwrap();
        assert_eq!(queued(&tracer), 1);
        tracer.shutdown();
        assert_eq!(locked(&lines.batches).concat(), "ended\n");
    }

    #[test]
    fn a_span_dropped_unended_ends_then_and_flush_ships_it() {
        let (tracer, kept) = tracer(Batching::default());
        let recording = span(&tracer, "cancelled");
        assert!(recording.is_recording());
        drop(recording);
        tracer.force_flush();
        let spans = kept.spans();
        assert_eq!(spans.len(), 1);
        assert!(spans[0].end_time >= spans[0].start_time && spans[0].end_time > SystemTime::UNIX_EPOCH);
    }

    #[test]
    fn a_tracer_dropped_without_shutdown_ships_what_is_queued_and_stops() {
        let batching = Batching { scheduled_delay: Duration::from_secs(60), ..Batching::default() };
        let (tracer, kept) = tracer(batching);
        span(&tracer, "queued").end();
        let spare = tracer.clone();
        drop(tracer);
        assert!(kept.spans().is_empty() && !kept.shut.load(Ordering::Relaxed), "a clone still holds it");
        drop(spare);
        assert_eq!(kept.spans().len(), 1);
        assert!(kept.shut.load(Ordering::Relaxed));
    }

    #[test]
    fn limits_status_and_name_are_the_sdks() {
        let (tracer, kept) = tracer(Batching::default());
        let mut recording = span(&tracer, "first");
        for i in 0..MAX_ATTRIBUTES + 1 {
            recording.set_attribute(KeyValue::new("n", i as i64));
        }
        recording.add_event("wide", vec![KeyValue::new("a", 1); MAX_ATTRIBUTES + 3]);
        for _ in 0..MAX_EVENTS + 1 {
            recording.add_event("e", vec![]);
        }
        recording.set_status(Status::error("broke"));
        recording.set_status(Status::Unset);
        recording.update_name("second");
        recording.end();
        let mut ok = span(&tracer, "ok");
        ok.set_status(Status::Ok);
        ok.set_status(Status::error("later"));
        ok.end();
        tracer.force_flush();
        let spans = kept.spans();
        let first = &spans[0];
        assert_eq!(first.name, "second");
        assert_eq!(first.attributes.len(), MAX_ATTRIBUTES, "the one given at start and 127 more");
        assert_eq!(first.dropped_attributes_count, 2);
        assert_eq!((first.events.len(), first.events.dropped_count), (MAX_EVENTS, 2));
        let wide = &first.events[0];
        assert_eq!((wide.attributes.len(), wide.dropped_attributes_count), (MAX_ATTRIBUTES, 3));
        assert_eq!(first.status, Status::error("broke"), "Unset does not replace Error");
        assert_eq!(spans[1].status, Status::Ok, "Error does not replace Ok");
        let many = tracer.start(&Context::new(), "many", SpanKind::Internal, 1, || {
            (0..MAX_ATTRIBUTES + 4).map(|i| KeyValue::new("n", i as i64))
        });
        let many = many.expect("a root span");
        drop(many);
        tracer.force_flush();
        let many = kept.spans().pop().unwrap();
        assert_eq!((many.attributes.len(), many.dropped_attributes_count), (MAX_ATTRIBUTES, 4));
    }

    #[test]
    fn the_limits_given_hold_for_attributes_events_and_links() {
        let limits = SpanLimits {
            max_attributes_per_span: 2,
            max_events_per_span: 1,
            max_attributes_per_event: 1,
            max_links_per_span: 1,
            max_attributes_per_link: 1,
        };
        let (tracer, kept) = limited(Batching::default(), limits);
        let mut recording =
            tracer.start(&Context::new(), "s", SpanKind::Internal, 1, || vec![KeyValue::new("a", 1); 3]).unwrap();
        recording.set_attribute(KeyValue::new("b", 2));
        recording.add_event("e", vec![KeyValue::new("c", 3); 2]);
        recording.add_event("f", vec![]);
        let linked = recording.span_context().clone();
        recording.add_link(linked.clone(), vec![KeyValue::new("d", 4); 3]);
        recording.add_link(linked, vec![]);
        recording.end();
        tracer.force_flush();
        let span = kept.spans().pop().unwrap();
        assert_eq!((span.attributes.len(), span.dropped_attributes_count), (2, 2));
        assert_eq!((span.events.len(), span.events.dropped_count), (1, 1));
        assert_eq!((span.events[0].attributes.len(), span.events[0].dropped_attributes_count), (1, 1));
        assert_eq!((span.links.len(), span.links.dropped_count), (1, 1));
        assert_eq!((span.links[0].attributes.len(), span.links[0].dropped_attributes_count), (1, 2));
    }

    #[test]
    fn a_span_the_sampler_drops_carries_ids_and_records_nothing() {
        let kept = Kept::default();
        let resource = Resource::builder().build();
        let off = Box::new(Sampler::AlwaysOff);
        let tracer = Tracer::new(off, SpanLimits::default(), kept.clone(), &resource, Batching::default());
        let built = std::cell::Cell::new(false);
        let recording = tracer.start(&Context::new(), "n", SpanKind::Server, 4, || {
            built.set(true);
            [KeyValue::new("k", "v")]
        });
        let recording = recording.expect("a root span, sampled or not");
        assert!(!recording.is_recording() && !built.get());
        assert!(recording.span_context().is_valid() && !recording.span_context().is_sampled());
        drop(recording);
        tracer.force_flush();
        assert!(kept.spans().is_empty());
    }

    #[test]
    fn batching_reads_the_sdks_variables() {
        let env = |pairs: &[(&str, &str)]| Batching::from_env(&Env::from_pairs(pairs.iter().copied()));
        assert_eq!(env(&[]), Batching::default());
        let set = env(&[
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
            ("OTEL_BSP_SCHEDULE_DELAY", "250"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1000"),
            ("OTEL_BSP_EXPORT_TIMEOUT", "7000"),
        ]);
        let expected = Batching {
            max_queue_size: 100,
            scheduled_delay: Duration::from_millis(250),
            max_export_batch_size: 100,
            export_timeout: Duration::from_millis(7000),
            ..Batching::default()
        };
        assert_eq!(set, expected, "a batch is at most the queue");
        assert_eq!(env(&[("OTEL_BSP_MAX_QUEUE_SIZE", "lots")]), Batching::default());
    }
}
