//! Hardening, round 5, the model door: what an attack on it found, through
//! the real binary, a scripted model server and raw HTTP (what a
//! well-behaved SDK never sends).

use serde_json::{json, Value};

use crate::{
    common::{
        cpu_ticks, memory_kib,
        model_server::{self, ModelServer},
        CatalogDir, LogLines, Reaped,
    },
    model_door::serve_with,
};

/// The door in front of a scripted model server, with `door` added to
/// `model_door:` (each line indented by two spaces).
async fn door(door: &str) -> (ModelServer, CatalogDir, Reaped, String, LogLines) {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (gateway, url, log) = serve_with(&dir, &upstream.base_url(), "", door, &[]);
    (upstream, dir, gateway, url, log)
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// `n` tools named `{prefix}_{i}` (get_weather among them, last), each
/// with a few parameters; a parameter with `pattern(i)` when given.
fn tools(n: usize, prefix: &str, pattern: Option<&dyn Fn(usize) -> String>) -> Vec<Value> {
    let mut tools: Vec<Value> = (0..n.saturating_sub(1))
        .map(|i| {
            let mut properties = json!({"id": {"type": "string", "description": "the id of the thing"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "tags": {"type": "array", "items": {"type": "string"}}});
            if let Some(pattern) = pattern {
                properties["code"] = json!({"type": "string", "pattern": pattern(i)});
            }
            json!({"type": "function", "function": {"name": format!("{prefix}_{i}"),
                "description": format!("Does action {i} of the service, with care and at length."),
                "parameters": {"type": "object", "properties": properties, "required": ["id"]}}})
        })
        .collect();
    tools.push(json!({"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}));
    tools
}

/// A chat request for `model` declaring `tools`; its status, the
/// `x-toolgate-unrepaired` header and the answer.
async fn chat(url: &str, model: &str, tools: &[Value], key: &str) -> (u16, Option<String>, Value) {
    let body = json!({"model": model, "messages": [{"role": "user", "content": "weather?"}], "tools": tools});
    let answer = client().post(format!("{url}/chat/completions")).bearer_auth(key).json(&body).send().await.unwrap();
    let unrepaired = answer.headers().get("x-toolgate-unrepaired").map(|v| v.to_str().unwrap().to_owned());
    let status = answer.status().as_u16();
    (status, unrepaired, answer.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_of_tiny_values_costs_about_its_size_not_a_tree_of_them() {
    let (_upstream, _dir, gateway, url, _log) = door("").await;
    let values = "[]".repeat(15_000_000 / 3).replace("][", "],[");
    let body = format!(
        r#"{{"model":"say","messages":[{{"role":"user","content":"hi","pad":[{values}]}}],"tools":{}}}"#,
        Value::Array(tools(1, "t", None))
    );
    let peak = memory_kib(gateway.id(), "VmHWM:");
    let sent = (0..4).map(|_| {
        let request = client().post(format!("{url}/chat/completions")).header("content-type", "application/json");
        let body = body.clone();
        async move { request.body(body).send().await.unwrap().status().as_u16() }
    });
    // The model server refuses bodies past 2 MiB (413, or it closes the
    // connection while the door still sends: 502): the door forwarded them.
    for status in futures::future::join_all(sent).await {
        assert!(status == 413 || status == 502, "{status}");
    }
    let after = memory_kib(gateway.id(), "VmHWM:");
    println!("peak RSS: {peak} KiB before, {after} KiB after 4 bodies of 15 MB of tiny values at once");
    // Each body is held as its bytes (a tree of it was about 60 times that).
    assert!(after < peak + 128 * 1024, "peak RSS grew from {peak} KiB to {after} KiB");
    // A member the door reads, named twice, is refused: the door and the
    // model server could read two different ones.
    let twice = r#"{"model": "say", "messages": [], "model": "other"}"#;
    let answer = client().post(format!("{url}/chat/completions")).body(twice).send().await.unwrap();
    assert_eq!(answer.status(), 400);
    let said: Value = answer.json().await.unwrap();
    assert_eq!(said["error"]["message"], "the request body names 'model' twice");
    let (status, _, answer) = chat(&url, "text-call", &tools(3, "t", None), "k").await;
    assert_eq!(
        (status, &answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"]),
        (200, &json!("get_weather"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiled_tool_lists_are_kept_within_their_bytes() {
    let (_upstream, _dir, gateway, url, _log) = door("  tools_cache_bytes: 8388608\n").await;
    // Two lists first: what the door holds for any request is held.
    for prefix in ["warm_a", "warm_b"] {
        assert_eq!(chat(&url, "say", &tools(300, prefix, None), "k").await.0, 200);
    }
    let before = memory_kib(gateway.id(), "VmRSS:");
    for i in 0..30 {
        let (status, unrepaired, _) = chat(&url, "say", &tools(300, &format!("list{i}"), None), "k").await;
        assert_eq!((status, unrepaired), (200, None));
    }
    let after = memory_kib(gateway.id(), "VmRSS:");
    println!("RSS: {before} KiB, then {after} KiB after 30 distinct lists of 300 tools (about 2 MiB each compiled)");
    assert!(after < before + 32 * 1024, "RSS grew from {before} KiB to {after} KiB");
    // A list the cache keeps is still read against.
    let (_, _, answer) = chat(&url, "text-call", &tools(300, "list29", None), "k").await;
    assert_eq!(answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather", "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_tools_or_max_pattern_bytes_the_answer_passes_unchanged_and_says_why() {
    let (_upstream, _dir, _gateway, url, log) = door("").await;
    let lifted = |answer: &Value| answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather";
    let (_, unrepaired, answer) = chat(&url, "text-call", &tools(512, "t", None), "k").await;
    assert!(lifted(&answer) && unrepaired.is_none(), "{answer}");
    let (status, unrepaired, answer) = chat(&url, "text-call", &tools(513, "t", None), "k").await;
    assert_eq!((status, unrepaired.as_deref()), (200, Some("too many tools")));
    let content = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(content.starts_with("<tool_call>") && !lifted(&answer), "the model's text, unchanged: {answer}");
    log.wait_for("the request's tools are not read against: 513 tools; model_door.max_tools is 512", 1).await;
    // Patterns: 65 of a little over 1 KiB each.
    let long = |i: usize| format!("^{}{i}$", "a".repeat(1024));
    let (_, unrepaired, answer) = chat(&url, "text-call", &tools(66, "p", Some(&long)), "k").await;
    assert_eq!(unrepaired.as_deref(), Some("too many patterns"), "{answer}");
    assert!(!lifted(&answer));
    log.wait_for("model_door.max_pattern_bytes is 65536", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patterns_whose_expressions_hold_megabytes_are_weighed_and_compiled_off_the_workers() {
    let (upstream, _dir, gateway, url, log) = door("").await;
    // Each of these holds about 4 MB compiled: 60 would hold 240 MB.
    let heavy = |i: usize| format!("^(k{i}x7|y{{1,200}}){{1,200}}$");
    let peak = memory_kib(gateway.id(), "VmHWM:");
    let (status, unrepaired, answer) = chat(&url, "text-call", &tools(61, "h", Some(&heavy)), "k").await;
    assert_eq!((status, unrepaired.as_deref()), (200, Some("too many patterns")), "{answer}");
    log.wait_for("patterns whose expressions hold more than model_door.tools_cache_bytes", 1).await;
    let after = memory_kib(gateway.id(), "VmHWM:");
    println!("peak RSS: {peak} KiB before, {after} KiB after 60 patterns of about 4 MB each");
    assert!(after < peak + 64 * 1024, "peak RSS grew from {peak} KiB to {after} KiB");
    // Two lists of 12 such patterns each (they fit the cache: compiled),
    // one a core; while they compile, another caller's request goes through.
    let compiling = (0..2).map(|n| {
        let (url, heavy) = (url.clone(), move |i: usize| format!("^(k{n}z{i}|y{{1,200}}){{1,200}}$"));
        tokio::spawn(async move { chat(&url, "say", &tools(13, &format!("c{n}"), Some(&heavy)), "heavy").await })
    });
    let compiling: Vec<_> = compiling.collect();
    let ticks = cpu_ticks(gateway.id());
    while cpu_ticks(gateway.id()) < ticks + 20 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(chat(&url, "say", &tools(2, "small", None), "small").await.0, 200);
    for list in compiling {
        assert_eq!(list.await.unwrap().1, None);
    }
    let seen = upstream.seen.authorization.lock().unwrap().clone();
    let order: Vec<&str> = seen.iter().flatten().map(|key| key.trim_start_matches("Bearer ")).collect();
    assert_eq!(order[order.len() - 3..], ["small", "heavy", "heavy"], "the small request waited for a compilation");
}
