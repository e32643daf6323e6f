//! Start-up and memory of the real gateway at 10,000 tools, each a small
//! object schema with a pattern, an enum and a range (every schema
//! different, as in a real catalogue).
//!
//! - In process: reading the files (YAML, entries, schemas compiled) and
//!   assembling the catalogue (merge, keys, suggestion index), medians of
//!   five runs.
//! - The real binary: `toolgate serve` from its start to its ready line,
//!   and its RSS when ready, medians of five starts.
//! - The first call of a tool, whose schema is compiled then: in process,
//!   the mean time to compile each of 1,000 schemas the load deferred; from
//!   outside, 1,000 different tools called once each on one warmed-up
//!   stream, then the same 1,000 again, mean latency of each pass.
//! - Memory under load: the RSS of `toolgate serve` when ready, after 1,000
//!   idle HTTP/2 connections, after 100,000 calls, and after 100,000 more
//!   (no growth after the warm-up).
//!
//! `cargo bench --bench startup [-- --tools 10000 --runs 5 --shared]`: with
//! `--shared` every tool takes the same schema (as families of tools often
//! do), which the load compiles once. `-- --compare NAME=BINARY ...` starts
//! each of several builds `--runs` times on the registry, interleaved, and
//! reports only that; `-- --formats` does the same for the shipped build on
//! the registry as block YAML and as one JSON object. `-- --write FILE` writes the registry
//! to FILE and stops (to profile `toolgate validate --catalog FILE`).

// Benchmarks report what they measured and start the processes they measure.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]
// The support modules are modules of this one binary.
#![allow(unreachable_pub)]

#[path = "support/catalogue.rs"]
mod catalogue;
#[path = "support/serve.rs"]
mod serve;

/// The binary's allocator (src/main.rs), so that the rows measured in
/// process are what `toolgate serve` does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::{
    path::Path,
    process::Child,
    time::{Duration, Instant},
};

use tonic::transport::Channel;
use toolgate::{
    catalog::{self, LoadOptions},
    env::Env,
    proto::v1::{tool_gateway_service_client::ToolGatewayServiceClient, ExecuteRequest},
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let option = |name: &str, default: usize| -> usize {
        args.iter().position(|a| a == name).and_then(|at| args.get(at + 1)?.parse().ok()).unwrap_or(default)
    };
    let (tools, runs) = (option("--tools", 10_000), option("--runs", 5));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.yaml");
    let names = catalogue::tool_names(tools);
    let shared = args.iter().any(|a| a == "--shared");
    let yaml = catalogue::registry(&names, |i| if shared { schema(0, &names[0]) } else { schema(i, &names[i]) });
    std::fs::write(&path, &yaml).unwrap();
    if let Some(file) = args.iter().position(|a| a == "--write").and_then(|at| args.get(at + 1)) {
        std::fs::write(file, &yaml).unwrap();
        println!("wrote {tools} tools to {file}");
        return;
    }
    println!("registry: {tools} tools, {:.1} MB of YAML", yaml.len() as f64 / 1e6);
    if args.iter().any(|a| a == "--formats") {
        // The same registry as one JSON object on one line (JSON is YAML:
        // the file keeps its name), as tools that write catalogues do.
        let json_dir = tempfile::tempdir().unwrap();
        let value: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
        let json = serde_json::to_string(&value).unwrap();
        std::fs::write(json_dir.path().join("registry.yaml"), &json).unwrap();
        println!("the same as JSON: {:.1} MB", json.len() as f64 / 1e6);
        let binary = serve::shipped();
        let targets = [("block YAML", dir.path()), ("JSON", json_dir.path())];
        let targets: Vec<_> = targets.into_iter().map(|(name, dir)| (name, binary.as_path(), dir)).collect();
        compare(&targets, runs);
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--compare") {
        let targets = args[at + 1..].iter().take_while(|a| !a.starts_with("--"));
        let targets: Vec<(&str, &Path, &Path)> = targets
            .map(|a| a.split_once('=').expect("NAME=BINARY"))
            .map(|(name, binary)| (name, Path::new(binary), dir.path()))
            .collect();
        compare(&targets, runs);
        return;
    }

    let options = LoadOptions { registry: vec![path.clone()], ..LoadOptions::default() };
    let (mut read, mut assemble) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let started = Instant::now();
        let files = catalog::read(&options, &Env::default());
        read.push(started.elapsed());
        let started = Instant::now();
        let loaded = catalog::assemble(&files, &[]).unwrap_or_else(|e| panic!("{:?}", e.problems));
        assemble.push(started.elapsed());
        assert_eq!(loaded.catalog.tools().len(), tools + 3);
    }
    println!(
        "in process: read (YAML, entries, schemas) {:?}; assemble (merge, keys, index) {:?}",
        median(read),
        median(assemble)
    );

    let (mut ready, mut rss) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let gateway = Gateway::start(dir.path());
        ready.push(gateway.ready_after);
        rss.push(gateway.rss_kib());
    }
    rss.sort();
    println!(
        "toolgate serve: ready after {:?}, RSS when ready {:.1} MB (medians of {runs})",
        median(ready),
        rss[rss.len() / 2] as f64 / 1024.0
    );

    let files = catalog::read(&options, &Env::default());
    let loaded = catalog::assemble(&files, &[]).unwrap_or_else(|e| panic!("{:?}", e.problems));
    let deferred: Vec<_> = loaded.catalog.tools().iter().filter(|t| !t.parameters.is_compiled()).take(1000).collect();
    let started = Instant::now();
    for tool in &deferred {
        assert!(!tool.parameters.is_valid(&serde_json::json!({})), "every tool here requires an id");
    }
    println!(
        "first use of a deferred schema (compile and one check), in process: {:?} each, over {}",
        started.elapsed() / deferred.len().max(1) as u32,
        deferred.len()
    );

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let gateway = Gateway::start(dir.path());
    let (first, again) = runtime.block_on(async {
        let mut client = ToolGatewayServiceClient::new(gateway.channel().await);
        // The connection warmed up first, on a tool outside the measured ones.
        for _ in 0..200 {
            let request = ExecuteRequest { tool: names[names.len() - 1].clone(), ..Default::default() };
            client.execute(request).await.expect("execute");
        }
        let mut passes = Vec::new();
        for _ in 0..2 {
            let started = Instant::now();
            for name in names.iter().take(1000) {
                let request =
                    ExecuteRequest { tool: name.clone(), arguments_json: "{}".to_owned(), ..Default::default() };
                client.execute(request).await.expect("execute");
            }
            passes.push(started.elapsed() / 1000);
        }
        (passes[0], passes[1])
    });
    println!("toolgate serve, 1,000 tools called once on one stream: first call {first:?}, second call {again:?}");
    drop(gateway);

    let gateway = Gateway::start(dir.path());
    let when_ready = gateway.rss_kib();
    let idle = runtime.block_on(async {
        let mut channels = Vec::new();
        for _ in 0..1000 {
            channels.push(gateway.channel().await);
        }
        let rss = gateway.rss_kib();
        drop(channels);
        rss
    });
    let first = runtime.block_on(calls(&gateway, 100_000, &names));
    let after_first = gateway.rss_kib();
    let second = runtime.block_on(calls(&gateway, 100_000, &names));
    let after_second = gateway.rss_kib();
    let mb = |kib: u64| kib as f64 / 1024.0;
    println!(
        "RSS: ready {:.1} MB; with 1,000 idle connections {:.1} MB; after 100,000 calls {:.1} MB ({first:?}); \
         after 100,000 more {:.1} MB ({second:?})",
        mb(when_ready),
        mb(idle),
        mb(after_first),
        mb(after_second)
    );
}

