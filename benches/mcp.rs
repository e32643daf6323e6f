//! The MCP front door, measured as MCP clients call it, side by side with
//! baselines that share none of its code, in one run:
//!
//! 1. `tools/call` of the built-in `echo` through `toolgate serve
//!    --mcp-listen` against a bare rmcp streamable-HTTP server with one echo
//!    tool (this binary, `--serve bare`: the same rmcp, served by hyper on a
//!    plain listener), from the Python `mcp` SDK (`benches/mcp_client.py`)
//!    in both eras, 1 and 16 calls in flight on one session, with each
//!    server's CPU time a call (from /proc);
//! 2. a federated tool (`read_note` of the tests' notes server, over
//!    streamable HTTP) through toolgate's front door, through `mcp-proxy`
//!    0.6.0 (a Rust MCP gateway from the crate registry) and direct, from the
//!    same client;
//! 3. the resident memory of each server with 1,000 session-era sessions open.
//!
//! `cargo bench --bench mcp [-- --seconds 5 --rounds 3 --mcp-proxy PATH]`.
//! With `--memory`, only toolgate's memory per session instead: 1,000 then
//! 10,000 session-era sessions spread over 16 principals, as they are opened
//! (each with its worker) and once idle (parked), then with a GET stream
//! open on 1,000 of them, beside the bare rmcp server's 1,000.
//! The mcp-proxy rows run when its binary is found (`--mcp-proxy`, else
//! `target/bench-tools/bin/mcp-proxy`, where `cargo install mcp-proxy
//! --version 0.6.0 --locked --root target/bench-tools` puts it). Each target
//! is measured `rounds` times, interleaved with the others; the median run
//! (by RPS) is shown with the range. The Python client is `.venv/bin/python`
//! (scripts/test installs the SDK there).

// Benchmarks report what they measured and start the processes they measure.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]
#![allow(unreachable_pub)]

#[path = "support/serve.rs"]
mod serve;

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::Duration,
};

