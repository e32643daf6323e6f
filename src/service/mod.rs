//! The `toolgate.v1.ToolGatewayService` handlers: convert the request, call
//! the domain, convert back; errors become statuses in `status` alone.
//! Generated protobuf types are touched here, in `server` and in the CLI's
//! `call` client, nowhere else.

mod convert;
mod observe;
pub mod status;

use std::{sync::Arc, time::Duration};

use arc_swap::ArcSwap;
use tonic::{metadata::MetadataMap, Request, Response, Status};

use crate::{
    catalog::{render, Catalog},
    config::Policy,
    exec::{Executor, ExecutorSlot},
    proto::v1::{self as pb, tool_gateway_service_server::ToolGatewayService},
    resolve::{self, check_names, Resolution, INLINE_NAMES},
    telemetry::{propagation, Observer},
};
use status::RpcError;

/// The gateway's shared state: the current executor (with its catalogue
/// snapshot, swapped when the catalogue changes) and the policy. Each request
/// works on the snapshot current when it started.
#[derive(Clone)]
pub struct Gateway {
    current: ExecutorSlot,
    policy: Policy,
    /// The same for every snapshot (they share it).
    observer: Observer,
}

impl Gateway {
    pub fn new(current: ExecutorSlot, policy: Policy) -> Self {
        let observer = current.load().shared().observer().clone();
        Self { current, policy, observer }
    }

    /// A gateway whose catalogue never changes.
    pub fn fixed(executor: Executor, policy: Policy) -> Self {
        Self::new(Arc::new(ArcSwap::from_pointee(executor)), policy)
    }

    fn executor(&self) -> Arc<Executor> {
        self.current.load_full()
    }

    /// Resolves `names` in `catalog`; large requests on the blocking pool.
    async fn resolve(catalog: &Arc<Catalog>, names: Vec<String>) -> Result<Resolution, RpcError> {
        if names.len() <= INLINE_NAMES {
            return Ok(resolve::resolve(catalog, &names));
        }
        let catalog = Arc::clone(catalog);
        tokio::task::spawn_blocking(move || resolve::resolve(&catalog, &names))
            .await
            .map_err(|err| RpcError::Internal(format!("resolution failed: {err}")))
    }
}

impl Gateway {
    async fn resolve_rpc(&self, request: pb::ResolveRequest) -> Result<pb::ResolveResponse, RpcError> {
        check_names("names", &request.names)?;
        let strict = self.policy.strict_for(request.strict);
        let catalog = self.executor().catalog().clone();
        let resolution = Self::resolve(&catalog, request.names).await?;
        observe::resolve_hints(&self.observer.metrics, &resolution);
        if strict && !resolution.unknown.is_empty() {
            return Err(RpcError::UnknownNames(resolution));
        }
        let message = resolution.message();
        if !message.is_empty() {
            tracing::warn!(unknown = resolution.unknown.len(), "{message}");
        }
        Ok(convert::resolve_response(&catalog, &resolution, message))
    }

    async fn execute_rpc(
        &self,
        metadata: &MetadataMap,
        request: pb::ExecuteRequest,
    ) -> Result<pb::ExecuteResponse, RpcError> {
        let strict = self.policy.strict_for(request.strict);
        let traceparent = propagation::caller_header(metadata.as_ref(), self.observer.tracer.is_some());
        let call = convert::call(request, strict, caller_deadline(metadata), traceparent);
        let outcome = self.executor().execute(&call).await?;
        Ok(convert::execute_response(outcome))
    }

    async fn list_tools_rpc(&self, request: pb::ListToolsRequest) -> Result<pb::ListToolsResponse, RpcError> {
        check_names("tools", &request.tools)?;
        let format = pb::ToolFormat::try_from(request.format).map_err(|_| RpcError::Format(request.format))?;
        let catalog = self.executor().catalog().clone();
        let tools: Vec<_> = if request.tools.is_empty() {
            catalog.tools().iter().collect()
        } else {
            let resolution = Self::resolve(&catalog, request.tools).await?;
            if !resolution.unknown.is_empty() {
                return Err(RpcError::UnknownNames(resolution));
            }
            resolution.tools.iter().map(|&id| catalog.tool(id)).collect()
        };
        Ok(pb::ListToolsResponse {
            formatted_json: convert::tool_format(format).map(|f| render(tools.iter().copied(), f)).unwrap_or_default(),
            tools: tools.into_iter().map(convert::tool).collect(),
            catalog_version: catalog.version().to_owned(),
        })
    }
}

#[tonic::async_trait]
impl ToolGatewayService for Gateway {
    async fn resolve(&self, request: Request<pb::ResolveRequest>) -> Result<Response<pb::ResolveResponse>, Status> {
        let (metadata, _, request) = request.into_parts();
        observe::rpc(&self.observer, observe::RESOLVE, &metadata, self.resolve_rpc(request)).await.map(Response::new)
    }

    async fn execute(&self, request: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        let (metadata, _, request) = request.into_parts();
        observe::rpc(&self.observer, observe::EXECUTE, &metadata, self.execute_rpc(&metadata, request))
            .await
            .map(Response::new)
    }

    async fn list_tools(
        &self,
        request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        let (metadata, _, request) = request.into_parts();
        observe::rpc(&self.observer, observe::LIST_TOOLS, &metadata, self.list_tools_rpc(request))
            .await
            .map(Response::new)
    }
}

/// How long the caller will wait (`grpc-timeout`), less a margin so that a
/// TIMEOUT answer reaches it before it gives up.
fn caller_deadline(metadata: &MetadataMap) -> Option<Duration> {
    let text = metadata.get("grpc-timeout")?.to_str().ok()?;
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
