//! Load over loopback, measured as real clients call: Execute of the
//! built-in `echo` through the gateway and through a bare tonic service
//! answering the same RPC with no work, side by side in one run, for each
//! shape of client:
//!
//! - tonic clients in this process: one stream (latency); one HTTP/2
//!   connection carrying 64 streams (as grpcio and grpc-go multiplex every
//!   call of a channel); 16 connections × 4 streams;
//! - `h2load` (Debian's `nghttp2-client`), an external generator: one
//!   connection with 64 streams, and with one, a pre-encoded request;
//! - Python's grpcio (`benches/grpcio_load.py`): one channel, 64 concurrent
//!   calls from asyncio, and one call at a time.
//!
//! The external clients run when they are installed (docs/benchmarks.md says
//! how); the tool says when one is not. With `--telemetry` the gateway is
//! also measured exporting its telemetry over OTLP (to a sink process that
//! accepts and drops it): metrics alone (`OTEL_TRACES_EXPORTER=none`), and
//! metrics with every trace and with 10 % of traces
//! (`OTEL_TRACES_SAMPLER=parentbased_traceidratio`), with tonic clients; at
//! the end, after those gateways have shut down (flushing what they hold),
//! how many of the spans they made reached their sinks.
//!
//! `cargo bench --bench load [-- --seconds 5 --rounds 3 --telemetry --tls --state]`
//! (`--state-only`: only the idempotency rows; `--telemetry-only`: only the
//! telemetry rows): each
//! target is measured `rounds` times, interleaved with the others, and the
//! median is shown (with the range of RPS). Prints RPS, mean, p50 and p99
//! (h2load reports no percentiles), and each server's own CPU time per
//! request (from /proc/<pid>/stat), which does not depend on how fast the
//! clients are: on a small machine they compete with the server for the CPU.
//!
//! Each server runs in its own process (this binary, started with
//! `--serve bare|bare-accept|sink`: the bare service plain, or behind
//! the gateway's own accept path); the gateway is the real `toolgate serve` on the
//! built-in tools.

// Benchmarks report what they measured and start the processes they measure.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]
// The support modules are modules of this one binary.
#![allow(unreachable_pub)]

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use tokio::net::TcpListener;
use tonic::{transport::Channel, Request, Response, Status};
use toolgate::proto::v1::{
    self as pb,
    tool_gateway_service_client::ToolGatewayServiceClient,
    tool_gateway_service_server::{ToolGatewayService, ToolGatewayServiceServer},
};

#[path = "support/serve.rs"]
mod serve;

/// The OTLP sink: counts spans, keeps nothing.
#[path = "support/sink.rs"]
mod sink;

// The tests' OTLP receiver, discarding: the sink's metrics service.
#[path = "../tests/gateway/common/otlp.rs"]
#[allow(dead_code)]
mod otlp;

const ARGUMENTS: &str = r#"{"message": "hello", "n": 42}"#;
/// h2load's shapes: streams on its one connection.
const H2LOAD_STREAMS: [usize; 2] = [64, 1];
const PYTHON_CONCURRENCY: [usize; 2] = [64, 1];

/// How a client calls: over how many connections, how many calls at once.
#[derive(Clone, Copy)]
struct Shape {
    name: &'static str,
    connections: usize,
    streams: usize,
}