use serde_json::{json, Value};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--serve") {
        return bare::serve();
    }
    let option = |name: &str| args.iter().position(|a| a == name).and_then(|at| args.get(at + 1)).cloned();
    let seconds: f64 = option("--seconds").and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let rounds: usize = option("--rounds").and_then(|s| s.parse().ok()).unwrap_or(3);
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let proxy_bin =
        option("--mcp-proxy").map(PathBuf::from).unwrap_or_else(|| repo.join("target/bench-tools/bin/mcp-proxy"));
    let work = tempfile::tempdir().unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    if args.iter().any(|a| a == "--memory") {
        return memory(work.path());
    }

    // 1. The front door against a bare rmcp server.
    let gateway = Server::toolgate(work.path(), "tools: []\n", "gateway");
    let bare = Server::bare();
    println!("## tools/call of echo: the front door against a bare rmcp server\n");
    Row::header();
    let mut ratios = Vec::new();
    for era in ["initialize", "discover"] {
        for concurrency in [1, 16] {
            let shape = format!("{era}, {concurrency} in flight");
            let [g, b] = interleaved(rounds, [&gateway, &bare], |server| {
                let before = server.cpu_seconds();
                let mut measured =
                    client(&server.url, era, concurrency, seconds, "echo", r#"{"message": "hello", "n": 42}"#);
                measured.cpu_us = (server.cpu_seconds() - before) * 1e6 / (measured.rps * seconds).max(1.0);
                measured
            });
            Row::print(&shape, [("toolgate", &g), ("bare rmcp", &b)]);
            ratios.push((shape, g.rps / b.rps, g.p50 - b.p50, g.cpu_us, b.cpu_us));
        }
    }
    println!(
        "\n| client, shape | toolgate / bare RPS | p50 toolgate − bare | server CPU a call, toolgate / bare |\n\
         |---|---:|---:|---:|"
    );
    for (shape, ratio, p50, cpu, bare_cpu) in &ratios {
        println!(
            "| Python SDK, {shape} | {ratio:.2} | {p50:+.0} µs | {cpu:.0} / {bare_cpu:.0} µs ({:+.0} µs) |",
            cpu - bare_cpu
        );
    }

    // 2. A federated tool: direct, through toolgate, through mcp-proxy. Each
    // measurement starts its own upstream (and gateway), so no run inherits
    // another's state in the Python server.
    let mut kinds = vec!["toolgate", "direct"];
    match proxy_bin.exists() {
        true => kinds.push("mcp-proxy"),
        false => println!("\n(mcp-proxy not found at {}: its rows are left out)", proxy_bin.display()),
    }
    println!("\n## A federated tool (read_note of the tests' notes server, over HTTP)\n");
    Row::header();
    for concurrency in [1, 16] {
        let mut runs: Vec<Vec<Measured>> = vec![Vec::new(); kinds.len()];
        for _ in 0..rounds {
            for (i, kind) in kinds.iter().enumerate() {
                let upstream = Upstream::start(&repo);
                let (target, tool) = match *kind {
                    "toolgate" => (
                        Server::toolgate(
                            work.path(),
                            &format!("mcp_servers:\n  notes:\n    url: \"{}\"\n", upstream.url),
                            "federating",
                        ),
                        "read_note",
                    ),
                    "mcp-proxy" => (Server::mcp_proxy(&proxy_bin, work.path(), &upstream.url), "notes/read_note"),
                    _ => (Server { child: None, url: upstream.url.clone(), name: "direct" }, "read_note"),
                };
                runs[i].push(client(&target.url, "initialize", concurrency, seconds, tool, r#"{"name": "todo"}"#));
            }
        }
        let ranged: Vec<Ranged> = runs.into_iter().map(Ranged::of).collect();
        let shape = format!("initialize, {concurrency} in flight");
        Row::print(&shape, kinds.iter().copied().zip(ranged.iter()));
    }
    let proxy = kinds.contains(&"mcp-proxy").then(|| {
        let upstream = Upstream::start(&repo);
        (Server::mcp_proxy(&proxy_bin, work.path(), &upstream.url), upstream)
    });

    // 3. Memory with 1,000 session-era sessions open.
    println!("\n## Resident memory with 1,000 session-era sessions open\n");
    println!("| server | RSS at start | with 1,000 sessions | per session |\n|---|---:|---:|---:|");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let mut servers: Vec<&Server> = vec![&gateway, &bare];
    servers.extend(proxy.as_ref().map(|(server, _)| server));
    for server in servers {
        let before = server.rss_kib();
        runtime.block_on(open_sessions(&server.url, 1_000));
        let after = server.rss_kib();
        let per = (after.saturating_sub(before)) as f64 / 1_000.0;
        println!("| {} | {:.1} MiB | {:.1} MiB | {per:.1} KiB |", server.name, mib(before), mib(after));
    }
}

/// Principals the `--memory` sessions are spread over.
const PRINCIPALS: usize = 16;

/// `--memory`: toolgate's resident memory per idle session-era session.
fn memory(work: &Path) {
    let mut principals = String::from("principals:\n");
    for n in 0..PRINCIPALS {
        let hash = toolgate::identity::hash_key(&format!("key-{n}"));
        principals.push_str(&format!("  - {{name: p{n}, api_key_sha256: {hash}, tools: [\"*\"]}}\n"));
    }
    let config = format!("{principals}mcp_front_door: {{sessions_per_principal: 1000, streams_per_principal: 1000}}\n");
    let gateway = Server::toolgate_with(work, "tools: []\n", "memory", Some(&config));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let idle = || std::thread::sleep(Duration::from_secs(20));
    println!("## Resident memory of idle session-era sessions ({PRINCIPALS} principals)\n");
    println!("| server, state | sessions | RSS | per session above start |\n|---|---:|---:|---:|");
    let start = gateway.rss_kib();
    let row = |state: &str, sessions: usize, rss: u64| {
        let per = rss.saturating_sub(start) as f64 / sessions.max(1) as f64;
        println!("| toolgate, {state} | {sessions} | {:.1} MiB | {per:.1} KiB |", mib(rss));
    };
    row("at start", 0, start);
    // Sessions arrive a thousand at a time and go idle: each thousand is
    // opened with its workers running, then parked.
    let mut sessions = Vec::new();
    let mut parked_1k = 0;
    let mut wakes = None;
    for batch in 0..10 {
        sessions.extend(runtime.block_on(open_sessions_as(&gateway.url, batch * 1_000..(batch + 1) * 1_000)));
        if batch == 0 {
            row("1,000 just opened (workers running)", 1_000, gateway.rss_kib());
        }
        idle();
        if batch == 0 {
            parked_1k = gateway.rss_kib();
            row("1,000 idle 20 s (parked)", 1_000, parked_1k);
            wakes = Some(runtime.block_on(wake_cost(&gateway.url, &sessions[..200])));
            idle();
        }
    }
    let parked_10k = gateway.rss_kib();
    row("10,000 idle (parked), opened 1,000 at a time", 10_000, parked_10k);
    println!(
        "\nFrom 1,000 to 10,000 parked sessions: {:.2} KiB a session (RSS does not fall when workers park: \
         the allocator keeps the pages, which the next sessions' workers reuse).",
        parked_10k.saturating_sub(parked_1k) as f64 / 9_000.0
    );
    if let Some([parked, awake]) = wakes {
        println!(
            "\n`tools/list` on 200 parked sessions, one after another (each starts a worker): p50 {:.0} µs, \
             p99 {:.0} µs; at once again on the same sessions (workers running): p50 {:.0} µs, p99 {:.0} µs.",
            parked[0], parked[1], awake[0], awake[1]
        );
    }
    // A GET stream each, on a gateway of its own: its first 1,000 sessions
    // opened with their streams, against the first gateway's 1,000 (the
    // same workers ran, and the streams are held on top of them).
    drop(gateway);
    let listening = Server::toolgate_with(work, "tools: []\n", "listening", Some(&config));
    let sessions = runtime.block_on(open_sessions_as(&listening.url, 0..1_000));
    let streams = runtime.block_on(listen(&listening.url, &sessions));
    idle();
    let with_streams = listening.rss_kib();
    row("1,000 idle 20 s (parked), each with a GET stream", 1_000, with_streams);
    println!(
        "\nA GET stream (its own HTTP/1.1 connection, as the Python SDK opens it): {:.1} KiB each.",
        with_streams.saturating_sub(parked_1k) as f64 / streams.len().max(1) as f64
    );
    drop(streams);
    let bare = Server::bare();
    let before = bare.rss_kib();
    runtime.block_on(open_sessions(&bare.url, 1_000));
    idle();
    let after = bare.rss_kib();
    println!(
        "\nBare rmcp (LocalSessionManager): {:.1} MiB at start, {:.1} MiB with 1,000 sessions idle 20 s, {:.1} KiB a session.",
        mib(before),
        mib(after),
        after.saturating_sub(before) as f64 / 1_000.0
    );
}

/// Opens session-era sessions numbered `range` (initialize, then
/// initialized), each as principal `n % PRINCIPALS`; their ids and keys.
async fn open_sessions_as(url: &str, range: std::ops::Range<usize>) -> Vec<(String, String)> {
    use futures::StreamExt;
    let client = Arc::new(reqwest::Client::new());
    let open = |n: usize| {
        let (client, url) = (Arc::clone(&client), url.to_owned());
        async move {
            let key = format!("key-{}", n % PRINCIPALS);
            let init = json!({"jsonrpc": "2.0", "id": n, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "idle", "version": "1"}}});
            let response = post(&client, &url, Some(&key), None, init.to_string()).send().await.unwrap();
            let session = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
            let _ = response.bytes().await;
            let session = session.unwrap_or_else(|| panic!("session {n} was refused"));
            let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned();
            let _ = post(&client, &url, Some(&key), Some(&session), initialized).send().await;
            (session, key)
        }
    };
    futures::stream::iter(range).map(open).buffer_unordered(16).collect().await
}

