//! The OTLP exporters, `opentelemetry-otlp`'s, made from the standard
//! variables, and what the gateway puts around them:
//!
//! - **The protocol** is `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` /
//!   `_METRICS_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`: `grpc` (the
//!   default, on 4317) or `http/protobuf` (on 4318, the signal's path
//!   appended to the general endpoint).
//! - **TLS**: an `https` endpoint is verified against the system's roots and
//!   `OTEL_EXPORTER_OTLP_CERTIFICATE` (a PEM file); `_CLIENT_CERTIFICATE`
//!   and `_CLIENT_KEY` give the gateway a client certificate. Each has its
//!   `TRACES_` / `METRICS_` variant, read first.
//! - The crate reads the rest itself: endpoints, `_TIMEOUT`, `_HEADERS`,
//!   `_COMPRESSION` (`gzip`).
//! - **Bounded exports**: attribute values are cut to
//!   `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT` characters (4096 by default; the
//!   `OTEL_SPAN_` variable first), and a batch goes as several requests
//!   when its spans would pass 4 MiB less 64 KiB: a gRPC server, a
//!   collector's among them, refuses a message past 4 MiB unless told
//!   otherwise, and would lose the batch whole.
//! - **Quiet failures**: a failed export is one warning a minute at most,
//!   not one per batch.
//! - **A runtime of their own** ([`ExportRuntime`]): the gRPC exporters'
//!   connections run on a thread of their own, not on the gateway's
//!   workers.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use opentelemetry::{Array, KeyValue, StringValue, Value};
use opentelemetry_otlp::{
    tonic_types::transport::{Certificate, ClientTlsConfig, Identity},
    MetricExporter, Protocol, SpanExporter, WithExportConfig, WithHttpConfig, WithTonicConfig,
};
use opentelemetry_sdk::{
    error::OTelSdkResult,
    metrics::{data::ResourceMetrics, exporter::PushMetricExporter, SdkMeterProvider, Temporality},
    trace::SpanData,
    Resource,
};

use super::traces::{Batching, Tracer};
use crate::env::Env;

/// A Tokio runtime of the exporters' own, on a thread of its own. The
/// gRPC exporters are made inside it, so tonic's tasks for their
/// connections (where a batch is encoded and written, and the answer
/// read) run there: measured from outside, on the gateway's workers they
/// took 3 % of the workers' time exporting every span
/// (docs/benchmarks.md, "Spans through the SDK"). The SDK's batch
/// processor and metric reader wait for each export on threads of their
/// own.
pub(crate) struct ExportRuntime {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ExportRuntime {
    pub(crate) fn start() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name("toolgate-otlp".into()).spawn(move || {
            runtime.block_on(async {
                let _ = stopped.await;
            });
        })?;
        Ok(Self { handle, stop: Some(stop), thread: Some(thread) })
    }

    /// Runs `make` inside the runtime: what it spawns runs there.
    fn within<T>(&self, make: impl FnOnce() -> T) -> T {
        let _inside = self.handle.enter();
        make()
    }
}

impl Drop for ExportRuntime {
    /// Stops the runtime once the exporters are shut down (their last
    /// exports ran on it).
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// At most one warning per this long.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The most bytes of spans in one export: gRPC servers refuse a message
/// past 4 MiB unless told otherwise; 64 KiB are left for the resource and
/// scope around the spans. A span larger than this alone goes alone.
const MAX_EXPORT_BYTES: usize = 4 * 1024 * 1024 - 64 * 1024;

/// The default of `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`, in characters (the
/// specification's default is no limit).
const VALUE_LENGTH_LIMIT: usize = 4096;

/// Remembers when it last warned.
#[derive(Debug, Default)]
struct Warnings {
    last: Mutex<Option<Instant>>,
}

impl Warnings {
    fn failed(&self, what: &str, error: &dyn std::fmt::Display) {
        let mut last = crate::lock::lock(&self.last);
        // The cause the HTTP client does not give ("network error"): the
        // TLS verifier's last report, if it made one since.
        let tls = super::tls_failures::take()
            .filter(|_| error.to_string().contains("network error"))
            .map(|why| format!(": {why}"))
            .unwrap_or_default();
        if last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            tracing::warn!(
                "{what} could not be exported ({error}{tls}); dropping telemetry until the collector answers"
            );
        }
    }
}

