//! The gRPC front door (docs/architecture.md, "Front doors"): the
//! `toolgate.v1.ToolGatewayService` handlers, each converting the request,
//! calling the core and converting back; and the server that carries them
//! with health and reflection ([`serve`]).
//!
//! Nothing here decides anything another front door would need: who the
//! caller is comes from [`crate::identity`], what it may see and run from
//! [`crate::exec`]. What is gRPC's own: metadata in and out, the
//! `grpc-timeout` deadline, the SERVER span of each RPC, and the one map of
//! errors to statuses ([`status`]). Generated protobuf types are touched
//! here and in the CLI's `call` client, nowhere else.

mod convert;
mod observe;
mod serve;
mod status;

use std::{pin::pin, sync::Arc, time::Duration};

use tonic::{metadata::MetadataMap, Request, Response, Status};

pub(crate) use serve::GrpcDoor;

use crate::{
    catalog::render,
    exec::rate::Admitted,
    exec::Call,
    identity::Caller,
    live::{Snapshot, SnapshotSlot},
    proto::v1::{self as pb, tool_gateway_service_server::ToolGatewayService},
    server::Peer,
    telemetry::{propagation, Observer},
    tls::ServerTls,
};
use status::RpcError;

/// What this door calls itself in spans, metrics and audit lines.
pub(crate) const NAME: &str = "grpc";

/// The service: the slot of the current snapshot (swapped on reload); each
/// request works on the snapshot current when it started.
#[derive(Clone)]
pub struct Gateway {
    current: SnapshotSlot,
    /// The same for every snapshot (they share it).
    observer: Observer,
    /// The listener's TLS, whose client CA checks client certificates again
    /// after a rotation.
    tls: Option<Arc<ServerTls>>,
}

impl Gateway {
    pub(crate) fn new(current: SnapshotSlot) -> Self {
        let observer = current.load().executor.observer().clone();
        Self { current, observer, tls: None }
    }

    /// Client certificates are those `tls` (the listener's) accepted, and
    /// still trusts.
    pub(crate) fn with_tls(mut self, tls: Option<Arc<ServerTls>>) -> Self {
        self.tls = tls;
        self
    }

    /// The snapshot a request works on, who sent it (from its metadata and
    /// its connection's client certificate) and its place under the
    /// principal's limits ([`Snapshot::admit`]).
    async fn admitted(
        &self,
        metadata: &MetadataMap,
        extensions: &tonic::Extensions,
    ) -> Result<(Arc<Snapshot>, Caller, Admitted), RpcError> {
        let snapshot = self.current.load_full();
        let peer = extensions.get::<Peer>().cloned().unwrap_or_default();
        let presented = peer.presented(&snapshot.identity, metadata.as_ref(), self.tls.as_deref(), false);
        let (caller, admitted) = snapshot.admit(&presented.credentials(), None, |p| peer.authenticated(p)).await?;
        Ok((snapshot, caller, admitted))
    }
}

#[tonic::async_trait]
impl ToolGatewayService for Gateway {
    async fn resolve(&self, request: Request<pb::ResolveRequest>) -> Result<Response<pb::ResolveResponse>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let work = pin!(async {
            let (snapshot, caller, _admitted) = self.admitted(&metadata, &extensions).await?;
            let executor = &snapshot.executor;
            let resolution = executor.resolve(&caller, request.names, request.strict).await?;
            Ok(convert::resolve_response(executor.catalog(), &resolution))
        });
        observe::rpc(&self.observer, observe::RESOLVE, &metadata, work).await.map(Response::new)
    }

    async fn execute(&self, request: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let work = pin!(async {
            let (snapshot, caller, _admitted) = self.admitted(&metadata, &extensions).await?;
            let traceparent = propagation::caller_header(metadata.as_ref(), self.observer.tracer.is_some());
            let call: Call = convert::call(request, caller_deadline(&metadata), traceparent).by(caller);
            let outcome = snapshot.executor.execute(&call).await?;
            Ok(convert::execute_response(outcome, call.call_id))
        });
        observe::rpc(&self.observer, observe::EXECUTE, &metadata, work).await.map(Response::new)
    }

    async fn list_tools(
        &self,
        request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let work = pin!(async {
            let (snapshot, caller, _admitted) = self.admitted(&metadata, &extensions).await?;
            let catalog = snapshot.executor.catalog();
            let ids = snapshot.executor.list(&caller, request.tools).await?;
            let format = pb::ToolFormat::try_from(request.format).map_err(|_| RpcError::Format(request.format))?;
            let tools: Vec<_> = ids.into_iter().map(|id| catalog.tool(id)).collect();
            Ok(pb::ListToolsResponse {
                formatted_json: convert::tool_format(format)
                    .map(|f| render(tools.iter().copied(), f))
                    .unwrap_or_default(),
                tools: tools.into_iter().map(convert::tool).collect(),
                catalog_version: catalog.version().to_owned(),
            })
        });
        observe::rpc(&self.observer, observe::LIST_TOOLS, &metadata, work).await.map(Response::new)
    }

    async fn search_tools(
        &self,
        request: Request<pb::SearchToolsRequest>,
    ) -> Result<Response<pb::SearchToolsResponse>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let work = pin!(async {
            let (snapshot, caller, _admitted) = self.admitted(&metadata, &extensions).await?;
            let toolset = Some(request.toolset).filter(|toolset| !toolset.is_empty());
            let found = snapshot.executor.search(&caller, &request.query, request.limit, toolset).await?;
            let catalog = snapshot.executor.catalog();
            Ok(pb::SearchToolsResponse {
                tools: found.iter().map(|&(id, _)| convert::tool(catalog.tool(id))).collect(),
                scores: found.iter().map(|&(_, score)| score).collect(),
            })
        });
        observe::rpc(&self.observer, observe::SEARCH_TOOLS, &metadata, work).await.map(Response::new)
    }
}

/// How long the caller will wait (`grpc-timeout`), less a margin so that a
/// TIMEOUT answer reaches it before it gives up.
fn caller_deadline(metadata: &MetadataMap) -> Option<Duration> {
    // The name built once: looking up a name given as text parses it first.
    const GRPC_TIMEOUT: http::HeaderName = http::HeaderName::from_static("grpc-timeout");
    let text = metadata.as_ref().get(&GRPC_TIMEOUT)?.to_str().ok()?;
    let (digits, unit) = text.split_at(text.len().checked_sub(1)?);
    let amount: u64 = digits.parse().ok()?;
    let timeout = match unit {
        "H" => Duration::from_secs(amount.saturating_mul(3600)),
        "M" => Duration::from_secs(amount.saturating_mul(60)),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    };
    let margin = (timeout / 10).min(Duration::from_millis(50));
    Some(timeout.saturating_sub(margin))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(key: &'static str, value: &str) -> MetadataMap {
        let mut map = MetadataMap::new();
        map.insert(key, value.parse().unwrap());
        map
    }

    #[test]
    fn grpc_timeout_becomes_a_deadline_with_a_margin() {
        assert_eq!(caller_deadline(&metadata("grpc-timeout", "500m")), Some(Duration::from_millis(450)));
        assert_eq!(caller_deadline(&metadata("grpc-timeout", "10S")), Some(Duration::from_millis(9950)));
        assert_eq!(caller_deadline(&metadata("grpc-timeout", "2M")), Some(Duration::from_millis(119_950)));
        assert_eq!(caller_deadline(&metadata("grpc-timeout", "x")), None);
        assert_eq!(caller_deadline(&MetadataMap::new()), None);
    }
}
