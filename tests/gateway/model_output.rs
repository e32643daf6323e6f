//! Tool calls as real model output leaves them (forms reported against
//! inference servers, chat templates and agent frameworks), sent through the
//! generated client: every call with exactly one meaning is repaired to the
//! intended tool and arguments, and none with two meanings, or reaching
//! outside the agent's tool set, is ever dispatched. Prints the tally.

use toolgate::proto::v1::ExecuteRequest;

use crate::common::TestGateway;

const REGISTRY: &str = r#"
tools:
  - name: get_weather
    description: Weather for a city.
    parameters:
      type: object
      properties:
        city: {type: string, minLength: 1}
        unit: {type: string, enum: [celsius, fahrenheit]}
        days: {type: integer, minimum: 1, maximum: 10}
      required: [city]
      additionalProperties: false
    backend: {builtin: echo}
  - name: read_file
    description: Read a file.
    parameters: {type: object, properties: {path: {type: string}}, required: [path], additionalProperties: false}
    backend: {builtin: echo}
  - name: list_files
    description: List files.
    parameters: {type: object, properties: {dir: {type: string}}, additionalProperties: false}
    backend: {builtin: echo}
  - name: delete_file
    description: Delete a file (never in the agent's set below).
    parameters: {type: object, properties: {path: {type: string}}, additionalProperties: false}
    backend: {builtin: echo}
  - name: GetOrder
    description: Get an order (v1).
    backend: {builtin: echo}
  - name: get_order
    description: Get an order (v2).
    backend: {builtin: echo}
"#;

/// The agent's tool set: everything but `delete_file`.
const SET: &[&str] = &["get_weather", "read_file", "list_files", "GetOrder", "get_order"];

const PARIS: &str = r#"{"city":"Paris"}"#;
const ARGS: &str = r#"{"city": "Paris"}"#;

/// Calls with one meaning: (tool, arguments) as emitted, and the tool and
/// arguments (as the backend receives them) they mean.
fn one_meaning() -> Vec<(String, String, &'static str, String)> {
    let mut cases: Vec<(String, String, &'static str, String)> = Vec::new();
    let mut name = |emitted: &str| cases.push((emitted.into(), ARGS.into(), "get_weather", PARIS.into()));
    for emitted in [
        "GetWeather",
        "functions.get_weather",
        "default_api.get_weather",
        "mcp__weather__get_weather",
        "get_weather<|channel|>commentary",
        "get_weather<|channel|>commentary json",
        "functions.get_weather<|channel|>commentary",
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json",
        "get_weather <|constrain|>json",
        "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>",
        "get_weather<|tool_call_end|>",
        "<|python_tag|>get_weather",
        "[TOOL_CALLS]get_weather",
        "[TOOL_CALLS] get_weather",
        "<function=get_weather>",
        "<tool_call>get_weather",
        "get_weather</tool_call>",
        "<tool_call>\nget_weather\n</tool_call>",
        "get_weather:0",
        "functions.get_weather:0",
        ".get_weather",
        ":get_weather",
        " get_weather\n",
        "\"get_weather\"",
        "'get_weather'",
        "`get_weather`",
        "get_weather()",
        "weather:get_weather",
        "weather::get_weather",
        "weather.get_weather",
        "weather__get_weather",
        "Weather__GetWeather",
        "tool_call:get_weather",
    ] {
        name(emitted);
    }
    let mut arguments = |tool: &'static str, emitted: &str, meant: &str| {
        cases.push((tool.into(), emitted.into(), tool, meant.into()));
    };
    for emitted in [
        "{\"city\": \"Paris\"}}",
        "{\"city\": \"Paris\"}\n\nI'll check the weather in Paris for you.",
        "{\u{201c}city\u{201d}: \u{201c}Paris\u{201d}}",
        "{{\"city\": \"Paris\"}}",
        "{city: \"Paris\"}",
        "{city: 'Paris'}",
        r#""{\"city\": \"Paris\"}""#,
        r#""\"{\\\"city\\\": \\\"Paris\\\"}\"""#,
        r#"[{"city": "Paris"}]"#,
        "```json\n{\"city\": \"Paris\"}\n```",
        "{'city': 'Paris',}",
        r#"{"arguments": {"city": "Paris"}}"#,
        r#"{"parameters": {"city": "Paris"}}"#,
        r#"{"input": {"city": "Paris"}}"#,
        r#"{"args": {"city": "Paris"}}"#,
        r#"{"kwargs": {"city": "Paris"}}"#,
        r#"{"properties": {"city": "Paris"}}"#,
        r#"{"{{arguments}}": {"city": "Paris"}}"#,
        r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#,
        r#"{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}"#,
        r#"{"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}"#,
        r#"{"city": "Paris", "type": "function"}"#,
        r#"{"city": "Paris", "name": "get_weather", "id": "call_1"}"#,
        r#"{"args.city": "Paris"}"#,
        r#"{"City": "Paris"}"#,
    ] {
        arguments("get_weather", emitted, PARIS);
    }
    arguments("get_weather", r#"{"city": "Paris", "days": "3"}"#, r#"{"city":"Paris","days":3}"#);
    arguments("get_weather", r#"{"city": "Paris", "unit": "Celsius"}"#, r#"{"city":"Paris","unit":"celsius"}"#);
    arguments("list_files", "null", "{}");
    arguments("list_files", "\"\"", "{}");
    arguments("list_files", "[]", "{}");
    let whole = r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#;
    cases.push(("".into(), whole.into(), "get_weather", PARIS.into()));
    let text = r#"{"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}"#;
    cases.push(("".into(), text.into(), "get_weather", PARIS.into()));
    cases
}

/// Calls with two meanings, or none: never dispatched.
const NOT_ONE: &[(&str, &str)] = &[
    ("get_weather<|channel|>read_file", ARGS),
    ("get_weatherjson", ARGS),
    ("getorder", "{}"),
    ("<function=get-order>", "{}"),
    ("<function=delete_file>", r#"{"path": "/etc"}"#),
    ("DeleteFile", r#"{"path": "/etc"}"#),
    ("weather__delete_file", r#"{"path": "/etc"}"#),
    ("please call get_weather", ARGS),
    ("get_weather:force", ARGS),
    ("get_weather", r#"{"city": "Paris"}{"city": "Rome"}"#),
    ("get_weather", r#"{"city": "Paris"} ["Rome"]"#),
    ("get_weather", r#"{"city": "Par"#),
    ("get_weather", r#"{"city": "Paris", "days": "3.5"}"#),
    ("get_weather", r#"{"city": "Paris", "days": "three"}"#),
    ("get_weather", r#"{"city": "Paris", "unit": "kelvin"}"#),
    ("get_weather", r#"{"arguments": {"city": "Paris"}, "input": {"city": "Rome"}}"#),
    ("get_weather", r#"{"arguments": {"city": "Paris"}, "city": "Rome"}"#),
    ("get_weather", r#"[{"city": "Paris"}, {"city": "Rome"}]"#),
    ("get_weather", "null"),
    ("", r#"{"name": "delete_file", "arguments": {"path": "/etc"}}"#),
    ("", r#"{"name": "get_weather", "arguments": {"city": "Paris"}, "input": {"city": "Rome"}}"#),
];

fn request(tool: &str, arguments: &str) -> ExecuteRequest {
    ExecuteRequest {
        tool: tool.into(),
        arguments_json: arguments.into(),
        tools: SET.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn model_output_with_one_meaning_is_repaired_and_none_other_dispatched() {
    let mut gw = TestGateway::registry(REGISTRY).start().await;
    let cases = one_meaning();
    let mut misses = Vec::new();
    for (tool, arguments, meant_tool, meant_arguments) in &cases {
        let response = gw.client.execute(request(tool, arguments)).await.unwrap().into_inner();
        let repaired = response.ok && response.tool == *meant_tool && response.result_json == *meant_arguments;
        if !repaired {
            misses.push(format!("{tool:?} {arguments}: {response:?}"));
        }
        // Strict: nothing of it is repaired.
        let mut strict = request(tool, arguments);
        strict.strict = Some(true);
        if let Ok(response) = gw.client.execute(strict).await {
            assert!(response.into_inner().repairs.is_empty(), "strict repaired {tool:?} {arguments}");
        }
    }
    let mut dispatched = Vec::new();
    for (tool, arguments) in NOT_ONE {
        let response = gw.client.execute(request(tool, arguments)).await.unwrap().into_inner();
        if response.ok {
            dispatched.push(format!("{tool:?} {arguments}: {response:?}"));
        }
    }
    println!(
        "model output: {} of {} calls with one meaning repaired; {} of {} with two or none dispatched",
        cases.len() - misses.len(),
        cases.len(),
        dispatched.len(),
        NOT_ONE.len()
    );
    assert!(misses.is_empty(), "not repaired:\n{}", misses.join("\n"));
    assert!(dispatched.is_empty(), "dispatched:\n{}", dispatched.join("\n"));
}
