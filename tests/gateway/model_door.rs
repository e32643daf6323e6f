//! The model door, through the real binary: a scripted model server
//! upstream (real HTTP on 127.0.0.1), the `openai` Python SDK as the
//! agent's client, and raw HTTP for headers and faults.

use serde_json::Value;

use crate::common::{
    listening_after, logged_after,
    mcp::python,
    model_server::{self, ModelServer},
    repo, toolgate, CatalogDir, LogLines, Reaped,
};

/// `toolgate serve` with the model door in front of `upstream`; the door's
/// base URL and the log.
pub(crate) fn serve(dir: &CatalogDir, upstream: &str, extra: &str) -> (Reaped, String, LogLines) {
    serve_with(dir, upstream, "", extra, &[])
}

/// The same, with keys added to the upstream's entry, top-level
/// configuration and environment variables.
pub(crate) fn serve_with(
    dir: &CatalogDir,
    upstream: &str,
    upstream_keys: &str,
    top: &str,
    env: &[(&str, &str)],
) -> (Reaped, String, LogLines) {
    dir.file("registry/tools.yaml", "tools:\n  - name: echo_tool\n    description: x\n    backend: {builtin: echo}\n");
    let config = format!(
        "model_door:\n  upstreams:\n    - name: local\n      base_url: {upstream}\n      models: [\"*\"]\n{upstream_keys}{top}"
    );
    let path = dir.file("toolgate.yaml", &config);
    let mut command = toolgate();
    command.envs(env.iter().copied());
    command.current_dir(dir.dir.path()).args(["serve", "--catalog", "registry", "--listen", "127.0.0.1:0"]);
    command.args(["--model-listen", "127.0.0.1:0", "--config"]).arg(path);
    let (child, lines, _, seen) = listening_after(&mut command);
    (child, logged_after(&seen, "model door (OpenAI-compatible) on "), LogLines::follow(lines))
}