const SHAPES: [Shape; 3] = [
    Shape { name: "1 stream", connections: 1, streams: 1 },
    Shape { name: "1 conn x 64", connections: 1, streams: 64 },
    Shape { name: "16 conns x 4", connections: 16, streams: 64 },
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--serve") {
        return serve(&args[at + 1]);
    }
    let option = |name: &str, default: u64| -> u64 {
        args.iter().position(|a| a == name).and_then(|at| args.get(at + 1)?.parse().ok()).unwrap_or(default)
    };
    let (seconds, rounds) = (option("--seconds", 5), option("--rounds", 3));
    let telemetry = args.iter().any(|a| a == "--telemetry");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let gateway = Server::toolgate(&[]);
    if args.iter().any(|a| a == "--state-only") {
        return state_costs(&runtime, &gateway, seconds, rounds);
    }
    if args.iter().any(|a| a == "--telemetry-only") {
        return telemetry_costs(&runtime, &gateway, seconds, rounds);
    }
    // Plain tonic in its own binary: no code of the gateway's, no
    // dev-dependency features (docs/benchmarks.md, "One method for both sides").
    let bare = Server::spawn(Command::new(serve::bare_echo()));
    let accept = Server::start("bare-accept", &[]);
    Row::header();
    let mut ratios = Vec::new();

    // tonic clients, in this process.
    for shape in SHAPES {
        let drive = |server: &Server| {
            server.measure(|| runtime.block_on(drive(server.port, shape.connections, shape.streams, seconds)))
        };
        let [g, b, a] = interleaved(rounds, [&gateway, &bare, &accept], drive);
        ratios.push(Ratio::of(format!("tonic, {}", shape.name), &g, &b));
        ratios.push(Ratio::of(format!("tonic, {} (accept path)", shape.name), &a, &b));
        Row::print("tonic", shape.name, [("gateway", &g), ("bare", &b), ("bare+acc", &a)]);
    }

    // h2load: one connection, 64 streams and one, an external generator.
    match H2load::prepare() {
        Some(h2load) => {
            for streams in H2LOAD_STREAMS {
                let [g, b, a] = interleaved(rounds, [&gateway, &bare, &accept], |server: &Server| {
                    server.measure(|| h2load.run(server.port, seconds, streams))
                });
                let shape = format!("1 conn x {streams}");
                ratios.push(Ratio::of(format!("h2load, {shape}"), &g, &b));
                ratios.push(Ratio::of(format!("h2load, {shape} (accept path)"), &a, &b));
                Row::print("h2load", &shape, [("gateway", &g), ("bare", &b), ("bare+acc", &a)]);
            }
        }
        None => println!("(h2load is not installed: apt-get install nghttp2-client)"),
    }

    // Python's grpcio: one channel.
    match python_with_grpcio() {
        Some(python) => {
            for concurrency in PYTHON_CONCURRENCY {
                let shape =
                    if concurrency == 1 { "1 call at a time".to_owned() } else { format!("1 channel x {concurrency}") };
                let [g, b] = interleaved(rounds, [&gateway, &bare], |server: &Server| {
                    server.measure(|| grpcio(&python, server.port, seconds, concurrency))
                });
                ratios.push(Ratio::of(format!("grpcio, {shape}"), &g, &b));
                Row::print("grpcio", &shape, [("gateway", &g), ("bare", &b)]);
            }
        }
        None => println!("(no Python with grpcio: .venv/bin/pip install grpcio grpcio-tools)"),
    }
    println!();
    for ratio in &ratios {
        ratio.print();
    }
    if telemetry {
        telemetry_costs(&runtime, &gateway, seconds, rounds);
    }
    if args.iter().any(|a| a == "--tls") {
        tls_costs(&runtime, &gateway, seconds, rounds);
    }
    if args.iter().any(|a| a == "--state") {
        state_costs(&runtime, &gateway, seconds, rounds);
    }
}

