//! An OTLP receiver that keeps what it is sent (spans and metrics),
//! optionally slowly, or drops it (the load benchmark's sink uses this file
//! too): over gRPC (gzip accepted), plain or TLS, and over HTTP/protobuf,
//! plain or TLS.

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
    /// The HTTP headers of each export received over HTTP, with its path.
    pub http_requests: Arc<Mutex<Vec<(String, http::HeaderMap)>>>,
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
            http_requests: Arc::default(),
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
        self.keep_spans(request.into_inner());
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Received {
    fn keep_spans(&self, request: ExportTraceServiceRequest) {
        let spans = request.resource_spans;
        let count = spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len() as u64).sum();
        self.span_count.fetch_add(count, Ordering::Relaxed);
        if self.keep {
            self.spans.lock().unwrap().extend(spans);
        }
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
#[allow(dead_code)] // used by benches/load.rs, which shares this file
pub async fn serve(
    listener: tokio::net::TcpListener,
    received: Received,
    shutdown: impl std::future::Future<Output = ()>,
) {
    serve_tls(listener, received, None, shutdown).await
}

/// As [`serve`], over TLS with `identity` (certificate and key, PEM) when
/// there is one. Exports compressed with gzip are taken.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    received: Received,
    identity: Option<(String, String)>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use tonic::codec::CompressionEncoding::Gzip;
    let mut server = tonic::transport::Server::builder();
    if let Some((cert, key)) = identity {
        let tls = tonic::transport::ServerTlsConfig::new().identity(tonic::transport::Identity::from_pem(cert, key));
        server = server.tls_config(tls).unwrap();
    }
    server
        .add_service(TraceServiceServer::new(received.clone()).accept_compressed(Gzip))
        .add_service(MetricsServiceServer::new(received).accept_compressed(Gzip))
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
    start_grpc(received, None).await
}

/// Starts `received` over gRPC on 127.0.0.1:0, over TLS with `identity`
/// (certificate and key, PEM) when there is one.
#[allow(dead_code)] // not used by benches/load.rs, which shares this file
pub async fn start_grpc(received: Received, identity: Option<(String, String)>) -> (SocketAddr, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_tls(listener, received.clone(), identity, std::future::pending()));
    (addr, received)
}

/// Starts `received` as an OTLP/HTTP receiver (protobuf bodies, gzip
/// taken, on `/v1/traces` and `/v1/metrics`) on 127.0.0.1:0, over TLS with
/// `identity` when there is one; it serves until the runtime ends.
#[allow(dead_code)] // not used by benches/load.rs, which shares this file
pub async fn start_http(received: Received, identity: Option<(String, String)>) -> (SocketAddr, Received) {
    use std::sync::Arc;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = identity.map(|(cert, key)| {
        use rustls::pki_types::pem::PemObject;
        let certs = rustls_pemfile_certs(&cert);
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        let mut config = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(certs, key).unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    let serving = received.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (acceptor, received) = (acceptor.clone(), serving.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let received = received.clone();
                    async move { Ok::<_, std::convert::Infallible>(received.over_http(request).await) }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
                let _ = match acceptor {
                    Some(acceptor) => {
                        let Ok(stream) = acceptor.accept(stream).await else { return };
                        builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service).await
                    }
                    None => builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service).await,
                };
            });
        }
    });
    (addr, received)
}

fn rustls_pemfile_certs(pem: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()).map(Result::unwrap).collect()
}

impl Received {
    /// One OTLP/HTTP export: its body decoded (gunzipped first when so
    /// encoded) and kept as a gRPC one is.
    async fn over_http(&self, request: http::Request<hyper::body::Incoming>) -> http::Response<String> {
        use http_body_util::BodyExt;
        use prost::Message;
        let (parts, body) = request.into_parts();
        let path = parts.uri.path().to_owned();
        self.http_requests.lock().unwrap().push((path.clone(), parts.headers.clone()));
        let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
            return answer(400, "unreadable body");
        };
        let body = match parts.headers.get("content-encoding").map(|v| v.as_bytes()) {
            Some(b"gzip") => {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut out).unwrap();
                bytes::Bytes::from(out)
            }
            _ => body,
        };
        if self.answer().await.is_err() {
            return answer(503, "refused by the test collector");
        }
        match path.as_str() {
            "/v1/traces" => match ExportTraceServiceRequest::decode(body) {
                Ok(request) => self.keep_spans(request),
                Err(e) => return answer(400, &e.to_string()),
            },
            "/v1/metrics" => match ExportMetricsServiceRequest::decode(body) {
                Ok(request) if self.keep => self.metrics.lock().unwrap().extend(request.resource_metrics),
                Ok(_) => {}
                Err(e) => return answer(400, &e.to_string()),
            },
            _ => return answer(404, "no such path"),
        }
        answer(200, "")
    }
}

fn answer(status: u16, body: &str) -> http::Response<String> {
    let mut response = http::Response::new(body.to_owned());
    *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
    response.headers_mut().insert("content-type", http::HeaderValue::from_static("application/x-protobuf"));
    response
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
