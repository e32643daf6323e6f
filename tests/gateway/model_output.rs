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
  - name: search_orders
    description: Search orders.
    parameters:
      type: object
      properties:
        filter:
          type: object
          properties: {status: {type: string}, customer: {type: string}}
          additionalProperties: false
        limit: {type: integer}
      required: [filter]
      additionalProperties: false
    backend: {builtin: echo}
  - name: GetOrder
    description: Get an order (v1).
    backend: {builtin: echo}
  - name: get_order
    description: Get an order (v2).
    backend: {builtin: echo}
"#;

/// The agent's tool set: everything but `delete_file`.
const SET: &[&str] = &["get_weather", "read_file", "list_files", "search_orders", "GetOrder", "get_order"];

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
    cases.extend(families());
    cases
}

/// Forms of the families of syntax (whole calls in other syntaxes, template
/// tokens in other alphabets, JSON dialect slips, wrappers, values), as
/// reported against inference servers and agent frameworks; the report
/// each was taken from is named beside it.
fn families() -> Vec<(String, String, &'static str, String)> {
    let deepseek_name =
        "<\u{FF5C}tool\u{2581}call\u{2581}begin\u{FF5C}>function<\u{FF5C}tool\u{2581}sep\u{FF5C}>get_weather";
    let deepseek_end = "<\u{FF5C}tool\u{2581}call\u{2581}end\u{FF5C}><\u{FF5C}tool\u{2581}calls\u{2581}end\u{FF5C}>";
    let deepseek_whole =
        format!("<\u{FF5C}tool\u{2581}calls\u{2581}begin\u{FF5C}>{deepseek_name}\n```json\n{ARGS}\n```{deepseek_end}");
    let whole: Vec<String> = vec![
        // Qwen3-Coder's XML (vllm-project/vllm#23099, lablup/mlxcel#204).
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>".into(),
        // MiniMax's invoke elements.
        "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>".into(),
        // GLM's key and value tags.
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>".into(),
        // DeepSeek V3's tokens in full-width bars and ▁ (google/adk-python#5654).
        deepseek_whole,
        // Kimi K2's sections.
        format!("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{ARGS}<|tool_call_end|><|tool_calls_section_end|>"),
        // Gemma 4 (ml-explore/mlx-lm#1105) and FunctionGemma (lablup/mlxcel#769) quote tokens.
        "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>".into(),
        "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>".into(),
        // Llama 3.2's Python list, Gemini's tool_code.
        "[get_weather(city='Paris')]".into(),
        "```tool_code\nprint(default_api.get_weather(city=\"Paris\"))\n```".into(),
        // Hermes, Mistral, Llama 3.1 JSON after their markers.
        format!("<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {ARGS}}}\n</tool_call>"),
        format!("[TOOL_CALLS][{{\"name\": \"get_weather\", \"arguments\": {ARGS}}}]"),
        format!("<|python_tag|>{{\"name\": \"get_weather\", \"parameters\": {ARGS}}}"),
        // LangChain's action envelope and ReAct text.
        format!("{{\"action\": \"get_weather\", \"action_input\": {ARGS}}}"),
        format!("Action: get_weather\nAction Input: {ARGS}"),
        // OpenAI's call object, arguments as text.
        r#"{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}"#.into(),
        // Flattened beside an empty wrapper (NousResearch/hermes-agent#110436).
        r#"{"name": "get_weather", "arguments": {}, "city": "Paris"}"#.into(),
        // A function element beside the object.
        format!("<function>get_weather</function>\n{ARGS}"),
        // Read by structure (the general reading): DeepSeek's DSML,
        // elements named for the tool, self-closing, Qwen3-Coder's XML with
        // its opener missing or its last parameter left open, tags that
        // lost their `<`, bare keys, a thought before the call, a Python
        // call then prose, a name then its parameters.
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>".into(),
        "<get_weather><city>Paris</city></get_weather>".into(),
        "<get_weather city=\"Paris\"/>".into(),
        "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>".into(),
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>".into(),
        "<minimax:tool_call>\ninvoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>".into(),
        "call:get_weather{city: \"Paris\"}".into(),
        "The user asks for the weather.</think>\n<get_weather><city>Paris</city></get_weather>".into(),
        "<|channel|>analysis<|message|>The user wants the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>".into(),
        "get_weather\n<parameter=city>Paris</parameter>".into(),
        format!("{{\"name\": \"get_weather\", \"arguments\": {ARGS}}}\n</tool_call>"),
    ];
    let mut cases: Vec<(String, String, &'static str, String)> =
        whole.into_iter().map(|arguments| (String::new(), arguments, "get_weather", PARIS.to_owned())).collect();
    let mut add = |tool: &str, arguments: &str, meant_tool: &'static str, meant: &str| {
        cases.push((tool.into(), arguments.into(), meant_tool, meant.into()));
    };
    // OpenAI's parallel wrapper holding one call (Azure/azure-rest-api-specs#32329, respawn-llc/kent#45).
    add(
        "multi_tool_use.parallel",
        r#"{"tool_uses": [{"recipient_name": "functions.get_weather", "parameters": {"city": "Paris"}}]}"#,
        "get_weather",
        PARIS,
    );
    // A whole call in the name.
    add("get_weather(city=\"Paris\")", "", "get_weather", PARIS);
    add("[get_weather(city='Paris')]", "{}", "get_weather", PARIS);
    // The tool's name, then its arguments in another syntax.
    add("get_weather", "<parameter=city>\nParis\n</parameter>", "get_weather", PARIS);
    add("get_weather", "get_weather(city=\"Paris\")", "get_weather", PARIS);
    add("get_weather", &format!("<function=get_weather>{ARGS}</function>"), "get_weather", PARIS);
    add(
        "get_weather",
        "<parameter=city>Paris</parameter>\n<parameter=days>\n3\n</parameter>",
        "get_weather",
        r#"{"city":"Paris","days":3}"#,
    );
    // Template tokens in another alphabet around the name.
    add(deepseek_name, &format!("```json\n{ARGS}\n```{deepseek_end}"), "get_weather", PARIS);
    add("get_weather<\u{FF5C}tool\u{2581}call\u{2581}end\u{FF5C}>", ARGS, "get_weather", PARIS);
    // JSON dialect slips with one reading.
    add("get_weather", "{\"city\": \"Paris\" // the capital\n}", "get_weather", PARIS);
    add("get_weather", "{\"city\": \"Paris\", /* later */ \"days\": 3}", "get_weather", r#"{"city":"Paris","days":3}"#);
    add("get_weather", "{\"city\": \"Paris\nFrance\"}", "get_weather", r#"{"city":"Paris\nFrance"}"#);
    add("read_file", r#"{"path": "C:\Users\me\Documents"}"#, "read_file", r#"{"path":"C:\\Users\\me\\Documents"}"#);
    add("get_weather", r#"{\"city\": \"Paris\"}"#, "get_weather", PARIS);
    add("get_weather", r#"{"city": \"Paris\"}"#, "get_weather", PARIS);
    add("get_weather", r#"{\n  "city": "Paris"\n}"#, "get_weather", PARIS);
    // A language tag line (tenstorrent/tt-inference-server#3683).
    add("get_weather", &format!("json\n{ARGS}"), "get_weather", PARIS);
    add("get_weather", "{\"city\": <|\"|>Paris<|\"|>}", "get_weather", PARIS);
    // Wrappers.
    add("get_weather", r#"{"arguments": "{\"city\": \"Paris\"}"}"#, "get_weather", PARIS);
    add("get_weather", r#"{"city": "Paris", "arguments": {}}"#, "get_weather", PARIS);
    add("search_orders", r#"{"status": "open"}"#, "search_orders", r#"{"filter":{"status":"open"}}"#);
    add(
        "search_orders",
        r#"{"status": "open", "limit": 5}"#,
        "search_orders",
        r#"{"limit":5,"filter":{"status":"open"}}"#,
    );
    // Values.
    add("get_weather", r#"{"city": "Paris", "days": null}"#, "get_weather", PARIS);
    add("get_weather", r#"{"city": ["Paris"]}"#, "get_weather", PARIS);
    add("get_weather", r#"{"city": "Paris", "days": ["3"]}"#, "get_weather", r#"{"city":"Paris","days":3}"#);
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
    // Two calls in one arguments text: never the first alone.
    (
        "get_weather",
        "{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{\"city\": \"Rome\"}",
    ),
    ("", "[get_weather(city='Paris'), get_weather(city='Rome')]"),
    (
        "",
        "<tool_call><function=get_weather><parameter=city>Paris</parameter></function></tool_call>\n<tool_call><function=get_weather><parameter=city>Rome</parameter></function></tool_call>",
    ),
    ("multi_tool_use.parallel", r#"{"tool_uses": [{"recipient_name": "functions.get_weather", "parameters": {"city": "Paris"}}, {"recipient_name": "functions.get_weather", "parameters": {"city": "Rome"}}]}"#),
    // Cut off, positional, another tool's name, outside the set.
    ("", "<function=get_weather><parameter=city>Par"),
    ("", "get_weather('Paris')"),
    ("read_file", "<function=get_weather><parameter=city>Paris</parameter></function>"),
    ("list_files", r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#),
    ("multi_tool_use.parallel", r#"{"tool_uses": [{"recipient_name": "functions.delete_file", "parameters": {"path": "/etc"}}]}"#),
    ("", "[delete_file(path='/etc')]"),
    // An escape that may have been meant either way; two values for one.
    ("read_file", r#"{"path": "C:\Users\new"}"#),
    ("get_weather", r#"{"city": ["Paris", "Rome"]}"#),
    // Read by structure, but not one complete call: cut off, a key of no
    // parameter, a tool outside the set, prose before it, two calls.
    ("", "<get_weather><city>Paris</city>"),
    ("", "<get_weather><town>Paris</town></get_weather>"),
    ("", "<delete_file path=\"/etc\"/>"),
    ("", "Sure, here it is: <get_weather><city>Paris</city></get_weather>"),
    ("", "<get_weather city=\"Paris\"/>\n<get_weather city=\"Rome\"/>"),
    // Words after the call (the words rule): the text is prose.
    ("", "get_weather(city=\"Paris\")\nI will tell you once I know."),
    ("", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\nI will tell you once I know."),
    ("", "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>."),
    // Prose, units and words for numbers.
    ("", "I would call get_weather for Paris"),
    ("get_weather", r#"{"city": "Paris", "days": "3 days"}"#),
    ("get_weather", r#"{"city": "Paris", "days": ["three"]}"#),
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

/// Each family's repair is recorded with what was emitted, and a text
/// holding two calls says so and runs neither.
#[tokio::test]
async fn each_family_records_its_repairs_and_two_calls_run_neither() {
    use toolgate::proto::v1::RepairKind;
    let mut gw = TestGateway::registry(REGISTRY).start().await;
    let (name, json, envelope, value) = (
        RepairKind::ToolName as i32,
        RepairKind::ArgumentsJson as i32,
        RepairKind::ArgumentsEnvelope as i32,
        RepairKind::ArgumentValue as i32,
    );
    let qwen = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
    let parallel = r#"{"tool_uses": [{"recipient_name": "functions.get_weather", "parameters": {"city": "Paris"}}]}"#;
    for (tool, arguments, kinds, sent) in [
        // Read from tags: the name, the arguments' text, then "3" read by the schema as 3.
        ("", qwen, vec![name, json, value], r#"{"city":"Paris","days":3}"#),
        ("multi_tool_use.parallel", parallel, vec![name, envelope], PARIS),
        ("get_weather", "get_weather(city=\"Paris\")", vec![json], PARIS),
        ("read_file", r#"{"path": "C:\Users\me"}"#, vec![json], r#"{"path":"C:\\Users\\me"}"#),
        ("get_weather", r#"{"city": "Paris", "days": null}"#, vec![value], PARIS),
        ("search_orders", r#"{"status": "open"}"#, vec![envelope], r#"{"filter":{"status":"open"}}"#),
    ] {
        let response = gw.client.execute(request(tool, arguments)).await.unwrap().into_inner();
        assert!(response.ok, "{arguments}: {response:?}");
        assert_eq!(response.arguments_json, sent, "{arguments}");
        assert_eq!(
            response.repairs.iter().map(|r| r.kind).collect::<Vec<_>>(),
            kinds,
            "{arguments}: {:?}",
            response.repairs
        );
        let first = &response.repairs[0];
        match first.kind {
            k if k == name => assert_eq!(first.original, tool),
            k if k == json => assert_eq!(first.original, arguments),
            k if k == value => assert_eq!(first.original, "days: null"),
            _ => assert_eq!(first.original, r#"{"status":"open"}"#),
        }
        let mut strict = request(tool, arguments);
        strict.strict = Some(true);
        if let Ok(response) = gw.client.execute(strict).await {
            let response = response.into_inner();
            assert!(!response.ok && response.repairs.is_empty(), "strict: {arguments}: {response:?}");
        }
    }
    let two = "{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{\"city\": \"Rome\"}";
    let three = "[get_weather(city='Paris'), get_weather(city='Rome'), read_file(path='/x')]";
    let named = [
        (two, "2 tool calls arrived in one ('get_weather', then 'get_weather')"),
        (three, "3 tool calls arrived in one ('get_weather', then 'get_weather', then 'read_file')"),
    ];
    for (tool, arguments, count) in [("get_weather", two, 2), ("", three, 3)] {
        let response = gw.client.execute(request(tool, arguments)).await.unwrap().into_inner();
        let error = response.error.expect("an error");
        assert_eq!(error.kind, toolgate::proto::v1::ErrorKind::InvalidArguments as i32);
        let said = named.iter().find(|(text, _)| *text == arguments).map(|(_, said)| *said).unwrap();
        assert!(error.message.starts_with(&format!("{said}, and none was run")), "{count}: {}", error.message);
        assert!(!response.ok);
    }
}
