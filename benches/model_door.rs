//! The model door, measured as an agent's client calls it, beside calling
//! the model server directly, in one run:
//!
//! 1. a whole chat completion whose tool call the door repairs (a drifted
//!    name, Python-ish arguments), 1 and 16 requests in flight: requests a
//!    second, p50 and p99, and what the door adds at p50;
//! 2. streamed completions: 64 words of text (passed as they come) and a
//!    call written as text (held, then lifted): time to the first chunk
//!    and to the end, p50 and p99;
//! 3. streams the model writes one delta every 30 ms (prose, a fence, a
//!    tool's name then words): the time to the first delta of text, which
//!    the door must not hold back;
//! 4. the door's resident memory with 500 streams open;
//! 5. the second chance (`--only retry`): a door with `retry: 1` beside one
//!    without on answers that need no retry (what asking again costs those:
//!    nothing, it should be), and on an answer the model corrects when told
//!    (a call of an undeclared tool): the time and tokens a retried request
//!    adds.
//!
//! The model server is this binary in `--serve` mode (axum on 127.0.0.1,
//! answers written at once, so the numbers are the door's and the
//! client's); the door is the real `toolgate serve --model-listen`; the
//! client is reqwest over HTTP/1.1 keep-alive connections, as the OpenAI
//! SDKs connect. Beside them, in the same run and on the same model server:
//! nginx as a plain proxy (when `nginx` is on the `PATH`: what any proxy
//! costs here), a plain proxy in Rust (`--proxy` mode of this binary:
//! hyper on both sides, each upstream connection driven in the task of the
//! request it carries, bodies passed unread: what the HTTP stack costs
//! before any reading; whole answers only), the door reaching the model
//! server through its pooled client (`proxy: env`: what driving its
//! connections itself gains; whole answers only) and LiteLLM's proxy (when `.venv-bench/bin/litellm` exists:
//! `scripts/bench-deps` installs it, nginx and wrk).
//! `cargo bench --bench model_door [-- --seconds 5 --rounds 3]`.

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
    if let Some(at) = args.iter().position(|a| a == "--proxy") {
        return plain::serve(args[at + 1].clone());
    }
    let option = |name: &str| args.iter().position(|a| a == name).and_then(|at| args.get(at + 1)).cloned();
    let seconds: f64 = option("--seconds").and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let rounds: usize = option("--rounds").and_then(|s| s.parse().ok()).unwrap_or(3);
    // `--only whole,streams,paced,memory`: some sections (default: all).
    let only = option("--only");
    let runs = |section: &str| only.as_deref().is_none_or(|only| only.split(',').any(|s| s == section));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let upstream = Process::upstream();
    let work = tempfile::tempdir().unwrap();
    let door = Process::door(work.path(), &upstream.url, "");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let nginx = Process::nginx(work.path(), &upstream.url);
    let litellm = Process::litellm(work.path(), &upstream.url);
    let plain = Process::plain(&upstream.url);
    let mut targets = vec![("direct", upstream.url.clone()), ("door", door.url.clone())];
    targets.extend(nginx.as_ref().map(|p| ("nginx", p.url.clone())));
    targets.extend(litellm.as_ref().map(|p| ("LiteLLM", p.url.clone())));
    // Whole answers only: the plain proxy reads each answer to its end.
    let mut whole_targets = targets.clone();
    whole_targets.push(("plain Rust proxy", plain.url.clone()));
    // The same door reaching the model server through its pooled client
    // (`proxy: env`, no proxy variable set): what driving the connection
    // itself gains.
    let pooled = tempfile::tempdir().unwrap();
    let through_client = Process::door_with(pooled.path(), &upstream.url, "", "      proxy: env\n");
    whole_targets.push(("door, pooled client", through_client.url.clone()));

    if runs("whole") {
        println!("## Whole completions with a tool call the door repairs\n");
        println!("| in flight | target | requests/s (range) | p50 | p99 |\n|---:|---|---:|---:|---:|");
        let mut added = Vec::new();
        for concurrency in [1, 16] {
            let measured = interleaved(rounds, &whole_targets, |url| {
                runtime.block_on(load(url, "drift", false, concurrency, seconds))
            });
            for ((name, _), m) in whole_targets.iter().zip(&measured) {
                println!(
                    "| {concurrency} | {name} | {:.0} ({:.0}–{:.0}) | {:.0} µs | {:.0} µs |",
                    m.rps, m.low, m.high, m.total.0, m.total.1
                );
            }
            for (i, (name, _)) in whole_targets.iter().enumerate().skip(1) {
                let (p50, ratio) = (measured[i].total.0 - measured[0].total.0, measured[i].rps / measured[0].rps);
                added.push((concurrency, *name, p50, ratio));
            }
        }
        println!();
        for (concurrency, name, p50, ratio) in added {
            println!("{concurrency} in flight: {name} adds {p50:.0} µs at p50; requests/s {ratio:.2} of direct  ");
        }
    }

    if runs("streams") {
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
    }
    if runs("paced") {
        println!("\n## Streams written one delta every 30 ms: time to the first delta of text\n");
        println!("| answer | target | first text p50 | first text p99 | end p50 |\n|---|---|---:|---:|---:|");
        for (model, what) in
            [("paced-prose", "prose"), ("paced-fence", "a fence"), ("paced-tool-word", "a tool's name, then words")]
        {
            let measured = interleaved(rounds, &targets, |url| runtime.block_on(load(url, model, true, 8, seconds)));
            for ((name, _), m) in targets.iter().zip(&measured) {
                println!(
                    "| {what} | {name} | {:.1} ms | {:.1} ms | {:.1} ms |",
                    m.text.0 / 1e3,
                    m.text.1 / 1e3,
                    m.total.0 / 1e3
                );
            }
        }
    }
    if runs("retry") {
        let again = tempfile::tempdir().unwrap();
        let retrying = Process::door(again.path(), &upstream.url, "  retry: 1\n");
        println!("\n## The second chance\n");
        println!("| answer | target | requests/s (range) | p50 | p99 | upstream requests | total tokens |\n|---|---|---:|---:|---:|---:|---:|");
        let doors =
            [("direct", upstream.url.clone()), ("door", door.url.clone()), ("door, retry: 1", retrying.url.clone())];
        for (model, what) in [("drift", "repaired, no retry needed"), ("retry", "corrected when told")] {
            let measured = interleaved(rounds, &doors, |url| runtime.block_on(load(url, model, false, 1, seconds)));
            for ((name, url), m) in doors.iter().zip(&measured) {
                let (requests, tokens) = runtime.block_on(tries(url, model));
                println!(
                    "| {what} | {name} | {:.0} ({:.0}–{:.0}) | {:.0} µs | {:.0} µs | {requests} | {tokens} |",
                    m.rps, m.low, m.high, m.total.0, m.total.1
                );
            }
        }
    }
    if !runs("memory") {
        return;
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

/// One measurement: requests a second, (p50, p99) to the first chunk, to
/// the first chunk carrying text and to the end, in µs.
#[derive(Clone, Copy, Default)]
struct Measured {
    rps: f64,
    first: (f64, f64),
    text: (f64, f64),
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
                let (mut first, mut text, mut total) = (Vec::new(), Vec::new(), Vec::new());
                while Instant::now() < until {
                    let start = Instant::now();
                    let request = client.post(&url).header("content-type", "application/json").body((*body).clone());
                    let mut response = request.send().await.unwrap();
                    assert!(response.status().is_success(), "{}", response.status());
                    let (mut seen_first, mut seen_text) = (false, false);
                    while let Some(chunk) = response.chunk().await.unwrap() {
                        if !seen_first && !chunk.is_empty() {
                            first.push(start.elapsed().as_secs_f64() * 1e6);
                            seen_first = true;
                        }
                        if !seen_text && carries_text(&chunk) {
                            text.push(start.elapsed().as_secs_f64() * 1e6);
                            seen_text = true;
                        }
                    }
                    total.push(start.elapsed().as_secs_f64() * 1e6);
                }
                (first, text, total)
            })
        })
        .collect();
    let (mut first, mut text, mut total) = (Vec::new(), Vec::new(), Vec::new());
    for task in tasks {
        let (f, x, t) = task.await.unwrap();
        first.extend(f);
        text.extend(x);
        total.extend(t);
    }
    let rps = total.len() as f64 / started.elapsed().as_secs_f64();
    Measured { rps, first: percentiles(first), text: percentiles(text), total: percentiles(total) }
}

