//! The span exporter: OTLP over gRPC, configured by the standard
//! `OTEL_EXPORTER_OTLP_*` variables, with the OTLP crate's message types
//! and their protobuf encoding.
//!
//! Why not `opentelemetry-otlp`'s span exporter (still used for metrics):
//! counted per call (docs/benchmarks.md, telemetry), shipping the spans was
//! four fifths of what exporting every span cost, and most of that was
//! copying each batch (kept for retries), converting every id, key and value
//! into a newly allocated string or list, and freeing both. This exporter
//! writes a batch into one request that it keeps between batches (its
//! strings and lists are cleared and refilled, so a steady stream of spans
//! allocates nothing per span), encodes it once, and sends the bytes.
//!
//! Where it differs: a failed export is not retried (the batch processor's
//! next batch follows; a collector that is down costs the warning of
//! `export.rs`); `https` endpoints and compression are refused at start, as
//! the OTLP crate refused them with the features this build has.

use std::{
    sync::Mutex,
    time::{Duration, SystemTime},
};

use bytes::{BufMut, Bytes};
use http::uri::PathAndQuery;
use opentelemetry::{
    trace::{SpanId, SpanKind, Status},
    InstrumentationScope, KeyValue, Value,
};
use opentelemetry_proto::{
    tonic::{
        collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse},
        common::v1 as common,
        resource::v1::Resource,
        trace::v1::{span, status, ResourceSpans, ScopeSpans, Span, SpanFlags},
    },
    transform::common::tonic::ResourceAttributesWithSchema,
};
use opentelemetry_sdk::{
    error::{OTelSdkError, OTelSdkResult},
    trace::{SpanData, SpanExporter},
};
use prost::Message;
use tonic::{
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    metadata::{MetadataKey, MetadataMap, MetadataValue},
    transport::{Channel, Endpoint},
    Extensions,
};

use crate::env::Env;

const EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
const DEFAULT_ENDPOINT: &str = "http://localhost:4317";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how spans are sent, from the environment: the `TRACES_`
/// variable of each setting, else the general one.
#[derive(Debug, PartialEq)]
pub(crate) struct Settings {
    pub endpoint: String,
    pub timeout: Duration,
    /// `OTEL_EXPORTER_OTLP_HEADERS`: `key=value` pairs, comma-separated,
    /// values percent-decoded.
    pub headers: Vec<(String, String)>,
}

impl Settings {
    pub(crate) fn from_env(env: &Env) -> Result<Self, String> {
        let setting = |name: &str| {
            let specific = format!("OTEL_EXPORTER_OTLP_TRACES_{name}");
            let general = format!("OTEL_EXPORTER_OTLP_{name}");
            [specific, general].into_iter().find_map(|var| {
                let value = env.get(&var)?.trim();
                (!value.is_empty()).then(|| (var, value.to_owned()))
            })
        };
        let endpoint = setting("ENDPOINT").map_or_else(|| DEFAULT_ENDPOINT.to_owned(), |(_, value)| value);
        if endpoint.starts_with("https:") {
            return Err(format!("the endpoint {endpoint} is https, and this build sends spans over plain gRPC only"));
        }
        let timeout = match setting("TIMEOUT") {
            None => DEFAULT_TIMEOUT,
            Some((var, value)) => Duration::from_millis(
                value.parse().map_err(|_| format!("{var} is {value:?}, not a number of milliseconds"))?,
            ),
        };
        if let Some((var, value)) = setting("COMPRESSION").filter(|(_, value)| value != "none") {
            return Err(format!("{var} is {value:?}, and this build sends spans uncompressed"));
        }
        let headers = setting("HEADERS").map_or_else(Vec::new, |(_, value)| headers(&value));
        Ok(Self { endpoint, timeout, headers })
    }
}

/// `key=value,key2=value2`, each part trimmed and percent-decoded; a pair
/// that is not `key=value` or does not decode is skipped.
fn headers(value: &str) -> Vec<(String, String)> {
    value
        .split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            let key = percent_decode(key.trim())?;
            let value = percent_decode(value.trim())?;
            (!key.is_empty()).then_some((key, value))
        })
        .collect()
}

fn percent_decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = tail.get(..2).and_then(|hex| std::str::from_utf8(hex).ok())?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// Sends batches of spans to a collector.
pub(crate) struct OtlpSpans {
    client: tonic::client::Grpc<Channel>,
    metadata: MetadataMap,
    /// The request batches are written into, kept between batches.
    request: Mutex<Batches>,
}

impl std::fmt::Debug for OtlpSpans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpSpans").finish_non_exhaustive()
    }
}

