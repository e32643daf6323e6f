//! Logs, traces and metrics. Logs go to stderr. Traces and metrics are
//! exported over OTLP (gRPC or HTTP/protobuf, plain or TLS) when the standard `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (or its `_TRACES_` / `_METRICS_` variant) is set, configured by the other
//! standard `OTEL_*` variables; nothing is exported otherwise, and then the
//! spans below are not even created.
//!
//! What is traced: one SERVER span per RPC (joined to the caller's trace by
//! its `traceparent`), one INTERNAL `execute_tool {tool}` span per call, and
//! `toolgate.repair` / `toolgate.hint` events on them. Arguments and results
//! are recorded only when `TOOLGATE_TRACE_CONTENT` is `1`, `true` or `yes`.
//! An emitted name is never a span name or a metric label. Exporting never
//! blocks a call; a failing collector costs one warning a minute, and spans
//! past the full export queue are dropped with one warning (and counted at
//! shutdown). Spans and metrics are the OpenTelemetry SDK's, sent by
//! `opentelemetry-otlp`.

mod export;
pub(crate) mod metrics;
pub(crate) mod propagation;
pub(crate) mod semconv;
pub(crate) mod span;
pub(crate) mod throttle;
mod traces;

use std::io::IsTerminal;

use opentelemetry_sdk::{metrics::SdkMeterProvider, Resource};
use tracing_subscriber::{filter::filter_fn, layer::SubscriberExt, util::SubscriberInitExt, Layer};

pub use metrics::Metrics;
pub use traces::{Batching, Tracer};

use crate::env::Env;

/// The default log filter: rmcp narrates every connection at info, and
/// warns of every JSON-RPC error it answers (`rmcp::service`: a caller's
/// misspelt tool is a caller's event, which the audit line and the span
/// already record).
const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn,rmcp::service=error";

/// The TLS verifier's reports (rustls-platform-verifier logs every failed
/// verification as an ERROR line of its own): kept out of the log and
/// carried by the exporters' once-a-minute warning instead, whose HTTP
/// client says only "network error" (`export.rs`). A log filter that names
/// the OpenTelemetry crates shows them as they come.
pub(crate) mod tls_failures {
    use std::sync::Mutex;

    use tracing_subscriber::{layer::Context, Layer};

    /// The last failure the verifier reported, not yet said.
    static LAST: Mutex<Option<String>> = Mutex::new(None);

    /// Whether `meta` is the verifier's.
    pub(super) fn said_by(meta: &tracing::Metadata<'_>) -> bool {
        meta.target().starts_with(VERIFIER)
    }

    /// The last failure reported since the last call, taken.
    pub(crate) fn take() -> Option<String> {
        crate::lock::lock(&LAST).take()
    }

    /// Keeps the verifier's reports.
    pub(super) struct Captured;

    impl<S: tracing::Subscriber> Layer<S> for Captured {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            // A `log` record's target is a field of the event (`log.target`).
            let mut message = Message::default();
            event.record(&mut message);
            let target = message.target.as_deref().unwrap_or(event.metadata().target());
            if target.starts_with(VERIFIER) {
                *crate::lock::lock(&LAST) = Some(message.text);
            }
        }
    }

    /// The verifier's target.
    const VERIFIER: &str = "rustls_platform_verifier";

    #[derive(Default)]
    struct Message {
        text: String,
        target: Option<String>,
    }

    impl tracing::field::Visit for Message {
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            match field.name() {
                "log.target" => self.target = Some(value.to_owned()),
                "message" => self.text = value.to_owned(),
                _ => {}
            }
        }

        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.text = format!("{value:?}");
            }
        }
    }
}

/// What the gateway records besides its answers.
#[derive(Clone)]
pub struct Observer {
    pub metrics: Metrics,
    /// Makes the spans; none when traces are not exported.
    pub tracer: Option<Tracer>,
    /// Put arguments and results on spans (opt-in).
    pub record_content: bool,
    /// The metrics as Prometheus text, when `metrics_listen` is set.
    pub scrape: Option<Scrape>,
}

impl Observer {
    pub fn disabled() -> Self {
        Self { metrics: Metrics::disabled(), tracer: None, record_content: false, scrape: None }
    }
}

/// Every metric of the gateway as Prometheus text (`GET /metrics` on
/// `metrics_listen`), read from the same instruments OTLP pushes.
#[derive(Clone)]
pub struct Scrape(prometheus::Registry);

impl Scrape {
    /// The exposition text (format 0.0.4).
    pub fn text(&self) -> String {
        let mut out = String::new();
        match prometheus::TextEncoder::new().encode_utf8(&self.0.gather(), &mut out) {
            Ok(()) => out,
            Err(err) => format!("# the metrics could not be encoded: {err}\n"),
        }
    }
}

/// The installed telemetry; [`Telemetry::shutdown`] flushes what is pending.
pub(crate) struct Telemetry {
    traces: Option<Tracer>,
    meters: Option<SdkMeterProvider>,
    scrape: Option<Scrape>,
    /// Where the gRPC exporters' connections run; stopped last.
    runtime: Option<export::ExportRuntime>,
    record_content: bool,
}

fn set(env: &Env, name: &str) -> bool {
    env.get(name).is_some_and(|v| !v.trim().is_empty())
}

fn truthy(env: &Env, name: &str) -> bool {
    env.flag(name) == Some(true)
}

impl Telemetry {
    /// Logs to stderr only (the commands other than `serve`).
    pub(crate) fn logs_only(env: &Env) {
        let _ = tracing_subscriber::registry().with(log_filter(env)).with(log_layer(env)).try_init();
    }

