//! The general reading by principle, through the real server: a JSON call
//! names a tool under one of the closed list of name keys or as its only
//! key; a tool's name, any separator, then any body; repeated children are
//! an array where the schema says array; arguments written as attributes
//! are never dropped. Each principle with the counter-cases that must stay
//! prose or hints (nothing runs).

use serde_json::{json, Value};
use toolgate::proto::v1::{ExecuteRequest, ExecuteResponse};

use crate::{
    common::{model_server, CatalogDir, TestGateway},
    words_rule::through_door,
};

const TOOLS: &str = r#"
tools:
  - name: get_weather
    description: The weather in a city.
    parameters:
      type: object
      properties:
        city: {type: string}
        unit: {type: string, enum: [celsius, fahrenheit]}
      required: [city]
    backend: {builtin: echo}
  - name: send_email
    description: Sends an email.
    parameters:
      type: object
      properties:
        to: {type: array, items: {type: string}}
        subject: {type: string}
      required: [to, subject]
    backend: {builtin: echo}
  - name: web_search
    description: Searches the web.
    parameters:
      type: object
      properties:
        query: {type: string}
        max_results: {type: integer}
      required: [query]
    backend: {builtin: echo}
  - name: list_files
    description: Lists the files of a folder (the working folder by default).
    parameters: {type: object, properties: {path: {type: string}}}
    backend: {builtin: echo}
"#;

/// The text as a model left it: no name, the call written in the arguments.
async fn execute(gateway: &TestGateway, text: &str) -> ExecuteResponse {
    let request = ExecuteRequest {
        tool: String::new(),
        arguments_json: text.to_owned(),
        tools: ["get_weather", "send_email", "web_search", "list_files"].map(String::from).to_vec(),
        ..Default::default()
    };
    gateway.client.clone().execute(request).await.expect("answered").into_inner()
}

async fn runs(gateway: &TestGateway, text: &str, tool: &str, arguments: Value) {
    let answer = execute(gateway, text).await;
    assert!(answer.ok, "{text:?}: {:?}", answer.error);
    assert_eq!(answer.tool, tool, "{text:?}");
    assert_eq!(serde_json::from_str::<Value>(&answer.result_json).unwrap(), arguments, "{text:?}");
}

