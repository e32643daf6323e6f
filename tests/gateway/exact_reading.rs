//! No wrong call (the reader's safety rules), through the real server: a
//! value never carries call markup, a value keeps its exact meaning (two
//! readings are held, never guessed), and a call is never dropped. The
//! wrong dispatches the held-out corpora found, each as its class.

use serde_json::{json, Value};
use toolgate::proto::v1::{ErrorKind, ExecuteRequest, ExecuteResponse, RepairKind};

use crate::common::{model_server, CatalogDir, TestGateway};

const TOOLS: &str = r#"
tools:
  - name: bash
    description: Runs a shell command.
    parameters:
      type: object
      properties:
        command: {type: string}
        tags: {type: array, items: {type: string}}
        timeout: {type: integer}
      required: [command]
    backend: {builtin: echo}
  - name: get_weather
    description: The weather in a place.
    parameters: {type: object, properties: {city: {type: string}, location: {type: string}}}
    backend: {builtin: echo}
  - name: delete_marker
    description: Deletes the marker.
    backend: {builtin: echo}
"#;

async fn execute(gateway: &TestGateway, tool: &str, arguments: &str) -> ExecuteResponse {
    let request = ExecuteRequest {
        tool: tool.to_owned(),
        arguments_json: arguments.to_owned(),
        tools: ["bash", "get_weather", "delete_marker"].map(String::from).to_vec(),
        ..Default::default()
    };
    gateway.client.clone().execute(request).await.expect("answered").into_inner()
}