/// Calls without a key, with a key of their own each on the memory store,
/// and on Redis on loopback (a `redis-server` started here), side by side.
fn state_costs(runtime: &tokio::runtime::Runtime, memory: &Server, seconds: u64, rounds: u64) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let Ok(mut redis) = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
    else {
        println!("(no redis-server: apt-get install redis-server)");
        return;
    };
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let catalog = tempfile::tempdir().unwrap();
    std::fs::write(catalog.path().join("tools.yaml"), "tools: []\n").unwrap();
    // Not in the catalogue folder, where it would be read as a catalogue file.
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("toolgate.yaml");
    std::fs::write(&config, format!("state: {{redis: \"redis://127.0.0.1:{port}/0\"}}\n")).unwrap();
    let (child, gateway_port) = serve::start_with(catalog.path(), &[], &["--config", config.to_str().unwrap()]);
    let shared = Server { child, stdin: None, stdout: None, port: gateway_port, _catalog: None };
    // The same, with a tool limit on echo that never refuses: what a keyed
    // call with a limit costs on Redis.
    let limited_config = config_dir.path().join("limited.yaml");
    std::fs::write(
        &limited_config,
        format!(
            "state: {{redis: \"redis://127.0.0.1:{port}/0\"}}\nrate_limits:\n  tools:\n    \
             echo: {{per_minute: 600000000, burst: 100000000, per: all}}\n"
        ),
    )
    .unwrap();
    let (child, limited_port) = serve::start_with(catalog.path(), &[], &["--config", limited_config.to_str().unwrap()]);
    let limited = Server { child, stdin: None, stdout: None, port: limited_port, _catalog: Some(catalog) };
    println!();
    println!("Idempotency keys, a key of its own for every call, tonic clients:");
    Row::header();
    for shape in [&SHAPES[0], &SHAPES[1]] {
        let cases: [(&Server, bool); 4] = [(memory, false), (memory, true), (&shared, true), (&limited, true)];
        let mut runs: Vec<Vec<Measured>> = vec![Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..rounds {
            for (at, (server, keyed)) in cases.iter().enumerate() {
                let measured = server.measure(|| {
                    runtime.block_on(drive_tls(server.port, shape.connections, shape.streams, seconds, None, *keyed))
                });
                runs[at].push(measured);
            }
        }
        let [none, in_memory, on_redis, with_limit] =
            [Typical::of(&runs[0]), Typical::of(&runs[1]), Typical::of(&runs[2]), Typical::of(&runs[3])];
        Row::print(
            "tonic",
            shape.name,
            [
                ("no key", &none),
                ("key, memory", &in_memory),
                ("key, Redis", &on_redis),
                ("key+limit, Redis", &with_limit),
            ],
        );
    }
    shared.stop();
    limited.stop();
    let _ = redis.kill();
    let _ = redis.wait();
}

/// The gateway over TLS (a certificate made here) against the same gateway
/// in plaintext, with tonic clients, side by side in one run.
fn tls_costs(runtime: &tokio::runtime::Runtime, plaintext: &Server, seconds: u64, rounds: u64) {
    let ca = {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap()).unwrap()
    };
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap().signed_by(&key, &ca).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("server.pem"), dir.path().join("server.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let catalog = tempfile::tempdir().unwrap();
    std::fs::write(catalog.path().join("tools.yaml"), "tools: []\n").unwrap();
    let args = ["--tls-cert", cert_path.to_str().unwrap(), "--tls-key", key_path.to_str().unwrap()];
    let (child, port) = serve::start_with(catalog.path(), &[], &args);
    let secure = Server { child, stdin: None, stdout: None, port, _catalog: Some(catalog) };
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(ca.pem()))
        .domain_name("localhost");
    println!();
    println!("TLS against plaintext, the same gateway, tonic clients:");
    Row::header();
    for shape in SHAPES {
        let [t, p] = interleaved(rounds, [&secure, plaintext], |server: &Server| {
            let tls = (server.port == secure.port).then_some(&tls);
            server.measure(|| {
                runtime.block_on(drive_tls(server.port, shape.connections, shape.streams, seconds, tls, false))
            })
        });
        Row::print("tonic", shape.name, [("TLS", &t), ("plaintext", &p)]);
        println!(
            "{:<26} TLS / plaintext RPS {:.2}; server CPU/req TLS - plaintext {:+.1} µs",
            format!("tonic, {}", shape.name),
            t.rps / p.rps,
            t.cpu_per_request_us - p.cpu_per_request_us
        );
    }
    secure.stop();
}

