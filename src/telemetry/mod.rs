//! Logs, traces and metrics. Logs go to stderr. Traces and metrics are
//! exported over OTLP (gRPC) when the standard `OTEL_EXPORTER_OTLP_ENDPOINT`
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
//! past the SDK's full export queue are dropped with one warning (and
//! counted at shutdown).

mod export;
pub(crate) mod metrics;
mod otlp;
pub(crate) mod propagation;
pub(crate) mod semconv;
pub(crate) mod span;
pub(crate) mod throttle;

use std::io::IsTerminal;

use opentelemetry::trace::TracerProvider;
use opentelemetry_sdk::{
    metrics::SdkMeterProvider,
    trace::{SdkTracer, SdkTracerProvider},
    Resource,
};
use tracing_subscriber::{filter::filter_fn, layer::SubscriberExt, util::SubscriberInitExt, Layer};

pub use metrics::Metrics;

/// The way a call came in, the `toolgate.front_door` attribute and label of
/// its span, metrics and audit line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FrontDoor {
    #[default]
    Grpc,
    Mcp,
}

impl FrontDoor {
    pub(crate) fn label(self) -> &'static str {
        match self {
            FrontDoor::Grpc => "grpc",
            FrontDoor::Mcp => "mcp",
        }
    }
}

use crate::env::Env;

/// The default log filter: rmcp narrates every connection at info.
const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";

/// What the gateway records besides its answers.
#[derive(Clone)]
pub struct Observer {
    pub metrics: Metrics,
    /// Makes the spans; none when traces are not exported.
    pub tracer: Option<SdkTracer>,
    /// Put arguments and results on spans (opt-in).
    pub record_content: bool,
}

impl Observer {
    pub fn disabled() -> Self {
        Self { metrics: Metrics::disabled(), tracer: None, record_content: false }
    }
}

/// The installed telemetry; [`Telemetry::shutdown`] flushes what is pending.
pub(crate) struct Telemetry {
    traces: Option<SdkTracerProvider>,
    meters: Option<SdkMeterProvider>,
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

    /// Logs, and OTLP export when the environment asks for it. Must run
    /// inside the Tokio runtime (the exporters' gRPC clients live there).
    pub(crate) fn start(env: &Env) -> Self {
        let disabled = truthy(env, "OTEL_SDK_DISABLED");
        let endpoint = set(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
        let wants = |signal: &str, exporter: &str| {
            !disabled
                && (endpoint || set(env, &format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")))
                && env.get(exporter).is_none_or(|v| v.trim() != "none")
        };
        // Logs first, so that an exporter that cannot be made says why.
        let _ = tracing_subscriber::registry().with(log_filter(env)).with(log_layer(env)).try_init();
        let resource = resource(env);
        let traces =
            wants("TRACES", "OTEL_TRACES_EXPORTER").then(|| export::tracer_provider(env, resource.clone())).flatten();
        let meters = wants("METRICS", "OTEL_METRICS_EXPORTER").then(|| export::meter_provider(resource)).flatten();
        if traces.is_some() || meters.is_some() {
            tracing::info!(traces = traces.is_some(), metrics = meters.is_some(), "exporting telemetry over OTLP");
        }
        Self { traces, meters, record_content: truthy(env, "TOOLGATE_TRACE_CONTENT") }
    }

    /// What the executor should record with.
    pub(crate) fn observer(&self) -> Observer {
        let metrics = match &self.meters {
            Some(provider) => Metrics::new(&opentelemetry::metrics::MeterProvider::meter(provider, "toolgate")),
            None => Metrics::disabled(),
        };
        let tracer = self.traces.as_ref().map(|provider| provider.tracer("toolgate"));
        Observer { metrics, tracer, record_content: self.record_content }
    }

    /// Flushes pending spans and metrics and stops the exporters.
    pub(crate) fn shutdown(self) {
        if let Some(traces) = self.traces {
            let _ = traces.shutdown();
        }
        if let Some(meters) = self.meters {
            let _ = meters.shutdown();
        }
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

/// The global filter: `TOOLGATE_LOG` (or `RUST_LOG`, else `info,rmcp=warn`),
/// with the OpenTelemetry crates' own reports off but the SDK's warnings (see
/// [`log_layer`]). A global filter keeps every disabled callsite of the
/// libraries below (h2, hyper, tonic) at no cost; per-layer filters alone
/// would not.
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

/// The OpenTelemetry SDK's reports that reach the log unless
/// `TOOLGATE_LOG` names the OpenTelemetry crates: the first span dropped
/// because the export queue is full (once), and how many were dropped (at
/// shutdown). It reports each failed export too; the exporters here say so
/// once a minute instead.
const SDK_REPORTS: [&str; 2] = ["BatchSpanProcessor.SpanDroppingStarted", "BatchSpanProcessor.SpansDropped"];

/// Log lines on stderr; of the OpenTelemetry SDK's, only [`SDK_REPORTS`].
fn log_layer<S>(env: &Env) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let everything = names_opentelemetry(user_filter(env));
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_filter(filter_fn(move |meta| {
            everything || meta.target() != "opentelemetry_sdk" || SDK_REPORTS.contains(&meta.name())
        }))
}
