//! Load over loopback: Execute of the built-in `echo` through the gateway,
//! through the gateway exporting its telemetry over OTLP (to a sink process
//! that accepts and drops it), every trace and then 10 % of traces
//! (`OTEL_TRACES_SAMPLER=parentbased_traceidratio`), and through a bare tonic
//! service answering the same RPC with no work, at 1, 16 and 64 concurrent
//! streams, in one run.
//! Prints RPS, p50 and p99 of each, the gateway's share of the bare service's
//! throughput, and what exporting telemetry costs; at the end, after the
//! exporting gateways have shut down (flushing what they hold), how many of
//! the spans they made reached their sinks (each has its own).
//!
//! `cargo bench --bench load [-- --seconds 5 --rounds 3]`: each target is
//! measured `rounds` times, interleaved with the others, and the median is
//! shown (with the range of RPS).
//!
//! Each server runs in its own process (this binary, started with
//! `--serve gateway|bare`); the load comes from tonic clients in this one.
//! On a small machine the clients compete with the server for the CPU, so the
//! tool also prints each server's own CPU time per request (from
//! /proc/<pid>/stat), which does not depend on how fast the clients are.

// Benchmarks report what they measured and start the processes they measure.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::net::TcpListener;
use tonic::{transport::Channel, Request, Response, Status};
use toolgate::{
    catalog::{self, LoadOptions},
    config::Policy,
    env::Env,
    exec::{ExecLimits, Executor, Shared},
    mcp::McpPool,
    process::Inherited,
    proto::v1::{
        self as pb,
        tool_gateway_service_client::ToolGatewayServiceClient,
        tool_gateway_service_server::{ToolGatewayService, ToolGatewayServiceServer},
    },
    server,
    service::Gateway,
    telemetry::Telemetry,
};

/// The OTLP receiver of the tests, here as a sink that drops what it gets.
// The tests' OTLP receiver, as the sink: the bench uses a part of it.
#[path = "../tests/gateway/common/otlp.rs"]
#[allow(dead_code)]
mod otlp;

