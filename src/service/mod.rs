//! The `toolgate.v1.ToolGatewayService` handlers: convert the request, call
//! the domain, convert back; errors become statuses in `status` alone.
//! Generated protobuf types are touched here, in `server` and in the CLI's
//! `call` client, nowhere else.

mod convert;
mod observe;
pub mod status;

use std::{sync::Arc, time::Duration};

use tonic::{metadata::MetadataMap, Request, Response, Status};

use crate::{
    auth::{self, Credentials, Principals, UserVerifier},
    catalog::{render, Catalog},
    config::Policy,
    exec::{AvailableSet, Caller, Executor},
    live::{Snapshot, SnapshotSlot},
    proto::v1::{self as pb, tool_gateway_service_server::ToolGatewayService},
    resolve::{self, check_names, Resolution, INLINE_NAMES},
    telemetry::{propagation, Observer},
};
use status::RpcError;

/// The gateway's shared state: the current snapshot (executor, policy and
/// principals, swapped when the catalogue or configuration changes). Each
/// request works on the snapshot current when it started.
#[derive(Clone)]
pub struct Gateway {
    current: SnapshotSlot,
    /// The same for every snapshot (they share it).
    observer: Observer,
    /// Verifies end users' tokens, when configured.
    users: Option<Arc<UserVerifier>>,
}

impl Gateway {
    pub fn new(current: SnapshotSlot) -> Self {
        let observer = current.load().executor.shared().observer().clone();
        Self { current, observer, users: None }
    }

    /// A gateway whose snapshot never changes.
    pub fn fixed(executor: Executor, policy: Policy) -> Self {
        Self::new(Snapshot::slot(executor, policy))
    }

    /// Every call must prove one of `principals` (unless there are none),
    /// and sees only what its grants allow. Replaces the snapshot's
    /// principals (for a gateway whose snapshot never changes).
    pub fn with_principals(mut self, principals: Arc<Principals>) -> Self {
        let mut snapshot = Snapshot::clone(&self.current.load());
        snapshot.principals = (!principals.is_empty()).then_some(principals);
        self.current = Arc::new(arc_swap::ArcSwap::from_pointee(snapshot));
        self
    }

    /// End users' tokens are verified (when the request carries one).
    pub fn with_users(mut self, users: Option<Arc<UserVerifier>>) -> Self {
        self.users = users;
        self
    }

    /// The snapshot a request works on, held until it ends.
    fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Who sent a request, from its metadata and its connection's client
    /// certificate; UNAUTHENTICATED with one message when it proves no
    /// principal, or carries a user token that does not verify.
    fn caller(
        &self,
        snapshot: &Snapshot,
        metadata: &MetadataMap,
        extensions: &tonic::Extensions,
    ) -> Result<Caller, RpcError> {
        let refused = || RpcError::Unauthenticated(auth::UNAUTHENTICATED.to_owned());
        let mut caller = match &snapshot.principals {
            None => Caller::default(),
            Some(principals) => {
                let authorization: Vec<Option<&str>> =
                    metadata.get_all("authorization").iter().map(|v| v.to_str().ok()).collect();
                let names = client_certificate_names(extensions);
                let credentials = Credentials { authorization: &authorization, certificate: names.as_deref() };
                principals.authenticate(credentials).map_err(|_| refused())?
            }
        };
        if let Some(users) = &self.users {
            let tokens: Vec<_> = metadata.get_all(users.header()).iter().collect();
            match tokens.as_slice() {
                [] => {}
                [token] => {
                    let token = token.to_str().map_err(|_| refused())?;
                    match users.verify(token.trim()) {
                        Ok(user) => caller.user = Some(user),
                        Err(why) => {
                            tracing::info!("a user token was refused: {why}");
                            return Err(refused());
                        }
                    }
                }
                _ => return Err(refused()),
            }
        }
        Ok(caller)
    }