impl OtlpSpans {
    /// Must run inside the Tokio runtime (the channel's connection lives there).
    pub(crate) fn new(settings: &Settings) -> Result<Self, String> {
        let endpoint = Endpoint::from_shared(settings.endpoint.clone())
            .map_err(|error| format!("the endpoint {} is not a URL: {error}", settings.endpoint))?
            .timeout(settings.timeout);
        let mut metadata = MetadataMap::new();
        for (key, value) in &settings.headers {
            let key = MetadataKey::from_bytes(key.to_ascii_lowercase().as_bytes())
                .map_err(|_| format!("the header name {key:?} is not allowed"))?;
            let value = MetadataValue::try_from(value.as_str())
                .map_err(|_| format!("the value of header {key} is not allowed"))?;
            metadata.append(key, value);
        }
        Ok(Self {
            client: tonic::client::Grpc::new(endpoint.connect_lazy()),
            metadata,
            request: Mutex::new(Batches::default()),
        })
    }

    async fn send(&self, body: Bytes) -> Result<ExportTraceServiceResponse, tonic::Status> {
        let mut client = self.client.clone();
        client.ready().await.map_err(|error| tonic::Status::unavailable(error.to_string()))?;
        let request = tonic::Request::from_parts(self.metadata.clone(), Extensions::default(), body);
        Ok(client.unary(request, PathAndQuery::from_static(EXPORT), Encoded).await?.into_inner())
    }
}

impl SpanExporter for OtlpSpans {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if batch.is_empty() {
            return Ok(());
        }
        let body = {
            let mut batches = self.request.lock().expect("not poisoned");
            batches.fill(&batch);
            let mut body = Vec::with_capacity(batches.request.encoded_len());
            batches.request.encode_raw(&mut body);
            Bytes::from(body)
        };
        drop(batch);
        match self.send(body).await {
            Ok(response) => match response.partial_success {
                Some(partial) if partial.rejected_spans > 0 => Err(OTelSdkError::InternalFailure(format!(
                    "the collector rejected {} spans: {}",
                    partial.rejected_spans, partial.error_message
                ))),
                _ => Ok(()),
            },
            Err(status) => Err(OTelSdkError::InternalFailure(format!("{:?}: {}", status.code(), status.message()))),
        }
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        *self.request.get_mut().expect("not poisoned") = Batches::of(resource);
    }
}

/// The request, and what lets it be refilled without allocating.
#[derive(Default)]
struct Batches {
    /// One resource (the provider's), one list of spans per scope.
    request: ExportTraceServiceRequest,
    /// The scope of each of the request's lists of spans.
    scopes: Vec<InstrumentationScope>,
    /// Spans a smaller batch left over, kept for the next.
    spare: Vec<Span>,
}

impl Batches {
    /// Batches of spans from `resource`.
    fn of(resource: &opentelemetry_sdk::Resource) -> Self {
        let resource = ResourceAttributesWithSchema::from(resource);
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource { attributes: resource.attributes.0, ..Default::default() }),
                schema_url: resource.schema_url.unwrap_or_default(),
                scope_spans: Vec::new(),
            }],
        };
        Self { request, ..Self::default() }
    }

    /// Writes `batch` into the request, reusing the strings and lists of
    /// the batch before.
    fn fill(&mut self, batch: &[SpanData]) {
        if self.request.resource_spans.is_empty() {
            self.request.resource_spans.push(ResourceSpans::default());
        }
        let scope_spans = &mut self.request.resource_spans[0].scope_spans;
        let mut used = vec![0; scope_spans.len()];
        for data in batch {
            let index = match self.scopes.iter().position(|scope| *scope == data.instrumentation_scope) {
                Some(index) => index,
                None => {
                    self.scopes.push(data.instrumentation_scope.clone());
                    scope_spans.push(ScopeSpans {
                        scope: Some((&data.instrumentation_scope, None).into()),
                        schema_url: data.instrumentation_scope.schema_url().unwrap_or_default().to_owned(),
                        spans: Vec::new(),
                    });
                    used.push(0);
                    scope_spans.len() - 1
                }
            };
            let spans = &mut scope_spans[index].spans;
            if used[index] == spans.len() {
                spans.push(self.spare.pop().unwrap_or_default());
            }
            write_span(&mut spans[used[index]], data);
            used[index] += 1;
        }
        for (scope, used) in scope_spans.iter_mut().zip(used) {
            self.spare.extend(scope.spans.drain(used..));
        }
    }
}

