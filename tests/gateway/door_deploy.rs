//! The model door as people deploy it (issue 70): alone, outside the
//! clone, without a catalogue or a gRPC port; the rest of the API passed
//! through to the model server; `GET /health`; `validate`'s warning for a
//! `base_url` without `/v1`.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::{
    common::{listening_after, model_server, toolgate},
    model_door::{http, script_lines},
};

/// The metrics and labels the shipped dashboard's model-door panels whose
/// title starts with `title` query.
fn dashboard_queries(title: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let path = crate::common::repo().join("deploy/grafana/dashboards/toolgate.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap().iter();
    let panels = panels.filter(|p| p["title"].as_str().unwrap_or_default().starts_with(title));
    let exprs: Vec<String> = panels
        .flat_map(|p| p["targets"].as_array().unwrap().iter())
        .map(|t| t["expr"].as_str().unwrap().to_owned())
        .collect();
    assert!(!exprs.is_empty(), "no panel titled {title}");
    let selector = regex::Regex::new(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[\{\[]").unwrap();
    let grouping = regex::Regex::new(r"\bby\s*\(([^)]*)\)").unwrap();
    let (mut metrics, mut labels) = (BTreeSet::new(), BTreeSet::new());
    for expr in &exprs {
        metrics.extend(selector.captures_iter(expr).map(|c| c[1].to_owned()));
        for group in grouping.captures_iter(expr) {
            labels.extend(group[1].split(',').map(|l| l.trim().to_owned()).filter(|l| !l.is_empty() && l != "le"));
        }
    }
    (metrics, labels)
}

/// The series names and label names of a Prometheus text scrape.
fn scraped(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut metrics, mut labels) = (BTreeSet::new(), BTreeSet::new());
    let label = regex::Regex::new(r#"([a-zA-Z_][a-zA-Z0-9_]*)=""#).unwrap();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let name = line.split(['{', ' ']).next().unwrap();
        metrics.insert(name.to_owned());
        labels.extend(label.captures_iter(line).map(|c| c[1].to_owned()));
    }
    (metrics, labels)
}

/// Every metric and label the dashboard's panels titled `title` query is in
/// `text` (a scrape of the real door).
fn dashboard_reads(text: &str, title: &str) {
    let (queried, grouped) = dashboard_queries(title);
    let (metrics, labels) = scraped(text);
    let missing: Vec<&String> = queried.difference(&metrics).collect();
    assert!(missing.is_empty(), "the dashboard queries {missing:?}, not in the scrape:\n{text}");
    let missing: Vec<&String> = grouped.difference(&labels).collect();
    assert!(missing.is_empty(), "the dashboard groups by {missing:?}, not in the scrape:\n{text}");
}

/// `toolgate serve` in a folder holding only `config` (no catalogue), with
/// `args`: the process and the model door's base URL.
fn door_alone(config: &str, args: &[&str]) -> (crate::common::Reaped, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("toolgate.yaml"), config).unwrap();
    let mut command = toolgate();
    command.current_dir(dir.path()).args(["serve", "--config", "toolgate.yaml"]).args(args);
    let (child, _lines, listening, seen) = listening_after(&mut command);
    assert!(listening.contains("gRPC off"), "{listening}");
    let url = crate::common::logged_after(&seen, "model door (OpenAI-compatible) on ");
    (child, url, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_doors_serve_alone_on_one_host_and_pass_the_rest_of_the_api_through() {
    let upstream = model_server::start().await;
    let config = format!(
        "model_door:\n  listen: 127.0.0.1:0\n  upstreams:\n    - name: local\n      base_url: {}\n",
        upstream.base_url()
    );
    // No catalogue, no gRPC port: `--listen off`, and `listen: off` in the
    // file; both on one host.
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let metrics_at = format!("127.0.0.1:{metrics_port}");
    let (_first, url, _dir) = door_alone(&config, &["--listen", "off", "--metrics-listen", &metrics_at]);
    let (_second, second_url, _dir2) = door_alone(&format!("listen: \"off\"\n{config}"), &[]);
    assert_ne!(url, second_url);
    let client = http();
    let root = url.trim_end_matches("/v1");
    let health = client.get(format!("{root}/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);

    // A model by its id, and a stream of another API that passes as it
    // comes: its first pieces arrive while the model server still writes.
    let model: Value = client.get(format!("{url}/models/qwen3")).send().await.unwrap().json().await.unwrap();
    assert_eq!(model["id"], "qwen3");
    let mut stream = client
        .post(format!("{url}/completions"))
        .json(&json!({"model": "coder", "prompt": "def", "stream": true}))
        .send()
        .await
        .unwrap();
    let mut first = String::new();
    while !first.contains(" add") {
        first.push_str(&String::from_utf8_lossy(&stream.chunk().await.unwrap().expect("more of the stream")));
    }
    upstream.seen.release.send_replace(true);
    let mut rest = String::new();
    while let Some(piece) = stream.chunk().await.unwrap() {
        rest.push_str(&String::from_utf8_lossy(&piece));
    }
    assert!(rest.contains("(a, b)") && rest.ends_with("data: [DONE]\n\n"), "{rest}");

    // One base_url for chat and embeddings (LangChain): the embedding
    // passes through as the model server wrote it, the chat's call comes
    // back repaired.
    let door = url.clone();
    tokio::task::spawn_blocking(move || {
        let said = script_lines("one_base_url.py", &[&door, "drift"], "framework");
        let line = &said["langchain"];
        assert_eq!(line["embedding"], json!([0.5, 0.25, 1.0]), "{line}");
        assert_eq!(line["tool_calls"], json!([{"name": "get_weather", "args": {"city": "Paris"}}]), "{line}");
    })
    .await
    .unwrap();

    let hello = json!({"model": "hello", "stream": true, "messages": [{"role": "user", "content": "Hi"}]});
    let streamed = client.post(format!("{url}/chat/completions")).json(&hello).send().await.unwrap();
    assert!(streamed.text().await.unwrap().contains("Hello."));
    // The door's series, scraped as Prometheus text: requests by route and
    // status, generations by model and upstream, tokens, the stream's first
    // bytes, the repair of the chat's call.
    let scraped = client.get(format!("http://{metrics_at}/metrics")).send().await.unwrap();
    assert_eq!(scraped.status(), 200);
    let text = scraped.text().await.unwrap();
    for series in [
        "http_server_request_duration_seconds_count{http_request_method=\"POST\",http_response_status_code=\"200\",http_route=\"/v1/chat/completions\"",
        "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_request_model=\"drift\",http_response_status_code=\"200\",toolgate_upstream=\"local\"",
        "gen_ai_client_token_usage_count{gen_ai_operation_name=\"chat\",gen_ai_request_model=\"drift\",gen_ai_token_type=\"input\",toolgate_upstream=\"local\"",
        "gen_ai_server_time_to_first_token_seconds_count{gen_ai_request_model=\"hello\",toolgate_upstream=\"local\"",
        "toolgate_tool_repairs_total{gen_ai_tool_name=\"get_weather\"",
    ] {
        assert!(text.contains(series), "{series} not in:\n{text}");
    }
    for panel in ["Model door: requests", "Model door: generation", "Model door: time", "Model door: tokens"] {
        dashboard_reads(&text, panel);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_passes_through_needs_the_same_key_and_counts_in_the_same_rate() {
    let upstream = model_server::start().await;
    let config = format!(
        "listen: \"off\"\nprincipals:\n  - name: bot\n    api_key_sha256: {}\n    tools: ['*']\n    rate: {{per_minute: 2, burst: 2}}\n\
         model_door:\n  listen: 127.0.0.1:0\n  upstreams:\n    - name: local\n      base_url: {}\n      api_key_env: UPSTREAM_KEY\n",
        toolgate::identity::hash_key("k"),
        upstream.base_url()
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("toolgate.yaml"), &config).unwrap();
    let mut command = toolgate();
    command.current_dir(dir.path()).args(["serve", "--config", "toolgate.yaml"]).env("UPSTREAM_KEY", "sk-upstream");
    let (_gateway, _lines, _, seen) = listening_after(&mut command);
    let url = crate::common::logged_after(&seen, "model door (OpenAI-compatible) on ");
    let client = http();
    let embed = |key: Option<&'static str>| {
        let request = client.post(format!("{url}/embeddings")).json(&json!({"model": "e", "input": "x"}));
        match key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    };
    assert_eq!(embed(None).send().await.unwrap().status(), 401);
    assert!(upstream.seen.authorization.lock().unwrap().is_empty(), "nothing reached the model server");
    // The principal's key admits; the model server gets its own key.
    assert_eq!(embed(Some("k")).send().await.unwrap().status(), 200);
    assert_eq!(upstream.last_authorization().as_deref(), Some("Bearer sk-upstream"));
    // /health needs no key; it is no request of the rate.
    let root = url.trim_end_matches("/v1");
    assert_eq!(client.get(format!("{root}/health")).send().await.unwrap().status(), 200);
    assert_eq!(embed(Some("k")).send().await.unwrap().status(), 200);
    assert_eq!(embed(Some("k")).send().await.unwrap().status(), 429);
}

#[test]
fn validate_warns_of_a_base_url_without_v1_and_a_door_alone_needs_something_to_serve() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        "model_door:\n  listen: 127.0.0.1:0\n  upstreams:\n    - name: vllm\n      base_url: http://127.0.0.1:8000\n";
    std::fs::write(dir.path().join("toolgate.yaml"), config).unwrap();
    let out = toolgate().current_dir(dir.path()).args(["validate", "--config", "toolgate.yaml"]).output().unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("model_door.upstreams[0].base_url: 'http://127.0.0.1:8000' does not end in /v1"),
        "{stderr}"
    );

    std::fs::write(dir.path().join("toolgate.yaml"), "listen: \"off\"\n").unwrap();
    let out = toolgate().current_dir(dir.path()).args(["serve", "--config", "toolgate.yaml"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("listen: off leaves nothing to serve"), "{stderr}");
}

/// A model server that answers every request 503.
async fn overloaded() -> String {
    let app = axum::Router::new().fallback(|| async {
        (axum::http::StatusCode::SERVICE_UNAVAILABLE, "{\"error\": {\"message\": \"overloaded\"}}")
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_fails_over_before_its_first_byte_and_never_after() {
    let (first, second) = (model_server::start().await, model_server::start().await);
    let closed = {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        socket.local_addr().unwrap().port()
    };
    let busy = overloaded().await;
    // `down` (nothing listens) names `busy` (503) as its fallback; `good`
    // matches the model too, so it comes after them.
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = format!(
        "listen: \"off\"\nmetrics_listen: 127.0.0.1:{metrics_port}\nmodel_door:\n  listen: 127.0.0.1:0\n  upstreams:\n\
         \x20   - name: down\n      base_url: http://127.0.0.1:{closed}/v1\n      models: [\"qwen*\"]\n      fallback: [busy]\n\
         \x20   - name: busy\n      base_url: {busy}\n      models: [\"qwen*\"]\n\
         \x20   - name: good\n      base_url: {}\n      models: [\"qwen*\"]\n\
         \x20   - name: cuts\n      base_url: {}\n      models: [\"cut\"]\n\
         \x20   - name: spare\n      base_url: {}\n      models: [\"cut\"]\n",
        second.base_url(),
        first.base_url(),
        second.base_url()
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("toolgate.yaml"), &config).unwrap();
    let mut command = toolgate();
    command.current_dir(dir.path()).args(["serve", "--config", "toolgate.yaml"]);
    let (_gateway, lines, _, seen) = listening_after(&mut command);
    let log = crate::common::LogLines::follow(lines);
    let url = crate::common::logged_after(&seen, "model door (OpenAI-compatible) on ");
    let client = http();

    // Down, then overloaded: the third upstream answers, repaired as ever.
    let body = json!({"model": "qwen3", "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]});
    let answer = client.post(format!("{url}/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let said: Value = answer.json().await.unwrap();
    assert_eq!(said["choices"][0]["message"]["content"], "Hello.", "{said}");
    assert_eq!(second.seen.bodies.lock().unwrap().len(), 1);
    // The log is read by another thread: wait for its lines, not a time.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while log.count("failing over") < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(log.count("failing over"), 2, "{}", log.text());
    assert!(log.text().contains("status 503"), "{}", log.text());
    let text = client.get(format!("http://127.0.0.1:{metrics_port}/metrics")).send().await.unwrap();
    let text = text.text().await.unwrap();
    assert!(
        text.contains("toolgate_model_door_failovers_total{from=\"down\",to=\"busy\",otel_scope_name=\"toolgate\"} 1"),
        "{text}"
    );
    dashboard_reads(&text, "Model door: failovers");

    // A stream whose first bytes reached the client: cut mid-way, it ends
    // with an error, and no other upstream is asked.
    let mut cut = body.clone();
    cut["model"] = "cut".into();
    cut["stream"] = true.into();
    let before = second.seen.bodies.lock().unwrap().len();
    let text = client.post(format!("{url}/chat/completions")).json(&cut).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("\"error\""), "{text}");
    assert_eq!(second.seen.bodies.lock().unwrap().len(), before, "no switch after the first byte");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_door_alone_runs_as_copied_outside_the_clone() {
    let upstream = model_server::start().await;
    let readme = std::fs::read_to_string(crate::common::repo().join("README.md")).unwrap();
    let heading = "### The model door alone";
    let at = readme.find(heading).expect("the README has the section");
    let start = at + readme[at..].find("```sh\n").unwrap() + "```sh\n".len();
    let script = &readme[start..start + readme[start..].find("```\n").unwrap()];
    // As copied, but the model server and the door's port are this test's.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let script = script
        .replace("http://127.0.0.1:8000/v1", &upstream.base_url())
        .replace("127.0.0.1:4000", &format!("127.0.0.1:{port}"));
    let home = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_toolgate")).parent().unwrap().to_owned();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut command = std::process::Command::new("bash");
    command.args(["-c", &script]).env("HOME", home.path()).env("PATH", path).current_dir(home.path());
    let (_door, _lines, listening, _) = listening_after(&mut command);
    assert!(listening.contains("gRPC off"), "{listening}");
    let body = json!({"model": "drift", "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]});
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let said: Value = http().post(url).json(&body).send().await.unwrap().json().await.unwrap();
    let call = &said["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "get_weather", "{said}");
    assert!(home.path().join("door/toolgate.yaml").exists());
}

#[test]
fn the_examples_run_through_the_door_and_not_without_it() {
    use std::io::BufRead;
    let examples = crate::common::repo().join("examples/model_door");
    // The scripted model server, as its docstring says to run it.
    let port = crate::common::backend::closed_port().port();
    let mut server = crate::common::Reaped::spawn(
        std::process::Command::new("python3")
            .arg(examples.join("scripted_model_server.py"))
            .arg(port.to_string())
            .stdout(std::process::Stdio::piped()),
    );
    let mut said = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap()).read_line(&mut said).unwrap();
    assert!(said.contains(&format!("127.0.0.1:{port}/v1")), "{said}");
    // The door as door.yaml configures it, on free ports.
    let door_port = crate::common::backend::closed_port().port();
    let config = std::fs::read_to_string(examples.join("door.yaml"))
        .unwrap()
        .replace("127.0.0.1:8000/v1", &format!("127.0.0.1:{port}/v1"))
        .replace("127.0.0.1:4000", &format!("127.0.0.1:{door_port}"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("door.yaml"), config).unwrap();
    let mut command = toolgate();
    command.current_dir(dir.path()).args(["serve", "--config", "door.yaml"]);
    let (_door, _lines, _, _) = listening_after(&mut command);
    let run = |script: &str, base_url: String| {
        let out = std::process::Command::new(crate::common::mcp::python())
            .arg(examples.join(script))
            .env("MODEL_BASE_URL", base_url)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for script in ["openai_sdk.py", "langchain_agent.py", "agents_sdk.py"] {
        let through = run(script, format!("http://127.0.0.1:{door_port}/v1"));
        assert!(through.contains("tool call: get_weather({'city': 'Paris'})"), "{script}: {through}");
        assert!(through.contains("The weather in Paris: sunny in Paris."), "{script}: {through}");
        let alone = run(script, format!("http://127.0.0.1:{port}/v1"));
        assert!(!alone.contains("tool call:"), "{script} without the door: {alone}");
    }
}