/// One whole request for `model` through `base`: the upstream requests it
/// took (`x-toolgate-retries` + 1) and the total tokens its answer reports.
async fn tries(base: &str, model: &str) -> (u64, u64) {
    let client = reqwest::Client::new();
    let response = client.post(format!("{base}/chat/completions")).json(&request(model, false)).send().await.unwrap();
    let retries = response.headers().get("x-toolgate-retries").and_then(|v| v.to_str().ok()?.parse().ok());
    let answer: Value = response.json().await.unwrap();
    (retries.unwrap_or(0) + 1, answer["usage"]["total_tokens"].as_u64().unwrap_or(0))
}

/// Whether a piece of a stream carries a delta of text: a `"content"`
/// whose string is not empty (with or without a space after the colon).
fn carries_text(chunk: &[u8]) -> bool {
    let key = b"\"content\":";
    chunk.windows(key.len()).enumerate().filter(|(_, w)| *w == key).any(|(at, _)| {
        let rest = chunk[at + key.len()..].iter().skip_while(|b| **b == b' ');
        let mut rest = rest.copied();
        rest.next() == Some(b'"') && rest.next().is_some_and(|b| b != b'"')
    })
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
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
            {"type": "function", "function": {"name": "grep", "description": "Search files.",
            "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}}],
    })
}