/// `tools/list` on each of `sessions` in turn, twice: the p50 and p99 (µs)
/// of the first round and of the second.
async fn wake_cost(url: &str, sessions: &[(String, String)]) -> [[f64; 2]; 2] {
    let client = reqwest::Client::new();
    let mut rounds = [[0.0; 2]; 2];
    for round in &mut rounds {
        let mut took = Vec::new();
        for (n, (session, key)) in sessions.iter().enumerate() {
            let started = std::time::Instant::now();
            let list = json!({"jsonrpc": "2.0", "id": n + 2, "method": "tools/list"}).to_string();
            let response = post(&client, url, Some(key), Some(session), list).send().await.unwrap();
            assert_eq!(response.status().as_u16(), 200);
            let _ = response.bytes().await.unwrap();
            took.push(started.elapsed().as_secs_f64() * 1e6);
        }
        took.sort_by(f64::total_cmp);
        *round = [took[took.len() / 2], took[took.len() * 99 / 100]];
    }
    rounds
}

/// Opens a GET stream on each of `sessions`, each on its own connection;
/// the open responses (dropping them closes the streams).
async fn listen(url: &str, sessions: &[(String, String)]) -> Vec<reqwest::Response> {
    use futures::StreamExt;
    let open = |(session, key): (String, String)| {
        let url = url.to_owned();
        async move {
            let client = reqwest::Client::new();
            let response = client
                .get(&url)
                .header("authorization", format!("Bearer {key}"))
                .header("accept", "text/event-stream")
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-06-18")
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
            response
        }
    };
    futures::stream::iter(sessions.to_vec()).map(open).buffer_unordered(16).collect().await
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// What one client run measured.
#[derive(Clone, Debug, Default)]
struct Measured {
    rps: f64,
    mean: f64,
    p50: f64,
    p99: f64,
    errors: u64,
    /// The server's CPU time a call (user and system, from /proc), where
    /// measured.
    cpu_us: f64,
}

/// Runs the Python SDK client against `url`.
fn client(url: &str, era: &str, concurrency: usize, seconds: f64, tool: &str, arguments: &str) -> Measured {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let out = Command::new(&python)
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/mcp_client.py"))
        .args(["--url", url, "--era", era, "--concurrency", &concurrency.to_string()])
        .args(["--seconds", &seconds.to_string(), tool, arguments])
        .output()
        .expect("the Python SDK client (.venv/bin/python: run scripts/test first)");
    let text = String::from_utf8_lossy(&out.stdout);
    let line: Value = serde_json::from_str(text.lines().last().unwrap_or("")).unwrap_or_else(|_| {
        panic!("the client failed against {url}: {text}\n{}", String::from_utf8_lossy(&out.stderr))
    });
    let number = |key: &str| line[key].as_f64().unwrap_or(0.0);
    Measured {
        rps: number("rps"),
        mean: number("mean_us"),
        p50: number("p50_us"),
        p99: number("p99_us"),
        errors: number("errors") as u64,
        cpu_us: 0.0,
    }
}

/// Runs `measure` `rounds` times on each target, interleaved; the median
/// run (by RPS) of each, with the range of RPS.
fn interleaved<const N: usize>(
    rounds: usize,
    targets: [&Server; N],
    measure: impl Fn(&Server) -> Measured,
) -> [Ranged; N] {
    let all = interleaved_all(rounds, &targets, measure);
    std::array::from_fn(|i| all[i].clone())
}

fn interleaved_all(rounds: usize, targets: &[&Server], measure: impl Fn(&Server) -> Measured) -> Vec<Ranged> {
    let mut runs: Vec<Vec<Measured>> = vec![Vec::new(); targets.len()];
    for _ in 0..rounds {
        for (i, target) in targets.iter().enumerate() {
            runs[i].push(measure(target));
        }
    }
    runs.into_iter().map(Ranged::of).collect()
}

/// The median run, and the lowest and highest RPS.
#[derive(Clone, Debug)]
struct Ranged {
    median: Measured,
    low: f64,
    high: f64,
}

impl std::ops::Deref for Ranged {
    type Target = Measured;
    fn deref(&self) -> &Measured {
        &self.median
    }
}

impl Ranged {
    /// The run of median RPS, its p50 replaced by the median of the runs'
    /// p50s (each the more robust on a busy machine).
    fn of(mut runs: Vec<Measured>) -> Self {
        let mut p50s: Vec<f64> = runs.iter().map(|r| r.p50).collect();
        p50s.sort_by(f64::total_cmp);
        runs.sort_by(|a, b| a.rps.total_cmp(&b.rps));
        let (low, high) = (runs[0].rps, runs[runs.len() - 1].rps);
        let mut median = runs[runs.len() / 2].clone();
        median.p50 = p50s[p50s.len() / 2];
        Self { median, low, high }
    }
}

struct Row;

impl Row {
    fn header() {
        println!("| shape | target | RPS (range) | mean | p50 | p99 | errors |\n|---|---|---:|---:|---:|---:|---:|");
    }

    fn print<'a>(shape: &str, targets: impl IntoIterator<Item = (&'a str, &'a Ranged)>) {
        for (name, m) in targets {
            println!(
                "| {shape} | {name} | {:.0} ({:.0}–{:.0}) | {:.0} µs | {:.0} µs | {:.0} µs | {} |",
                m.rps, m.low, m.high, m.mean, m.p50, m.p99, m.errors
            );
        }
    }
}

