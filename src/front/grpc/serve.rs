//! The gRPC server: the gateway service, `grpc.health.v1`, reflection (v1
//! and v1alpha), message and HTTP/2 limits, on the accepted connections of
//! [`crate::server`], and graceful shutdown.

use std::{future::Future, sync::Arc};

use tokio::net::TcpListener;
use tonic::transport::Server;
use tonic_health::ServingStatus;

use super::Gateway;
use crate::{
    proto::{v1::tool_gateway_service_server::ToolGatewayServiceServer, FILE_DESCRIPTOR_SET, SERVICE_NAME},
    server::{
        connections::{Registry, TrackCalls},
        tls::TlsIncoming,
        ConnectionSettings, Incoming, ServerTls, Stop,
    },
};

/// The largest request or response message, as clients allow by default.
/// Smaller limits are enforced in-band by the handlers.
pub(crate) const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// Calls one HTTP/2 connection may carry at once. grpcio and grpc-go send
/// every call of a channel over one connection, and a tool call may take its
/// whole timeout (30 s by default), so hyper's default of 200 would cap an
/// agent backend's parallel slow calls; each tool's `max_concurrency` is the
/// limit that protects backends. At 64 streams 200, 256 and 1,024 measured
/// alike (docs/benchmarks.md).
pub(crate) const MAX_CONCURRENT_STREAMS: u32 = 1024;

/// Flow-control windows stay hyper's fixed 1 MiB per stream and per
/// connection: calls and answers are small (limits of 1 MiB and 4 MiB), and
/// the adaptive (BDP) window measured no faster on either small calls or
/// 256 KiB ones (docs/benchmarks.md), while it adds PING round trips.
const ADAPTIVE_WINDOW: bool = false;

/// Rapid-reset protection (CVE-2023-44487), hyper's defaults set here so
/// they are written down: at most this many streams a client opened and
/// reset before the server accepted them…
const MAX_PENDING_ACCEPT_RESET_STREAMS: usize = 20;
/// …and at most this many streams the server had to reset for the client's
/// errors; past either, the connection is closed with GOAWAY.
const MAX_LOCAL_ERROR_RESET_STREAMS: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("the server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// How the server treats connections, beyond the gateway itself.
#[derive(Default)]
pub struct Serving {
    pub(crate) connections: ConnectionSettings,
    /// TLS on the gateway's listener (certificates re-read on reload).
    pub(crate) tls: Option<Arc<ServerTls>>,
    /// A second, plaintext listener serving only `grpc.health.v1`, without
    /// credentials: for probes (Kubernetes' send no client certificate).
    pub(crate) health: Option<TcpListener>,
}

type Served = std::pin::Pin<Box<dyn Future<Output = Result<(), tonic::transport::Error>> + Send>>;

/// Serves `gateway`, health and reflection on `listener` until `stop`'s
/// shutdown completes. Then health turns NOT_SERVING, no new connection is
/// accepted, and calls in flight get up to the drain time to finish (or
/// none, once `stop`'s second signal comes).
pub(crate) async fn serve(
    listener: TcpListener,
    gateway: Gateway,
    stop: Stop<impl Future<Output = ()>, impl Future<Output = ()>>,
    serving: Serving,
) -> Result<(), ServeError> {
    let Stop { shutdown, drain, now } = stop;
    let Serving { connections, tls, health: health_listener } = serving;
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_service_status("", ServingStatus::Serving).await;
    health.set_service_status(SERVICE_NAME, ServingStatus::Serving).await;

    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            // google.rpc.ErrorInfo and Status, so tools like grpcurl decode error details.
            .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
    };
    let gateway = ToolGatewayServiceServer::new(gateway)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);

    let registry = Arc::new(Registry::default());
    let (keepalive, keepalive_timeout) = (connections.keepalive_interval, connections.keepalive_timeout);
    let handshake_timeout = connections.handshake_timeout;
    let incoming = Incoming::new(listener, connections.clone(), Arc::clone(&registry));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let stopping = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|&stop| stop).await;
        }
    };
    let health_only = health_listener.map(|listener| {
        // The probe port gets the guards of every port: capped, and closed
        // when silent or idle; its own small cap, so that silent
        // connections there never take the descriptors the gateway needs.
        let settings = connections.for_probes();
        let registry = Arc::new(Registry::default());
        let server = Server::builder()
            .http2_keepalive_interval(Some(settings.keepalive_interval))
            .http2_keepalive_timeout(Some(settings.keepalive_timeout))
            .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_ACCEPT_RESET_STREAMS))
            .http2_max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESET_STREAMS))
            .layer(TrackCalls::new(Arc::clone(&registry)))
            .add_service(health_service.clone())
            .serve_with_incoming_shutdown(Incoming::new(listener, settings, registry), stopping());
        tokio::spawn(async move {
            if let Err(err) = server.await {
                tracing::warn!("the health listener failed: {err}");
            }
        })
    });
    let router = Server::builder()
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .http2_adaptive_window(Some(ADAPTIVE_WINDOW))
        .http2_keepalive_interval(Some(keepalive))
        .http2_keepalive_timeout(Some(keepalive_timeout))
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_ACCEPT_RESET_STREAMS))
        .http2_max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESET_STREAMS))
        .layer(TrackCalls::new(registry))
        .add_service(health_service)
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?)
        .add_service(gateway);
    let server: Served = match tls {
        None => Box::pin(router.serve_with_incoming_shutdown(incoming, stopping())),
        Some(tls) => {
            let incoming = TlsIncoming::new(incoming, tls, handshake_timeout);
            Box::pin(router.serve_with_incoming_shutdown(incoming, stopping()))
        }
    };
    let _health_only = health_only.map(AbortOnDrop);
    tokio::pin!(server);

    tokio::select! {
        result = &mut server => return Ok(result?),
        () = shutdown => {}
    }
    tracing::info!("shutting down: health is NOT_SERVING, draining calls in flight");
    health.set_service_status(SERVICE_NAME, ServingStatus::NotServing).await;
    health.set_service_status("", ServingStatus::NotServing).await;
    let _ = stop.send(true);
    tokio::select! {
        result = tokio::time::timeout(drain, server) => match result {
            Ok(result) => Ok(result?),
            Err(_) => {
                tracing::warn!(drain_secs = drain.as_secs_f64(), "calls still in flight after the drain time; closing");
                Ok(())
            }
        },
        () = now => {
            tracing::warn!("asked again to stop: closing now, without waiting for calls in flight");
            Ok(())
        }
    }
}

/// A task ended when its handle goes.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