    /// Resolves `names` in `catalog` among the tools of `visible`; large
    /// requests on the blocking pool.
    async fn resolve(
        catalog: &Arc<Catalog>,
        names: Vec<String>,
        visible: AvailableSet,
    ) -> Result<Resolution, RpcError> {
        let run = move |catalog: &Catalog, names: &[String]| {
            resolve::resolve_within(catalog, names, usize::MAX, &|id| visible.contains(id))
        };
        if names.len() <= INLINE_NAMES {
            return Ok(run(catalog, &names));
        }
        let catalog = Arc::clone(catalog);
        tokio::task::spawn_blocking(move || run(&catalog, &names))
            .await
            .map_err(|err| RpcError::Internal(format!("resolution failed: {err}")))
    }
}

/// The names of the client certificate the connection presented (mTLS).
fn client_certificate_names(extensions: &tonic::Extensions) -> Option<Vec<String>> {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
    let info = extensions.get::<TlsConnectInfo<TcpConnectInfo>>()?;
    let certs = info.peer_certs()?;
    Some(auth::names_of(certs.first()?.as_ref()))
}

impl Gateway {
    async fn resolve_rpc(
        &self,
        snapshot: &Snapshot,
        caller: Caller,
        request: pb::ResolveRequest,
    ) -> Result<pb::ResolveResponse, RpcError> {
        check_names("names", &request.names)?;
        let strict = snapshot.policy.strict_for(request.strict);
        let executor = &snapshot.executor;
        let catalog = executor.catalog().clone();
        let resolution = Self::resolve(&catalog, request.names, executor.visible(&caller)).await?;
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
        snapshot: &Snapshot,
        caller: Caller,
        metadata: &MetadataMap,
        request: pb::ExecuteRequest,
    ) -> Result<pb::ExecuteResponse, RpcError> {
        let strict = snapshot.policy.strict_for(request.strict);
        let traceparent = propagation::caller_header(metadata.as_ref(), self.observer.tracer.is_some());
        let mut call = convert::call(request, strict, caller_deadline(metadata), traceparent);
        call.caller = caller;
        let outcome = snapshot.executor.execute(&call).await?;
        Ok(convert::execute_response(outcome, call.call_id))
    }

    async fn list_tools_rpc(
        &self,
        snapshot: &Snapshot,
        caller: Caller,
        request: pb::ListToolsRequest,
    ) -> Result<pb::ListToolsResponse, RpcError> {
        check_names("tools", &request.tools)?;
        let format = pb::ToolFormat::try_from(request.format).map_err(|_| RpcError::Format(request.format))?;
        let executor = &snapshot.executor;
        let catalog = executor.catalog().clone();
        let visible = executor.visible(&caller);
        let tools: Vec<_> = if request.tools.is_empty() {
            let ids = (0..catalog.tools().len()).map(|i| crate::catalog::ToolId(i as u32));
            ids.filter(|&id| visible.contains(id)).map(|id| catalog.tool(id)).collect()
        } else {
            let resolution = Self::resolve(&catalog, request.tools, visible).await?;
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
        let (metadata, extensions, request) = request.into_parts();
        let work = async {
            let snapshot = self.snapshot();
            let caller = self.caller(&snapshot, &metadata, &extensions)?;
            self.resolve_rpc(&snapshot, caller, request).await
        };
        observe::rpc(&self.observer, observe::RESOLVE, &metadata, work).await.map(Response::new)
    }

    async fn execute(&self, request: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let work = async {
            let snapshot = self.snapshot();
            let caller = self.caller(&snapshot, &metadata, &extensions)?;
            self.execute_rpc(&snapshot, caller, &metadata, request).await
        };
        observe::rpc(&self.observer, observe::EXECUTE, &metadata, work).await.map(Response::new)
    }

    async fn list_tools(
        &self,
        request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let work = async {
            let snapshot = self.snapshot();
            let caller = self.caller(&snapshot, &metadata, &extensions)?;
            self.list_tools_rpc(&snapshot, caller, request).await
        };
        observe::rpc(&self.observer, observe::LIST_TOOLS, &metadata, work).await.map(Response::new)
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