/// A small object schema with a pattern, an enum and a range, different for each tool.
fn schema(i: usize, name: &str) -> String {
    let prefix: String = name.split('_').map(|w| w[..1].to_ascii_uppercase()).collect();
    format!(
        "{{type: object, properties: {{id: {{type: string, pattern: \"^{prefix}-[0-9]{{1,{}}}$\"}}, \
         state: {{type: string, enum: [open, closed, s{i}]}}, limit: {{type: integer, minimum: 1, maximum: {}}}}}, \
         required: [id], additionalProperties: false}}",
        4 + i % 5,
        10 + i % 90
    )
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

/// `calls` calls over 16 connections × 4 streams: valid calls, repaired
/// names, misses and invalid arguments, as models send them.
async fn calls(gateway: &Gateway, calls: usize, names: &[String]) -> Duration {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..64 {
        let channel = gateway.channel().await;
        let names = names.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut client = ToolGatewayServiceClient::new(channel);
            for i in (worker..calls).step_by(64) {
                let name = &names[i % names.len()];
                let (tool, arguments) = match i % 4 {
                    0 => (name.clone(), r#"{"id": "X-1"}"#.to_owned()),
                    1 => (name.to_uppercase(), r#"{"id": "X-1", "limit": 5}"#.to_owned()),
                    2 => (format!("{name}_nope"), "{}".to_owned()),
                    _ => (name.clone(), format!(r#"{{"id": {i}}}"#)),
                };
                let request = ExecuteRequest { tool, arguments_json: arguments, ..Default::default() };
                client.execute(request).await.expect("execute");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed()
}

/// Each of `targets` (a name and a build of `toolgate`) started `runs`
/// times on `registry`, the targets in turn in each round: on a machine
/// whose speed moves through the day, only builds started in one run
/// compare. Prints each one's median time to ready with its range, and its
/// median RSS when ready.
fn compare(targets: &[(&str, &Path, &Path)], runs: usize) {
    let mut measured = vec![Vec::new(); targets.len()];
    for _ in 0..runs {
        for ((_, binary, registry), starts) in targets.iter().zip(&mut measured) {
            let gateway = Gateway::start_binary(binary, registry);
            starts.push((gateway.ready_after, gateway.rss_kib()));
        }
    }
    for ((name, _, _), starts) in targets.iter().zip(measured) {
        let (ready, mut rss): (Vec<Duration>, Vec<u64>) = starts.into_iter().unzip();
        let (fastest, slowest) = (ready.iter().min().unwrap().as_millis(), ready.iter().max().unwrap().as_millis());
        rss.sort();
        println!(
            "{name}: ready after {:?} ({fastest}-{slowest} ms), RSS when ready {:.1} MB (medians of {runs})",
            median(ready),
            rss[rss.len() / 2] as f64 / 1024.0
        );
    }
}

/// `toolgate serve` on a registry folder; killed when dropped.
struct Gateway {
    child: Child,
    port: u16,
    ready_after: Duration,
}

impl Gateway {
    fn start(registry: &Path) -> Self {
        Self::start_binary(&serve::shipped(), registry)
    }

    /// [`Gateway::start`], running `binary` (another build, to compare).
    fn start_binary(binary: &Path, registry: &Path) -> Self {
        let started = Instant::now();
        let (child, port) = serve::start_binary(binary, registry, &[], &[]);
        let ready_after = started.elapsed();
        Self { child, port, ready_after }
    }

    async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://127.0.0.1:{}", self.port)).unwrap().connect().await.unwrap()
    }

    /// Resident memory, from /proc/<pid>/status.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .expect("VmRSS")
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