/// Measures each server `rounds` times, interleaved, so that a slow spell of
/// the machine does not fall on one of them only; the median of each.
fn interleaved<const N: usize>(
    rounds: u64,
    servers: [&Server; N],
    mut measure: impl FnMut(&Server) -> Measured,
) -> [Typical; N] {
    let mut runs: Vec<Vec<Measured>> = servers.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (at, server) in servers.iter().enumerate() {
            runs[at].push(measure(server));
        }
    }
    let typical: Vec<Typical> = runs.iter().map(|runs| Typical::of(runs)).collect();
    typical.try_into().unwrap_or_else(|_| unreachable!("one per server"))
}

/// One line of the table.
struct Row;

impl Row {
    fn header() {
        println!(
            "{:<7} {:<17} {:<8} {:>9} {:>17} {:>9} {:>9} {:>9} {:>14}",
            "client", "shape", "target", "RPS", "(range)", "mean", "p50", "p99", "server CPU/req"
        );
    }

    fn print<const N: usize>(client: &str, shape: &str, rows: [(&str, &Typical); N]) {
        let shown = |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:.0?}", d));
        for (target, t) in rows {
            println!(
                "{client:<7} {shape:<17} {target:<8} {:>9.0} {:>17} {:>9} {:>9} {:>9} {:>12.1}µs",
                t.rps,
                format!("({:.0}–{:.0})", t.rps_min, t.rps_max),
                shown(Some(t.mean)),
                shown(t.p50),
                shown(t.p99),
                t.cpu_per_request_us,
            );
        }
    }
}

/// The gateway against the bare service for one client shape.
struct Ratio {
    what: String,
    rps: f64,
    p50_gap: Option<f64>,
    cpu_gap: f64,
}

impl Ratio {
    fn of(what: String, gateway: &Typical, bare: &Typical) -> Self {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        Self {
            what,
            rps: gateway.rps / bare.rps,
            p50_gap: gateway.p50.zip(bare.p50).map(|(g, b)| us(g) - us(b)),
            cpu_gap: gateway.cpu_per_request_us - bare.cpu_per_request_us,
        }
    }

    fn print(&self) {
        let p50 = self.p50_gap.map_or("-".to_owned(), |gap| format!("{gap:+.0} µs"));
        println!(
            "{:<26} gateway / bare RPS {:.2}; p50 gateway - bare {p50}; server CPU/req gateway - bare {:+.1} µs",
            self.what, self.rps, self.cpu_gap
        );
    }
}

