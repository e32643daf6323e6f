//! The model door's Responses API (docs/model-door.md, "Responses"):
//! through the real binary, a scripted model server speaking
//! `/v1/responses` upstream, the `openai` SDK and the OpenAI Agents SDK's
//! default model as clients, raw HTTP for paths, queries and routing.

use serde_json::{json, Value};

use crate::{
    common::{model_server, CatalogDir},
    model_door::{serve, serve_with},
};

/// Each client's line from `tests/model/responses.py` for `model`.
fn clients(base_url: &str, model: &str) -> std::collections::BTreeMap<String, Value> {
    crate::model_door::script_lines("responses.py", &[base_url, model], "client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_clients_get_repaired_and_lifted_calls_the_model_alone_does_not_give() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let direct = upstream.base_url();
    tokio::task::spawn_blocking(move || {
        for model in ["drift", "text-call"] {
            let through = clients(&url, model);
            let sdk = &through["sdk"];
            let calls = sdk["calls"].as_array().unwrap();
            assert_eq!(calls.len(), 1, "{model}: {sdk}");
            assert_eq!((&calls[0]["name"], &calls[0]["arguments"]), (&json!("get_weather"), &json!({"city": "Paris"})));
            assert!(calls[0]["id"].as_str().unwrap().starts_with("fc_"), "{sdk}");
            assert!(calls[0]["call_id"].as_str().unwrap().starts_with("call_"), "{sdk}");
            assert_eq!(sdk["text"], "", "{model}: no text left beside the call: {sdk}");
            // Streamed: the same call, the events numbered consecutively,
            // each item added at the next place.
            let streamed = &through["sdk-stream"];
            let calls = streamed["calls"].as_array().unwrap();
            assert_eq!(calls.len(), 1, "{model}: {streamed}");
            assert_eq!(calls[0]["name"], "get_weather", "{streamed}");
            assert_eq!(
                serde_json::from_str::<Value>(calls[0]["arguments"].as_str().unwrap()).unwrap(),
                json!({"city": "Paris"})
            );
            let sequence: Vec<u64> =
                streamed["sequence"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
            assert_eq!(sequence, (0..sequence.len() as u64).collect::<Vec<_>>(), "{streamed}");
            let added: Vec<u64> = streamed["added"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
            assert_eq!(added, (0..added.len() as u64).collect::<Vec<_>>(), "{streamed}");
            for name in ["agents", "agents-stream"] {
                let agents = &through[name];
                assert_eq!(agents["ran"], json!([{"city": "Paris"}]), "{model} {name}: {agents}");
                assert_eq!(agents["final_output"], "It is sunny.", "{model} {name}: {agents}");
            }
        }
        // Straight to the model server: nothing the Agents SDK can run.
        for model in ["drift", "text-call"] {
            let alone = clients(&direct, model);
            for name in ["agents", "agents-stream"] {
                assert_eq!(alone[name]["ran"], json!([]), "{model}: {}", alone[name]);
            }
        }
        // Prose stays text.
        let prose = clients(&url, "prose");
        for name in ["sdk", "sdk-stream"] {
            assert_eq!(prose[name]["calls"], json!([]), "{}", prose[name]);
            assert!(prose[name]["text"].as_str().unwrap().starts_with("Sure, I could call"), "{}", prose[name]);
        }
    })
    .await
    .unwrap();
}

/// A conversation stored upstream (`previous_response_id`): calls are
/// repaired, text is never lifted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_stored_conversation_calls_are_repaired_and_text_stays() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let client = crate::model_door::http();
    let ask = |model: &str, previous: Value| {
        let tool = json!({"type": "function", "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}});
        let body = json!({"model": model, "input": "Weather?", "tools": [tool], "previous_response_id": previous});
        client.post(format!("{url}/responses?api-version=2")).json(&body).send()
    };
    let kinds = |answer: &Value| -> Vec<String> {
        answer["output"].as_array().unwrap().iter().map(|i| i["type"].as_str().unwrap().to_owned()).collect()
    };
    let lifted: Value = ask("text-call", Value::Null).await.unwrap().json().await.unwrap();
    assert_eq!(kinds(&lifted), ["function_call"], "{lifted}");
    let stored: Value = ask("text-call", json!("resp_0")).await.unwrap().json().await.unwrap();
    assert_eq!(kinds(&stored), ["message"], "text is never lifted: {stored}");
    let repaired: Value = ask("drift", json!("resp_0")).await.unwrap().json().await.unwrap();
    assert_eq!(repaired["output"][0]["name"], "get_weather", "{repaired}");
    assert_eq!(repaired["output"][0]["call_id"], "call_1", "the ids kept: {repaired}");
    // The query string reached the model server as sent.
    assert!(upstream.seen.queries.lock().unwrap().iter().all(|q| q == "api-version=2"));
}

/// `/v1/responses/{id}` is forwarded with its query string; an upstream
/// that does not speak the Responses API is never sent one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_responses_requests_are_forwarded_and_routing_follows_the_apis() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let client = crate::model_door::http();
    let stored: Value =
        client.get(format!("{url}/responses/resp_42?include=x")).send().await.unwrap().json().await.unwrap();
    assert_eq!((&stored["id"], &stored["asked"]), (&json!("resp_42"), &json!("include=x")), "{stored}");

    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve_with(&dir, &upstream.base_url(), "      apis: [chat]\n", "", &[]);
    let refused = client.post(format!("{url}/responses")).json(&json!({"model": "drift", "input": "x"})).send();
    let refused = refused.await.unwrap();
    assert_eq!(refused.status(), 404);
    let said: Value = refused.json().await.unwrap();
    assert!(said["error"]["message"].as_str().unwrap().contains("responses API"), "{said}");
}

/// `codex exec` (Codex CLI, pinned in `tests/mcp/js`) on the model at
/// `base_url`, in `work`, with a fresh home: whether its shell tool wrote
/// `ran.txt` there. Codex retries an unreachable server forever: it runs in
/// a process group of its own, killed after 120 s.
fn codex_ran(base_url: &str, model: &str) -> (bool, String) {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = format!(
        "model = \"{model}\"\nmodel_provider = \"door\"\n\n[model_providers.door]\nname = \"door\"\n\
         base_url = \"{base_url}\"\nwire_api = \"responses\"\nenv_key = \"DOOR_KEY\"\n"
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let mut command = crate::common::mcp::node_command("codex");
    command
        .args([
            "exec",
            "--skip-git-repo-check",
            "--json",
            "--sandbox",
            "workspace-write",
            "Write ran.txt with the shell.",
        ])
        .current_dir(work.path())
        .env("CODEX_HOME", home.path())
        .env("HOME", home.path())
        .env("DOOR_KEY", "sk-test");
    let said = crate::common::said_within(&mut command, 120);
    (work.path().join("ran.txt").exists(), said)
}

/// Codex, pointed at the door, runs the shell command the model meant
/// through a drifted name or a call written as text; pointed straight at
/// the model server it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_the_call_the_model_meant_through_the_door() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve(&dir, &upstream.base_url(), "");
    let direct = upstream.base_url();
    tokio::task::spawn_blocking(move || {
        for model in ["codex-drift", "codex-text"] {
            let (ran, said) = codex_ran(&url, model);
            assert!(ran, "{model} through the door: {said}");
            let (ran, said) = codex_ran(&direct, model);
            assert!(!ran, "{model} straight to the model server: {said}");
        }
    })
    .await
    .unwrap();
}
