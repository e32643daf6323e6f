//! The span exporter: OTLP over gRPC, configured by the standard
//! `OTEL_EXPORTER_OTLP_*` variables, sending the bytes prost makes of the
//! OTLP crate's messages.
//!
//! Why not `opentelemetry-otlp`'s span exporter (still used for metrics):
//! counted per call (docs/benchmarks.md, telemetry), shipping the spans was
//! four fifths of what exporting every span cost: copying each batch (kept
//! for retries), converting every id, key and value into a newly allocated
//! string or list, prost measuring each nested message again for every
//! message around it, and freeing it all. Here each span's protobuf is
//! written straight from the SDK's span data ([`Wire`]), by the thread
//! that ends it ([`write_span`]), and a request is a batch of those bytes
//! in the resource and the tracer's one scope; unit tests hold its bytes
//! equal to prost's encoding of the crate's request.
//!
//! Where it differs: a failed export is not retried (the batch processor's
//! next batch follows; a collector that is down costs the warning of
//! `export.rs`); `https` endpoints and compression are refused at start, as
//! the OTLP crate refused them with the features this build has.

use std::time::{Duration, SystemTime};

use bytes::BufMut;
use http::uri::PathAndQuery;
use opentelemetry::{
    trace::{SpanId, Status, TraceFlags, TraceState},
    InstrumentationScope, KeyValue, Value,
};
use opentelemetry_proto::{
    tonic::{
        collector::trace::v1::ExportTraceServiceResponse,
        common::v1 as common,
        trace::v1::{span, status, SpanFlags},
    },
    transform::common::tonic::ResourceAttributesWithSchema,
};
use opentelemetry_sdk::{
    error::{OTelSdkError, OTelSdkResult},
    trace::SpanData,
};
use prost::{
    encoding::{encode_varint, encoded_len_varint, WireType},
    Message,
};
use tonic::{
    codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
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
    endpoint: Endpoint,
    /// Made on the first export, in the runtime that runs the exports (the
    /// channel's connection lives there).
    client: std::sync::OnceLock<tonic::client::Grpc<Channel>>,
    metadata: MetadataMap,
    /// What every request says of the resource.
    resource: Heading,
    /// The scope of the spans [`write_span`] wrote: the tracer's one.
    scope: Heading,
}

impl std::fmt::Debug for OtlpSpans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpSpans").finish_non_exhaustive()
    }
}

impl OtlpSpans {
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
            endpoint,
            client: std::sync::OnceLock::new(),
            metadata,
            resource: Heading::default(),
            scope: Heading::scope(&InstrumentationScope::builder(super::tracer::SCOPE).build()),
        })
    }

    async fn send(&self, body: Framed) -> Result<ExportTraceServiceResponse, tonic::Status> {
        let mut client = self.client.get_or_init(|| tonic::client::Grpc::new(self.endpoint.connect_lazy())).clone();
        client.ready().await.map_err(|error| tonic::Status::unavailable(error.to_string()))?;
        let codec = Encoded { len: body.len() };
        let request = tonic::Request::from_parts(self.metadata.clone(), Extensions::default(), body);
        Ok(client.unary(request, PathAndQuery::from_static(EXPORT), codec).await?.into_inner())
    }
}

