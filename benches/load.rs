//! Load over loopback: Execute of the built-in `echo` through the gateway,
//! and in the same run a bare tonic service answering the same RPC with no
//! work, at 1, 16 and 64 concurrent streams. Prints RPS, p50 and p99 of
//! each, and the gateway's share of the bare service's throughput.
//!
//! `cargo bench --bench load [-- --seconds 5]`
//!
//! Each server runs in its own process (this binary, started with
//! `--serve gateway|bare`); the load comes from tonic clients in this one.

use std::{
    io::{BufRead, BufReader, Read},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::net::TcpListener;
use tonic::{transport::Channel, Request, Response, Status};
use toolgate::{
    catalog::{self, LoadOptions},
    config::Policy,
    env::Env,
    exec::{ExecLimits, Executor},
    proto::v1::{
        self as pb,
        tool_gateway_service_client::ToolGatewayServiceClient,
        tool_gateway_service_server::{ToolGatewayService, ToolGatewayServiceServer},
    },
    server,
    service::Gateway,
};

const STREAMS: [usize; 3] = [1, 16, 64];
const ARGUMENTS: &str = r#"{"message": "hello", "n": 42}"#;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--serve") {
        return serve(&args[at + 1]);
    }
    let seconds: u64 =
        args.iter().position(|a| a == "--seconds").and_then(|at| args.get(at + 1)?.parse().ok()).unwrap_or(5);
    let gateway = Server::start("gateway");
    let bare = Server::start("bare");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!("{:<8} {:>7} {:>10} {:>10} {:>10}", "target", "streams", "RPS", "p50", "p99");
    let mut ratios = Vec::new();
    for streams in STREAMS {
        let g = runtime.block_on(drive(gateway.port, streams, seconds));
        let b = runtime.block_on(drive(bare.port, streams, seconds));
        for (name, r) in [("gateway", &g), ("bare", &b)] {
            println!("{name:<8} {streams:>7} {:>10.0} {:>10?} {:>10?}", r.rps, r.p50, r.p99);
        }
        ratios.push((streams, g.rps / b.rps));
    }
    for (streams, ratio) in ratios {
        println!("gateway / bare at {streams} streams: {:.1} %", ratio * 100.0);
    }
}

struct Measured {
    rps: f64,
    p50: Duration,
    p99: Duration,
}

/// `streams` concurrent callers over a few HTTP/2 connections: 1 s of warm-up,
/// then `seconds` measured.
async fn drive(port: u16, streams: usize, seconds: u64) -> Measured {
    let connections = streams.clamp(1, 4);
    let mut channels = Vec::new();
    for _ in 0..connections {
        channels.push(Channel::from_shared(format!("http://127.0.0.1:{port}")).unwrap().connect().await.unwrap());
    }
    let warm_until = Instant::now() + Duration::from_secs(1);
    let stop_at = warm_until + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for i in 0..streams {
        let mut client = ToolGatewayServiceClient::new(channels[i % connections].clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let started = Instant::now();
                if started >= stop_at {
                    break;
                }
                let request =
                    pb::ExecuteRequest { tool: "echo".into(), arguments_json: ARGUMENTS.into(), ..Default::default() };
                let response = client.execute(request).await.expect("execute").into_inner();
                assert!(response.ok, "{response:?}");
                if started >= warm_until {
                    latencies.push(started.elapsed());
                }
            }
            latencies
        }));
    }
    let mut latencies: Vec<Duration> = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Measured { rps: latencies.len() as f64 / seconds as f64, p50: at(0.50), p99: at(0.99) }
}

/// A server process of this binary; killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(kind: &str) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--serve", kind])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        Self { child, port: line.trim().parse().expect("the server prints its port") }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Server mode: print the port, serve until stdin closes.
fn serve(kind: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap().port());
        let stdin_closed = async {
            tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await.ok();
        };
        match kind {
            "gateway" => {
                let options = LoadOptions { registry: vec![], ..LoadOptions::default() };
                let catalog = catalog::load(&options, &Env::default()).expect("built-ins load").catalog;
                let executor = Executor::new(Arc::new(catalog), ExecLimits::default()).unwrap();
                let gateway = Gateway::new(Arc::new(executor), Policy::default());
                server::serve(listener, gateway, stdin_closed, Duration::from_secs(1)).await.unwrap();
            }
            _ => {
                tonic::transport::Server::builder()
                    .add_service(ToolGatewayServiceServer::new(Bare))
                    .serve_with_incoming_shutdown(
                        tokio_stream::wrappers::TcpListenerStream::new(listener),
                        stdin_closed,
                    )
                    .await
                    .unwrap();
            }
        }
    });
}

/// The same RPC with no work: the floor of what tonic costs.
struct Bare;

#[tonic::async_trait]
impl ToolGatewayService for Bare {
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
}