/// What exporting telemetry costs, with tonic clients, against the gateway
/// that does not export.
fn telemetry_costs(runtime: &tokio::runtime::Runtime, gateway: &Server, seconds: u64, rounds: u64) {
    let mut sink = Server::start("sink", &[]);
    let endpoint = format!("http://127.0.0.1:{}", sink.port);
    let mut sampled_sink = Server::start("sink", &[]);
    let sampled_endpoint = format!("http://127.0.0.1:{}", sampled_sink.port);
    // Metrics alone (traces not exported): what the spans add on top.
    let metrics_sink = Server::start("sink", &[]);
    let metrics_endpoint = format!("http://127.0.0.1:{}", metrics_sink.port);
    let metrics_only = Server::toolgate(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", metrics_endpoint.as_str()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "1000"),
        ("OTEL_TRACES_EXPORTER", "none"),
    ]);
    let exporting = Server::toolgate(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "1000"),
    ]);
    let sampled = Server::toolgate(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", sampled_endpoint.as_str()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "1000"),
        ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
        ("OTEL_TRACES_SAMPLER_ARG", "0.1"),
    ]);
    println!("\ntelemetry, tonic clients:");
    Row::header();
    let (mut exported_calls, mut sampled_calls) = (0, 0);
    let mut lines = Vec::new();
    for shape in SHAPES {
        let sinks = [None, Some(&metrics_sink), Some(&sink), Some(&sampled_sink)];
        let mut calls = [0u64; 4];
        let [g, m, e, s] = {
            let servers = [gateway, &metrics_only, &exporting, &sampled];
            let mut runs: Vec<Vec<Measured>> = vec![Vec::new(), Vec::new(), Vec::new(), Vec::new()];
            for _ in 0..rounds {
                for (at, server) in servers.iter().enumerate() {
                    let measured = server.measure_with_sink(sinks[at], || {
                        runtime.block_on(drive(server.port, shape.connections, shape.streams, seconds))
                    });
                    calls[at] += measured.calls;
                    runs[at].push(measured);
                }
            }
            let t: Vec<Typical> = runs.iter().map(|r| Typical::of(r)).collect();
            <[Typical; 4]>::try_from(t).unwrap_or_else(|_| unreachable!("four targets"))
        };
        exported_calls += calls[2];
        sampled_calls += calls[3];
        Row::print("tonic", shape.name, [("gateway", &g), ("metrics", &m), ("export", &e), ("sampled", &s)]);
        for (name, t) in [("metrics", &m), ("export", &e), ("sampled", &s)] {
            if let Some(us) = t.sink_cpu_per_request_us {
                lines.push(format!("{}: {name} sink CPU/req {us:.1} µs", shape.name));
            }
        }
        lines.push(format!(
            "{}: exporting every span / not exporting {:.1} %; exporting 10 % of traces / not exporting {:.1} %",
            shape.name,
            e.rps / g.rps * 100.0,
            s.rps / g.rps * 100.0
        ));
        lines.push(format!(
            "{}: metrics only / not exporting {:.1} %; every span and metrics / metrics only {:.1} %; \
             10 % of traces and metrics / metrics only {:.1} %",
            shape.name,
            m.rps / g.rps * 100.0,
            e.rps / m.rps * 100.0,
            s.rps / m.rps * 100.0
        ));
    }
    for line in lines {
        println!("{line}");
    }
    exporting.stop();
    sampled.stop();
    metrics_only.stop();
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
    mean: Duration,
    p50: Option<Duration>,
    p99: Option<Duration>,
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
            mean: middle.mean,
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
    mean: Duration,
    p50: Option<Duration>,
    p99: Option<Duration>,
    cpu_per_request_us: f64,
    /// What the sink receiving the telemetry used, on the same cores.
    sink_cpu_per_request_us: Option<f64>,
}

impl Measured {
    fn of_latencies(mut latencies: Vec<Duration>, calls: u64, seconds: u64) -> Self {
        latencies.sort();
        let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
        let mean = latencies.iter().sum::<Duration>() / latencies.len().max(1) as u32;
        Measured {
            calls,
            rps: latencies.len() as f64 / seconds as f64,
            mean,
            p50: Some(at(0.50)),
            p99: Some(at(0.99)),
            cpu_per_request_us: 0.0,
            sink_cpu_per_request_us: None,
        }
    }
}

/// `streams` concurrent callers spread over `connections` HTTP/2
/// connections: 1 s of warm-up, then `seconds` measured.
async fn drive(port: u16, connections: usize, streams: usize, seconds: u64) -> Measured {
    drive_tls(port, connections, streams, seconds, None, false).await
}