/// A process measured: the model server or the door, and its base URL.
struct Process {
    child: Child,
    url: String,
}

impl Process {
    fn upstream() -> Self {
        let (child, address) = serve::this_binary(&["--serve"]);
        Self { child, url: format!("http://{address}/v1") }
    }

    /// The plain proxy in Rust (this binary in `--proxy` mode) in front of
    /// `upstream`.
    fn plain(upstream: &str) -> Self {
        let authority = upstream.trim_start_matches("http://").trim_end_matches("/v1");
        let (child, address) = serve::this_binary(&["--proxy", authority]);
        Self { child, url: format!("http://{address}/v1") }
    }

    /// `toolgate serve` with the model door in front of `upstream`.
    fn door(work: &std::path::Path, upstream: &str, extra: &str) -> Self {
        Self::door_with(work, upstream, extra, "")
    }

    /// The same, with `upstream_keys` added to the upstream's entry.
    fn door_with(work: &std::path::Path, upstream: &str, extra: &str, upstream_keys: &str) -> Self {
        std::fs::create_dir_all(work.join("registry")).unwrap();
        std::fs::write(work.join("registry/tools.yaml"), "tools: []\n").unwrap();
        let config =
            format!("model_door:\n{extra}  upstreams:\n    - name: bench\n      base_url: {upstream}\n{upstream_keys}");
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

    /// nginx as a plain proxy in front of `upstream` (keep-alive both
    /// ways, nothing buffered), if `nginx` is on the `PATH`.
    fn nginx(work: &std::path::Path, upstream: &str) -> Option<Self> {
        let dir = work.join("nginx");
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let port = free_port();
        let authority = upstream.trim_start_matches("http://").trim_end_matches("/v1");
        let config = format!(
            "worker_processes 1;\ndaemon off;\npid {pid};\nerror_log {dir}/logs/error.log warn;\n\
             events {{ worker_connections 4096; }}\nhttp {{\n  access_log off;\n  \
             upstream model {{ server {authority}; keepalive 64; }}\n  server {{\n    listen 127.0.0.1:{port};\n    \
             location / {{ proxy_pass http://model; proxy_http_version 1.1; proxy_set_header Connection \"\"; \
             proxy_buffering off; }}\n  }}\n}}\n",
            pid = dir.join("nginx.pid").display(),
            dir = dir.display(),
        );
        std::fs::write(dir.join("nginx.conf"), config).unwrap();
        let child = Command::new("nginx")
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-p")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let process = Self { child, url: format!("http://127.0.0.1:{port}/v1") };
        process.ready().then_some(process)
    }

    /// LiteLLM's proxy in front of `upstream` (every model routed to it),
    /// if `.venv-bench/bin/litellm` exists.
    fn litellm(work: &std::path::Path, upstream: &str) -> Option<Self> {
        let binary = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-bench/bin/litellm");
        if !binary.exists() {
            return None;
        }
        let port = free_port();
        let config = format!(
            "model_list:\n  - model_name: \"*\"\n    litellm_params:\n      model: \"openai/*\"\n      \
             api_base: \"{upstream}\"\n      api_key: \"sk-bench\"\n"
        );
        std::fs::write(work.join("litellm.yaml"), config).unwrap();
        let child = Command::new(binary)
            .arg("--config")
            .arg(work.join("litellm.yaml"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env("LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY", "true")
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_LOG", "ERROR")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let process = Self { child, url: format!("http://127.0.0.1:{port}/v1") };
        let ready = process.ready();
        if !ready {
            eprintln!("LiteLLM's proxy did not answer a chat completion within a minute: its rows are left out");
        }
        ready.then_some(process)
    }

    /// Whether it answers a chat completion within a minute.
    fn ready(&self) -> bool {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let client = reqwest::Client::new();
            let url = format!("{}/chat/completions", self.url);
            let until = Instant::now() + Duration::from_secs(60);
            while Instant::now() < until {
                let body = request("drift", false).to_string();
                let sent = client.post(&url).header("content-type", "application/json").body(body).send().await;
                if sent.is_ok_and(|r| r.status().is_success()) {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            false
        })
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

/// A port free on 127.0.0.1 now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The model server: each model one answer, written at once, or (models
/// `paced-…`) one delta every 30 ms.
mod upstream {
    use std::time::Duration;

    use axum::{body::Body, response::IntoResponse, routing::post, Router};
    use futures::StreamExt;
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
            // `retry`: a call of a tool nobody declared until a tool's
            // message says what went wrong; then the call meant.
            let told = asked["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
            let (name, arguments) = match (model.as_str(), told) {
                ("retry", false) => ("lookup_forecast", "{\"place\": \"Paris\"}"),
                ("retry", true) => ("get_weather", "{\"city\": \"Paris\"}"),
                _ => ("GetWeather", "{'city': 'Paris',}"),
            };
            let call = json!({"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}});
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
            m if m.starts_with("paced-") => {}
            _ => events.extend((0..64).map(|i| chunk(json!({"content": format!("word{i} ")}), None))),
        }
        if let Some(answer) = paced(&model) {
            let pieces: Vec<String> = answer.split('|').map(str::to_owned).collect();
            let deltas = futures::stream::iter(pieces).then(|piece| async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                Ok::<_, std::io::Error>(chunk(json!({"content": piece}), None))
            });
            let end = chunk(json!({}), Some("stop")) + "data: [DONE]\n\n";
            let first = futures::stream::iter([Ok::<_, std::io::Error>(events.concat())]);
            let body = Body::from_stream(first.chain(deltas).chain(futures::stream::iter([Ok(end)])));
            return ([("content-type", "text/event-stream")], body).into_response();
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

    /// What a `paced-…` model writes, its deltas split at `|`.
    fn paced(model: &str) -> Option<&'static str> {
        Some(match model {
            "paced-prose" => "Hello|, the| weather| in Paris| is| sunny|.",
            "paced-fence" => "```python\n|import| os\n|print(|os.getcwd())|\n```",
            "paced-tool-word" => "grep| -rn| TODO| src/| finds| them|.",
            _ => return None,
        })
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

/// The plain proxy: hyper serving the client, hyper's connection API to
/// the model server, each idle upstream connection kept in a pool and
/// driven in the task of the request it carries (no task of its own, no
/// hand-over between threads); the request and the answer passed whole
/// and unread. What any proxy built on this HTTP stack costs here.
mod plain {
    use std::{
        convert::Infallible,
        pin::Pin,
        sync::{Arc, Mutex},
    };

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper::{
        body::Incoming,
        client::conn::http1::{handshake, Connection, SendRequest},
        Request, Response,
    };
    use hyper_util::rt::TokioIo;

    type Upstream = (SendRequest<Full<Bytes>>, Pin<Box<Connection<TokioIo<tokio::net::TcpStream>, Full<Bytes>>>>);

    async fn pass(authority: &str, idle: &Mutex<Vec<Upstream>>, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        let pooled = idle.lock().unwrap().pop();
        let (mut send, mut connection) = match pooled {
            Some(upstream) => upstream,
            None => {
                let stream = tokio::net::TcpStream::connect(authority).await.unwrap();
                stream.set_nodelay(true).unwrap();
                let (send, connection) = handshake(TokioIo::new(stream)).await.unwrap();
                (send, Box::pin(connection))
            }
        };
        let mut forwarded = Request::builder().method(parts.method).uri(parts.uri.path()).header("host", authority);
        for (name, value) in parts.headers.iter().filter(|(name, _)| *name != hyper::header::HOST) {
            forwarded = forwarded.header(name, value);
        }
        let sending = send.send_request(forwarded.body(Full::new(body)).unwrap());
        let answer = tokio::select! {
            answer = sending => answer.unwrap(),
            ended = &mut connection => panic!("the model server closed the connection: {ended:?}"),
        };
        let (parts, body) = answer.into_parts();
        let body = tokio::select! {
            body = body.collect() => body.unwrap().to_bytes(),
            ended = &mut connection => panic!("the model server closed the connection: {ended:?}"),
        };
        idle.lock().unwrap().push((send, connection));
        Response::from_parts(parts, Full::new(body))
    }

    pub fn serve(authority: String) {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            println!("{}", listener.local_addr().unwrap());
            let shared = Arc::new((authority, Mutex::new(Vec::new())));
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                stream.set_nodelay(true).unwrap();
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let shared = Arc::clone(&shared);
                        async move { Ok::<_, Infallible>(pass(&shared.0, &shared.1, request).await) }
                    });
                    let http = hyper::server::conn::http1::Builder::new();
                    let _ = http.serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
    }
}
