//! Serves the gateway's gRPC service on 127.0.0.1:0 with plain tonic:
//! Execute answers `ok` with the request's arguments as arguments and
//! result, the rest UNIMPLEMENTED. Prints its port, and serves until its
//! stdin closes (as the load bench's servers do).

use tokio::io::AsyncReadExt;
use tonic::{Request, Response, Status};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[allow(dead_code)] // the messages of the RPCs this server does not answer
mod pb {
    tonic::include_proto!("toolgate.v1");
}

use pb::tool_gateway_service_server::{ToolGatewayService, ToolGatewayServiceServer};

struct Echo;

#[tonic::async_trait]
impl ToolGatewayService for Echo {
    async fn resolve(&self, _: Request<pb::ResolveRequest>) -> Result<Response<pb::ResolveResponse>, Status> {
        Err(Status::unimplemented("bare"))
    }

    async fn execute(&self, request: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        let request = request.into_inner();
        Ok(Response::new(pb::ExecuteResponse {
            ok: true,
            tool: request.tool,
            result_json: request.arguments_json.clone(),
            arguments_json: request.arguments_json,
            ..Default::default()
        }))
    }

    async fn list_tools(&self, _: Request<pb::ListToolsRequest>) -> Result<Response<pb::ListToolsResponse>, Status> {
        Err(Status::unimplemented("bare"))
    }

    async fn search_tools(
        &self,
        _: Request<pb::SearchToolsRequest>,
    ) -> Result<Response<pb::SearchToolsResponse>, Status> {
        Err(Status::unimplemented("bare"))
    }
}

#[tokio::main]
async fn main() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    println!("{}", listener.local_addr().expect("an address").port());
    let stdin_closed = async {
        let mut sink = Vec::new();
        let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    };
    tonic::transport::Server::builder()
        .add_service(ToolGatewayServiceServer::new(Echo))
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            stdin_closed,
        )
        .await
        .expect("serves");
}
