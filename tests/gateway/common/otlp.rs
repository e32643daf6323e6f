//! An OTLP/gRPC receiver that keeps what it is sent (spans and metrics),
//! optionally slowly, or drops it (the load benchmark's sink uses this file
//! too).

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use opentelemetry_proto::tonic::{
    collector::{
        metrics::v1::{
            metrics_service_server::{MetricsService, MetricsServiceServer},
            ExportMetricsServiceRequest, ExportMetricsServiceResponse,
        },
        trace::v1::{
            trace_service_server::{TraceService, TraceServiceServer},
            ExportTraceServiceRequest, ExportTraceServiceResponse,
        },
    },
    metrics::v1::ResourceMetrics,
    trace::v1::ResourceSpans,
};
use tonic::{Request, Response, Status};

#[derive(Clone)]
pub struct Received {
    pub spans: Arc<Mutex<Vec<ResourceSpans>>>,
    pub metrics: Arc<Mutex<Vec<ResourceMetrics>>>,
    /// Spans received, kept or not.
    pub span_count: Arc<AtomicU64>,
    /// The gRPC metadata of each span export received.
    pub span_metadata: Arc<Mutex<Vec<tonic::metadata::MetadataMap>>>,
    delay: Duration,
    keep: bool,
    /// Answer every export with this error instead.
    refuse: Option<tonic::Code>,
}

impl Received {
    /// Keeps everything, answering after `delay`.
    pub fn keeping(delay: Duration) -> Self {
        Self {
            spans: Arc::default(),
            metrics: Arc::default(),
            span_count: Arc::default(),
            span_metadata: Arc::default(),
            delay,
            keep: true,
            refuse: None,
        }
    }

    /// Accepts everything at once and keeps nothing (the load bench's sink).
    #[allow(dead_code)] // used by benches/load.rs, which shares this file
    pub fn discarding() -> Self {
        Self { keep: false, ..Self::keeping(Duration::ZERO) }
    }

    /// Answers every export with `code`.
    pub fn refusing(code: tonic::Code) -> Self {
        Self { keep: false, refuse: Some(code), ..Self::keeping(Duration::ZERO) }
    }

    /// What every export meets first: the delay, then the refusal if any.
    async fn answer(&self) -> Result<(), Status> {
        tokio::time::sleep(self.delay).await;
        match self.refuse {
            Some(code) => Err(Status::new(code, "refused by the test collector")),
            None => Ok(()),
        }
    }
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        self.answer().await?;
        self.span_metadata.lock().unwrap().push(request.metadata().clone());
        let spans = request.into_inner().resource_spans;
        let count = spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len() as u64).sum();
        self.span_count.fetch_add(count, Ordering::Relaxed);
        if self.keep {
            self.spans.lock().unwrap().extend(spans);
        }
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Received {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        self.answer().await?;
        if self.keep {
            self.metrics.lock().unwrap().extend(request.into_inner().resource_metrics);
        }
        Ok(Response::new(ExportMetricsServiceResponse::default()))
    }
}

/// `listener`'s connections with TCP_NODELAY set, as collectors set it (Go
/// sets it on every connection): without it, an answer written in pieces
/// waited for the exporter's delayed acknowledgement, 40 ms for one batch
/// in ten under load.
pub fn incoming(listener: tokio::net::TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// Serves `received` on `listener` ([`incoming`]) until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    received: Received,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(received.clone()))
        .add_service(MetricsServiceServer::new(received))
        .serve_with_incoming_shutdown(incoming(listener), shutdown)
        .await
        .unwrap();
}

/// Starts a receiver on 127.0.0.1:0 keeping what it gets, answering after
/// `delay`; it serves until the runtime ends.
pub async fn receiver(delay: Duration) -> (SocketAddr, Received) {
    start(Received::keeping(delay)).await
}

/// Starts `received` on 127.0.0.1:0; it serves until the runtime ends.
pub async fn start(received: Received) -> (SocketAddr, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, received.clone(), std::future::pending()));
    (addr, received)
}

/// A received span event: its span's name, its name, attributes as text.
pub type EventRow = (String, String, Vec<(String, String)>);

/// A received span: trace id (hex), name, attributes as text.
pub type SpanRow = (String, String, Vec<(String, String)>);

impl Received {
    /// Every span received.
    pub fn span_list(&self) -> Vec<SpanRow> {
        let mut out = Vec::new();
        for resource in self.spans.lock().unwrap().iter() {
            for scope in &resource.scope_spans {
                for span in &scope.spans {
                    let trace: String = span.trace_id.iter().map(|b| format!("{b:02x}")).collect();
                    let attributes = span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), format!("{:?}", kv.value.as_ref().and_then(|v| v.value.clone()))))
                        .collect();
                    out.push((trace, span.name.clone(), attributes));
                }
            }
        }
        out
    }

    /// Every span event received: the span's name, the event's, and the
    /// event's attributes as text.
    #[allow(dead_code)] // not used by benches/load.rs, which shares this file
    pub fn span_events(&self) -> Vec<EventRow> {
        let spans = self.spans.lock().unwrap();
        let all = spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans);
        let text = |kv: &opentelemetry_proto::tonic::common::v1::KeyValue| {
            (kv.key.clone(), format!("{:?}", kv.value.as_ref().and_then(|v| v.value.clone())))
        };
        all.flat_map(|span| {
            span.events
                .iter()
                .map(|event| (span.name.clone(), event.name.clone(), event.attributes.iter().map(text).collect()))
        })
        .collect()
    }

    /// Every span received as (name, span id, parent span id), in hex.
    pub fn span_parents(&self) -> Vec<(String, String, String)> {
        let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let spans = self.spans.lock().unwrap();
        let all = spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans);
        all.map(|span| (span.name.clone(), hex(&span.span_id), hex(&span.parent_span_id))).collect()
    }

    /// The `service.name` of the resources that sent spans.
    pub fn service_names(&self) -> Vec<String> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .filter_map(|r| r.resource.as_ref())
            .flat_map(|r| r.attributes.iter())
            .filter(|kv| kv.key == "service.name")
            .map(|kv| format!("{:?}", kv.value.as_ref().and_then(|v| v.value.clone())))
            .collect()
    }

    pub fn metric_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .metrics
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| r.scope_metrics.iter())
            .flat_map(|s| s.metrics.iter())
            .map(|m| m.name.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}
