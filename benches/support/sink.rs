//! The load benches' OTLP sink: counts the spans it is sent and keeps
//! nothing, reading each request only as deep as its list of spans (each
//! span's bytes are skipped by their length, not decoded). It runs on the
//! cores the gateway runs on, where a collector would not: the tests'
//! receiver, which decodes every span, took 6–8 µs of them a call, a sixth
//! of what the gateway took. Metrics go to the tests' receiver, discarding.

use std::{
    convert::Infallible,
    future::{ready, Ready},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    task::{Context, Poll},
};

use bytes::{Buf, BufMut};
use futures::future::BoxFuture;
use opentelemetry_proto::tonic::collector::{
    metrics::v1::metrics_service_server::MetricsServiceServer, trace::v1::ExportTraceServiceResponse,
};
use prost::{
    encoding::{skip_field, DecodeContext, WireType},
    DecodeError,
};
use tonic::{
    body::Body,
    server::{Grpc, NamedService, UnaryService},
    Request, Response, Status,
};
use tonic_prost::ProstCodec;

use super::otlp::{self, Received};

/// `ExportTraceServiceRequest`, as far as its spans.
#[derive(Clone, PartialEq, prost::Message)]
struct Spans {
    #[prost(message, repeated, tag = "1")]
    resource_spans: Vec<ResourceSpans>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ResourceSpans {
    #[prost(message, repeated, tag = "2")]
    scope_spans: Vec<ScopeSpans>,
}

/// `ScopeSpans`, as far as how many spans it holds: a span is stepped over
/// by its length, as any field the sink does not read is, never read field
/// by field (prost's decoding of an empty message walks every field of
/// it: a quarter of the sink's CPU before).
#[derive(Clone, Debug, Default, PartialEq)]
struct ScopeSpans {
    spans: usize,
}

impl prost::Message for ScopeSpans {
    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        if tag == 2 {
            self.spans += 1;
        }
        skip_field(wire_type, tag, buf, ctx)
    }

    /// The sink only receives: nothing of this is ever sent.
    fn encode_raw(&self, _: &mut impl BufMut) {}

    fn encoded_len(&self) -> usize {
        0
    }

    fn clear(&mut self) {
        self.spans = 0;
    }
}

/// The trace service, counting.
#[derive(Clone)]
struct Traces(Arc<AtomicU64>);

impl NamedService for Traces {
    const NAME: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
}

impl tower::Service<http::Request<Body>> for Traces {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let count = self.clone();
        Box::pin(async move {
            let mut grpc = Grpc::new(ProstCodec::<ExportTraceServiceResponse, Spans>::default());
            Ok(grpc.unary(count, request).await)
        })
    }
}

impl UnaryService<Spans> for Traces {
    type Response = ExportTraceServiceResponse;
    type Future = Ready<Result<Response<ExportTraceServiceResponse>, Status>>;

    fn call(&mut self, request: Request<Spans>) -> Self::Future {
        let spans = request.get_ref().resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans);
        self.0.fetch_add(spans.sum::<usize>() as u64, Ordering::Relaxed);
        ready(Ok(Response::new(ExportTraceServiceResponse::default())))
    }
}

/// Serves the sink on `listener` (TCP_NODELAY set, [`otlp::incoming`])
/// until `shutdown`; `count` is the spans received.
pub async fn serve(
    listener: tokio::net::TcpListener,
    count: Arc<AtomicU64>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tonic::transport::Server::builder()
        .add_service(Traces(count))
        .add_service(MetricsServiceServer::new(Received::discarding()))
        .serve_with_incoming_shutdown(otlp::incoming(listener), shutdown)
        .await
        .unwrap();
}