/// The SDK's answer for `model`, streamed or whole.
fn sdk(base_url: &str, model: &str, mode: &str) -> Value {
    let out = std::process::Command::new(python())
        .arg(repo().join("tests/model/openai_client.py"))
        .args([base_url, model, mode])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the SDK client failed: {text}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(text.trim()).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// A plain HTTP client.
pub(crate) fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

fn calls(answer: &Value) -> Vec<(String, Value)> {
    let calls = answer["tool_calls"].as_array().unwrap_or_else(|| panic!("no calls: {answer}"));
    calls.iter().map(|c| (c["name"].as_str().unwrap().to_owned(), c["arguments"].clone())).collect()
}

fn city(name: &str) -> (String, Value) {
    ("get_weather".to_owned(), serde_json::json!({"city": name}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_receives_repaired_and_lifted_calls_whole_and_streamed() {
    let upstream: ModelServer = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let url2 = url.clone();
    tokio::task::spawn_blocking(move || {
        let url = url2;
        for mode in ["whole", "stream"] {
            // A drifted name and Python-ish arguments: repaired.
            let answer = sdk(&url, "drift", mode);
            assert_eq!(calls(&answer), [city("Paris")], "{mode}: {answer}");
            assert_eq!(answer["tool_calls"][0]["id"], "call_1", "the model's id is kept: {answer}");
            // A call written as text: lifted, with a new id.
            for (model, expected) in [
                ("text-call", vec![city("Paris")]),
                ("two-calls", vec![city("Paris"), city("Rome")]),
                ("think-call", vec![city("Oslo")]),
            ] {
                let answer = sdk(&url, model, mode);
                assert_eq!(calls(&answer), expected, "{mode} {model}: {answer}");
                assert_eq!(answer["finish_reason"], "tool_calls", "{mode} {model}: {answer}");
                for call in answer["tool_calls"].as_array().unwrap() {
                    let id = call["id"].as_str().unwrap();
                    assert!(id.starts_with("call_") && id.len() == 29, "{id}");
                }
            }
            // A call inside prose, a call of no declared tool: text, unchanged.
            for model in ["prose", "unknown"] {
                let answer = sdk(&url, model, mode);
                assert_eq!(calls(&answer), [], "{mode} {model}: {answer}");
                assert_eq!(answer["finish_reason"], "stop", "{mode} {model}: {answer}");
                let (content, _) = model_server_content(model);
                assert_eq!(answer["content"], content, "{mode} {model}: the text passes unchanged");
            }
        }
        // What was repaired is said (whole answers).
        let answer = sdk(&url, "drift", "whole");
        let repairs: Value = serde_json::from_str(answer["repairs"].as_str().unwrap()).unwrap();
        let kinds: Vec<&str> = repairs.as_array().unwrap().iter().map(|r| r["kind"].as_str().unwrap()).collect();
        assert!(kinds.contains(&"TOOL_NAME") && kinds.contains(&"ARGUMENTS_JSON"), "{repairs}");
        assert_eq!(repairs[0]["choice"], 0);
        assert_eq!(repairs[0]["call"], 0);
    })
    .await
    .unwrap();
    // Without principals, the caller's own key goes to the upstream.
    assert_eq!(upstream.last_authorization().as_deref(), Some("Bearer sk-test-caller"));
}

/// The content the scripted server writes for `model`.
fn model_server_content(model: &str) -> (&'static str, ()) {
    match model {
        "prose" => ("Sure, I could call get_weather(city='Paris') for you, if you like.", ()),
        "unknown" => ("<tool_call>{\"name\": \"delete_everything\", \"arguments\": {}}</tool_call>", ()),
        _ => unreachable!(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_changes_nothing_and_faults_are_said_in_openais_shape() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let client = http();
    let body = serde_json::json!({
        "model": "drift",
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    });
    let strict = client.post(format!("{url}/chat/completions")).header("x-toolgate-strict", "true").json(&body);
    let answer = strict.send().await.unwrap();
    assert!(answer.headers().get("x-toolgate-repairs").is_none());
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "GetWeather");
    // tool_choice none: a call as text stays text.
    let mut none = body.clone();
    none["model"] = "text-call".into();
    none["tool_choice"] = "none".into();
    let answer: Value =
        client.post(format!("{url}/chat/completions")).json(&none).send().await.unwrap().json().await.unwrap();
    assert!(answer["choices"][0]["message"]["tool_calls"].is_null(), "{answer}");
    // The upstream's own error passes as it was.
    let mut broken = body.clone();
    broken["model"] = "broken".into();
    let answer = client.post(format!("{url}/chat/completions")).json(&broken).send().await.unwrap();
    assert_eq!(answer.status(), 500);
    assert_eq!(answer.text().await.unwrap(), "{\"error\": {\"message\": \"the model crashed\"}}");
    // A stream cut mid-way ends with an error event and no [DONE].
    let mut cut = body.clone();
    cut["model"] = "cut".into();
    cut["stream"] = true.into();
    let text = client.post(format!("{url}/chat/completions")).json(&cut).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("\"error\"") && !text.contains("[DONE]"), "{text}");
    // An answer longer than the door reads to repair arrives whole, as sent.
    let mut huge = body.clone();
    huge["model"] = "huge".into();
    let answer: Value =
        client.post(format!("{url}/chat/completions")).json(&huge).send().await.unwrap().json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"].as_str().map(str::len), Some(17 * 1024 * 1024));
    // Paths the door does not serve; another /v1/… path is the model
    // server's to answer (here its 404, passed on).
    let root = url.trim_end_matches("/v1");
    let answer = client.post(format!("{root}/nothing")).json(&body).send().await.unwrap();
    assert_eq!(answer.status(), 404);
    let error: Value = answer.json().await.unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("/v1/chat/completions"), "{error}");
    assert_eq!(client.post(format!("{url}/nothing")).json(&body).send().await.unwrap().status(), 404);
    // The models of the upstreams.
    let models: Value = client.get(format!("{url}/models")).send().await.unwrap().json().await.unwrap();
    assert_eq!(models["data"][0]["id"], "qwen3-coder");
    // Not JSON: 400 in OpenAI's shape.
    let answer = client.post(format!("{url}/chat/completions")).body("{oops").send().await.unwrap();
    assert_eq!(answer.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_cannot_be_reached_is_a_502() {
    let dir = CatalogDir::new();
    let closed = crate::common::backend::closed_port();
    let (_gateway, url, _log) = serve(&dir, &format!("http://{closed}/v1"), "");
    let body = serde_json::json!({"model": "any", "messages": [{"role": "user", "content": "x"}]});
    let answer = http().post(format!("{url}/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(answer.status(), 502);
    let error: Value = answer.json().await.unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("'local' could not be reached"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_principals_a_toolgate_key_admits_the_upstream_gets_its_own_and_the_rate_limit_counts() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let principals = format!(
        "principals:\n  - name: bot\n    api_key_sha256: {}\n    tools: ['*']\n    rate: {{per_minute: 2, burst: 2}}\n",
        toolgate::identity::hash_key("k")
    );
    let key = "      api_key_env: UPSTREAM_KEY\n";
    let (_gateway, url, _log) =
        serve_with(&dir, &upstream.base_url(), key, &principals, &[("UPSTREAM_KEY", "sk-upstream")]);
    let client = http();
    let body = serde_json::json!({"model": "text-call", "messages": [{"role": "user", "content": "x"}]});
    let post = |key: Option<&str>| {
        let request = client.post(format!("{url}/chat/completions")).json(&body);
        match key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    };
    // No key, a wrong key: 401, and nothing reaches the upstream.
    for key in [None, Some("sk-not-ours")] {
        let answer = post(key).send().await.unwrap();
        assert_eq!(answer.status(), 401);
        assert_eq!(answer.headers()["www-authenticate"], "Bearer");
    }
    assert!(upstream.seen.authorization.lock().unwrap().is_empty());
    // The principal's key admits; the upstream gets its own key, never the caller's.
    for _ in 0..2 {
        assert_eq!(post(Some("k")).send().await.unwrap().status(), 200);
        assert_eq!(upstream.last_authorization().as_deref(), Some("Bearer sk-upstream"));
    }
    // The third within the minute: 429 with Retry-After, in OpenAI's shape.
    let answer = post(Some("k")).send().await.unwrap();
    assert_eq!(answer.status(), 429);
    assert!(answer.headers().contains_key("retry-after"));
    let error: Value = answer.json().await.unwrap();
    assert_eq!(error["error"]["type"], "rate_limit_exceeded", "{error}");
    assert_eq!(upstream.seen.authorization.lock().unwrap().len(), 2);
}

#[test]
fn a_model_door_configured_wrongly_is_refused_with_every_problem() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", "tools:\n  - name: echo_tool\n    description: x\n    backend: {builtin: echo}\n");
    dir.file(
        "toolgate.yaml",
        "model_door:\n  listen: 127.0.0.1:0\n  upstreams:\n    - name: local\n      base_url: ftp://x\n      api_key_env: NO_SUCH_KEY_VAR\n      timeout: soon\n      models: [\"qwen*\", \"[gpt\"]\n  default_upstream: locl\n",
    );
    let out = crate::common::run(dir.dir.path(), &["validate", "--config", "toolgate.yaml", "--catalog", "registry"]);
    let said = crate::common::stderr(&out) + &crate::common::stdout(&out);
    assert!(!out.status.success(), "{said}");
    for problem in [
        "model_door.upstreams[0].base_url: 'ftp://x' is not an http(s) URL",
        "model_door.upstreams[0].api_key_env: the environment variable NO_SUCH_KEY_VAR is not set",
        "model_door.upstreams[0].timeout: 'soon' is not a duration",
        "model_door.upstreams[0].models[1]: '[gpt' is not a glob",
        "model_door.default_upstream: no upstream is named 'locl'",
        "did you mean 'local'",
    ] {
        assert!(said.contains(problem), "{problem:?} in {said}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_has_a_server_span_and_a_chat_span_with_the_repairs() {
    let (collector, received) = crate::common::otlp::receiver(std::time::Duration::ZERO).await;
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let endpoint = format!("http://{collector}");
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let (gateway, url, _log) = serve_with(&dir, &upstream.base_url(), "", "", &env);
    let client = http();
    let tools = serde_json::json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]);
    let traces =
        [("drift", false, "44444444444444444444444444444444"), ("text-call", true, "55555555555555555555555555555555")];
    for (model, stream, trace) in traces {
        let body = serde_json::json!({"model": model, "messages": [{"role": "user", "content": "x"}], "tools": tools, "stream": stream});
        let request = client.post(format!("{url}/chat/completions")).json(&body);
        let answer = request.header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01")).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        answer.text().await.unwrap();
    }
    // Everything pending is flushed on the way out.
    assert!(std::process::Command::new("kill").args(["-TERM", &gateway.id().to_string()]).status().unwrap().success());
    tokio::task::spawn_blocking(move || gateway.wait().unwrap()).await.unwrap();

    let spans = received.span_list();
    let span = |trace: &str, name: &str| {
        let found = spans.iter().find(|(t, n, _)| t == trace && n == name);
        found.unwrap_or_else(|| panic!("{name} in {trace}: {spans:?}")).2.clone()
    };
    let has = |attributes: &[(String, String)], key: &str, value: &str| {
        attributes.iter().any(|(k, v)| k == key && v.contains(value))
    };
    for (model, _, trace) in traces {
        let server = span(trace, "POST /v1/chat/completions");
        assert!(has(&server, "http.response.status_code", "200"), "{server:?}");
        let chat = span(trace, &format!("chat {model}"));
        for (key, value) in [
            ("gen_ai.operation.name", "chat"),
            ("gen_ai.provider.name", "openai"),
            ("gen_ai.request.model", model),
            ("gen_ai.response.model", model),
            ("gen_ai.response.finish_reasons", ""),
        ] {
            assert!(has(&chat, key, value), "{key} on chat {model}: {chat:?}");
        }
    }
    assert!(has(&span(traces[0].2, "chat drift"), "gen_ai.usage.input_tokens", "10"));
    let events = received.span_events();
    let repairs = |span: &str| -> Vec<Vec<(String, String)>> {
        events.iter().filter(|(s, e, _)| s == span && e == "toolgate.repair").map(|(_, _, a)| a.clone()).collect()
    };
    let drift = repairs("chat drift");
    assert!(
        drift.iter().any(|a| has(a, "toolgate.repair.kind", "tool_name")
            && has(a, "toolgate.repair.from", "GetWeather")
            && has(a, "toolgate.repair.to", "get_weather")),
        "{drift:?}"
    );
    assert!(
        drift
            .iter()
            .any(|a| has(a, "toolgate.repair.kind", "arguments_json")
                && !a.iter().any(|(k, _)| k == "toolgate.repair.from")),
        "arguments are content: {drift:?}"
    );
    assert!(!repairs("chat text-call").is_empty(), "{events:?}");
    assert!(received.metric_names().contains(&"toolgate.tool.repairs".to_owned()));
}

/// The JSON lines a Python script of `tests/model/` prints for `args`, by
/// the value of each line's `key`.
pub(crate) fn script_lines(script: &str, args: &[&str], key: &str) -> std::collections::BTreeMap<String, Value> {
    let out = std::process::Command::new(python()).arg(repo().join("tests/model").join(script)).args(args).output();
    let out = out.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{script} failed: {text}\n{}", String::from_utf8_lossy(&out.stderr));
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .map(|line| (line[key].as_str().unwrap().to_owned(), line))
        .collect()
}

/// Each framework's line from `tests/model/frameworks.py` for `model`, by
/// framework name.
fn frameworks(base_url: &str, model: &str) -> std::collections::BTreeMap<String, Value> {
    script_lines("frameworks.py", &[base_url, model], "framework")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_and_the_agents_sdk_get_calls_they_refuse_from_the_model_alone() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let direct = upstream.base_url();
    tokio::task::spawn_blocking(move || {
        let paris = serde_json::json!([{"name": "get_weather", "args": {"city": "Paris"}}]);
        for model in ["drift", "text-call"] {
            let through = frameworks(&url, model);
            for framework in ["langchain", "langchain-stream"] {
                let line = &through[framework];
                assert_eq!(line["tool_calls"], paris, "{model} {framework}: {line}");
                assert_eq!(line["invalid_tool_calls"], serde_json::json!([]), "{model} {framework}: {line}");
            }
            // The Agents SDK ran the tool with the repaired call, then answered.
            let agents = &through["agents"];
            assert_eq!(agents["ran"], serde_json::json!([{"city": "Paris"}]), "{model}: {agents}");
            assert_eq!(agents["final_output"], "It is sunny.", "{model}: {agents}");
        }
        // The same model without the door: LangChain cannot parse the call,
        // the Agents SDK finds no such tool, a call written as text is text.
        let alone = frameworks(&direct, "drift");
        assert_eq!(alone["langchain"]["tool_calls"], serde_json::json!([]), "{}", alone["langchain"]);
        assert_eq!(alone["agents"]["ran"], serde_json::json!([]), "{}", alone["agents"]);
        assert!(alone["agents"]["error"].as_str().is_some_and(|e| e.contains("GetWeather")), "{}", alone["agents"]);
        let alone = frameworks(&direct, "text-call");
        assert_eq!(alone["langchain"]["tool_calls"], serde_json::json!([]), "{}", alone["langchain"]);
        assert_eq!(alone["agents"]["ran"], serde_json::json!([]), "{}", alone["agents"]);
    })
    .await
    .unwrap();
}

/// Each framework's line from `tests/model/strict.py` for `model`.
fn strict_frameworks(base_url: &str, model: &str) -> std::collections::BTreeMap<String, Value> {
    script_lines("strict.py", &[base_url, model], "framework")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_tools_get_the_calls_non_strict_ones_get() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let direct = upstream.base_url();
    tokio::task::spawn_blocking(move || {
        let frameworks = ["agents-strict", "agents", "pydantic-ai-strict", "pydantic-ai"];
        // A drifted name without the optional parameter, the call as text
        // without it, and a number as text: each framework, strict or not,
        // runs the one call the model meant (`days` null where left out).
        for (model, days) in [("strict-drift", Value::Null), ("strict-text", Value::Null), ("strict-days", 3.into())] {
            let through = strict_frameworks(&url, model);
            for framework in frameworks {
                let line = &through[framework];
                assert_eq!(
                    line["ran"],
                    serde_json::json!([{"city": "Paris", "days": days}]),
                    "{model} {framework}: {line}"
                );
                assert!(line.get("error").is_none(), "{model} {framework}: {line}");
            }
        }
        // Without the door none of them runs the drifted call.
        let alone = strict_frameworks(&direct, "strict-drift");
        for framework in frameworks {
            assert_eq!(alone[framework]["ran"], serde_json::json!([]), "{framework}: {}", alone[framework]);
        }
    })
    .await
    .unwrap();
}

/// The TypeScript SDK's answer for `model`, streamed or whole.
fn typescript(base_url: &str, model: &str, mode: &str) -> Value {
    let out = crate::common::mcp::node_command("node")
        .arg(repo().join("tests/mcp/js/openai_client.mjs"))
        .args([base_url, model, mode])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the TypeScript SDK failed: {text}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(text.trim()).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_receives_repaired_lifted_calls_and_raises_on_a_cut_stream() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    tokio::task::spawn_blocking(move || {
        for mode in ["whole", "stream"] {
            for (model, expected) in [("drift", vec![city("Paris")]), ("two-calls", vec![city("Paris"), city("Rome")])]
            {
                let answer = typescript(&url, model, mode);
                assert_eq!(calls(&answer), expected, "{mode} {model}: {answer}");
                assert_eq!(answer["finish_reason"], "tool_calls", "{mode} {model}: {answer}");
            }
            let answer = typescript(&url, "prose", mode);
            assert_eq!(calls(&answer), [], "{mode}: {answer}");
        }
        // A stream cut mid-way: the SDK raises, never a silent truncation.
        let answer = typescript(&url, "cut", "stream");
        assert!(answer["error"].is_string(), "{answer}");
    })
    .await
    .unwrap();
}

#[test]
fn the_documented_configuration_passes_validate() {
    let doc = std::fs::read_to_string(repo().join("docs/model-door.md")).unwrap();
    let yaml = doc.split("```yaml\n").nth(1).and_then(|rest| rest.split("```").next()).expect("a yaml block");
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", "tools: []\n");
    dir.file("toolgate.yaml", yaml);
    let out = toolgate()
        .current_dir(dir.dir.path())
        .args(["validate", "--config", "toolgate.yaml", "--catalog", "registry"])
        .env("LOCAL_LLM_KEY", "sk-local")
        .output()
        .unwrap();
    let said = crate::common::stderr(&out) + &crate::common::stdout(&out);
    assert!(out.status.success(), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_16_mib_is_413_and_a_door_beyond_loopback_needs_principals() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let huge = format!("{{\"model\": \"drift\", \"messages\": [], \"pad\": \"{}\"}}", "a".repeat(16 * 1024 * 1024 + 1));
    let answer = http().post(format!("{url}/chat/completions")).body(huge).send().await.unwrap();
    assert_eq!(answer.status(), 413);
    assert!(upstream.seen.authorization.lock().unwrap().is_empty(), "nothing reached the model server");

    let out = toolgate()
        .current_dir(dir.dir.path())
        .args(["serve", "--catalog", "registry", "--listen", "127.0.0.1:0", "--model-listen", "0.0.0.0:0"])
        .args(["--config", "toolgate.yaml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = crate::common::stderr(&out);
    assert!(said.contains("refusing to listen on 0.0.0.0:0"), "{said}");
}

/// Server-sent events whose lines end in CR alone, or CRLF, are events all
/// the same: a call the model wrote as text is lifted from either stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_lines_end_in_cr_or_crlf_is_read_as_events() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    for model in ["text-call-cr", "text-call-crlf"] {
        let answer = chat(&url, weather_request(model, true)).await;
        let text = answer.text().await.unwrap();
        let lifted = text.contains(r#""name":"get_weather""#) && text.contains(r#""finish_reason":"tool_calls""#);
        assert!(lifted, "{model}: {text}");
        assert!(text.contains(r#"{\"city\":\"Paris\"}"#), "{model}: {text}");
    }
}

/// A whole answer whose call is repaired reaches the client as the model
/// server wrote it but for the repaired name and arguments: a number past
/// 64 bits, an escape and the server's spacing are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repaired_whole_answer_keeps_every_other_byte_of_the_model_servers() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let direct = chat(&upstream.base_url(), weather_request("drift-exact", false)).await.text().await.unwrap();
    assert!(direct.contains("17330000000000000000001") && direct.contains(r"fp_caf\u00e9"), "{direct}");
    let answer = chat(&url, weather_request("drift-exact", false)).await;
    let repairs = answer.headers().get("x-toolgate-repairs").map(|v| v.to_str().unwrap().to_owned());
    assert!(repairs.is_some_and(|r| r.contains("TOOL_NAME") && r.contains("ARGUMENTS_JSON")));
    let expected = direct
        .replace(r#""name":"GetWeather""#, r#""name":"get_weather""#)
        .replace(r#""arguments":"{'city': 'Paris',}""#, r#""arguments":"{\"city\":\"Paris\"}""#);
    assert_ne!(expected, direct);
    assert_eq!(answer.text().await.unwrap(), expected);
}

/// Two calls streamed at one index, or without an index, stay two calls,
/// each at an index of its own, never merged into one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_streamed_calls_at_one_index_or_none_stay_two() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    for model in ["two-structured-same-index", "two-structured-no-index"] {
        let answer = sdk(&url, model, "stream");
        assert_eq!(calls(&answer), [city("Oslo"), city("Paris")], "{model}: {answer}");
    }
}

/// `body` posted to the door's chat completions as JSON.
pub(crate) async fn chat(url: &str, body: String) -> reqwest::Response {
    http()
        .post(format!("{url}/chat/completions"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// The door's `tools` request for the scripted model server's
/// `get_weather`, as JSON text.
fn weather_request(model: &str, stream: bool) -> String {
    let parameters =
        serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    serde_json::json!({
        "model": model, "stream": stream, "messages": [{"role": "user", "content": "The weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": parameters}}],
    })
    .to_string()
}

/// Usage the upstream sends in the finish chunk of a stream whose calls
/// the door held and wrote again reaches the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_in_the_finish_chunk_of_a_stream_with_calls_reaches_the_client() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let answer = chat(&url, weather_request("drift-usage", true)).await;
    let text = answer.text().await.unwrap();
    assert!(text.contains(r#""name":"get_weather""#), "the call repaired: {text}");
    assert!(text.contains(r#""completion_tokens":7"#), "the usage passed: {text}");
}

/// A header the gateway reads as a credential never reaches the model
/// server: here the end user's token under a renamed `users.jwt.header`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_token_header_is_never_forwarded_upstream() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let signer = crate::common::jwt::Signer::new(jsonwebtoken::Algorithm::ES256, "es-1");
    dir.file("certs/jwks.json", &serde_json::json!({"keys": [signer.jwk()]}).to_string());
    let users = "users:\n  jwt: {issuer: \"https://idp.test/\", audience: toolgate, jwks_file: certs/jwks.json, header: x-end-user}\n";
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), users);
    let expires = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 600;
    let token = signer
        .token(serde_json::json!({"iss": "https://idp.test/", "aud": "toolgate", "sub": "alice", "exp": expires}));
    let answer = http()
        .post(format!("{url}/chat/completions"))
        .header("content-type", "application/json")
        .header("x-end-user", token)
        .body(weather_request("drift", false))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
    let seen = upstream.seen.headers.lock().unwrap().last().cloned().unwrap();
    assert!(!seen.iter().any(|name| name == "x-end-user"), "forwarded: {seen:?}");
    assert!(seen.iter().any(|name| name == "content-type"), "{seen:?}");
}

/// The door reaches its upstream through a proxy only when told: with
/// `HTTP_PROXY` set and no `proxy`, it goes direct; with `proxy: env` it
/// honours the variable; with `proxy: URL`, that proxy. The proxy here is
/// the scripted model server itself (it answers an absolute-form request
/// by its path); the upstream's own address is a closed port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_is_reached_through_a_proxy_only_when_configured() {
    let proxy = model_server::start().await;
    let unreachable = format!("http://{}/v1", crate::common::backend::closed_port());
    let proxy_url = format!("http://{}", proxy.addr);
    let env =
        [("HTTP_PROXY", proxy_url.as_str()), ("http_proxy", proxy_url.as_str()), ("NO_PROXY", ""), ("no_proxy", "")];
    for (keys, through) in [("", false), ("      proxy: env\n", true), (&*format!("      proxy: {proxy_url}\n"), true)]
    {
        let dir = CatalogDir::new();
        let (_gateway, url, _log) = serve_with(&dir, &unreachable, keys, "", &env);
        let answer = chat(&url, weather_request("drift", false)).await;
        let status = answer.status();
        assert_eq!(status == 200, through, "{keys:?}: {status} {}", answer.text().await.unwrap());
    }
}

/// The browser rule of every HTTP door holds at the model door: a foreign
/// `Origin` is 403 (and the model server never hears of it), an allowed
/// one (`model_door.allowed_origins`) passes, a loopback listener answers
/// only loopback `Host` names, and a body that says it is not JSON is 415.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_origins_and_hosts_and_bodies_that_are_not_json_are_refused() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let port = url.trim_end_matches("/v1").rsplit(':').next().unwrap().to_owned();
    let post = |headers: &[(&str, &str)]| {
        let mut request = http().post(format!("{url}/chat/completions")).body(weather_request("drift", false));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send()
    };
    let json = ("content-type", "application/json");
    let said = |status: u16, headers: &'static [(&'static str, &'static str)]| (status, headers);
    for (status, headers) in [
        said(403, &[("origin", "http://evil.example"), ("content-type", "text/plain")]),
        said(403, &[("origin", "http://evil.example"), ("content-type", "application/json")]),
        said(403, &[("host", "attacker.example"), ("content-type", "application/json")]),
        said(415, &[("content-type", "text/plain")]),
        said(415, &[("content-type", "application/x-www-form-urlencoded")]),
    ] {
        let answer = post(headers).await.unwrap();
        assert_eq!(answer.status(), status, "{headers:?}");
        let body: Value = answer.json().await.unwrap();
        assert!(body["error"]["message"].is_string(), "OpenAI's shape: {body}");
    }
    assert!(upstream.seen.authorization.lock().unwrap().is_empty(), "nothing reached the model server");
    let local = format!("http://localhost:{port}");
    for origin in [local.as_str(), "http://127.0.0.1:3000"] {
        assert_eq!(post(&[("origin", origin), json]).await.unwrap().status(), 200, "{origin}");
    }

    // An origin allowed in the configuration passes; the list reloads,
    // and needs no restart.
    let dir = CatalogDir::new();
    let (_gateway, url, log) = serve(&dir, &upstream.base_url(), "");
    let config = dir.dir.path().join("toolgate.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    let send = |origin: &'static str| {
        http()
            .post(format!("{url}/chat/completions"))
            .header("origin", origin)
            .header("content-type", "application/json")
            .body(weather_request("drift", false))
            .send()
    };
    assert_eq!(send("https://app.example").await.unwrap().status(), 403);
    let allowed = text.replacen("model_door:\n", "model_door:\n  allowed_origins: [\"https://app.example\"]\n", 1);
    std::fs::write(config.with_extension("swp"), allowed).unwrap();
    std::fs::rename(config.with_extension("swp"), &config).unwrap();
    log.wait_for("catalogue and configuration reloaded", 1).await;
    assert!(!log.text().contains("after a restart"), "{}", log.text());
    assert_eq!(send("https://app.example").await.unwrap().status(), 200, "the reloaded origin is allowed");
}

/// A thought, then a call: lifted whole and streamed alike, also when the
/// thought's end and the call arrive in one delta, or the whole answer in
/// one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_after_a_thought_is_lifted_however_the_deltas_fall() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let text = r#"<think>hmm</think>get_weather(city="Oslo")"#;
    for (model, stream) in [("say", false), ("say", true), ("say-one", true)] {
        let (_, calls, finish, _) =
            crate::words_rule::through_door(&url, model, text, stream, serde_json::json!({})).await;
        assert_eq!(calls, [city("Oslo")], "{model} streamed {stream}");
        assert_eq!(finish, "tool_calls", "{model} streamed {stream}");
    }
}

/// Every choice of an answer of several (`n` > 1) is repaired and lifted,
/// whole and streamed alike: a stream holds each choice by its `index`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_choice_of_several_is_repaired_and_lifted_whole_and_streamed() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    for (model, stream) in [("text-call", false), ("text-call", true), ("drift", false), ("drift", true)] {
        let mut body: Value = serde_json::from_str(&weather_request(model, stream)).unwrap();
        body["n"] = serde_json::json!(2);
        let answer = chat(&url, body.to_string()).await;
        let text = answer.text().await.unwrap();
        // Each choice's calls, put together as clients do (by choice, then
        // by the call's index).
        let mut calls: std::collections::BTreeMap<(u64, u64), (String, String)> = Default::default();
        let mut finish = std::collections::BTreeMap::new();
        let mut add = |choice: &Value, calls_at: &str| {
            let index = choice["index"].as_u64().unwrap();
            for (at, call) in choice[calls_at]["tool_calls"].as_array().into_iter().flatten().enumerate() {
                let entry = calls.entry((index, call["index"].as_u64().unwrap_or(at as u64))).or_default();
                entry.0.push_str(call["function"]["name"].as_str().unwrap_or_default());
                entry.1.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                finish.insert(index, reason.to_owned());
            }
        };
        match stream {
            false => {
                let completion: Value = serde_json::from_str(&text).unwrap();
                completion["choices"].as_array().unwrap().iter().for_each(|c| add(c, "message"));
            }
            true => {
                for data in text.lines().filter_map(|l| l.strip_prefix("data: ")).filter(|d| *d != "[DONE]") {
                    let chunk: Value = serde_json::from_str(data).unwrap();
                    chunk["choices"].as_array().into_iter().flatten().for_each(|c| add(c, "delta"));
                }
            }
        }
        let read: Vec<(u64, String, Value)> = calls
            .into_iter()
            .map(|((choice, _), (name, arguments))| (choice, name, serde_json::from_str(&arguments).unwrap()))
            .collect();
        let paris = |choice| (choice, "get_weather".to_owned(), serde_json::json!({"city": "Paris"}));
        assert_eq!(read, [paris(0), paris(1)], "{model} streamed {stream}: {text}");
        assert_eq!(finish.values().collect::<Vec<_>>(), ["tool_calls", "tool_calls"], "{model} streamed {stream}");
    }
}

/// A principal keeps at most `model_door.requests_per_principal` requests
/// open at the door: the next is 429 in OpenAI's shape with `Retry-After`,
/// another principal is served, and a place frees when a request ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_open_requests_are_bounded_and_another_is_served() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (a, b) = (toolgate::identity::hash_key("key-a"), toolgate::identity::hash_key("key-b"));
    let top = format!(
        "principals:\n  - {{name: a, api_key_sha256: {a}, tools: ['*']}}\n  - {{name: b, api_key_sha256: {b}, tools: ['*']}}\n"
    );
    let upstream_keys = "  requests_per_principal: 2\n";
    let (_gateway, url, _log) = serve_with(&dir, &upstream.base_url(), "", &format!("{upstream_keys}{top}"), &[]);
    let ask = |key: &'static str, model: &'static str, stream: bool| {
        http()
            .post(format!("{url}/chat/completions"))
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {key}"))
            .body(weather_request(model, stream))
            .send()
    };
    let mut held = Vec::new();
    for _ in 0..2 {
        let answer = ask("key-a", "hold", true).await.unwrap();
        assert_eq!(answer.status(), 200);
        let mut body = answer.bytes_stream();
        futures::StreamExt::next(&mut body).await.expect("the first chunk").unwrap();
        held.push(body);
    }
    let refused = ask("key-a", "drift", false).await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let said: Value = refused.json().await.unwrap();
    assert!(said["error"]["message"].as_str().unwrap().contains("requests_per_principal"), "{said}");
    assert_eq!(ask("key-b", "drift", false).await.unwrap().status(), 200, "another principal is served");

    upstream.seen.release.send_replace(true);
    for body in held {
        let rest: Vec<_> = futures::StreamExt::collect(body).await;
        assert!(rest.iter().all(Result::is_ok));
    }
    assert_eq!(ask("key-a", "drift", false).await.unwrap().status(), 200, "a place freed");
}

/// Requests to upstreams hold permits of the connection budget every door
/// shares: under a descriptor limit of 64, 60 held streams on one HTTP/2
/// connection never take the descriptors a command tool needs; past the
/// budget the door answers 503 with `Retry-After`, and a gRPC call of a
/// command tool on a connection opened before still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_requests_hold_permits_of_the_shared_budget() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    dir.file("registry/echo.py", "import json, sys\nprint(json.dumps({'ok': True, 'result': json.load(sys.stdin)}))\n");
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: echo_cmd\n    description: x\n    backend: {command: {argv: [python3, echo.py]}}\n",
    );
    let config = format!(
        "model_door:\n  upstreams:\n    - name: local\n      base_url: {}\n      models: [\"*\"]\n",
        upstream.base_url()
    );
    dir.file("toolgate.yaml", &config);
    let mut command = std::process::Command::new("prlimit");
    command.current_dir(dir.dir.path()).args(["--nofile=64:64", "--", env!("CARGO_BIN_EXE_toolgate")]);
    command.args(["serve", "--catalog", "registry", "--listen", "127.0.0.1:0", "--model-listen", "127.0.0.1:0"]);
    command.args(["--config", "toolgate.yaml"]);
    let (_gateway, _lines, listening, seen) = listening_after(&mut command);
    let url = format!("http://{}", logged_after(&seen, "model door (OpenAI-compatible) on http://"));
    let grpc = listening.split(' ').next().unwrap().to_owned();
    let mut client =
        toolgate::proto::v1::tool_gateway_service_client::ToolGatewayServiceClient::connect(format!("http://{grpc}"))
            .await
            .unwrap();
    let execute = || toolgate::proto::v1::ExecuteRequest {
        tool: "echo_cmd".into(),
        arguments_json: r#"{"n": 1}"#.into(),
        ..Default::default()
    };
    assert!(client.execute(execute()).await.unwrap().into_inner().ok);

    let _ = rustls::crypto::ring::default_provider().install_default();
    let h2 = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let mut asked = Vec::new();
    for _ in 0..60 {
        let h2 = h2.clone();
        let url = url.clone();
        asked.push(tokio::spawn(async move {
            let answer = h2
                .post(format!("{url}/chat/completions"))
                .header("content-type", "application/json")
                .body(weather_request("hold", true))
                .send()
                .await
                .unwrap();
            let status = answer.status().as_u16();
            let retry = answer.headers().get("retry-after").is_some();
            let mut body = answer.bytes_stream();
            let _ = futures::StreamExt::next(&mut body).await;
            (status, retry, body)
        }));
    }
    let mut answers = Vec::new();
    for asked in asked {
        answers.push(asked.await.unwrap());
    }
    let served = answers.iter().filter(|(status, _, _)| *status == 200).count();
    let busy = answers.iter().filter(|(status, retry, _)| *status == 503 && *retry).count();
    assert!(served > 0 && busy > 0 && served + busy == 60, "{served} served, {busy} busy");
    // The budget's permits are held; a command tool still gets its pipes.
    let answer = client.execute(execute()).await.unwrap().into_inner();
    assert!(answer.ok, "{:?}", answer.error);
    upstream.seen.release.send_replace(true);
}

/// A model server written by hand on a socket, for what a framework's
/// server never does on cue: each connection reads requests one by one and
/// `answers` says what to write to the `n`th (from 0): `Some(bytes)` (then
/// the next is read) or `None` (nothing more: the connection is closed,
/// or held open when `hold` is set). The number of connections accepted
/// and requests read are counted.
struct Scripted {
    address: std::net::SocketAddr,
    connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Scripted {
    async fn start(hold: bool, answers: fn(usize) -> Option<Vec<u8>>) -> Self {
        use std::sync::{atomic::Ordering, Arc};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let connections: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
        let requests: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
        let (accepted, read) = (Arc::clone(&connections), Arc::clone(&requests));
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                let read = Arc::clone(&read);
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    for n in 0.. {
                        // One request: its head, then as many bytes as its
                        // Content-Length says.
                        let whole = |buffer: &[u8]| {
                            let end = buffer.windows(4).position(|w| w == b"\r\n\r\n")?;
                            let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
                            let length = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                            Some(end + 4 + length).filter(|&whole| buffer.len() >= whole)
                        };
                        let length = loop {
                            if let Some(length) = whole(&buffer) {
                                break length;
                            }
                            let mut chunk = [0u8; 4096];
                            match socket.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(got) => buffer.extend_from_slice(&chunk[..got]),
                            }
                        };
                        buffer.drain(..length);
                        read.fetch_add(1, Ordering::SeqCst);
                        match answers(n) {
                            Some(answer) => socket.write_all(&answer).await.unwrap(),
                            None if hold => {
                                let _ = socket.read(&mut [0u8; 1]).await;
                                return;
                            }
                            None => return,
                        }
                    }
                });
            }
        });
        Self { address, connections, requests }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    fn counted(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering;
        (self.connections.load(Ordering::SeqCst), self.requests.load(Ordering::SeqCst))
    }
}