impl OtlpSpans {
    /// The resource every request names.
    pub(crate) fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.resource = Heading::resource(resource);
    }

    /// Sends spans [`write_span`] wrote, all of the tracer's scope.
    pub(crate) async fn export_written(&self, spans: Vec<u8>) -> OTelSdkResult {
        if spans.is_empty() {
            return Ok(());
        }
        self.sent(Framed::around(&self.resource, &self.scope, spans)).await
    }

    async fn sent(&self, request: Framed) -> OTelSdkResult {
        match self.send(request).await {
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
}

/// What every request says of its resource, or of its spans' scope,
/// encoded once: the message, as the first field of its list (key and
/// length included; none for a resource before the provider sets one), and
/// the list's schema URL.
#[derive(Default)]
struct Heading {
    field: Vec<u8>,
    schema_url: String,
}

impl Heading {
    fn new(message: &impl Message, schema_url: Option<&str>) -> Self {
        let mut field = Vec::new();
        prost::encoding::message::encode(1, message, &mut field);
        Self { field, schema_url: schema_url.unwrap_or_default().to_owned() }
    }

    /// `ResourceSpans.resource`, and its schema URL.
    fn resource(resource: &opentelemetry_sdk::Resource) -> Self {
        let resource = ResourceAttributesWithSchema::from(resource);
        let message = opentelemetry_proto::tonic::resource::v1::Resource {
            attributes: resource.attributes.0,
            ..Default::default()
        };
        Self::new(&message, resource.schema_url.as_deref())
    }

    /// `ScopeSpans.scope`, and its schema URL.
    fn scope(scope: &InstrumentationScope) -> Self {
        Self::new(&common::InstrumentationScope::from((scope, None)), scope.schema_url())
    }
}

/// An `ExportTraceServiceRequest` written straight from the SDK's spans:
/// the bytes prost makes of what the OTLP crate converts them into (a unit
/// test holds them equal), without that conversion's owned copy of every
/// id, name, key and value, and without prost's measuring of each nested
/// message once for every message around it. Fields go in tag order and a
/// field holding its default is left out, as prost writes them; the rare
/// parts (the scope, lists of values) are the crate's messages, encoded by
/// prost.
struct Wire(Vec<u8>);

/// Writes `data` after `out` as one span of the spans of a scope
/// (`ScopeSpans.spans`, its key and length included), as
/// [`OtlpSpans::export_written`] sends it: the gateway's tracer calls this
/// where each span ends ([`super::tracer::Tracer::writing`]).
pub(crate) fn write_span(data: &SpanData, out: &mut Vec<u8>) {
    let mut wire = Wire(std::mem::take(out));
    wire.scope_span(data);
    *out = wire.0;
}

/// An `ExportTraceServiceRequest` of spans [`write_span`] wrote, all of one
/// scope: what goes before them (the resource, the scope, and the two
/// lists' keys and lengths) and after them (the schema URLs), written
/// around them only into the buffer tonic sends from ([`Encoded`]). So a
/// batch's spans are copied once on their way out, not first into a
/// request of their own.
struct Framed {
    head: Vec<u8>,
    spans: Vec<u8>,
    tail: Vec<u8>,
}

impl Framed {
    /// `spans` in one `ResourceSpans` of `resource` and one `ScopeSpans`
    /// of `scope`.
    fn around(resource: &Heading, scope: &Heading, spans: Vec<u8>) -> Self {
        // The scope's schema URL, then the resource's: each list's last field.
        let mut tail = Wire(Vec::new());
        tail.string(3, &scope.schema_url);
        let scope_tail = tail.0.len();
        tail.string(3, &resource.schema_url);
        let scope_spans = scope.field.len() + spans.len() + scope_tail;
        let resource_spans = resource.field.len()
            + 1
            + encoded_len_varint(scope_spans as u64)
            + scope_spans
            + (tail.0.len() - scope_tail);
        let mut head = Wire(Vec::with_capacity(resource.field.len() + scope.field.len() + 8));
        head.key(1, WireType::LengthDelimited);
        head.raw_varint(resource_spans as u64);
        head.0.extend_from_slice(&resource.field);
        head.key(2, WireType::LengthDelimited);
        head.raw_varint(scope_spans as u64);
        head.0.extend_from_slice(&scope.field);
        Self { head: head.0, spans, tail: tail.0 }
    }

    fn len(&self) -> usize {
        self.head.len() + self.spans.len() + self.tail.len()
    }
}

impl Wire {
    /// `ScopeSpans.spans`: one span.
    fn scope_span(&mut self, data: &SpanData) {
        self.message(2, 2, |wire| wire.span(data));
    }

    fn span(&mut self, data: &SpanData) {
        let context = &data.span_context;
        self.bytes(1, &context.trace_id().to_bytes());
        self.bytes(2, &context.span_id().to_bytes());
        self.trace_state(3, context.trace_state());
        if data.parent_span_id != SpanId::INVALID {
            self.bytes(4, &data.parent_span_id.to_bytes());
        }
        self.string(5, &data.name);
        self.varint(6, span::SpanKind::from(data.span_kind.clone()) as u64);
        self.fixed64(7, nanos(data.start_time));
        self.fixed64(8, nanos(data.end_time));
        self.attributes(9, &data.attributes);
        self.varint(10, data.dropped_attributes_count.into());
        for event in data.events.iter() {
            self.message(11, 1, |wire| {
                wire.fixed64(1, nanos(event.timestamp));
                wire.string(2, &event.name);
                wire.attributes(3, &event.attributes);
                wire.varint(4, event.dropped_attributes_count.into());
            });
        }
        self.varint(12, data.events.dropped_count.into());
        for link in data.links.iter() {
            let context = &link.span_context;
            self.message(13, 1, |wire| {
                wire.bytes(1, &context.trace_id().to_bytes());
                wire.bytes(2, &context.span_id().to_bytes());
                wire.trace_state(3, context.trace_state());
                wire.attributes(4, &link.attributes);
                wire.varint(5, link.dropped_attributes_count.into());
                wire.fixed32(6, flags(context.trace_flags(), context.is_remote()));
            });
        }
        self.varint(14, data.links.dropped_count.into());
        self.message(15, 1, |wire| {
            if let Status::Error { description } = &data.status {
                wire.string(2, description);
            }
            wire.varint(3, status::StatusCode::from(&data.status) as u64);
        });
        self.fixed32(16, flags(context.trace_flags(), data.parent_span_is_remote));
    }

    /// `KeyValue`s: a key, and a value that is always written (a value of
    /// a `oneof` is, even when it is its kind's default).
    fn attributes(&mut self, field: u32, attributes: &[KeyValue]) {
        for attribute in attributes {
            self.message(field, 1, |wire| {
                wire.string(1, attribute.key.as_str());
                wire.message(2, 1, |wire| match &attribute.value {
                    Value::String(text) => wire.field_bytes(1, text.as_str().as_bytes()),
                    Value::Bool(value) => wire.field_varint(2, u64::from(*value)),
                    Value::I64(value) => wire.field_varint(3, *value as u64),
                    Value::F64(value) => wire.field_fixed64(4, value.to_bits()),
                    // Lists (and kinds added later): as the OTLP crate makes them.
                    other => common::AnyValue::from(other.clone()).encode_raw(&mut wire.0),
                });
            });
        }
    }

    /// A trace state as its header; most spans have none, and the header
    /// of none is not made.
    fn trace_state(&mut self, field: u32, state: &TraceState) {
        if *state != TraceState::NONE {
            self.string(field, &state.header());
        }
    }

    /// A message field: its key, its length, then what `body` writes.
    /// `width` (at most 3) is the length's likely width in bytes, kept free
    /// before the body is written and closed up or widened after (which
    /// moves the body) when the length needs another.
    #[inline]
    fn message(&mut self, field: u32, width: usize, body: impl FnOnce(&mut Self)) {
        self.key(field, WireType::LengthDelimited);
        let start = self.0.len();
        self.0.extend_from_slice(&[0; 3][..width]);
        body(self);
        let len = self.0.len() - start - width;
        if width == 1 && len < 0x80 {
            // Most messages: an attribute, its value, an event, a status.
            self.0[start] = len as u8;
            return;
        }
        let needed = encoded_len_varint(len as u64);
        if needed != width {
            self.0.splice(start..start + width, std::iter::repeat_n(0, needed));
        }
        let mut prefix = &mut self.0[start..start + needed];
        encode_varint(len as u64, &mut prefix);
    }

    /// A field's key: one byte for a field below 16 (all but a span's flags).
    #[inline]
    fn key(&mut self, field: u32, wire_type: WireType) {
        self.raw_varint(u64::from(field << 3 | wire_type as u32));
    }

    /// A varint, written in place when it is one byte (keys, and most
    /// lengths and counts); prost's loop otherwise.
    #[inline]
    fn raw_varint(&mut self, value: u64) {
        match value < 0x80 {
            true => self.0.push(value as u8),
            false => encode_varint(value, &mut self.0),
        }
    }

    // Each kind's `field_` writer writes the field whatever its value; the
    // plain one leaves the field out when it holds its default.

    fn field_bytes(&mut self, field: u32, value: &[u8]) {
        self.key(field, WireType::LengthDelimited);
        self.raw_varint(value.len() as u64);
        self.0.extend_from_slice(value);
    }

    fn bytes(&mut self, field: u32, value: &[u8]) {
        if !value.is_empty() {
            self.field_bytes(field, value);
        }
    }

    fn string(&mut self, field: u32, value: &str) {
        self.bytes(field, value.as_bytes());
    }

    fn field_varint(&mut self, field: u32, value: u64) {
        self.key(field, WireType::Varint);
        self.raw_varint(value);
    }

    fn varint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.field_varint(field, value);
        }
    }

    fn fixed32(&mut self, field: u32, value: u32) {
        if value != 0 {
            self.key(field, WireType::ThirtyTwoBit);
            self.0.put_u32_le(value);
        }
    }

    fn field_fixed64(&mut self, field: u32, value: u64) {
        self.key(field, WireType::SixtyFourBit);
        self.0.put_u64_le(value);
    }

    fn fixed64(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.field_fixed64(field, value);
        }
    }
}