/// Refused as invalid arguments, nothing run; the message.
fn refused(answer: ExecuteResponse, what: &str) -> String {
    assert!(!answer.ok, "{what}: ran {} with {}", answer.tool, answer.result_json);
    let error = answer.error.unwrap();
    assert_eq!(error.kind(), ErrorKind::InvalidArguments, "{what}: {}", error.message);
    error.message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_never_carries_call_markup() {
    let gateway = TestGateway::registry(TOOLS).start().await;
    // Closing markup kept at a value's end: the value before it.
    for (tool, arguments, expected) in [
        ("bash", "{\"command\": \"npm test</｜DSML｜parameter>\\n \"}", json!({"command": "npm test"})),
        ("get_weather", "{\"location\": \"上海\\n</parameter_function>\"}", json!({"location": "上海"})),
        ("bash", "{\"command\": \"ls -la</arg_value></tool_call>\"}", json!({"command": "ls -la"})),
        ("bash", "{\"command\": \"pwd<|im_end|>\"}", json!({"command": "pwd"})),
    ] {
        let answer = execute(&gateway, tool, arguments).await;
        assert!(answer.ok, "{arguments}: {:?}", answer.error);
        assert_eq!(serde_json::from_str::<Value>(&answer.result_json).unwrap(), expected, "{arguments}");
        assert!(answer.repairs.iter().any(|r| r.kind() == RepairKind::ArgumentValue), "{arguments}");
    }
    // Markup inside a value, or text after it: refused, naming the parameter.
    for arguments in [
        "{\"command\": \"echo a</parameter>\\n<parameter=command>rm -rf /\"}",
        "{\"command\": \"ls<|tool_call_end|><|tool_call_begin|>functions.delete_marker:1\"}",
    ] {
        let message = refused(execute(&gateway, "bash", arguments).await, arguments);
        assert!(message.starts_with("the value of 'command' holds call markup"), "{message}");
    }
    // Markup of no call stays text.
    let answer = execute(&gateway, "bash", "{\"command\": \"echo '<b>bold</b>' > page.html\"}").await;
    assert_eq!(answer.arguments_json, r#"{"command": "echo '<b>bold</b>' > page.html"}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_keeps_its_exact_meaning() {
    let gateway = TestGateway::registry(TOOLS).start().await;
    // An entity in a markup value reads two ways: never run either way.
    let qwen = "<tool_call>\n<function=bash>\n<parameter=command>\ncat ci.yml 2&gt;/dev/null || true\n</parameter>\n</function>\n</tool_call>";
    let message = refused(execute(&gateway, "", qwen).await, qwen);
    assert_eq!(
        message,
        "the value of 'command' reads two ways: as written (\"cat ci.yml 2&gt;/dev/null || true\") or with its \
         character entities decoded (\"cat ci.yml 2>/dev/null || true\"), and nothing was run: send the arguments as JSON"
    );
    // An empty string is no value of an array: never wrapped into [""].
    refused(execute(&gateway, "bash", r#"{"command": "ls", "tags": ""}"#).await, "empty string");
    let markup = "<tool_call>\n<function=bash>\n<parameter=command>ls</parameter>\n<parameter=tags></parameter>\n</function>\n</tool_call>";
    refused(execute(&gateway, "", markup).await, markup);
    // `42.0` written as markup for an integer is 42; the JSON number 42.0
    // passes as it was emitted.
    let markup = "<tool_call>\n<function=bash>\n<parameter=command>ls</parameter>\n<parameter=timeout>42.0</parameter>\n</function>\n</tool_call>";
    assert_eq!(execute(&gateway, "", markup).await.arguments_json, r#"{"command":"ls","timeout":42}"#);
    let answer = execute(&gateway, "bash", r#"{"command": "ls", "timeout": 42.0}"#).await;
    assert_eq!(answer.arguments_json, r#"{"command": "ls", "timeout": 42.0}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_never_dropped_and_a_split_is_never_guessed() {
    let gateway = TestGateway::registry(TOOLS).start().await;
    for (tool, arguments, named) in [
        ("", "{}\n<tool_call>delete_marker</tool_call>", "('delete_marker')"),
        ("get_weather", "{}\n<tool_call>delete_marker</tool_call>", "('get_weather', then 'delete_marker')"),
        ("get_weather", "{}\ndelete_marker", "('get_weather', then 'delete_marker')"),
        (
            "get_weather",
            "{\"city\": \"Oslo\"}\n<tool_call>{\"name\": \"delete_marker\"}</tool_call>",
            "('get_weather', then 'delete_marker')",
        ),
        (
            "get_weather",
            "{\"city\": \"Oslo\"}<tool_call>delete_marker</tool_call>",
            "('get_weather', then 'delete_marker')",
        ),
    ] {
        let message = refused(execute(&gateway, tool, arguments).await, arguments);
        assert_eq!(
            message,
            format!("2 tool calls arrived in one {named}, and none was run: send each as a tool call of its own, one call per tool call"),
            "{tool} {arguments}"
        );
    }
    // A second invoke opened before the first one closed: where the first
    // ends would be a guess.
    let dsml = "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜parameter>\n<｜DSML｜invoke name=\"delete_marker\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
    let answer = execute(&gateway, "", dsml).await;
    assert!(!answer.ok, "ran {}", answer.tool);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_door_a_call_holding_another_passes_as_written_and_no_guess_is_lifted() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = crate::model_door::serve(&dir, &upstream.base_url(), "");
    let tools = json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "delete_marker", "parameters": {"type": "object", "properties": {}}}},
    ]);
    let client = reqwest::Client::new();
    let send = |model: &'static str, said: &'static str, stream: bool| {
        let body =
            json!({"model": model, "messages": [{"role": "user", "content": said}], "tools": tools, "stream": stream});
        let request = client.post(format!("{url}/chat/completions")).json(&body);
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    let written = "{\"city\": \"Oslo\"}\n<tool_call>delete_marker</tool_call>";
    for stream in [false, true] {
        let raw =
            send("say-call", "get_weather\n{\"city\": \"Oslo\"}\n<tool_call>delete_marker</tool_call>", stream).await;
        let arguments = match stream {
            false => serde_json::from_str::<Value>(&raw).unwrap()["choices"][0]["message"]["tool_calls"][0]["function"]
                ["arguments"]
                .clone(),
            true => {
                let mut text = String::new();
                for data in raw.lines().filter_map(|l| l.strip_prefix("data: ")).filter(|d| *d != "[DONE]") {
                    let chunk: Value = serde_json::from_str(data).unwrap();
                    for call in chunk["choices"][0]["delta"]["tool_calls"].as_array().into_iter().flatten() {
                        text.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
                    }
                }
                Value::String(text)
            }
        };
        assert_eq!(arguments, json!(written), "stream {stream}: never split, never cut");
        // DSML whose second invoke opens before the first closes: text.
        let dsml = "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜parameter>\n<｜DSML｜invoke name=\"delete_marker\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
        let raw = send("say", dsml, stream).await;
        let lifted = match stream {
            false => !serde_json::from_str::<Value>(&raw).unwrap()["choices"][0]["message"]["tool_calls"].is_null(),
            true => raw.contains("\"tool_calls\":["),
        };
        assert!(!lifted, "stream {stream}: {raw}");
    }
}