/// Spans cut to their value limit and sent in requests a collector takes.
#[derive(Debug)]
struct Bounded<E> {
    inner: E,
    value_limit: usize,
    warnings: Warnings,
}

impl<E: opentelemetry_sdk::trace::SpanExporter> opentelemetry_sdk::trace::SpanExporter for Bounded<E> {
    async fn export(&self, mut batch: Vec<SpanData>) -> OTelSdkResult {
        for span in &mut batch {
            truncate_values(span, self.value_limit);
        }
        let mut result = Ok(());
        for part in parts(batch, MAX_EXPORT_BYTES) {
            if let Err(error) = self.inner.export(part).await {
                self.warnings.failed("spans", &error);
                result = Err(error);
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// `batch` split into runs of spans whose estimated encoding stays within
/// `max_bytes` each.
fn parts(batch: Vec<SpanData>, max_bytes: usize) -> Vec<Vec<SpanData>> {
    let mut parts = Vec::new();
    let mut part = Vec::new();
    let mut bytes = 0;
    for span in batch {
        let size = encoded_size(&span);
        if !part.is_empty() && bytes + size > max_bytes {
            parts.push(std::mem::take(&mut part));
            bytes = 0;
        }
        bytes += size;
        part.push(span);
    }
    if !part.is_empty() {
        parts.push(part);
    }
    parts
}

/// What a span takes in an OTLP request, a little more rather than less:
/// its text and values, and a generous allowance for the protobuf's tags,
/// lengths, ids and times.
fn encoded_size(span: &SpanData) -> usize {
    fn attributes(list: &[KeyValue]) -> usize {
        list.iter().map(|kv| 12 + kv.key.as_str().len() + value_size(&kv.value)).sum()
    }
    let events: usize = span.events.iter().map(|e| 24 + e.name.len() + attributes(&e.attributes)).sum();
    let links: usize = span.links.iter().map(|l| 64 + attributes(&l.attributes)).sum();
    let status = match &span.status {
        opentelemetry::trace::Status::Error { description } => description.len(),
        _ => 0,
    };
    128 + span.name.len() + status + attributes(&span.attributes) + events + links
}

fn value_size(value: &Value) -> usize {
    match value {
        Value::String(s) => s.as_str().len(),
        Value::Array(Array::String(list)) => list.iter().map(|s| 4 + s.as_str().len()).sum(),
        Value::Array(Array::Bool(list)) => 2 * list.len(),
        Value::Array(Array::I64(list)) => 11 * list.len(),
        Value::Array(Array::F64(list)) => 9 * list.len(),
        _ => 11,
    }
}

/// Cuts every string value of `span` (its attributes', its events' and
/// links') to `limit` characters.
fn truncate_values(span: &mut SpanData, limit: usize) {
    let cut = |list: &mut Vec<KeyValue>| list.iter_mut().for_each(|kv| truncate_value(&mut kv.value, limit));
    cut(&mut span.attributes);
    span.events.events.iter_mut().for_each(|e| cut(&mut e.attributes));
    span.links.links.iter_mut().for_each(|l| cut(&mut l.attributes));
}

fn truncate_value(value: &mut Value, limit: usize) {
    let cut = |s: &mut StringValue| {
        // No more bytes than the limit: no more characters either.
        if s.as_str().len() <= limit {
            return;
        }
        if let Some((at, _)) = s.as_str().char_indices().nth(limit) {
            *s = StringValue::from(s.as_str()[..at].to_owned());
        }
    };
    match value {
        Value::String(s) => cut(s),
        Value::Array(Array::String(list)) => list.iter_mut().for_each(cut),
        _ => {}
    }
}

struct QuietMetrics {
    inner: MetricExporter,
    warnings: Warnings,
}

impl PushMetricExporter for QuietMetrics {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        if let Err(error) = &result {
            self.warnings.failed("metrics", error);
        }
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

/// How one signal is sent: the protocol, and the TLS material read from
/// the files the variables name.
struct Transport {
    protocol: Protocol,
    https: bool,
    certificate: Option<Vec<u8>>,
    /// The client's certificate and key, PEM.
    client: Option<(Vec<u8>, Vec<u8>)>,
    timeout: Duration,
}

impl Transport {
    /// The settings of `signal` (`TRACES` or `METRICS`); an error names
    /// the variable that cannot be used.
    fn from_env(env: &Env, signal: &str) -> Result<Self, String> {
        let var = |name: &str| {
            let specific = format!("OTEL_EXPORTER_OTLP_{signal}_{name}");
            match env.get(&specific).filter(|v| !v.trim().is_empty()) {
                Some(value) => Some((specific, value.trim())),
                None => {
                    let general = format!("OTEL_EXPORTER_OTLP_{name}");
                    env.get(&general).filter(|v| !v.trim().is_empty()).map(|value| (general, value.trim()))
                }
            }
        };
        let protocol = match var("PROTOCOL") {
            None => Protocol::Grpc,
            Some((_, "grpc")) => Protocol::Grpc,
            Some((_, "http/protobuf")) => Protocol::HttpBinary,
            Some((name, other)) => {
                return Err(format!("{name}={other} is not a protocol this gateway sends (grpc, http/protobuf)"))
            }
        };
        let https =
            var("ENDPOINT").is_some_and(|(_, url)| url.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://")));
        let file = |name: &str| -> Result<Option<Vec<u8>>, String> {
            match var(name) {
                None => Ok(None),
                Some((var, path)) => {
                    std::fs::read(path).map(Some).map_err(|error| format!("{var}: cannot read {path}: {error}"))
                }
            }
        };
        let certificate = file("CERTIFICATE")?;
        let client = match (file("CLIENT_CERTIFICATE")?, file("CLIENT_KEY")?) {
            (Some(certificate), Some(key)) => Some((certificate, key)),
            (None, None) => None,
            _ => {
                return Err(format!(
                    "OTEL_EXPORTER_OTLP_{signal}_CLIENT_CERTIFICATE and _CLIENT_KEY go together (or the same without {signal}_)"
                ))
            }
        };
        let timeout =
            var("TIMEOUT").and_then(|(_, ms)| ms.parse().ok()).map_or(Duration::from_secs(10), Duration::from_millis);
        Ok(Self { protocol, https, certificate, client, timeout })
    }

    /// TLS for a gRPC exporter to an `https` endpoint: the system's roots,
    /// the configured certificate, the client's identity.
    fn over_tonic<B: WithTonicConfig>(&self, builder: B) -> B {
        if !self.https {
            return builder;
        }
        let mut tls = ClientTlsConfig::new().with_native_roots();
        if let Some(pem) = &self.certificate {
            tls = tls.ca_certificate(Certificate::from_pem(pem));
        }
        if let Some((certificate, key)) = &self.client {
            tls = tls.identity(Identity::from_pem(certificate, key));
        }
        builder.with_tls_config(tls)
    }

    /// An HTTP exporter: the crate's own client, unless a certificate is
    /// configured; then one that trusts it beside the system's roots.
    fn over_http<B: WithHttpConfig + WithExportConfig>(&self, builder: B) -> Result<B, String> {
        let builder = builder.with_protocol(Protocol::HttpBinary);
        if self.certificate.is_none() && self.client.is_none() {
            return Ok(builder);
        }
        let mut client = reqwest::blocking::Client::builder().timeout(self.timeout);
        if let Some(pem) = &self.certificate {
            let certificate = reqwest::Certificate::from_pem(pem).map_err(|e| format!("the CA certificate: {e}"))?;
            client = client.tls_certs_merge([certificate]);
        }
        if let Some((certificate, key)) = &self.client {
            let identity = reqwest::Identity::from_pem(&[certificate.as_slice(), b"\n", key.as_slice()].concat())
                .map_err(|e| format!("the client certificate: {e}"))?;
            client = client.identity(identity);
        }
        // The blocking client runs a runtime of its own, which must not be
        // made (or dropped) on a thread of the gateway's runtime.
        let client = std::thread::spawn(move || client.build())
            .join()
            .map_err(|_| "the HTTP client could not be made".to_owned())?
            .map_err(|e| format!("the HTTP client: {e}"))?;
        Ok(builder.with_http_client(client))
    }
}

pub(crate) fn tracer(env: &Env, resource: &Resource, runtime: &ExportRuntime) -> Option<Tracer> {
    let exporter = Transport::from_env(env, "TRACES").and_then(|transport| {
        let built = match transport.protocol {
            Protocol::HttpBinary => transport.over_http(SpanExporter::builder().with_http())?.build(),
            _ => runtime.within(|| transport.over_tonic(SpanExporter::builder().with_tonic()).build()),
        };
        built.map_err(|e| e.to_string())
    });
    let exporter = or_said("traces", exporter)?;
    let bounded = Bounded { inner: exporter, value_limit: value_limit(env), warnings: Warnings::default() };
    Some(Tracer::configured_by_env(bounded, resource, Batching::from_env(env)))
}

/// The exporter made, or none after the one warning that says why the
/// `signal` will not be exported.
fn or_said<E>(signal: &str, made: Result<E, String>) -> Option<E> {
    made.map_err(|err| tracing::warn!("{signal} will not be exported: {err}")).ok()
}

/// `OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT`, else
/// `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`, else 4096 characters.
fn value_limit(env: &Env) -> usize {
    ["OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"]
        .iter()
        .find_map(|name| env.get(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(VALUE_LENGTH_LIMIT)
}

pub(crate) fn meter_provider(
    env: &Env,
    resource: Resource,
    runtime: &ExportRuntime,
    scrape: Option<opentelemetry_prometheus::PrometheusExporter>,
) -> Option<SdkMeterProvider> {
    let exporter = Transport::from_env(env, "METRICS").and_then(|transport| {
        let built = match transport.protocol {
            Protocol::HttpBinary => transport.over_http(MetricExporter::builder().with_http())?.build(),
            _ => runtime.within(|| transport.over_tonic(MetricExporter::builder().with_tonic()).build()),
        };
        built.map_err(|e| e.to_string())
    });
    let exporter = or_said("metrics", exporter)?;
    let exporter = QuietMetrics { inner: exporter, warnings: Warnings::default() };
    let builder = SdkMeterProvider::builder().with_resource(resource).with_periodic_exporter(exporter);
    Some(match scrape {
        Some(reader) => builder.with_reader(reader).build(),
        None => builder.build(),
    })
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{SpanContext, SpanKind, Status};
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    use super::*;

    fn span(attributes: Vec<KeyValue>) -> SpanData {
        SpanData {
            span_context: SpanContext::empty_context(),
            parent_span_id: opentelemetry::trace::SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "execute_tool".into(),
            start_time: std::time::SystemTime::UNIX_EPOCH,
            end_time: std::time::SystemTime::UNIX_EPOCH,
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    #[test]
    fn values_are_cut_to_the_limit_in_characters() {
        let mut data = span(vec![
            KeyValue::new("long", "é".repeat(10)),
            KeyValue::new("short", "abc"),
            KeyValue::new("list", Value::Array(Array::String(vec!["x".repeat(9).into(), "y".into()]))),
            KeyValue::new("n", 123456789_i64),
        ]);
        truncate_values(&mut data, 4);
        let values: Vec<String> = data.attributes.iter().map(|kv| kv.value.to_string()).collect();
        assert_eq!(values, ["éééé", "abc", "[\"xxxx\",\"y\"]", "123456789"]);
    }

    #[test]
    fn a_batch_is_split_where_its_bytes_would_pass_the_bound() {
        let big = || span(vec![KeyValue::new("gen_ai.tool.call.result", "x".repeat(1000))]);
        let batch: Vec<SpanData> = (0..10).map(|_| big()).collect();
        let size = encoded_size(&batch[0]);
        assert!(size > 1000, "{size}");
        let parts = parts(batch, 3 * size);
        assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 3, 1]);
        // A span past the bound alone goes alone; small ones go together.
        let parts = super::parts(vec![big(), span(vec![]), span(vec![])], 500);
        assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn the_protocol_and_tls_files_are_read_signal_first_and_a_bad_one_is_named() {
        let env = Env::from_pairs([
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "HTTPS://collector:4318"),
        ]);
        let traces = Transport::from_env(&env, "TRACES").unwrap();
        assert_eq!((traces.protocol, traces.https), (Protocol::HttpBinary, true));
        assert_eq!(Transport::from_env(&env, "METRICS").unwrap().protocol, Protocol::Grpc);
        let json = Env::from_pairs([("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")]);
        let err = Transport::from_env(&json, "TRACES").err().unwrap();
        assert!(err.contains("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json"), "{err}");
        let missing = Env::from_pairs([("OTEL_EXPORTER_OTLP_CERTIFICATE", "/no/such/ca.pem")]);
        let err = Transport::from_env(&missing, "TRACES").err().unwrap();
        assert!(err.starts_with("OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read /no/such/ca.pem"), "{err}");
    }
}