/// A span's or link's flags: the trace flags, and whether the parent (or
/// the linked span) is remote, as the OTLP crate writes them.
fn flags(trace: TraceFlags, remote: bool) -> u32 {
    let mut flags = u32::from(trace.to_u8()) | SpanFlags::ContextHasIsRemoteMask as u32;
    if remote {
        flags |= SpanFlags::ContextIsRemoteMask as u32;
    }
    flags
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos() as u64)
}

/// Sends a [`Framed`] of `len` bytes, and decodes the answer.
#[derive(Clone, Copy)]
struct Encoded {
    len: usize,
}

impl Codec for Encoded {
    type Encode = Framed;
    type Decode = ExportTraceServiceResponse;
    type Encoder = Self;
    type Decoder = Self;

    fn encoder(&mut self) -> Self {
        *self
    }

    fn decoder(&mut self) -> Self {
        *self
    }
}

impl Encoder for Encoded {
    type Item = Framed;
    type Error = tonic::Status;

    fn encode(&mut self, item: Framed, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item.head);
        dst.put_slice(&item.spans);
        dst.put_slice(&item.tail);
        Ok(())
    }

    /// A buffer the request and gRPC's 5-byte message header fit in at
    /// once: tonic's default (8 KiB) grew by doubling, copying the request
    /// five times over for a batch of 512 spans. The yield threshold is
    /// tonic's default, and does not apply to a single message.
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(self.len + 5, 32 * 1024)
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
        trace::{
            Link, SpanContext, SpanKind, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer, TracerProvider as _,
        },
        Context,
    };
    use opentelemetry_proto::{
        tonic::collector::trace::v1::ExportTraceServiceRequest,
        transform::trace::tonic::group_spans_by_resource_and_scope,
    };
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};

    use super::*;

    /// A provider of `resource` whose spans are kept in the exporter returned.
    fn recorded(resource: &opentelemetry_sdk::Resource) -> (SdkTracerProvider, InMemorySpanExporter) {
        let exporter = InMemorySpanExporter::default();
        let provider =
            SdkTracerProvider::builder().with_resource(resource.clone()).with_simple_exporter(exporter.clone()).build();
        (provider, exporter)
    }

    /// Spans with every kind of thing a span holds, made by the SDK, from
    /// two scopes: attributes of each kind of value, events, a link, a
    /// remote parent and a trace state, an error; and a plain span.
    fn spans(resource: &opentelemetry_sdk::Resource, plain_only: bool) -> Vec<SpanData> {
        let (provider, exporter) = recorded(resource);
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

    /// `batch` as the gateway's tracer makes it: every span of its one scope.
    fn of_tracer(batch: &[SpanData]) -> Vec<SpanData> {
        let scope = InstrumentationScope::builder(crate::telemetry::tracer::SCOPE).build();
        batch.iter().map(|data| SpanData { instrumentation_scope: scope.clone(), ..data.clone() }).collect()
    }

    /// What the OTLP crate sends for `batch`, of the tracer's scope.
    fn crates(batch: &[SpanData], resource: &opentelemetry_sdk::Resource) -> ExportTraceServiceRequest {
        let resource = ResourceAttributesWithSchema::from(resource);
        ExportTraceServiceRequest { resource_spans: group_spans_by_resource_and_scope(of_tracer(batch), &resource) }
    }

    /// What `exporter` sends for `batch`, each span written as the tracer
    /// writes it where it ends.
    fn written(exporter: &Heading, batch: &[SpanData]) -> Vec<u8> {
        let mut spans = Vec::new();
        for data in batch {
            write_span(data, &mut spans);
        }
        let scope = Heading::scope(&InstrumentationScope::builder(crate::telemetry::tracer::SCOPE).build());
        let request = Framed::around(exporter, &scope, spans);
        let len = request.len();
        let sent = [request.head, request.spans, request.tail].concat();
        assert_eq!(sent.len(), len);
        sent
    }

    #[test]
    fn a_batch_is_written_byte_for_byte_as_prost_encodes_the_otlp_crates_request() {
        // A schema URL, written after the spans.
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("toolgate")
            .with_schema_url([], "https://opentelemetry.io/schemas/1.37.0")
            .build();
        let exporter = Heading::resource(&resource);
        assert!(!exporter.schema_url.is_empty());
        let full = spans(&resource, false);
        assert_eq!(full.len(), 3);
        let plain = spans(&resource, true);
        let reversed: Vec<_> = full.iter().rev().cloned().collect();
        let mixed: Vec<_> = [&full[..], &plain[..], &full[..1]].concat();
        for batch in [&full, &plain, &reversed, &mixed] {
            let expected = crates(batch, &resource).encode_to_vec();
            assert_eq!(written(&exporter, batch), expected);
        }
        // Decoded, the request is what the crate would send (and its
        // resource is there).
        let decoded = ExportTraceServiceRequest::decode(&written(&exporter, &full)[..]).unwrap();
        assert_eq!(decoded, crates(&full, &resource));
        assert!(decoded.resource_spans[0].resource.as_ref().is_some_and(|resource| !resource.attributes.is_empty()));
    }

    #[test]
    fn values_that_are_their_kinds_default_and_lengths_of_every_width_are_written_as_prost_writes_them() {
        let resource = opentelemetry_sdk::Resource::builder_empty().build();
        let (provider, exporter) = recorded(&resource);
        let tracer = provider.tracer("");
        let mut defaults = tracer.start("");
        opentelemetry::trace::Span::set_attributes(
            &mut defaults,
            [
                KeyValue::new("text", ""),
                KeyValue::new("yes", false),
                KeyValue::new("n", 0_i64),
                KeyValue::new("x", 0.0),
                KeyValue::new("negative", -1_i64),
                // An empty key is left out, as an empty text is.
                KeyValue::new("", "keyless"),
            ],
        );
        opentelemetry::trace::Span::end(&mut defaults);
        // Lengths of one, two and three bytes, in attributes, spans and the
        // lists around them.
        for len in [100, 200, 20_000] {
            let mut long = tracer.start("long");
            opentelemetry::trace::Span::set_attribute(&mut long, KeyValue::new("text", "x".repeat(len)));
            opentelemetry::trace::Span::end(&mut long);
        }
        let batch = exporter.get_finished_spans().unwrap();
        let exporter = Heading::resource(&resource);
        for batch in [&batch[..1], &batch[1..2], &batch[2..3], &batch[3..], &batch[..]] {
            assert_eq!(written(&exporter, batch), crates(batch, &resource).encode_to_vec());
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