fn write_span(span: &mut Span, data: &SpanData) {
    let context = &data.span_context;
    write_bytes(&mut span.trace_id, &context.trace_id().to_bytes());
    write_bytes(&mut span.span_id, &context.span_id().to_bytes());
    span.trace_state.clear();
    span.trace_state.push_str(&context.trace_state().header());
    span.parent_span_id.clear();
    if data.parent_span_id != SpanId::INVALID {
        span.parent_span_id.extend_from_slice(&data.parent_span_id.to_bytes());
    }
    span.flags = u32::from(context.trace_flags().to_u8()) | SpanFlags::ContextHasIsRemoteMask as u32;
    if data.parent_span_is_remote {
        span.flags |= SpanFlags::ContextIsRemoteMask as u32;
    }
    write_str(&mut span.name, &data.name);
    span.kind = match data.span_kind {
        SpanKind::Client => span::SpanKind::Client,
        SpanKind::Server => span::SpanKind::Server,
        SpanKind::Producer => span::SpanKind::Producer,
        SpanKind::Consumer => span::SpanKind::Consumer,
        SpanKind::Internal => span::SpanKind::Internal,
    } as i32;
    span.start_time_unix_nano = nanos(data.start_time);
    span.end_time_unix_nano = nanos(data.end_time);
    write_attributes(&mut span.attributes, &data.attributes);
    span.dropped_attributes_count = data.dropped_attributes_count;
    span.events.truncate(data.events.len());
    for (index, event) in data.events.iter().enumerate() {
        if index == span.events.len() {
            span.events.push(span::Event::default());
        }
        let written = &mut span.events[index];
        written.time_unix_nano = nanos(event.timestamp);
        write_str(&mut written.name, &event.name);
        write_attributes(&mut written.attributes, &event.attributes);
        written.dropped_attributes_count = event.dropped_attributes_count;
    }
    span.dropped_events_count = data.events.dropped_count;
    span.links.clear();
    span.links.extend(data.links.iter().cloned().map(span::Link::from));
    span.dropped_links_count = data.links.dropped_count;
    let written = span.status.get_or_insert_default();
    written.message.clear();
    written.code = match &data.status {
        Status::Unset => status::StatusCode::Unset,
        Status::Ok => status::StatusCode::Ok,
        Status::Error { description } => {
            written.message.push_str(description);
            status::StatusCode::Error
        }
    } as i32;
}

fn write_bytes(to: &mut Vec<u8>, from: &[u8]) {
    to.clear();
    to.extend_from_slice(from);
}

fn write_str(to: &mut String, from: &str) {
    to.clear();
    to.push_str(from);
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos() as u64)
}

fn write_attributes(to: &mut Vec<common::KeyValue>, from: &[KeyValue]) {
    to.truncate(from.len());
    for (index, attribute) in from.iter().enumerate() {
        if index == to.len() {
            to.push(common::KeyValue::default());
        }
        let written = &mut to[index];
        written.key.clear();
        written.key.push_str(attribute.key.as_str());
        write_value(written.value.get_or_insert_default(), &attribute.value);
    }
}

fn write_value(to: &mut common::AnyValue, from: &Value) {
    use common::any_value::Value as Any;
    let value = match (to.value.take(), from) {
        (_, Value::Bool(value)) => Any::BoolValue(*value),
        (_, Value::I64(value)) => Any::IntValue(*value),
        (_, Value::F64(value)) => Any::DoubleValue(*value),
        (Some(Any::StringValue(mut text)), Value::String(value)) => {
            text.clear();
            text.push_str(value.as_str());
            Any::StringValue(text)
        }
        (_, Value::String(value)) => Any::StringValue(value.as_str().to_owned()),
        // Lists (and kinds added later): made anew, as the OTLP crate makes them.
        (_, other) => {
            *to = common::AnyValue::from(other.clone());
            return;
        }
    };
    to.value = Some(value);
}

/// Sends a request encoded beforehand and decodes the answer.
struct Encoded;

impl Codec for Encoded {
    type Encode = Bytes;
    type Decode = ExportTraceServiceResponse;
    type Encoder = Self;
    type Decoder = Self;

    fn encoder(&mut self) -> Self {
        Self
    }

    fn decoder(&mut self) -> Self {
        Self
    }
}