async fn held(gateway: &TestGateway, text: &str) {
    let answer = execute(gateway, text).await;
    assert!(!answer.ok, "{text:?}: ran {} with {}", answer.tool, answer.result_json);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_call_names_a_tool_under_a_name_key_or_as_its_only_key() {
    let gateway = TestGateway::registry(TOOLS).start().await;
    let oslo = json!({"city": "Oslo"});
    for text in [
        r#"{"function": "get_weather", "args": {"city": "Oslo"}}"#,
        r#"{"tool": "get_weather", "tool_input": {"city": "Oslo"}}"#,
        r#"{"function_name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}"#,
        r#"{"get_weather": {"city": "Oslo"}}"#,
        r#"{"get_weather": "{\"city\": \"Oslo\"}"}"#,
    ] {
        runs(&gateway, text, "get_weather", oslo.clone()).await;
    }
    for text in [
        // A key of no tool; a name key naming no tool; a name key beside another.
        r#"{"city": {"name": "Oslo"}}"#,
        r#"{"name": "Oslo", "country": "NO"}"#,
        r#"{"name": "get_weather", "function": "web_search", "arguments": {"city": "Oslo"}}"#,
        // Two keys: which is the call is a guess.
        r#"{"get_weather": {"city": "Oslo"}, "web_search": {"query": "Oslo"}}"#,
    ] {
        held(&gateway, text).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_then_a_body_with_any_separator() {
    let gateway = TestGateway::registry(TOOLS).start().await;
    let oslo = json!({"city": "Oslo"});
    for text in [
        "get_weather - {\"city\": \"Oslo\"}",
        "get_weather → {'city': 'Oslo'}",
        "get_weather({\"city\": \"Oslo\"})",
        "functions.get_weather({\"city\": \"Oslo\"})",
        "get_weather(city: \"Oslo\")",
        "get_weather[{\"city\": \"Oslo\"}]",
        "get_weather city=\"Oslo\"",
        "get_weather: city=Oslo",
        "get_weather\ncity=\"Oslo\"",
        // A label that is a name key, then one that is an argument key.
        "Tool: get_weather\nArguments: {\"city\": \"Oslo\"}",
        "tool_name: get_weather\nparameters: {\"city\": \"Oslo\"}",
        "Function: get_weather\nArgs: {\"city\": \"Oslo\"}",
    ] {
        runs(&gateway, text, "get_weather", oslo.clone()).await;
    }
    runs(&gateway, "web_search query=\"rust\" max_results=3", "web_search", json!({"query": "rust", "max_results": 3}))
        .await;
    runs(
        &gateway,
        "web_search(query: \"rust\", max_results: 3)",
        "web_search",
        json!({"query": "rust", "max_results": 3}),
    )
    .await;
    for text in [
        // Words, not a body.
        "get_weather is what I would call",
        "get_weather: city is Oslo",
        "Tool: get_weather is the one",
        "Calling get_weather with {\"city\": \"Oslo\"}",
        // Words after the body (the words rule).
        "get_weather city=\"Oslo\" tomorrow, I think",
        "Tool: get_weather\nArguments: {\"city\": \"Oslo\"}\nThis one is risky.",
        // An expression, escapes that read two ways, a key given twice.
        "get_weather(city: 2+2)",
        "get_weather city=Oslo+Rome",
        "get_weather(city: \"Oslo\\nRome\")",
        "get_weather city=\"Oslo\" city=\"Rome\"",
        // A key of no parameter.
        "get_weather town=\"Oslo\"",
        // A labelled name without its arguments' line: left out, or none?
        "Action: list_files",
        "Tool: list_files\n",
    ] {
        held(&gateway, text).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_children_are_an_array_where_the_schema_says_array_and_attributes_are_arguments() {
    let gateway = TestGateway::registry(TOOLS).start().await;
    let two = json!({"to": ["a@example.org", "b@example.org"], "subject": "hi"});
    for text in [
        "<send_email><to>a@example.org</to><to>b@example.org</to><subject>hi</subject></send_email>",
        "<function=send_email>\n<parameter=to>\na@example.org\n</parameter>\n<parameter=to>\nb@example.org\n</parameter>\n<parameter=subject>\nhi\n</parameter>\n</function>",
        "<invoke name=\"send_email\"><parameter name=\"to\">a@example.org</parameter><parameter name=\"to\">b@example.org</parameter><parameter name=\"subject\">hi</parameter></invoke>",
    ] {
        runs(&gateway, text, "send_email", two.clone()).await;
    }
    // Attributes beside the name are arguments, never dropped.
    runs(&gateway, "<invoke name=\"list_files\" path=\"/etc\"/>", "list_files", json!({"path": "/etc"})).await;
    runs(
        &gateway,
        "<tool_call name=\"get_weather\" arguments='{\"city\": \"Oslo\"}'/>",
        "get_weather",
        json!({"city": "Oslo"}),
    )
    .await;
    for text in [
        // Repeated where the schema says one value.
        "<send_email><to>a@example.org</to><subject>hi</subject><subject>yo</subject></send_email>",
        "<get_weather><city>Oslo</city><city>Rome</city></get_weather>",
        // An item that reads two ways (its entities).
        "<send_email><to>a@example.org</to><to>b&amp;c@example.org</to><subject>hi</subject></send_email>",
        // An attribute of no parameter.
        "<invoke name=\"list_files\" recursive=\"true\"/>",
    ] {
        held(&gateway, text).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_door_labelled_and_separated_calls_are_lifted_and_words_stay_text() {
    let upstream = model_server::start().await;
    let dir = CatalogDir::new();
    let (_gateway, url, _log) = crate::model_door::serve(&dir, &upstream.base_url(), "");
    let oslo = ("get_weather".to_owned(), json!({"city": "Oslo"}));
    for stream in [false, true] {
        for said in [
            "Tool: get_weather\nArguments: {\"city\": \"Oslo\"}",
            "get_weather - {\"city\": \"Oslo\"}",
            "get_weather city=\"Oslo\"",
        ] {
            let (_, calls, finish, _) = through_door(&url, "say", said, stream, json!({})).await;
            assert_eq!((calls, finish.as_str()), (vec![oslo.clone()], "tool_calls"), "stream {stream}: {said:?}");
        }
        for said in ["get_weather city=\"Oslo\" tomorrow, I think", "Tool: get_weather is the one"] {
            let (content, calls, finish, _) = through_door(&url, "say", said, stream, json!({})).await;
            assert_eq!((content, calls, finish.as_str()), (json!(said), vec![], "stop"), "stream {stream}: {said:?}");
        }
    }
}
