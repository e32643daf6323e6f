//! The model door, measured as an agent's client calls it, beside calling
//! the model server directly, in one run:
//!
//! 1. a whole chat completion whose tool call the door repairs (a drifted
//!    name, Python-ish arguments), 1 and 16 requests in flight: requests a
//!    second, p50 and p99, and what the door adds at p50;
//! 2. streamed completions: 64 words of text (passed as they come) and a
//!    call written as text (held, then lifted): time to the first chunk
//!    and to the end, p50 and p99;
//! 3. the door's resident memory with 500 streams open.
//!
//! The model server is this binary in `--serve` mode (axum on 127.0.0.1,
//! answers written at once, so the numbers are the door's and the
//! client's); the door is the real `toolgate serve --model-listen`; the
//! client is reqwest over HTTP/1.1 keep-alive connections, as the OpenAI
//! SDKs connect. `cargo bench --bench model_door [-- --seconds 5 --rounds 3]`.

// Benchmarks report what they measured and start the processes they measure.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]
#![allow(unreachable_pub)]

#[path = "support/serve.rs"]
mod serve;

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{json, Value};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--serve") {
        return upstream::serve();
    }
    let option = |name: &str| args.iter().position(|a| a == name).and_then(|at| args.get(at + 1)).cloned();
    let seconds: f64 = option("--seconds").and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let rounds: usize = option("--rounds").and_then(|s| s.parse().ok()).unwrap_or(3);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let upstream = Process::upstream();
    let work = tempfile::tempdir().unwrap();
    let door = Process::door(work.path(), &upstream.url);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let targets = [("direct", upstream.url.clone()), ("door", door.url.clone())];

    println!("## Whole completions with a tool call the door repairs\n");
    println!("| in flight | target | requests/s (range) | p50 | p99 |\n|---:|---|---:|---:|---:|");
    let mut added = Vec::new();
    for concurrency in [1, 16] {
        let measured =
            interleaved(rounds, &targets, |url| runtime.block_on(load(url, "drift", false, concurrency, seconds)));
        for ((name, _), m) in targets.iter().zip(&measured) {
            println!(
                "| {concurrency} | {name} | {:.0} ({:.0}–{:.0}) | {:.0} µs | {:.0} µs |",
                m.rps, m.low, m.high, m.total.0, m.total.1
            );
        }
        added.push((concurrency, measured[1].total.0 - measured[0].total.0, measured[1].rps / measured[0].rps));
    }
    for (concurrency, p50, ratio) in added {
        println!("\n{concurrency} in flight: the door adds {p50:.0} µs at p50; requests/s {ratio:.2} of direct");
    }

    println!("\n## Streamed completions\n");
    println!("| answer | target | streams/s | first chunk p50 | first chunk p99 | end p50 | end p99 |\n|---|---|---:|---:|---:|---:|---:|");
    for (model, what) in [("words", "64 words of text"), ("text-call", "a call written as text")] {
        let measured = interleaved(rounds, &targets, |url| runtime.block_on(load(url, model, true, 1, seconds)));
        for ((name, _), m) in targets.iter().zip(&measured) {
            println!(
                "| {what} | {name} | {:.0} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs |",
                m.rps, m.first.0, m.first.1, m.total.0, m.total.1
            );
        }
    }

    println!("\n## Memory with streams open\n");
    let before = door.rss_kib();
    let open = 500;
    let held = runtime.block_on(open_streams(&door.url, open));
    let after = door.rss_kib();
    println!(
        "{open} streams open through the door (each has its first chunk, the model still writing): RSS {:.1} MiB → {:.1} MiB, {:.1} KiB a stream",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        (after.saturating_sub(before)) as f64 / open as f64
    );
    drop(held);
}

/// One measurement: requests a second, (p50, p99) to the first chunk and
/// to the end, in µs.
#[derive(Clone, Copy, Default)]
struct Measured {
    rps: f64,
    first: (f64, f64),
    total: (f64, f64),
}

/// The median run of several, by requests a second, and their range.
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

/// Each target measured `rounds` times, the targets taking turns.
fn interleaved(rounds: usize, targets: &[(&str, String)], measure: impl Fn(&str) -> Measured) -> Vec<Ranged> {
    let mut runs: Vec<Vec<Measured>> = vec![Vec::new(); targets.len()];
    for _ in 0..rounds {
        for (i, (_, url)) in targets.iter().enumerate() {
            runs[i].push(measure(url));
        }
    }
    runs.into_iter()
        .map(|mut runs| {
            runs.sort_by(|a, b| a.rps.total_cmp(&b.rps));
            let (low, high) = (runs[0].rps, runs[runs.len() - 1].rps);
            Ranged { median: runs[runs.len() / 2], low, high }
        })
        .collect()
}

fn percentiles(mut samples: Vec<f64>) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

