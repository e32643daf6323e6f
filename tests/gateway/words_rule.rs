//! The words rule, through the real server: text read as whole calls
//! holds calls only when, apart from residue, it is calls, with at most a
//! preamble before explicit call markup; words after a call make it prose.
//! `Execute` (a gRPC client, the name empty) and the model door (raw HTTP,
//! whole and streamed, in front of a scripted model server) read alike.

use serde_json::{json, Value};
use toolgate::proto::v1::{ErrorKind, ExecuteRequest, RepairKind};

use crate::common::{model_server, CatalogDir, TestGateway};

const TOOLS: &str = r#"
tools:
  - name: delete_file
    description: Deletes a file.
    parameters: {type: object, properties: {path: {type: string}}, required: [path]}
    backend: {builtin: echo}
  - name: get_weather
    description: The weather in a city.
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    backend: {builtin: echo}
  - name: delete_marker
    description: Deletes the marker.
    backend: {builtin: echo}
"#;

/// Texts that name a call and then go on talking about it: prose, never run,
/// never lifted (hardening round 5, item 1).
const TALKED_ABOUT: &[&str] = &[
    r#"delete_file(path="/") -- never run this, it erases everything."#,
    r#"{"name": "delete_file", "arguments": {"path": "/"}} is the call you must NOT make."#,
    r#"<tool_call>{"name": "delete_file", "arguments": {"path": "/"}}</tool_call> is what an attacker wants; I refuse."#,
    r#"get_weather(city="Oslo") would tell you, but I will not call it."#,
    "delete_marker() -- never run this",
    r#"get_weather(city="Oslo")."#,
    "<get_weather><city>Oslo</city></get_weather> 🙂",
];

/// Markup quoted, shown or named in a sentence: prose.
const SHOWN: &[&str] = &[
    "Never run this:\n```\n<tool_call>{\"name\": \"delete_file\", \"arguments\": {\"path\": \"/\"}}</tool_call>\n```",
    "An attacker would send <invoke name=\"delete_file\"><parameter name=\"path\">/</parameter></invoke>",
    "Write `<tool_call>{\"name\": \"delete_file\", \"arguments\": {\"path\": \"/\"}}</tool_call>` to delete it.",
    "> <tool_call>{\"name\": \"delete_file\", \"arguments\": {\"path\": \"/\"}}</tool_call>",
    "I'll check: get_weather(city=\"Oslo\")",
    "Let me see. {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}",
    "Sure, let me check.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>",
];

/// Words, then calls in explicit markup: the calls run (and are lifted),
/// the words are the preamble.
const AFTER_WORDS: &[(&str, &str)] = &[
    (
        "I'll check the weather.\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>",
        "I'll check the weather.\n",
    ),
    (
        "Let me look. <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Oslo\"}<|tool_call_end|><|tool_calls_section_end|>",
        "Let me look. ",
    ),
    (
        "Checking.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        "Checking.\n\n",
    ),
    ("Sure thing [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}", "Sure thing "),
];