/// A server under test: its process (none for the upstream measured
/// directly) and its MCP URL.
struct Server {
    child: Option<Child>,
    url: String,
    name: &'static str,
}

impl Server {
    /// `toolgate serve --mcp-listen` on a registry holding `registry`.
    fn toolgate(work: &Path, registry: &str, name: &'static str) -> Self {
        Self::toolgate_with(work, registry, name, None)
    }

    /// The same, with `config` as its configuration file.
    fn toolgate_with(work: &Path, registry: &str, name: &'static str, config: Option<&str>) -> Self {
        let dir = work.join(name);
        std::fs::create_dir_all(dir.join("registry")).unwrap();
        std::fs::write(dir.join("registry/tools.yaml"), registry).unwrap();
        let mut command = Command::new(serve::shipped());
        command.current_dir(&dir).args([
            "serve",
            "--catalog",
            "registry",
            "--listen",
            "127.0.0.1:0",
            "--mcp-listen",
            "127.0.0.1:0",
        ]);
        if let Some(config) = config {
            std::fs::write(dir.join("toolgate.yaml"), config).unwrap();
            command.args(["--config", "toolgate.yaml"]);
        }
        let mut child = command
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut url = None;
        for line in lines.by_ref().map_while(Result::ok) {
            if let Some(at) = line.find("MCP (streamable HTTP) on ") {
                url = Some(line[at + "MCP (streamable HTTP) on ".len()..].trim().to_owned());
            }
            if line.contains("toolgate listening on") {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
        Self { child: Some(child), url: url.expect("the MCP listener"), name: "toolgate" }
    }

    /// This binary's bare rmcp server.
    fn bare() -> Self {
        let (child, address) = serve::this_binary(&["--serve"]);
        Self { child: Some(child), url: format!("http://{address}/mcp"), name: "bare rmcp" }
    }

    /// mcp-proxy 0.6.0 in front of `upstream`, as its README configures it.
    fn mcp_proxy(binary: &Path, work: &Path, upstream: &str) -> Self {
        let port = free_port();
        let config = work.join("proxy.toml");
        std::fs::write(
            &config,
            format!(
                "[proxy]\nname = \"bench\"\nseparator = \"/\"\n\n[proxy.listen]\nhost = \"127.0.0.1\"\nport = {port}\n\n\
                 [[backends]]\nname = \"notes\"\ntransport = \"http\"\nurl = \"{upstream}\"\n"
            ),
        )
        .unwrap();
        let child = serving(Command::new(binary).args(["--config"]).arg(&config).env("RUST_LOG", "warn"), port);
        Self { child: Some(child), url: format!("http://127.0.0.1:{port}/"), name: "mcp-proxy" }
    }

    /// CPU seconds (user and system) the server has used.
    fn cpu_seconds(&self) -> f64 {
        let Some(child) = &self.child else { return 0.0 };
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
        let fields: Vec<&str> =
            stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
        let ticks = |at: usize| fields.get(at).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        (ticks(11) + ticks(12)) / 100.0
    }

    fn rss_kib(&self) -> u64 {
        let Some(child) = &self.child else { return 0 };
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
        line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The tests' notes server on streamable HTTP.
struct Upstream {
    _server: Server,
    url: String,
}

impl Upstream {
    fn start(repo: &Path) -> Self {
        let port = free_port();
        let mut command = Command::new(repo.join(".venv/bin/python"));
        command.arg(repo.join("tests/mcp/notes_server.py")).args(["--http", &port.to_string()]);
        let child = serving(&mut command, port);
        let url = format!("http://127.0.0.1:{port}/mcp");
        Self { _server: Server { child: Some(child), url: url.clone(), name: "notes" }, url }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `command` started with no stdio, once it accepts connections on `port`.
fn serving(command: &mut Command, port: u16) -> Child {
    let child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    wait_for_port(port);
    child
}

fn wait_for_port(port: u16) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens on {port}");
}

/// A POST of `body` to `url` as a session-era client sends it: with `key`
/// as its API key, and in `session` (2025-06-18) when given.
fn post(
    client: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    session: Option<&str>,
    body: String,
) -> reqwest::RequestBuilder {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(key) = key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-06-18");
    }
    request
}

/// Opens `count` session-era sessions (initialize, then initialized) and
/// leaves them open.
async fn open_sessions(url: &str, count: usize) {
    use futures::StreamExt;
    let client = Arc::new(reqwest::Client::new());
    let open = |n: usize| {
        let (client, url) = (Arc::clone(&client), url.to_owned());
        async move {
            let init = json!({"jsonrpc": "2.0", "id": n, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "idle", "version": "1"}}});
            let response = post(&client, &url, None, None, init.to_string()).send().await.unwrap();
            let session = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
            let _ = response.bytes().await;
            let Some(session) = session else { return };
            let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned();
            let _ = post(&client, &url, None, Some(&session), initialized).send().await;
        }
    };
    futures::stream::iter(0..count).map(open).buffer_unordered(16).collect::<Vec<()>>().await;
}

/// The baseline: a bare rmcp streamable-HTTP server with one echo tool,
/// served by hyper on a plain listener, with none of the gateway's code.
mod bare {
    use std::{borrow::Cow, sync::Arc};

    use hyper_util::{
        rt::{TokioExecutor, TokioIo},
        server::conn::auto::Builder,
        service::TowerToHyperService,
    };
    use rmcp::{
        model::{
            CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
            PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
        },
        service::RequestContext,
        transport::streamable_http_server::{
            session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
        },
        ErrorData, RoleServer, ServerHandler,
    };
    use serde_json::{json, Value};

    const VERSIONS: &[ProtocolVersion] =
        &[ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2025_06_18];

    #[derive(Clone)]
    struct Echo;

    impl ServerHandler for Echo {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
                .with_server_info(Implementation::new("bare", "1"))
                .with_protocol_version(ProtocolVersion::V_2026_07_28)
        }

        fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
            Cow::Borrowed(VERSIONS)
        }

        async fn list_tools(
            &self,
            _request: Option<PaginatedRequestParams>,
            _context: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let schema = json!({"type": "object"}).as_object().cloned().unwrap_or_default();
            Ok(ListToolsResult::with_all_items(vec![Tool::new("echo", "Returns its arguments.", Arc::new(schema))]))
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            _context: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            let arguments = Value::Object(request.arguments.unwrap_or_default());
            let mut result = CallToolResult::success(vec![ContentBlock::text(arguments.to_string())]);
            result.structured_content = Some(arguments);
            Ok(result.into())
        }
    }

    pub fn serve() {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let config = StreamableHttpServerConfig::default().disable_allowed_hosts().with_legacy_session_mode(true);
            let service = StreamableHttpService::new(|| Ok(Echo), Arc::new(LocalSessionManager::default()), config);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            println!("{}", listener.local_addr().unwrap());
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let _ = stream.set_nodelay(true);
                let service = TowerToHyperService::new(service.clone());
                tokio::spawn(async move {
                    let _ = Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
    }
}