/// `concurrency` clients asking `model` for `seconds`, each on its own
/// keep-alive connection.
async fn load(base: &str, model: &str, stream: bool, concurrency: usize, seconds: f64) -> Measured {
    let body = Arc::new(request(model, stream).to_string());
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (body, url) = (Arc::clone(&body), format!("{base}/chat/completions"));
            tokio::spawn(async move {
                let client = reqwest::Client::builder().http1_only().build().unwrap();
                let (mut first, mut total) = (Vec::new(), Vec::new());
                while Instant::now() < until {
                    let start = Instant::now();
                    let request = client.post(&url).header("content-type", "application/json").body((*body).clone());
                    let mut response = request.send().await.unwrap();
                    assert!(response.status().is_success(), "{}", response.status());
                    let mut seen_first = false;
                    while let Some(chunk) = response.chunk().await.unwrap() {
                        if !seen_first && !chunk.is_empty() {
                            first.push(start.elapsed().as_secs_f64() * 1e6);
                            seen_first = true;
                        }
                    }
                    total.push(start.elapsed().as_secs_f64() * 1e6);
                }
                (first, total)
            })
        })
        .collect();
    let (mut first, mut total) = (Vec::new(), Vec::new());
    for task in tasks {
        let (f, t) = task.await.unwrap();
        first.extend(f);
        total.extend(t);
    }
    let rps = total.len() as f64 / started.elapsed().as_secs_f64();
    Measured { rps, first: percentiles(first), total: percentiles(total) }
}

/// `open` streams through `base` of a model that writes its first words
/// and then nothing for a minute, each read to its first chunk; kept open
/// while the result lives.
async fn open_streams(base: &str, open: usize) -> Vec<reqwest::Response> {
    let client = reqwest::Client::builder().http1_only().pool_max_idle_per_host(0).build().unwrap();
    let body = request("hang", true).to_string();
    let mut held = Vec::with_capacity(open);
    for _ in 0..open {
        let request = client.post(format!("{base}/chat/completions")).header("content-type", "application/json");
        let mut response = request.body(body.clone()).send().await.unwrap();
        response.chunk().await.unwrap().expect("a first chunk");
        held.push(response);
    }
    held
}

fn request(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "stream": stream,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    })
}

/// A process measured: the model server or the door, and its base URL.
struct Process {
    child: Child,
    url: String,
}

impl Process {
    fn upstream() -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg("--serve")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        Self { child, url: format!("http://{}/v1", line.trim()) }
    }

    /// `toolgate serve` with the model door in front of `upstream`.
    fn door(work: &std::path::Path, upstream: &str) -> Self {
        std::fs::create_dir_all(work.join("registry")).unwrap();
        std::fs::write(work.join("registry/tools.yaml"), "tools: []\n").unwrap();
        let config = format!("model_door:\n  upstreams:\n    - name: bench\n      base_url: {upstream}\n");
        std::fs::write(work.join("toolgate.yaml"), config).unwrap();
        let mut child = Command::new(serve::shipped())
            .current_dir(work)
            .args(["serve", "--catalog", "registry", "--listen", "127.0.0.1:0", "--model-listen", "127.0.0.1:0"])
            .args(["--config", "toolgate.yaml"])
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env("TOOLGATE_LOG", "warn,toolgate=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let marker = "model door (OpenAI-compatible) on ";
        let mut url = None;
        for line in lines.by_ref().map_while(Result::ok) {
            if let Some(at) = line.find(marker) {
                url = Some(line[at + marker.len()..].trim().to_owned());
            }
            if line.contains("toolgate listening on") {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
        Self { child, url: url.expect("the model door's address") }
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
        line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The model server: each model one answer, written at once.
mod upstream {
    use std::time::Duration;

    use axum::{body::Body, response::IntoResponse, routing::post, Router};
    use serde_json::{json, Value};

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        let chunk = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    }

    async fn chat(body: axum::body::Bytes) -> axum::response::Response {
        let asked: Value = serde_json::from_slice(&body).unwrap();
        let model = asked["model"].as_str().unwrap_or_default().to_owned();
        if !asked["stream"].as_bool().unwrap_or(false) {
            let call = json!({"id": "call_1", "type": "function", "function": {"name": "GetWeather", "arguments": "{'city': 'Paris',}"}});
            let completion = json!({"id": "c", "object": "chat.completion", "created": 1, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [call]}, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
            return ([("content-type", "application/json")], completion.to_string()).into_response();
        }
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        match model.as_str() {
            "text-call" => {
                let text =
                    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
                let chars: Vec<char> = text.chars().collect();
                events.extend(chars.chunks(4).map(|c| chunk(json!({"content": c.iter().collect::<String>()}), None)));
            }
            "hang" => events.push(chunk(json!({"content": "Thinking"}), None)),
            _ => events.extend((0..64).map(|i| chunk(json!({"content": format!("word{i} ")}), None))),
        }
        if model == "hang" {
            let first = futures::stream::iter(events.into_iter().map(Ok::<_, std::io::Error>));
            let rest = futures::stream::once(async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<_, std::io::Error>("data: [DONE]\n\n".to_owned())
            });
            let body = Body::from_stream(futures::StreamExt::chain(first, rest));
            return ([("content-type", "text/event-stream")], body).into_response();
        }
        events.push(chunk(json!({}), Some("stop")));
        events.push("data: [DONE]\n\n".to_owned());
        ([("content-type", "text/event-stream")], events.concat()).into_response()
    }

    pub fn serve() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            println!("{}", listener.local_addr().unwrap());
            let app = Router::new().route("/v1/chat/completions", post(chat));
            axum::serve(listener, app).await.unwrap();
        });
    }
}