async fn execute(gateway: &TestGateway, arguments: &str) -> toolgate::proto::v1::ExecuteResponse {
    let request = ExecuteRequest {
        tool: String::new(),
        arguments_json: arguments.to_owned(),
        tools: ["delete_file", "get_weather", "delete_marker"].map(String::from).to_vec(),
        ..Default::default()
    };
    gateway.client.clone().execute(request).await.expect("answered").into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_runs_no_call_that_words_follow_and_drops_a_preamble_it_says() {
    let gateway = TestGateway::registry(TOOLS).start().await;
    for text in TALKED_ABOUT {
        let answer = execute(&gateway, text).await;
        assert!(!answer.ok, "{text}: ran {}", answer.tool);
        let error = answer.error.unwrap();
        assert_eq!(error.kind(), ErrorKind::InvalidArguments, "{text}");
        let name = ["delete_file", "get_weather", "delete_marker"].into_iter().find(|n| text.contains(n)).unwrap();
        assert_eq!(
            error.message,
            format!(
                "the text holds a call of '{name}', then words: it reads as the call or as the words, and nothing \
                 was run: send the call alone as the tool call"
            ),
            "{text}"
        );
    }
    for text in SHOWN {
        let answer = execute(&gateway, text).await;
        assert!(!answer.ok, "{text}: ran {}", answer.tool);
    }
    for (text, preamble) in AFTER_WORDS {
        let answer = execute(&gateway, text).await;
        assert!(answer.ok, "{text}: {:?}", answer.error);
        assert_eq!((answer.tool.as_str(), answer.result_json.as_str()), ("get_weather", r#"{"city":"Oslo"}"#));
        let first = &answer.repairs[0];
        assert_eq!(first.kind(), RepairKind::WordsDropped, "{text}: {:?}", answer.repairs);
        assert_eq!((first.original.as_str(), first.repaired.as_str()), (*preamble, ""));
    }
}

/// The door's answer for a model that says `text`: its content, its calls
/// (name, arguments), its finish reason and its `x-toolgate-repairs`;
/// put together from the events when streamed. The model's tools:
/// `delete_file(path)` and `get_weather(city)`, each required.
pub(crate) async fn through_door(
    url: &str,
    model: &str,
    text: &str,
    stream: bool,
    extra: Value,
) -> (Value, Vec<(String, Value)>, String, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tools: Vec<Value> = ["delete_file", "get_weather"]
        .iter()
        .map(|name| {
            let key = if *name == "delete_file" { "path" } else { "city" };
            json!({"type": "function", "function": {"name": name, "parameters": {"type": "object",
                "properties": {key: {"type": "string"}}, "required": [key]}}})
        })
        .collect();
    let mut body =
        json!({"model": model, "messages": [{"role": "user", "content": text}], "tools": tools, "stream": stream});
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    let answer = reqwest::Client::new().post(format!("{url}/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let repairs =
        answer.headers().get("x-toolgate-repairs").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let read =
        |arguments: &str| serde_json::from_str::<Value>(arguments).unwrap_or(Value::String(arguments.to_owned()));
    let raw = answer.text().await.unwrap();
    if !stream {
        let completion: Value = serde_json::from_str(&raw).unwrap();
        let choice = &completion["choices"][0];
        let calls = choice["message"]["tool_calls"].as_array().cloned().unwrap_or_default();
        let calls = calls.iter().map(|c| {
            (c["function"]["name"].as_str().unwrap().to_owned(), read(c["function"]["arguments"].as_str().unwrap()))
        });
        let finish = choice["finish_reason"].as_str().unwrap().to_owned();
        return (choice["message"]["content"].clone(), calls.collect(), finish, repairs);
    }
    let (mut content, mut calls, mut finish) = (String::new(), Vec::<(String, String)>::new(), String::new());
    for data in raw.lines().filter_map(|line| line.strip_prefix("data: ")).filter(|d| *d != "[DONE]") {
        let chunk: Value = serde_json::from_str(data).unwrap();
        let choice = &chunk["choices"][0];
        content.push_str(choice["delta"]["content"].as_str().unwrap_or_default());
        for call in choice["delta"]["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap() as usize;
            if calls.len() <= index {
                calls.resize(index + 1, Default::default());
            }
            calls[index].0.push_str(call["function"]["name"].as_str().unwrap_or_default());
            calls[index].1.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = reason.to_owned();
        }
    }
    let content = match content.is_empty() {
        true => Value::Null,
        false => Value::String(content),
    };
    (content, calls.into_iter().map(|(name, arguments)| (name, read(&arguments))).collect(), finish, repairs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_door_lifts_no_call_that_words_follow_and_keeps_a_preamble_whole_and_streamed() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = crate::model_door::serve(&dir, &upstream.base_url(), "");
    let oslo = ("get_weather".to_owned(), json!({"city": "Oslo"}));
    for stream in [false, true] {
        for text in TALKED_ABOUT.iter().chain(SHOWN) {
            let (content, calls, finish, _) = through_door(&url, "say", text, stream, json!({})).await;
            assert_eq!(
                (&content, calls.as_slice(), finish.as_str()),
                (&json!(text), &[][..], "stop"),
                "stream {stream}: {text}"
            );
        }
        for (text, preamble) in AFTER_WORDS {
            let (content, calls, finish, repairs) = through_door(&url, "say", text, stream, json!({})).await;
            assert_eq!(
                (content, calls, finish.as_str()),
                (json!(preamble), vec![oslo.clone()], "tool_calls"),
                "stream {stream}: {text}"
            );
            if !stream {
                let repairs: Value = serde_json::from_str(&repairs).unwrap();
                assert_eq!(repairs[0], json!({"choice": 0, "call": 0, "kind": "CONTENT_LIFTED"}), "{text}");
            }
        }
        // Not lifted: an answer cut by its length, one a structured output
        // was asked for, two calls where parallel calls are off.
        let (text, _) = AFTER_WORDS[0];
        let (content, calls, finish, _) = through_door(&url, "say-length", text, stream, json!({})).await;
        assert_eq!((content, calls.len(), finish.as_str()), (json!(text), 0, "length"));
        let call = r#"{"name": "get_weather", "arguments": {"city": "Oslo"}}"#;
        let format = json!({"response_format": {"type": "json_object"}});
        let (content, calls, _, _) = through_door(&url, "say", call, stream, format).await;
        assert_eq!((content, calls.len()), (json!(call), 0), "stream {stream}: structured output is the answer");
        let two = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>";
        let (_, calls, _, _) = through_door(&url, "say", two, stream, json!({})).await;
        assert_eq!(calls.len(), 2, "stream {stream}");
        let (content, calls, _, _) =
            through_door(&url, "say", two, stream, json!({"parallel_tool_calls": false})).await;
        assert_eq!((content, calls.len()), (json!(two), 0), "stream {stream}: one call at most");
    }
}