/// A whole chat completion answering `text`, as HTTP/1.1 bytes.
fn completion_bytes(text: &str) -> Vec<u8> {
    let body = serde_json::json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
    .to_string();
    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len())
        .into_bytes()
}

/// Each of the door's connections is served whole on a connection thread
/// (its socket moved there after the accept): over TLS too, and a stream in
/// flight when the gateway is told to stop still ends whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_and_through_a_stop_each_connection_is_served_whole() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let ca = crate::common::pki::Ca::new("server CA");
    let server = ca.issue("toolgate", &["127.0.0.1", "localhost"]);
    dir.file("certs/server.pem", &server.cert);
    dir.file("certs/server.key", &server.key);
    let tls = "tls: {cert: certs/server.pem, key: certs/server.key}\n";
    let (gateway, url, log) = serve_with(&dir, &upstream.base_url(), "", tls, &[]);
    assert!(url.starts_with("https://"), "{url}");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let root = reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap();
    let client = reqwest::Client::builder().add_root_certificate(root).build().unwrap();
    let post = |model: &str, stream: bool| {
        let request = client.post(format!("{url}/chat/completions")).header("content-type", "application/json");
        request.body(weather_request(model, stream)).send()
    };
    // Several requests on one kept-alive connection, then more on others.
    for _ in 0..3 {
        let answer: Value = post("drift", false).await.unwrap().json().await.unwrap();
        let call = &answer["choices"][0]["message"]["tool_calls"][0]["function"];
        assert_eq!(
            (call["name"].as_str(), call["arguments"].as_str()),
            (Some("get_weather"), Some(r#"{"city":"Paris"}"#))
        );
    }
    let mut asked = Vec::new();
    for _ in 0..8 {
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
            .build()
            .unwrap();
        let url = url.clone();
        asked.push(tokio::spawn(async move {
            let request = client.post(format!("{url}/chat/completions")).header("content-type", "application/json");
            let answer = request.body(weather_request("drift", true)).send().await.unwrap();
            answer.text().await.unwrap()
        }));
    }
    for asked in asked {
        let text = asked.await.unwrap();
        assert!(text.contains("get_weather") && text.ends_with("data: [DONE]\n\n"), "{text}");
    }
    // A stream in flight when the gateway is told to stop: its first chunk
    // came; the door stops accepting; released, the stream ends whole.
    let answer = post("hold", true).await.unwrap();
    let mut body = answer.bytes_stream();
    let first = futures::StreamExt::next(&mut body).await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("assistant"), "{first:?}");
    let pid = gateway.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let door = url.trim_start_matches("https://").trim_end_matches("/v1").to_owned();
    while tokio::net::TcpStream::connect(&door).await.is_ok() {
        tokio::task::yield_now().await;
    }
    upstream.seen.release.send_replace(true);
    let mut rest = Vec::new();
    while let Some(piece) = futures::StreamExt::next(&mut body).await {
        rest.extend_from_slice(&piece.unwrap_or_else(|err| panic!("the stream was cut: {err:?}\n{}", log.text())));
    }
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.contains("Done.") && rest.ends_with("data: [DONE]\n\n"), "{rest}");
    let status = tokio::task::spawn_blocking(move || gateway.wait().unwrap()).await.unwrap();
    assert!(status.success(), "{status:?}\n{}", log.text());
    log.wait_for("toolgate stopped", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_model_server_closed_while_it_idled_loses_no_request() {
    // Each connection answers one request and closes when the next comes,
    // unanswered: what a model server's keep-alive timeout does to a
    // request that meets it.
    let upstream = Scripted::start(false, |n| (n == 0).then(|| completion_bytes("hello"))).await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let client = http();
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    for _ in 0..6 {
        let answer = client.post(format!("{url}/chat/completions")).json(&body).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        let answer: Value = answer.json().await.unwrap();
        assert_eq!(answer["choices"][0]["message"]["content"], "hello");
    }
    // Each request was answered, on a connection of its own at last: those
    // that met a connection the model server closed were asked again on a
    // new one. (How many met one depends on whether the gateway's pool had
    // the last connection back when the next request came: a request may
    // go out on a new connection at once.)
    let (connections, requests) = upstream.counted();
    assert!(connections >= 6, "{connections} connections for six answers");
    assert!(requests > 6, "no request met a closed connection: {requests} requests on {connections} connections");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_server_that_stops_within_its_timeout_is_a_504_or_a_cut_stream() {
    // Silent: reads the request and writes nothing.
    let silent = Scripted::start(true, |_| None).await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve_with(&dir, &silent.base_url(), "      timeout: 300ms\n", "", &[]);
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let answer = http().post(format!("{url}/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(answer.status(), 504);
    let error: Value = answer.json().await.unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert_eq!(message, "the model server 'local' did not answer within 300ms", "{error}");
    // A stream that stops after its first event: cut at the timeout, with
    // an error event and no [DONE].
    let stalled = Scripted::start(true, |n| {
        (n == 0).then(|| {
            let event = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\
                 \"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n";
            format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n", event.len())
                .into_bytes()
        })
    })
    .await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve_with(&dir, &stalled.base_url(), "      timeout: 300ms\n", "", &[]);
    let mut streamed = body.clone();
    streamed["stream"] = true.into();
    let text =
        http().post(format!("{url}/chat/completions")).json(&streamed).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("Hel") && text.contains("\"error\"") && !text.contains("[DONE]"), "{text}");
}