/// [`drive`], over TLS when `tls` says how to trust the server.
async fn drive_tls(
    port: u16,
    connections: usize,
    streams: usize,
    seconds: u64,
    tls: Option<&tonic::transport::ClientTlsConfig>,
    keyed: bool,
) -> Measured {
    let mut channels = Vec::new();
    for _ in 0..connections {
        let channel = match tls {
            None => Channel::from_shared(format!("http://127.0.0.1:{port}")).unwrap(),
            Some(tls) => {
                Channel::from_shared(format!("https://127.0.0.1:{port}")).unwrap().tls_config(tls.clone()).unwrap()
            }
        };
        channels.push(channel.connect().await.unwrap());
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
                // With `keyed`, every call has an idempotency key of its own.
                let idempotency_key = if keyed { format!("{i}-{calls}") } else { String::new() };
                let request = pb::ExecuteRequest {
                    tool: "echo".into(),
                    arguments_json: ARGUMENTS.into(),
                    idempotency_key,
                    ..Default::default()
                };
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
    Measured::of_latencies(latencies, calls, seconds)
}

/// h2load with a pre-encoded Execute request (a gRPC frame in a file).
struct H2load {
    request: tempfile::NamedTempFile,
}

impl H2load {
    fn prepare() -> Option<Self> {
        Command::new("h2load").arg("--version").output().ok().filter(|o| o.status.success())?;
        let message =
            pb::ExecuteRequest { tool: "echo".into(), arguments_json: ARGUMENTS.into(), ..Default::default() };
        let body = prost::Message::encode_to_vec(&message);
        let mut frame = vec![0u8];
        frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
        frame.extend_from_slice(&body);
        let mut request = tempfile::NamedTempFile::new().unwrap();
        request.write_all(&frame).unwrap();
        Some(Self { request })
    }

    fn run(&self, port: u16, seconds: u64, streams: usize) -> Measured {
        let out = Command::new("h2load")
            .args(["-c", "1", "-m", &streams.to_string(), "-D", &seconds.to_string(), "--warm-up-time", "1"])
            .arg("-d")
            .arg(self.request.path())
            .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
            .arg(format!("http://127.0.0.1:{port}/toolgate.v1.ToolGatewayService/Execute"))
            .output()
            .expect("h2load runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |prefix: &str| text.lines().find_map(|l| l.trim().strip_prefix(prefix).map(str::to_owned));
        // "finished in 5.00s, 78123.40 req/s, 6.5MB/s"
        let rps: f64 = field("finished in")
            .and_then(|l| l.split(", ").nth(1)?.trim_end_matches(" req/s").parse().ok())
            .unwrap_or_else(|| panic!("h2load said: {text}"));
        // "requests: 390617 total, 390681 started, 390617 done, 390617 succeeded, 0 failed, ..."
        let failed: u64 = field("requests:")
            .and_then(|l| l.split(", ").find_map(|p| p.strip_suffix(" failed")?.parse().ok()))
            .unwrap_or(0);
        assert_eq!(failed, 0, "h2load: {text}");
        // "time for request:   130us   12.01ms   806us   213us   79.80%": min, max, mean, sd
        let mean = field("time for request:")
            .and_then(|l| l.split_whitespace().nth(2).and_then(parse_h2load_time))
            .unwrap_or_default();
        Measured {
            // The measured seconds report; the warm-up second ran at about the same rate.
            calls: (rps * (seconds + 1) as f64) as u64,
            rps,
            mean,
            p50: None,
            p99: None,
            cpu_per_request_us: 0.0,
            sink_cpu_per_request_us: None,
        }
    }
}

/// `806us`, `12.01ms`, `1.2s`.
fn parse_h2load_time(text: &str) -> Option<Duration> {
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else {
        (text.strip_suffix('s')?, 1.0)
    };
    Some(Duration::from_secs_f64(number.parse::<f64>().ok()? * scale))
}

/// A Python that can run `benches/grpcio_load.py`: the test venv's, or the
/// one `TOOLGATE_BENCH_PYTHON` names.
fn python_with_grpcio() -> Option<String> {
    let python = std::env::var("TOOLGATE_BENCH_PYTHON")
        .unwrap_or_else(|_| format!("{}/.venv/bin/python", env!("CARGO_MANIFEST_DIR")));
    let works = Command::new(&python).args(["-c", "import grpc, grpc_tools"]).output();
    works.is_ok_and(|o| o.status.success()).then_some(python)
}

fn grpcio(python: &str, port: u16, seconds: u64, concurrency: usize) -> Measured {
    let script = format!("{}/benches/grpcio_load.py", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python)
        .args([script, port.to_string(), seconds.to_string(), concurrency.to_string()])
        .output()
        .expect("python runs");
    let line = String::from_utf8_lossy(&out.stdout);
    let result: serde_json::Value = serde_json::from_str(line.trim())
        .unwrap_or_else(|_| panic!("grpcio_load.py said: {line}{}", String::from_utf8_lossy(&out.stderr)));
    let us = |key: &str| Duration::from_secs_f64(result[key].as_f64().unwrap_or(0.0) / 1e6);
    Measured {
        calls: result["calls"].as_u64().unwrap_or(0),
        rps: result["rps"].as_f64().unwrap_or(0.0),
        mean: us("mean_us"),
        p50: Some(us("p50_us")),
        p99: Some(us("p99_us")),
        cpu_per_request_us: 0.0,
        sink_cpu_per_request_us: None,
    }
}

/// A server process: the real `toolgate` binary, or this one (the bare
/// service, the sink); killed when dropped. This binary prints its port
/// first; a sink then answers each line on its stdin with its span count.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<BufReader<ChildStdout>>,
    port: u16,
    /// The catalogue folder of a `toolgate serve`.
    _catalog: Option<tempfile::TempDir>,
}

impl Server {
    /// `toolgate serve` on the built-in tools, as an operator runs it,
    /// with `env` added to its environment.
    fn toolgate(env: &[(&str, &str)]) -> Self {
        let catalog = tempfile::tempdir().unwrap();
        std::fs::write(catalog.path().join("tools.yaml"), "tools: []\n").unwrap();
        let (child, port) = serve::start(catalog.path(), env);
        Self { child, stdin: None, stdout: None, port, _catalog: Some(catalog) }
    }

    fn start(kind: &str, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.args(["--serve", kind]).envs(env.iter().copied());
        Self::spawn(command)
    }

    /// A server that prints its port and serves until its stdin closes.
    fn spawn(mut command: Command) -> Self {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = Some(BufReader::new(child.stdout.take().unwrap()));
        let mut server = Self { child, stdin, stdout, port: 0, _catalog: None };
        server.port = server.line().parse().expect("the server prints its port");
        server
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.as_mut().expect("a server of this binary").read_line(&mut line).unwrap();
        line.trim().to_owned()
    }

    /// Asks a sink how many spans it has received.
    fn ask(&mut self) -> String {
        writeln!(self.stdin.as_mut().unwrap()).unwrap();
        self.line()
    }

    /// Shuts the server down gracefully (SIGTERM for toolgate, the end of
    /// stdin for this binary) and waits.
    fn stop(mut self) {
        if self.stdin.take().is_none() {
            let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        }
        let _ = self.child.wait();
    }
}

impl Server {
    /// Runs `load` against the server and charges it the CPU time it used.
    fn measure(&self, load: impl FnOnce() -> Measured) -> Measured {
        self.measure_with_sink(None, load)
    }

    /// The same, also charging the telemetry sink's CPU time.
    fn measure_with_sink(&self, sink: Option<&Server>, load: impl FnOnce() -> Measured) -> Measured {
        let sink_before = sink.map(Server::cpu_seconds);
        let before = self.cpu_seconds();
        let mut measured = load();
        // Calls over the whole run, warm-up included, as the CPU time is.
        let requests = measured.calls as f64;
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
        let spans = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let count = spans.clone();
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
            "sink" => sink::serve(listener, spans, stdin_closed).await,
            "bare-accept" => {
                // The same bare service through the gateway's own accept
                // path: the difference to "bare" is what that path costs.
                let routes = tonic::service::Routes::new(ToolGatewayServiceServer::new(Bare));
                toolgate::server::serve_accepted(listener, routes, stdin_closed).await.unwrap();
            }
            _ => {
                tonic::transport::Server::builder()
                    .add_service(ToolGatewayServiceServer::new(Bare))
                    // Plain tonic with TCP_NODELAY set (tonic sets it only when
                    // it binds the address itself): the floor, not a handicap,
                    // and none of the gateway's own accept path.
                    .serve_with_incoming_shutdown(
                        tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
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

    async fn search_tools(
        &self,
        _: Request<pb::SearchToolsRequest>,
    ) -> Result<Response<pb::SearchToolsResponse>, Status> {
        Err(Status::unimplemented("bare"))
    }
}