const STREAMS: [usize; 3] = [1, 16, 64];
const ARGUMENTS: &str = r#"{"message": "hello", "n": 42}"#;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--serve") {
        return serve(&args[at + 1]);
    }
    let option = |name: &str, default: u64| -> u64 {
        args.iter().position(|a| a == name).and_then(|at| args.get(at + 1)?.parse().ok()).unwrap_or(default)
    };
    let (seconds, rounds) = (option("--seconds", 5), option("--rounds", 3));
    let mut sink = Server::start("sink", &[]);
    let endpoint = format!("http://127.0.0.1:{}", sink.port);
    let mut sampled_sink = Server::start("sink", &[]);
    let sampled_endpoint = format!("http://127.0.0.1:{}", sampled_sink.port);
    let gateway = Server::start("gateway", &[]);
    let exporting = Server::start(
        "gateway",
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_METRIC_EXPORT_INTERVAL", "1000")],
    );
    let sampled = Server::start(
        "gateway",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", sampled_endpoint.as_str()),
            ("OTEL_METRIC_EXPORT_INTERVAL", "1000"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.1"),
        ],
    );
    let bare = Server::start("bare", &[]);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!(
        "{:<9} {:>7} {:>10} {:>17} {:>10} {:>10} {:>14} {:>14}",
        "target", "streams", "RPS", "(range)", "p50", "p99", "server CPU/req", "sink CPU/req"
    );
    let targets = [
        ("gateway", &gateway, None),
        ("exporting", &exporting, Some(&sink)),
        ("sampled", &sampled, Some(&sampled_sink)),
        ("bare", &bare, None),
    ];
    let mut ratios = Vec::new();
    let (mut exported_calls, mut sampled_calls) = (0, 0);
    for streams in STREAMS {
        // Rounds interleave the targets, so that a slow spell of the machine
        // does not fall on one of them only.
        let mut runs: Vec<Vec<Measured>> = targets.iter().map(|_| Vec::new()).collect();
        for _ in 0..rounds {
            for (at, (_, server, sink)) in targets.iter().enumerate() {
                runs[at].push(server.measure(&runtime, streams, seconds, sink.as_deref()));
            }
        }
        exported_calls += runs[1].iter().map(|m| m.calls).sum::<u64>();
        sampled_calls += runs[2].iter().map(|m| m.calls).sum::<u64>();
        let typical: Vec<Typical> = runs.iter().map(|runs| Typical::of(runs)).collect();
        for ((name, ..), t) in targets.iter().zip(&typical) {
            println!(
                "{name:<9} {streams:>7} {:>10.0} {:>17} {:>10?} {:>10?} {:>12.1}µs {:>14}",
                t.rps,
                format!("({:.0}–{:.0})", t.rps_min, t.rps_max),
                t.p50,
                t.p99,
                t.cpu_per_request_us,
                t.sink_cpu_per_request_us.map_or("-".to_owned(), |us| format!("{us:.1}µs"))
            );
        }
        let [g, e, s, b] = &typical[..] else { unreachable!("four targets") };
        ratios.push((streams, g.rps / b.rps, e.rps / g.rps, s.rps / g.rps));
    }
    for (streams, bare, export, sampled) in ratios {
        println!(
            "at {streams} streams: gateway / bare {:.1} %; exporting every span / not exporting {:.1} %; \
             exporting 10 % of traces / not exporting {:.1} %",
            bare * 100.0,
            export * 100.0,
            sampled * 100.0
        );
    }
    exporting.stop();
    sampled.stop();
    let received = |sink: &mut Server| sink.ask().parse::<u64>().expect("the sink answers a count");
    let (all, some) = (received(&mut sink), received(&mut sampled_sink));
    println!(
        "spans received: exporting every trace {all} of {} made ({:.1} %); sampled {some} ({:.1} % of the calls' spans)",
        2 * exported_calls,
        all as f64 / (2 * exported_calls) as f64 * 100.0,
        some as f64 / (2 * sampled_calls) as f64 * 100.0
    );
}

/// The median of several runs (RPS, CPU), with the RPS range; latencies
/// are those of the run with the median RPS.
struct Typical {
    rps: f64,
    rps_min: f64,
    rps_max: f64,
    p50: Duration,
    p99: Duration,
    cpu_per_request_us: f64,
    sink_cpu_per_request_us: Option<f64>,
}

impl Typical {
    fn of(runs: &[Measured]) -> Self {
        let median = |mut values: Vec<f64>| {
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        let mut by_rps: Vec<&Measured> = runs.iter().collect();
        by_rps.sort_by(|a, b| a.rps.total_cmp(&b.rps));
        let middle = by_rps[by_rps.len() / 2];
        let sinks: Option<Vec<f64>> = runs.iter().map(|m| m.sink_cpu_per_request_us).collect();
        Self {
            rps: middle.rps,
            rps_min: by_rps[0].rps,
            rps_max: by_rps[by_rps.len() - 1].rps,
            p50: middle.p50,
            p99: middle.p99,
            cpu_per_request_us: median(runs.iter().map(|m| m.cpu_per_request_us).collect()),
            sink_cpu_per_request_us: sinks.map(median),
        }
    }
}

struct Measured {
    /// Calls made, warm-up included.
    calls: u64,
    rps: f64,
    p50: Duration,
    p99: Duration,
    cpu_per_request_us: f64,
    /// What the sink receiving the telemetry used, on the same cores.
    sink_cpu_per_request_us: Option<f64>,
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
            let (mut latencies, mut calls) = (Vec::new(), 0);
            loop {
                let started = Instant::now();
                if started >= stop_at {
                    break;
                }
                let request =
                    pb::ExecuteRequest { tool: "echo".into(), arguments_json: ARGUMENTS.into(), ..Default::default() };
                let response = client.execute(request).await.expect("execute").into_inner();
                assert!(response.ok, "{response:?}");
                calls += 1;
                if started >= warm_until {
                    latencies.push(started.elapsed());
                }
            }
            (latencies, calls)
        }));
    }
    let (mut latencies, mut calls): (Vec<Duration>, u64) = (Vec::new(), 0);
    for task in tasks {
        let (some, made) = task.await.unwrap();
        latencies.extend(some);
        calls += made;
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Measured {
        calls,
        rps: latencies.len() as f64 / seconds as f64,
        p50: at(0.50),
        p99: at(0.99),
        cpu_per_request_us: 0.0,
        sink_cpu_per_request_us: None,
    }
}

