//! The model door's Messages API (docs/model-door.md, "Messages"): through
//! the real binary, a scripted model server speaking `/v1/messages`
//! upstream, the `anthropic` SDK as the client, raw HTTP for paths,
//! credentials and errors.

use serde_json::{json, Value};

use crate::{
    common::{model_server, repo, CatalogDir},
    model_door::{http, serve, serve_with},
};

/// The SDK's lines from `tests/model/messages.py` for `model`.
fn anthropic(base_url: &str, model: &str) -> std::collections::BTreeMap<String, Value> {
    crate::model_door::script_lines("messages.py", &[base_url, model], "client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_sdk_gets_repaired_and_lifted_tool_use_blocks_whole_and_streamed() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    // The SDK adds `/v1` itself.
    let base = url.trim_end_matches("/v1").to_owned();
    let direct = upstream.base_url().trim_end_matches("/v1").to_owned();
    tokio::task::spawn_blocking(move || {
        for model in ["drift", "text-call"] {
            let through = anthropic(&base, model);
            for mode in ["whole", "stream"] {
                let said = &through[mode];
                let calls = said["calls"].as_array().unwrap();
                assert_eq!(calls.len(), 1, "{model} {mode}: {said}");
                assert_eq!((&calls[0]["name"], &calls[0]["input"]), (&json!("get_weather"), &json!({"city": "Paris"})));
                assert!(calls[0]["id"].as_str().unwrap().starts_with("toolu_"), "{said}");
                assert_eq!(said["stop_reason"], "tool_use", "{model} {mode}: {said}");
                assert_eq!(said["text"], "", "{model} {mode}: {said}");
            }
            let started: Vec<u64> =
                through["stream"]["started"].as_array().unwrap().iter().map(|i| i.as_u64().unwrap()).collect();
            assert_eq!(started, (0..started.len() as u64).collect::<Vec<_>>(), "consecutive blocks");
            let alone = anthropic(&direct, model);
            let names: Vec<&Value> = alone["whole"]["calls"].as_array().unwrap().iter().map(|c| &c["name"]).collect();
            assert!(
                !names.contains(&&json!("get_weather")),
                "{model} straight to the model server: {}",
                alone["whole"]
            );
        }
        let prose = anthropic(&base, "prose");
        for mode in ["whole", "stream"] {
            assert_eq!(prose[mode]["calls"], json!([]), "{}", prose[mode]);
            assert_eq!(prose[mode]["stop_reason"], "end_turn", "{}", prose[mode]);
        }
    })
    .await
    .unwrap();
}

/// `x-api-key` passes unchanged without principals; with `api_key_env` the
/// upstream gets that key in `x-api-key`; `count_tokens` is forwarded with
/// its query string; the door's own errors are in the Messages shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_count_tokens_and_errors_in_the_messages_shape() {
    let upstream = model_server::start().await;
    let client = http();
    let body = json!({"model": "prose", "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}]});
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let sent = client.post(format!("{url}/messages?beta=true")).header("x-api-key", "sk-caller").json(&body).send();
    assert_eq!(sent.await.unwrap().status(), 200);
    assert_eq!(upstream.seen.api_keys.lock().unwrap().last().cloned().flatten().as_deref(), Some("sk-caller"));
    let counted: Value = client
        .post(format!("{url}/messages/count_tokens?beta=true"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!((&counted["input_tokens"], &counted["asked"]), (&json!(7), &json!("beta=true")), "{counted}");
    let refused = client.get(format!("{url}/messages")).send().await.unwrap();
    assert_eq!(refused.status(), 405);
    let said: Value = refused.json().await.unwrap();
    assert_eq!((&said["type"], &said["error"]["type"]), (&json!("error"), &json!("invalid_request_error")), "{said}");
    let unserved = json!({"model": "x", "max_tokens": 1, "messages": []});

    let dir = CatalogDir::new();
    let keys = "      api_key_env: UPSTREAM_KEY\n      apis: [chat, messages]\n";
    let env = [("UPSTREAM_KEY", "sk-upstream")];
    let (_gateway, url, _log) = serve_with(&dir, &upstream.base_url(), keys, "", &env);
    let sent = client.post(format!("{url}/messages")).header("x-api-key", "sk-caller").json(&body).send();
    assert_eq!(sent.await.unwrap().status(), 200);
    assert_eq!(upstream.seen.api_keys.lock().unwrap().last().cloned().flatten().as_deref(), Some("sk-upstream"));

    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve_with(&dir, &upstream.base_url(), "      apis: [chat]\n", "", &[]);
    let missing = client.post(format!("{url}/messages")).json(&unserved).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let said: Value = missing.json().await.unwrap();
    assert_eq!(said["error"]["type"], "not_found_error", "{said}");
}

/// `claude -p` (Claude Code, pinned in `tests/mcp/js`) on the model server
/// at `base_url` (without `/v1`), in a fresh directory and home, its Bash
/// tool allowed: whether it wrote `ran.txt` there, and what it said. It
/// runs in a process group of its own, killed after 120 s.
fn claude_ran(base_url: &str, model: &str) -> (bool, String) {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut command = crate::common::mcp::node_command("claude");
    command
        .args(["-p", "Write ran.txt with Bash.", "--output-format", "json", "--allowedTools", "Bash", "--model", model])
        .current_dir(work.path())
        .env("HOME", home.path())
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0");
    let said = crate::common::said_within(&mut command, 120);
    (work.path().join("ran.txt").exists(), said)
}

/// Claude Code, pointed at the door, runs the Bash command the model meant
/// through a name in another case or a call written as text; pointed
/// straight at the model server it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_the_call_the_model_meant_through_the_door() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let base = url.trim_end_matches("/v1").to_owned();
    let direct = upstream.base_url().trim_end_matches("/v1").to_owned();
    tokio::task::spawn_blocking(move || {
        for model in ["claude-drift", "claude-text"] {
            let (ran, said) = claude_ran(&base, model);
            assert!(ran, "{model} through the door: {said}");
            let (ran, said) = claude_ran(&direct, model);
            assert!(!ran, "{model} straight to the model server: {said}");
        }
    })
    .await
    .unwrap();
}

/// With principals, `x-api-key` is a toolgate key as `Authorization` is:
/// it admits its principal, never reaches the model server, an unknown one
/// is 401 in the Messages shape, and two keys must name one principal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_principals_x_api_key_is_a_toolgate_key() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (a, b) = (toolgate::identity::hash_key("key-a"), toolgate::identity::hash_key("key-b"));
    let top = format!(
        "principals:\n  - {{name: a, api_key_sha256: {a}, tools: ['*']}}\n  - {{name: b, api_key_sha256: {b}, tools: ['*']}}\n"
    );
    let (_gateway, url, _log) = serve_with(&dir, &upstream.base_url(), "", &top, &[]);
    let client = http();
    let body = json!({"model": "prose", "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}]});
    let ask = |headers: &[(&str, &str)]| {
        let mut request = client.post(format!("{url}/messages")).json(&body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send()
    };
    assert_eq!(ask(&[("x-api-key", "key-a")]).await.unwrap().status(), 200);
    assert_eq!(upstream.seen.api_keys.lock().unwrap().last().cloned().flatten(), None, "the key stays at the door");
    assert_eq!(ask(&[("x-api-key", "key-a"), ("authorization", "Bearer key-a")]).await.unwrap().status(), 200);
    for headers in [&[("x-api-key", "key-c")][..], &[("x-api-key", "key-a"), ("authorization", "Bearer key-b")], &[]] {
        let refused = ask(headers).await.unwrap();
        assert_eq!(refused.status(), 401, "{headers:?}");
        let said: Value = refused.json().await.unwrap();
        assert_eq!(said["error"]["type"], "authentication_error", "{said}");
    }
}

/// LiteLLM's proxy (pinned in `tests/mcp/requirements.txt`) started in
/// front of `api_base` (a Chat Completions server), every model routed
/// there; killed when dropped.
struct Litellm {
    child: std::process::Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Litellm {
    fn start(api_base: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "model_list:\n  - model_name: \"*\"\n    litellm_params:\n      model: \"hosted_vllm/*\"\n      \
             api_base: \"{api_base}\"\n      api_key: \"sk-door\"\n"
        );
        std::fs::write(dir.path().join("litellm.yaml"), config).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new(repo().join(".venv/bin/litellm"))
            .arg("--config")
            .arg(dir.path().join("litellm.yaml"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env("LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY", "true")
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_LOG", "ERROR")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("litellm (.venv: run scripts/test)");
        Self { child, base: format!("http://127.0.0.1:{port}"), _dir: dir }
    }

    /// Waits until it answers its liveness probe (at most 90 s).
    async fn ready(&self) {
        let client = http();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(90);
        while std::time::Instant::now() < until {
            let probe = client.get(format!("{}/health/liveliness", self.base)).send().await;
            if probe.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        panic!("LiteLLM did not start");
    }
}

impl Drop for Litellm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The documented recipe: a Messages client (the `anthropic` SDK) to
/// LiteLLM's proxy, which speaks Chat Completions to the door in front of
/// the model server: LiteLLM translates, the door repairs. LiteLLM in front
/// of the model server alone hands the drifted call on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn litellm_in_front_of_the_door_translates_and_the_door_repairs() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "      apis: [chat]\n");
    let through = Litellm::start(&url);
    let alone = Litellm::start(&upstream.base_url());
    through.ready().await;
    alone.ready().await;
    let (through_base, alone_base) = (through.base.clone(), alone.base.clone());
    tokio::task::spawn_blocking(move || {
        for model in ["drift", "text-call"] {
            let said = anthropic(&through_base, model);
            let calls = said["whole"]["calls"].as_array().unwrap();
            assert_eq!(calls.len(), 1, "{model}: {}", said["whole"]);
            assert_eq!((&calls[0]["name"], &calls[0]["input"]), (&json!("get_weather"), &json!({"city": "Paris"})));
        }
        let said = anthropic(&alone_base, "drift");
        let names: Vec<&Value> = said["whole"]["calls"].as_array().unwrap().iter().map(|c| &c["name"]).collect();
        assert!(!names.contains(&&json!("get_weather")), "{}", said["whole"]);
    })
    .await
    .unwrap();
}