    /// Logs, and OTLP export when the environment asks for it, and (with
    /// `scraped`) the metrics as Prometheus text besides. Must run inside
    /// the Tokio runtime (the exporters' gRPC clients live there).
    pub(crate) fn start(env: &Env, scraped: bool) -> Self {
        let disabled = truthy(env, "OTEL_SDK_DISABLED");
        let endpoint = set(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
        let wants = |signal: &str, exporter: &str| {
            !disabled
                && (endpoint || set(env, &format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")))
                && env.get(exporter).is_none_or(|v| v.trim() != "none")
        };
        // Logs first, so that an exporter that cannot be made says why.
        let _ = tracing_subscriber::registry()
            .with(log_filter(env))
            .with(log_layer(env))
            .with(tls_failures::Captured)
            .try_init();
        let record_content = truthy(env, "TOOLGATE_TRACE_CONTENT");
        let (traces, metrics) = (wants("TRACES", "OTEL_TRACES_EXPORTER"), wants("METRICS", "OTEL_METRICS_EXPORTER"));
        let registry = scraped.then(prometheus::Registry::new);
        let reader = registry.as_ref().and_then(|registry| {
            let built =
                opentelemetry_prometheus::exporter().with_registry(registry.clone()).without_target_info().build();
            built.map_err(|err| tracing::warn!("the metrics cannot be scraped: {err}")).ok()
        });
        let scrape = reader.as_ref().and(registry).map(Scrape);
        if !traces && !metrics {
            let meters = reader
                .map(|reader| SdkMeterProvider::builder().with_resource(resource(env)).with_reader(reader).build());
            return Self { traces: None, meters, scrape, runtime: None, record_content };
        }
        let runtime = match export::ExportRuntime::start() {
            Ok(runtime) => runtime,
            Err(err) => {
                tracing::warn!("telemetry will not be exported: cannot start its thread: {err}");
                return Self { traces: None, meters: None, scrape: None, runtime: None, record_content };
            }
        };
        let resource = resource(env);
        let traces = traces.then(|| export::tracer(env, &resource, &runtime)).flatten();
        let meters = match (metrics, reader) {
            (true, reader) => export::meter_provider(env, resource, &runtime, reader),
            (false, Some(reader)) => {
                Some(SdkMeterProvider::builder().with_resource(resource).with_reader(reader).build())
            }
            (false, None) => None,
        };
        if traces.is_some() || meters.is_some() {
            tracing::info!(traces = traces.is_some(), metrics = meters.is_some(), "exporting telemetry over OTLP");
        }
        Self { traces, meters, scrape, runtime: Some(runtime), record_content }
    }

    /// What the executor should record with.
    pub(crate) fn observer(&self) -> Observer {
        let metrics = match &self.meters {
            Some(provider) => Metrics::new(&opentelemetry::metrics::MeterProvider::meter(provider, "toolgate")),
            None => Metrics::disabled(),
        };
        Observer {
            metrics,
            tracer: self.traces.clone(),
            record_content: self.record_content,
            scrape: self.scrape.clone(),
        }
    }

    /// Flushes pending spans and metrics and stops the exporters.
    pub(crate) fn shutdown(self) {
        if let Some(traces) = self.traces {
            traces.shutdown();
        }
        if let Some(meters) = self.meters {
            let _ = meters.shutdown();
        }
        drop(self.runtime);
    }
}

/// The service name is `toolgate` unless `OTEL_SERVICE_NAME` (or
/// `OTEL_RESOURCE_ATTRIBUTES`) says otherwise.
fn resource(env: &Env) -> Resource {
    let builder = Resource::builder();
    match set(env, "OTEL_SERVICE_NAME")
        || env.get("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|v| v.contains("service.name"))
    {
        true => builder.build(),
        false => builder.with_service_name("toolgate").build(),
    }
}

/// The global filter: `TOOLGATE_LOG` (or `RUST_LOG`, else `info,rmcp=warn,rmcp::service=error`),
/// with the OpenTelemetry crates' own reports at warnings unless it names
/// them (see [`log_layer`] for which of those are shown). A global filter
/// keeps every disabled callsite of the libraries below (h2, hyper, tonic)
/// at no cost; per-layer filters alone would not.
fn log_filter(env: &Env) -> tracing_subscriber::EnvFilter {
    let user = user_filter(env);
    let mut filter = tracing_subscriber::EnvFilter::try_new(user).unwrap_or_else(|_| DEFAULT_LOG_FILTER.into());
    let extra = match names_opentelemetry(user) {
        true => &[][..],
        false => &["opentelemetry=off", "opentelemetry_sdk=warn", "opentelemetry-otlp=off"][..],
    };
    for directive in extra {
        filter = filter.add_directive(directive.parse().expect("a valid directive"));
    }
    filter
}

fn user_filter(env: &Env) -> &str {
    env.get("TOOLGATE_LOG").or(env.get("RUST_LOG")).unwrap_or(DEFAULT_LOG_FILTER)
}

/// Whether a log filter asks for the OpenTelemetry crates' own logs.
fn names_opentelemetry(filter: &str) -> bool {
    filter.contains("opentelemetry")
}

/// The SDK's reports shown when the log filter does not name the
/// OpenTelemetry crates: the batch processor's first dropped span (its
/// queue full) and the number dropped, at shutdown. A failed export is
/// said once a minute by the exporters here (`export.rs`), not once a
/// batch as the SDK says it.
const SDK_REPORTS: [&str; 2] = ["BatchSpanProcessor.SpanDroppingStarted", "BatchSpanProcessor.SpansDropped"];

/// Log lines on stderr.
fn log_layer<S>(env: &Env) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let all = names_opentelemetry(user_filter(env));
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_filter(filter_fn(move |meta| {
            let sdk = meta.target().starts_with("opentelemetry") && !SDK_REPORTS.contains(&meta.name());
            all || !(sdk || tls_failures::said_by(meta))
        }))
}
