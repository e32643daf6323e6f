//! The model door as people deploy it (issue 70): alone, outside the
//! clone, without a catalogue or a gRPC port; the rest of the API passed
//! through to the model server; `GET /health`; `validate`'s warning for a
//! `base_url` without `/v1`.

use serde_json::{json, Value};

use crate::{
    common::{listening_after, model_server, toolgate},
    model_door::{http, script_lines},
};

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
    let (_first, url, _dir) = door_alone(&config, &["--listen", "off"]);
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
    tokio::task::spawn_blocking(move || {
        let said = script_lines("one_base_url.py", &[&url, "drift"], "framework");
        let line = &said["langchain"];
        assert_eq!(line["embedding"], json!([0.5, 0.25, 1.0]), "{line}");
        assert_eq!(line["tool_calls"], json!([{"name": "get_weather", "args": {"city": "Paris"}}]), "{line}");
    })
    .await
    .unwrap();
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
