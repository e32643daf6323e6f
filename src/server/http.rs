//! The connection loop of the doors that speak HTTP through hyper (MCP's
//! streamable HTTP, the model door): each accepted connection served
//! HTTP/1.1 or HTTP/2 by hyper, every request handed to the door's edge
//! ([`HttpEdge`]) with who sent it, until the door is told to stop; then
//! the connections finish what they have.

use std::{convert::Infallible, future::Future, sync::Arc};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::BoxBody;
use hyper::{body::Incoming, Request, Response};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto::Builder,
};
use tonic::transport::server::Connected;

use super::{Connections, Peer, Stopping};

/// What an HTTP door answers.
pub(crate) type Reply = Response<BoxBody<Bytes, Infallible>>;

/// A door's answer to each request: the request and who sent it (the
/// peer's address, what its connection presented, its calls).
pub(crate) trait HttpEdge: Send + Sync + 'static {
    fn handle(&self, request: Request<Incoming>, connected: &Peer) -> impl Future<Output = Reply> + Send;
}

/// Serves every connection of `connections` with `edge` until `stopping`
/// completes, then waits for the connections' requests in flight. `door`
/// names the door in the log line of a connection that ended in error.
pub(crate) async fn serve_http(
    door: &'static str,
    edge: Arc<impl HttpEdge>,
    mut connections: Connections,
    mut stopping: Stopping,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let builder = Builder::new(TokioExecutor::new());
    loop {
        let conn = tokio::select! {
            next = connections.next() => match next {
                Some(Ok(conn)) => conn,
                Some(Err(_)) => continue,
                None => break,
            },
            () = &mut stopping => break,
        };
        let connected = conn.connect_info();
        let Some(peer) = connected.addr else { continue };
        let edge = Arc::clone(&edge);
        let service = hyper::service::service_fn(move |request| {
            let (edge, connected) = (Arc::clone(&edge), connected.clone());
            async move { Ok::<_, Infallible>(edge.handle(request, &connected).await) }
        });
        let connection =
            graceful.watch(builder.serve_connection_with_upgrades(TokioIo::new(conn), service).into_owned());
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(door, peer = %peer, "connection ended: {err}");
            }
        });
    }
    graceful.shutdown().await;
}