impl Encoder for Encoded {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Encoded {
    type Item = ExportTraceServiceResponse;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, tonic::Status> {
        Message::decode(src).map(Some).map_err(|error| tonic::Status::internal(error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::{
        trace::{Link, SpanContext, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer, TracerProvider as _},
        Context,
    };
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};

    use super::*;

    /// Spans with every kind of thing a span holds, made by the SDK, from
    /// two scopes: attributes of each kind of value, events, a link, a
    /// remote parent and a trace state, an error; and a plain span.
    fn spans(resource: &opentelemetry_sdk::Resource, plain_only: bool) -> Vec<SpanData> {
        let exporter = InMemorySpanExporter::default();
        let provider =
            SdkTracerProvider::builder().with_resource(resource.clone()).with_simple_exporter(exporter.clone()).build();
        let toolgate = provider.tracer("toolgate");
        let other = provider.tracer_with_scope(
            InstrumentationScope::builder("other").with_version("1.2").with_schema_url("https://s").build(),
        );
        let mut plain = toolgate.start("plain");
        opentelemetry::trace::Span::set_attribute(&mut plain, KeyValue::new("gen_ai.tool.name", "echo"));
        opentelemetry::trace::Span::end(&mut plain);
        if !plain_only {
            let remote = SpanContext::new(
                TraceId::from(7),
                SpanId::from(9),
                TraceFlags::SAMPLED,
                true,
                TraceState::from_key_value([("vendor", "x")]).unwrap(),
            );
            let parent = Context::new().with_remote_span_context(remote.clone());
            let mut full = other
                .span_builder("full")
                .with_kind(SpanKind::Server)
                .with_links(vec![Link::with_context(remote)])
                .start_with_context(&other, &parent);
            opentelemetry::trace::Span::set_attributes(
                &mut full,
                [
                    KeyValue::new("text", "a"),
                    KeyValue::new("yes", true),
                    KeyValue::new("n", 42_i64),
                    KeyValue::new("x", 1.5),
                    KeyValue::new(
                        "list",
                        Value::Array(opentelemetry::Array::from(vec![opentelemetry::StringValue::from("a")])),
                    ),
                ],
            );
            opentelemetry::trace::Span::add_event(&mut full, "toolgate.repair", vec![KeyValue::new("from", "X")]);
            opentelemetry::trace::Span::add_event(&mut full, "toolgate.hint", vec![]);
            opentelemetry::trace::Span::set_status(&mut full, Status::error("broken"));
            opentelemetry::trace::Span::end(&mut full);
            let mut second = toolgate.start("second");
            opentelemetry::trace::Span::set_attribute(&mut second, KeyValue::new("text", "longer than before"));
            opentelemetry::trace::Span::end(&mut second);
        }
        exporter.get_finished_spans().unwrap()
    }

    /// What the OTLP crate sends for `batch`.
    fn crates(batch: &[SpanData], resource: &opentelemetry_sdk::Resource) -> ExportTraceServiceRequest {
        let resource = ResourceAttributesWithSchema::from(resource);
        ExportTraceServiceRequest { resource_spans: group_spans_by_resource_and_scope(batch.to_vec(), &resource) }
    }

    #[test]
    fn a_batch_is_written_as_the_otlp_crate_writes_it_again_and_again() {
        let resource = opentelemetry_sdk::Resource::builder().with_service_name("toolgate").build();
        let full = spans(&resource, false);
        assert_eq!(full.len(), 3);
        let mut batches = Batches::of(&resource);
        batches.fill(&full);
        assert_eq!(batches.request, crates(&full, &resource));
        // Refilled with less: nothing of the batch before is left, in spans,
        // attributes, events, links or status.
        let plain = spans(&resource, true);
        let reversed: Vec<_> = full.iter().rev().cloned().collect();
        for batch in [&plain, &reversed, &full, &plain[..0].to_vec(), &plain] {
            batches.fill(batch);
            let mut expected = crates(batch, &resource);
            // The crate lists only the scopes a batch has; an emptied scope
            // of this request encodes as a scope with no spans.
            let kept = &batches.request.resource_spans[0].scope_spans;
            let written: Vec<_> = kept.iter().filter(|scope| !scope.spans.is_empty()).cloned().collect();
            let mut written_request = batches.request.clone();
            written_request.resource_spans[0].scope_spans = written;
            if batch.is_empty() {
                expected.resource_spans[0].scope_spans.clear();
            }
            assert_eq!(written_request, expected);
        }
    }

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, String> {
        Settings::from_env(&Env::from_pairs(pairs.iter().copied()))
    }

    #[test]
    fn settings_take_the_traces_variable_first_and_refuse_what_this_build_cannot_do() {
        let defaults = settings(&[]).unwrap();
        assert_eq!(defaults, Settings { endpoint: DEFAULT_ENDPOINT.into(), timeout: DEFAULT_TIMEOUT, headers: vec![] });
        let both = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4317"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4317"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20abc, x-tenant = blue ,broken,=empty"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "none"),
        ])
        .unwrap();
        assert_eq!(both.endpoint, "http://traces:4317");
        assert_eq!(both.timeout, Duration::from_millis(2500));
        assert_eq!(
            both.headers,
            vec![("authorization".into(), "Bearer abc".into()), ("x-tenant".into(), "blue".into())]
        );
        let general = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4317")]).unwrap();
        assert_eq!(general.endpoint, "http://general:4317");
        for (pairs, says) in [
            (&[("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "soon")][..], "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT is \"soon\""),
            (&[("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")][..], "uncompressed"),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4317")][..], "plain gRPC only"),
        ] {
            let error = settings(pairs).unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }
}
