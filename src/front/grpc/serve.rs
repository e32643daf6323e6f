//! The gRPC door's server: the gateway service, `grpc.health.v1`,
//! reflection (v1 and v1alpha), message and HTTP/2 limits, on the accepted
//! connections [`crate::server::serve`] hands it; and the probe port's
//! health-only door.

use tonic::transport::Server;
use tonic_health::{
    pb::health_server::HealthServer,
    server::{HealthReporter, HealthService},
    ServingStatus,
};

use super::Gateway;
use crate::{
    proto::{v1::tool_gateway_service_server::ToolGatewayServiceServer, FILE_DESCRIPTOR_SET, SERVICE_NAME},
    server::{connections::TrackCalls, Connections, Door, ServeError, Stopping},
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

/// The gRPC door: the gateway service, health and reflection, over the
/// connections [`server::serve`](crate::server::serve) accepted. When told
/// to stop, health turns NOT_SERVING before the last calls are drained.
pub(crate) struct GrpcDoor {
    gateway: Gateway,
    health: HealthReporter,
}

/// `grpc.health.v1`, answering what `reporter` reports.
fn health_service(reporter: &HealthReporter) -> HealthServer<HealthService> {
    HealthServer::new(HealthService::from_health_reporter(reporter.clone()))
}

impl GrpcDoor {
    /// The door of `gateway`, its health reported SERVING.
    pub(crate) async fn new(gateway: Gateway) -> Self {
        let health = HealthReporter::new();
        health.set_service_status("", ServingStatus::Serving).await;
        health.set_service_status(SERVICE_NAME, ServingStatus::Serving).await;
        Self { gateway, health }
    }

    /// The door of the probe port (`health_listen`): `grpc.health.v1` only,
    /// reporting what this door reports.
    pub(crate) fn health_only(&self) -> HealthDoor {
        HealthDoor { health: self.health.clone() }
    }
}

/// A server builder with the HTTP/2 settings every gRPC listener has. No
/// HTTP/2 keepalive PINGs: the kernel watches for a vanished peer
/// (`connections::accept`), at no cost per frame.
fn builder() -> Server {
    Server::builder()
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_ACCEPT_RESET_STREAMS))
        .http2_max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESET_STREAMS))
}

impl Door for GrpcDoor {
    fn name(&self) -> &'static str {
        super::NAME
    }

    async fn run(
        self,
        _local: Option<std::net::SocketAddr>,
        connections: Connections,
        stopping: Stopping,
    ) -> Result<(), ServeError> {
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
                // google.rpc.ErrorInfo and Status, so tools like grpcurl decode error details.
                .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
        };
        let gateway = ToolGatewayServiceServer::new(self.gateway)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let health_service = health_service(&self.health);
        let health = self.health;
        let stopping = async move {
            stopping.await;
            tracing::info!("shutting down: health is NOT_SERVING, draining calls in flight");
            health.set_service_status(SERVICE_NAME, ServingStatus::NotServing).await;
            health.set_service_status("", ServingStatus::NotServing).await;
        };
        builder()
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
            .http2_adaptive_window(Some(ADAPTIVE_WINDOW))
            .layer(TrackCalls)
            .add_service(health_service)
            .add_service(reflection().build_v1()?)
            .add_service(reflection().build_v1alpha()?)
            .add_service(gateway)
            .serve_with_incoming_shutdown(connections, stopping)
            .await?;
        Ok(())
    }
}

/// What the probe port's door calls itself, and its key among the doors'
/// listeners.
const HEALTH: &str = "health";

/// The probe port's door: `grpc.health.v1` alone, without credentials (for
/// probes: Kubernetes' send no client certificate).
pub(crate) struct HealthDoor {
    health: HealthReporter,
}

impl Door for HealthDoor {
    fn name(&self) -> &'static str {
        HEALTH
    }

    async fn run(
        self,
        _local: Option<std::net::SocketAddr>,
        connections: Connections,
        stopping: Stopping,
    ) -> Result<(), ServeError> {
        builder()
            .layer(TrackCalls)
            .add_service(health_service(&self.health))
            .serve_with_incoming_shutdown(connections, stopping)
            .await?;
        Ok(())
    }
}