/// A server process of this binary; killed when dropped. It prints its port
/// first; a sink then answers each line on its stdin with its span count.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    port: u16,
}

impl Server {
    fn start(kind: &str, env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--serve", kind])
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut server = Self { child, stdin, stdout, port: 0 };
        server.port = server.line().parse().expect("the server prints its port");
        server
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_owned()
    }

    /// Asks a sink how many spans it has received.
    fn ask(&mut self) -> String {
        writeln!(self.stdin.as_mut().unwrap()).unwrap();
        self.line()
    }

    /// Closes stdin, which shuts the server down gracefully, and waits.
    fn stop(mut self) {
        self.stdin = None;
        let _ = self.child.wait();
    }
}

impl Server {
    /// Drives the server and charges it the CPU time it used.
    fn measure(
        &self,
        runtime: &tokio::runtime::Runtime,
        streams: usize,
        seconds: u64,
        sink: Option<&Server>,
    ) -> Measured {
        let sink_before = sink.map(Server::cpu_seconds);
        let before = self.cpu_seconds();
        let started = Instant::now();
        let mut measured = runtime.block_on(drive(self.port, streams, seconds));
        let elapsed = started.elapsed().as_secs_f64();
        let requests = measured.rps * elapsed;
        measured.cpu_per_request_us = (self.cpu_seconds() - before) / requests * 1e6;
        measured.sink_cpu_per_request_us =
            sink.zip(sink_before).map(|(sink, before)| (sink.cpu_seconds() - before) / requests * 1e6);
        measured
    }

    /// User and system CPU time of the server process so far.
    fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name, which is in parentheses: utime is the 12th, stime the 13th.
        let fields: Vec<&str> =
            stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
        (ticks(11) + ticks(12)) / 100.0
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
        let received = otlp::Received::discarding();
        let count = received.span_count.clone();
        // Each line read is answered with the sink's span count; the end of
        // stdin is the end of the server.
        let stdin_closed = async {
            tokio::task::spawn_blocking(move || {
                for _ in std::io::stdin().lines().map_while(Result::ok) {
                    println!("{}", count.load(std::sync::atomic::Ordering::Relaxed));
                }
            })
            .await
            .ok();
        };
        match kind {
            "gateway" => {
                // Exports when OTEL_EXPORTER_OTLP_ENDPOINT is set, as `toolgate serve` does.
                let telemetry = Telemetry::start(&Env::from_process());
                let options = LoadOptions { registry: vec![], ..LoadOptions::default() };
                let catalog = catalog::load(&options, &Env::default()).expect("built-ins load").catalog;
                toolgate::tls::install_crypto_provider();
                let shared = Shared::new(McpPool::empty(), Inherited::default(), telemetry.observer()).unwrap();
                let executor = Executor::new(Arc::new(catalog), ExecLimits::default(), shared);
                let gateway = Gateway::fixed(executor, Policy::default());
                server::serve(listener, gateway, stdin_closed, Duration::from_secs(1)).await.unwrap();
                let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
            }
            "sink" => otlp::serve(listener, received, stdin_closed).await,
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
