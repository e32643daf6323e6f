//! Connections as a shared budget, through the real binary: a principal's
//! connections are bounded (`limits.connections_per_principal`), and idle
//! kept-alive connections never hold the permits others need.

use std::{
    io::{Read, Write},
    time::Duration,
};

use toolgate::proto::v1::{tool_gateway_service_client::ToolGatewayServiceClient, ExecuteRequest};

use crate::common::{listening_after, logged_after, CatalogDir};

/// The gateway serving `echo` (gRPC) and MCP, with `config`, run as
/// `prefix` says (`prlimit …`, or nothing); the gRPC and MCP addresses.
fn serve(dir: &CatalogDir, config: &str, prefix: &[&str]) -> (crate::common::Reaped, String, String) {
    dir.file("registry/tools.yaml", "tools:\n  - name: echo\n    description: x\n    backend: {builtin: echo}\n");
    dir.file("toolgate.yaml", config);
    let mut command = match prefix.split_first() {
        Some((program, args)) => {
            let mut command = std::process::Command::new(program);
            command.args(args).arg(env!("CARGO_BIN_EXE_toolgate"));
            command
        }
        None => crate::common::toolgate(),
    };
    command.current_dir(dir.dir.path()).args(["serve", "--catalog", "registry", "--config", "toolgate.yaml"]);
    command.args(["--listen", "127.0.0.1:0", "--mcp-listen", "127.0.0.1:0"]);
    let (child, _lines, listening, seen) = listening_after(&mut command);
    let mcp = logged_after(&seen, "MCP (streamable HTTP) on http://").trim_end_matches("/mcp").to_owned();
    (child, listening.split(' ').next().unwrap().to_owned(), mcp)
}

fn execute(key: Option<&str>) -> tonic::Request<ExecuteRequest> {
    let mut request =
        tonic::Request::new(ExecuteRequest { tool: "echo".into(), arguments_json: "{}".into(), ..Default::default() });
    if let Some(key) = key {
        request.metadata_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
    }
    request
}

/// A gRPC connection of its own (one channel, one connection).
async fn connection(addr: &str) -> ToolGatewayServiceClient<tonic::transport::Channel> {
    ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap()
}

/// A principal holds at most `limits.connections_per_principal`
/// connections, counted from each one's first authenticated request: the
/// next is refused (RESOURCE_EXHAUSTED) and closed; another principal is
/// served; a closed connection makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_connections_are_bounded() {
    let dir = CatalogDir::new();
    let (a, b) = (toolgate::identity::hash_key("key-a"), toolgate::identity::hash_key("key-b"));
    let config = format!(
        "principals:\n  - {{name: a, api_key_sha256: {a}, tools: ['*']}}\n  - {{name: b, api_key_sha256: {b}, tools: ['*']}}\n\
         limits: {{connections_per_principal: 2}}\n"
    );
    let (_gateway, grpc, _) = serve(&dir, &config, &[]);
    let mut first = connection(&grpc).await;
    let mut second = connection(&grpc).await;
    for client in [&mut first, &mut second] {
        assert!(client.execute(execute(Some("key-a"))).await.unwrap().into_inner().ok);
    }
    // Requests on a counted connection go on.
    assert!(first.execute(execute(Some("key-a"))).await.unwrap().into_inner().ok);
    let mut third = connection(&grpc).await;
    let refused = third.execute(execute(Some("key-a"))).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("connections_per_principal"), "{refused:?}");
    let mut other = connection(&grpc).await;
    assert!(other.execute(execute(Some("key-b"))).await.unwrap().into_inner().ok, "another principal's own bound");

    // A connection of a's closes: a new one is counted.
    drop(second);
    let mut served = false;
    for _ in 0..100 {
        let mut again = connection(&grpc).await;
        if again.execute(execute(Some("key-a"))).await.is_ok() {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served, "a closed connection never made room");
}

/// Idle kept-alive connections never hold the permits others need: under a
/// descriptor limit of 64 (a budget of about 40 connections), anonymous
/// MCP connections that each sent one request and stay open fill it; once
/// they have been idle 5 s, a new gRPC caller gets in (they are closed to
/// make room) and is served, long before the 5-minute idle limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_kept_alive_connections_make_room_for_new_callers() {
    let dir = CatalogDir::new();
    let (_gateway, grpc, mcp) = serve(&dir, "", &["prlimit", "--nofile=64:64", "--"]);
    let mcp_addr = mcp.trim_start_matches("http://").to_owned();
    let mut held = Vec::new();
    // Open connections until the gateway accepts no more (each sent one
    // request, answered; keep-alive).
    for _ in 0..64 {
        let Ok(mut stream) = std::net::TcpStream::connect(&mcp_addr) else { break };
        stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let request = format!("GET /not-here HTTP/1.1\r\nHost: {mcp_addr}\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = [0u8; 256];
        match stream.read(&mut answer) {
            Ok(n) if n > 0 => held.push(stream),
            // Not accepted (waits in the listen queue): the budget is full.
            _ => break,
        }
    }
    assert!(held.len() >= 16, "{} connections held", held.len());
    // Past 5 s idle, a new caller makes room and is served.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let served = tokio::time::timeout(Duration::from_secs(30), async {
        let mut client = connection(&grpc).await;
        client.execute(execute(None)).await.unwrap().into_inner().ok
    })
    .await;
    assert_eq!(served, Ok(true), "the new caller waited for a permit");
    drop(held);
}
