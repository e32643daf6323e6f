//! The door's second chance (docs/model-door.md, "Second chance"): through
//! the real binary, a scripted model server that calls a tool nobody
//! declared until the conversation tells it what went wrong.

use serde_json::{json, Value};

use crate::{
    common::{model_server, CatalogDir},
    model_door::{http, script_lines, serve_with},
};

fn request(model: &str) -> Value {
    let parameters = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    json!({"model": model, "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": parameters}}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_cannot_be_made_is_asked_again_within_the_budget() {
    let (collector, received) = crate::common::otlp::receiver(std::time::Duration::ZERO).await;
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let endpoint = format!("http://{collector}");
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let (gateway, url, _log) = serve_with(&dir, &upstream.base_url(), "  retry: 1\n", "", &env);
    let client = http();
    let ask = |model: &str, header: Option<&str>| {
        let mut sent = client.post(format!("{url}/chat/completions")).json(&request(model));
        if let Some(n) = header {
            sent = sent.header("x-toolgate-retry", n);
        }
        sent.send()
    };

    // Corrected on the second try: the framework sees only the call meant.
    let answer = ask("retry-call", None).await.unwrap();
    assert_eq!(answer.headers()["x-toolgate-retries"], "1");
    let said: Value = answer.json().await.unwrap();
    let call = &said["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!((&call["name"], &call["arguments"]), (&json!("get_weather"), &json!("{\"city\": \"Paris\"}")), "{said}");
    assert_eq!(said["usage"]["total_tokens"], 30, "the tries' usage summed: {said}");
    // The model was told, in the call's own turn, what Execute says.
    let asked_again = upstream.seen.bodies.lock().unwrap().last().cloned().unwrap();
    let messages = asked_again["messages"].as_array().unwrap();
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["tool_calls"][0]["function"]["name"], "lookup_forecast");
    assert_eq!((&messages[2]["role"], &messages[2]["tool_call_id"]), (&json!("tool"), &json!("call_1")));
    let told = messages[2]["content"].as_str().unwrap();
    assert!(told.contains("lookup_forecast") && told.contains("get_weather"), "{told}");
    assert_eq!(asked_again["stream"], false);

    // Exhausted: the header asks for two, three requests are made, and
    // the last answer passes as it came.
    let before = upstream.seen.bodies.lock().unwrap().len();
    let answer = ask("retry-never", Some("2")).await.unwrap();
    assert_eq!(answer.headers()["x-toolgate-retries"], "2");
    let said: Value = answer.json().await.unwrap();
    assert_eq!(said["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "lookup_forecast");
    assert_eq!(said["usage"]["total_tokens"], 45, "every try counted: {said}");
    assert_eq!(upstream.seen.bodies.lock().unwrap().len() - before, 3);

    // Prose is never asked again; a header that is no number is 400.
    let before = upstream.seen.bodies.lock().unwrap().len();
    let answer = ask("prose", Some("2")).await.unwrap();
    assert_eq!(answer.headers()["x-toolgate-retries"], "0");
    assert_eq!(upstream.seen.bodies.lock().unwrap().len() - before, 1);
    assert_eq!(ask("drift", Some("many")).await.unwrap().status(), 400);

    // Each try is an event of the generation's span, and the tries count
    // in toolgate.model_door.retries by outcome (flushed on the way out).
    assert!(std::process::Command::new("kill").args(["-TERM", &gateway.id().to_string()]).status().unwrap().success());
    tokio::task::spawn_blocking(move || gateway.wait().unwrap()).await.unwrap();
    let events = received.span_events();
    let tries = events.iter().filter(|(_, event, _)| event == "toolgate.retry").count();
    assert_eq!(tries, 3, "one try corrected, two exhausted: {events:?}");
    assert!(received.metric_names().contains(&"toolgate.model_door.retries".to_owned()));
}

/// The text of every `data:` line of a stream, read whole.
async fn stream_data(answer: reqwest::Response) -> Vec<String> {
    let text = answer.text().await.unwrap();
    text.lines().filter_map(|line| line.strip_prefix("data: ")).map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_call_was_held_from_its_start_is_asked_again_and_its_calls_answered_in_every_api() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve_with(&dir, &upstream.base_url(), "  retry: 1\n", "", &[]);
    let client = http();

    // A stream (with usage in its finish chunk): the broken call never
    // reaches the client; the corrected one does, then the finish, the
    // usage of both tries and [DONE].
    let mut body = request("retry-call-usage");
    body["stream"] = true.into();
    body["stream_options"] = json!({"include_usage": true});
    let answer = client.post(format!("{url}/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let data = stream_data(answer).await;
    assert!(!data.iter().any(|d| d.contains("lookup_forecast")), "{data:?}");
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    let chunks: Vec<Value> = data.iter().filter_map(|d| serde_json::from_str(d).ok()).collect();
    let calls: Vec<&Value> =
        chunks.iter().filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0/function")).collect();
    assert_eq!(calls.len(), 1, "{data:?}");
    assert_eq!((&calls[0]["name"], &calls[0]["arguments"]), (&json!("get_weather"), &json!("{\"city\": \"Paris\"}")));
    let finish = chunks.iter().find_map(|c| c.pointer("/choices/0/finish_reason").filter(|f| !f.is_null()));
    assert_eq!(finish, Some(&json!("tool_calls")));
    let usage = chunks.iter().rev().find_map(|c| c.get("usage").filter(|u| u.is_object())).unwrap();
    assert_eq!(usage["total_tokens"], 18 + 15, "{usage}");
    // The upstream was asked again whole, without stream_options.
    let asked_again = upstream.seen.bodies.lock().unwrap().last().cloned().unwrap();
    assert_eq!((&asked_again["stream"], asked_again.get("stream_options")), (&json!(false), None));

    // One bad call beside a good one: both are answered in the corrective
    // turn (the upstream refuses a conversation that leaves one out), and
    // the framework gets both calls as the model rewrote them.
    let answer = client.post(format!("{url}/chat/completions")).json(&request("retry-two")).send().await.unwrap();
    assert_eq!(answer.headers()["x-toolgate-retries"], "1");
    let said: Value = answer.json().await.unwrap();
    let calls = said["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    let cities: Vec<&str> = calls.iter().map(|c| c["function"]["arguments"].as_str().unwrap()).collect();
    assert_eq!(cities, ["{\"city\": \"Paris\"}", "{\"city\": \"London\"}"], "{said}");
    let asked_again = upstream.seen.bodies.lock().unwrap().last().cloned().unwrap();
    let told: Vec<&Value> =
        asked_again["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(told.len(), 2);
    assert!(told[1]["content"].as_str().unwrap().starts_with("not run: another call of this answer could not be made"));

    // Responses: function_call_output items; the corrected call arrives.
    let parameters = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let body = json!({"model": "retry-call", "input": "Weather in Paris?",
        "tools": [{"type": "function", "name": "get_weather", "parameters": parameters}]});
    let answer = client.post(format!("{url}/responses")).json(&body).send().await.unwrap();
    assert_eq!(answer.headers()["x-toolgate-retries"], "1");
    let said: Value = answer.json().await.unwrap();
    let call = said["output"].as_array().unwrap().iter().find(|i| i["type"] == "function_call").unwrap();
    assert_eq!(call["name"], "get_weather", "{said}");
    assert_eq!(said["usage"]["total_tokens"], 30, "{said}");

    // Messages: one user message of tool_result blocks, is_error.
    let body = json!({"model": "retry-call", "max_tokens": 100,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"name": "get_weather", "input_schema": parameters}]});
    let answer = client.post(format!("{url}/messages")).json(&body).send().await.unwrap();
    assert_eq!(answer.headers()["x-toolgate-retries"], "1");
    let said: Value = answer.json().await.unwrap();
    let call = said["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use").unwrap();
    assert_eq!((&call["name"], &call["input"]), (&json!("get_weather"), &json!({"city": "Paris"})), "{said}");
    assert_eq!(said["usage"]["output_tokens"], 10, "{said}");

    // Streamed, in both: the broken call's events never reach the client;
    // the corrected call's do, numbered on, and the end carries the usage
    // of both tries.
    let body = json!({"model": "retry-call", "input": "Weather in Paris?", "stream": true,
        "tools": [{"type": "function", "name": "get_weather", "parameters": parameters}]});
    let answer = client.post(format!("{url}/responses")).json(&body).send().await.unwrap();
    let events: Vec<Value> = stream_data(answer).await.iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert!(!events.iter().any(|e| e.to_string().contains("lookup_forecast")), "{events:?}");
    let numbers: Vec<u64> = events.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>(), "{events:?}");
    let completed = events.last().unwrap();
    assert_eq!(completed["type"], "response.completed");
    assert_eq!(completed["response"]["output"][0]["name"], "get_weather", "{completed}");
    assert_eq!(completed["response"]["usage"]["total_tokens"], 30, "{completed}");
    let added: Vec<&Value> = events.iter().filter(|e| e["type"] == "response.output_item.added").collect();
    assert_eq!(added.len(), 1, "{events:?}");

    let body = json!({"model": "retry-call", "max_tokens": 100, "stream": true,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"name": "get_weather", "input_schema": parameters}]});
    let answer = client.post(format!("{url}/messages")).json(&body).send().await.unwrap();
    let events: Vec<Value> = stream_data(answer).await.iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert!(!events.iter().any(|e| e.to_string().contains("lookup_forecast")), "{events:?}");
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"message_start"));
    assert_eq!(&kinds[kinds.len() - 2..], ["message_delta", "message_stop"], "{kinds:?}");
    let start = events.iter().find(|e| e["type"] == "content_block_start").unwrap();
    assert_eq!(start["content_block"]["name"], "get_weather", "{events:?}");
    let delta = &events[events.len() - 2];
    assert_eq!((&delta["delta"]["stop_reason"], &delta["usage"]["output_tokens"]), (&json!("tool_use"), &json!(10)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_try_counts_against_the_clients_rate_and_without_retry_nothing_changes() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let principals = format!(
        "principals:\n  - name: bot\n    api_key_sha256: {}\n    tools: ['*']\n    rate: {{per_minute: 2, burst: 2}}\n",
        toolgate::identity::hash_key("k")
    );
    let (_gateway, url, _log) = serve_with(&dir, &upstream.base_url(), "  retry: 2\n", &principals, &[]);
    let client = http();
    let ask = |model: &str| client.post(format!("{url}/chat/completions")).bearer_auth("k").json(&request(model));
    // The request takes one of the two, its first try the other; the
    // second try would pass the rate: not made, the last answer passes.
    let answer = ask("retry-never").send().await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["x-toolgate-retries"], "1");
    assert_eq!(upstream.seen.bodies.lock().unwrap().len(), 2);
    assert_eq!(ask("prose").send().await.unwrap().status(), 429);

    // `retry: 0` (the default): the broken call passes as it came, one
    // request, no header.
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve_with(&dir, &upstream.base_url(), "", "", &[]);
    let before = upstream.seen.bodies.lock().unwrap().len();
    let answer = client.post(format!("{url}/chat/completions")).json(&request("retry-call")).send().await.unwrap();
    assert!(answer.headers().get("x-toolgate-retries").is_none());
    let said: Value = answer.json().await.unwrap();
    assert_eq!(said["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "lookup_forecast");
    assert_eq!(upstream.seen.bodies.lock().unwrap().len() - before, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frameworks_run_the_corrected_call_and_never_see_the_broken_one() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = serve_with(&dir, &upstream.base_url(), "  retry: 1\n", "", &[]);
    let direct = upstream.base_url();
    tokio::task::spawn_blocking(move || {
        let frameworks = ["agents-chat", "agents-chat-stream", "agents-responses", "langgraph", "langgraph-stream"];
        let paris = json!([{"city": "Paris"}]);
        let through = script_lines("retry.py", &[&url, "retry-call"], "framework");
        for framework in frameworks {
            let line = &through[framework];
            assert_eq!(line["ran"], paris, "{framework}: {line}");
            assert_eq!(line["final_output"], "It is sunny.", "{framework}: {line}");
        }
        let meant = json!([{"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}]);
        for framework in ["openai", "openai-stream"] {
            assert_eq!(through[framework]["calls"], meant, "{framework}: {}", through[framework]);
        }
        assert_eq!(through["openai"]["retries"], "1");
        assert_eq!(through["openai"]["usage"], 30, "every try's usage");

        // Without the door, the Agents SDK ends the run on the unknown
        // tool, and the openai SDK hands it on. (LangGraph answers an unknown
        // tool itself, naming it, and the model corrects on a turn of the
        // framework's.)
        let alone = script_lines("retry.py", &[&direct, "retry-call"], "framework");
        for framework in ["agents-chat", "agents-chat-stream", "agents-responses", "agents-responses-stream"] {
            assert_eq!(alone[framework]["ran"], json!([]), "{framework}: {}", alone[framework]);
        }
        assert_eq!(alone["openai"]["calls"][0]["name"], "lookup_forecast");

        // A model that never corrects: after the extra request the last
        // answer passes as it came; nothing hangs.
        let never = script_lines("retry.py", &[&url, "retry-never"], "framework");
        assert_eq!(never["openai"]["calls"][0]["name"], "lookup_forecast", "{}", never["openai"]);
        assert_eq!(never["openai"]["retries"], "1");
        assert_eq!(never["openai-stream"]["calls"][0]["name"], "lookup_forecast", "{}", never["openai-stream"]);
        assert_eq!(never["agents-chat"]["ran"], json!([]));
    })
    .await
    .unwrap();
}
