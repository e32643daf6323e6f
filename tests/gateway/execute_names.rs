//! Execute, tool names: exact, alias, drift repaired inside the available set,
//! ambiguity never dispatched, the corrective error with the nearest name and
//! the inventory, and a drifted name that can never reach a denied tool.

use tonic::Code;
use toolgate::proto::v1::{ErrorKind, ExecuteRequest, Repair, RepairKind};

use crate::common::{
    backend::{self, HttpBackend},
    error, execute, kind, TestGateway,
};

fn registry(http: &HttpBackend) -> String {
    format!(
        r#"
tools:
  - name: web_search
    description: Search the web.
    aliases: [search]
    parameters:
      type: object
      properties: {{query: {{type: string}}, limit: {{type: integer}}}}
      required: [query]
      additionalProperties: false
    backend: {{builtin: echo}}
  - name: read_file
    description: Read a file.
    backend: {{builtin: echo}}
  - name: delete_file
    description: Delete a file.
    backend: {{http: {{url: "{}"}}}}
  - name: GetOrder
    description: Get an order (v1).
    backend: {{builtin: echo}}
  - name: get_order
    description: Get an order (v2).
    backend: {{builtin: echo}}
toolsets:
  readonly: [read_file, web_search]
"#,
        http.url("/echo")
    )
}

const ALL: &str =
    "['GetOrder', 'calculator', 'current_time', 'delete_file', 'echo', 'get_order', 'read_file', 'web_search']";

/// A gateway on [`registry`]; a strict one on the registry without
/// `get_order`, whose key collides with `GetOrder` (a warning, which strict
/// validation refuses to load).
async fn gateway(http: &HttpBackend, strict: bool) -> TestGateway {
    let registry = match strict {
        true => registry(http).replace(V2, ""),
        false => registry(http),
    };
    TestGateway::registry(&registry).strict(strict).start().await
}

/// `get_order`'s entry in [`registry`].
const V2: &str = "  - name: get_order\n    description: Get an order (v2).\n    backend: {builtin: echo}\n";

fn request(tool: &str, arguments: &str, tools: &[&str], strict: Option<bool>) -> ExecuteRequest {
    ExecuteRequest {
        tool: tool.into(),
        arguments_json: arguments.into(),
        tools: tools.iter().map(|t| t.to_string()).collect(),
        strict,
        ..Default::default()
    }
}

#[tokio::test]
async fn exact_names_and_aliases_dispatch_without_repair() {
    let http = backend::start().await;
    let mut gw = gateway(&http, false).await;
    for name in ["web_search", "search"] {
        let response = execute(&mut gw.client, name, r#"{"query": "rust"}"#).await;
        assert!(response.ok, "{response:?}");
        assert_eq!(response.tool, "web_search");
        assert!(response.repairs.is_empty());
        assert_eq!(response.result_json, r#"{"query":"rust"}"#);
    }
}

#[tokio::test]
async fn drifted_names_are_repaired_to_the_single_match() {
    let http = backend::start().await;
    let mut gw = gateway(&http, false).await;
    for drifted in [
        "WebSearch",
        "web-search",
        "WEB_SEARCH",
        "Web Search",
        "functions.web_search",
        "default_api.web_search",
        "tools.WebSearch",
        "mcp__brave__web_search",
    ] {
        let response = execute(&mut gw.client, drifted, r#"{"query": "rust"}"#).await;
        assert!(response.ok, "{drifted}: {response:?}");
        assert_eq!(response.tool, "web_search");
        assert_eq!(
            response.repairs,
            [Repair { kind: RepairKind::ToolName as i32, original: drifted.into(), repaired: "web_search".into() }]
        );
    }
}

#[tokio::test]
async fn an_ambiguous_key_is_never_dispatched_and_names_every_candidate() {
    let http = backend::start().await;
    let mut gw = gateway(&http, false).await;
    for emitted in ["getorder", "Get-Order", "functions.GETORDER"] {
        let response = execute(&mut gw.client, emitted, "{}").await;
        assert_eq!(kind(&response), ErrorKind::UnknownTool);
        assert!(response.tool.is_empty() && response.repairs.is_empty());
        let err = error(&response);
        assert_eq!(
            err.message,
            format!("Tool '{emitted}' not found. Did you mean 'GetOrder' or 'get_order'? Available tools: {ALL}")
        );
        assert_eq!(err.suggestions, ["GetOrder", "get_order"]);
        assert!(err.retryable);
    }
}

#[tokio::test]
async fn unknown_names_get_the_nearest_name_and_the_inventory() {
    let http = backend::start().await;
    let mut gw = gateway(&http, false).await;
    let response = execute(&mut gw.client, "web_serch", r#"{"query": "x"}"#).await;
    let err = error(&response);
    assert_eq!(err.message, format!("Tool 'web_serch' not found. Did you mean 'web_search'? Available tools: {ALL}"));
    assert_eq!(err.suggestions, ["web_search"]);
    assert_eq!(err.available_tools.len(), 8);
    assert_eq!(err.available_tools_total, 8);

    let response = execute(&mut gw.client, "launch_rocket", "{}").await;
    assert_eq!(error_message(&response), format!("Tool 'launch_rocket' not found. Available tools: {ALL}"));
    assert!(error(&response).suggestions.is_empty());

    // A toolset is not a tool; an empty name is a name like any other.
    let response = execute(&mut gw.client, "readonly", "{}").await;
    assert_eq!(kind(&response), ErrorKind::UnknownTool);
    let response = execute(&mut gw.client, "", "{}").await;
    assert!(error_message(&response).starts_with("Tool '' not found. Available tools: "));
}

fn error_message(response: &toolgate::proto::v1::ExecuteResponse) -> String {
    error(response).message.clone()
}

#[tokio::test]
async fn strict_dispatches_exact_names_and_aliases_only_but_still_hints() {
    let http = backend::start().await;
    let mut gw = gateway(&http, true).await;
    let response = execute(&mut gw.client, "search", r#"{"query": "x"}"#).await;
    assert!(response.ok && response.tool == "web_search");
    let response = execute(&mut gw.client, "WebSearch", r#"{"query": "x"}"#).await;
    let err = error(&response);
    let all = ALL.replace(" 'get_order',", "");
    assert_eq!(err.message, format!("Tool 'WebSearch' not found. Did you mean 'web_search'? Available tools: {all}"));
    assert!(response.repairs.is_empty());
    // The request's own field relaxes the server's policy.
    let relaxed = gw.client.execute(request("WebSearch", r#"{"query": "x"}"#, &[], Some(false))).await.unwrap();
    assert!(relaxed.into_inner().ok);
}

#[tokio::test]
async fn a_drifted_name_never_reaches_a_tool_outside_the_available_set() {
    let http = backend::start().await;
    let mut gw = gateway(&http, false).await;
    // delete_file runs when the caller may use it…
    let allowed = gw.client.execute(request("DeleteFile", "{}", &[], None)).await.unwrap().into_inner();
    assert!(allowed.ok && allowed.tool == "delete_file");
    assert_eq!(http.seen.calls(), 1);
    // …and never when the agent's set leaves it out: drifted, exact, namespaced.
    for emitted in ["DeleteFile", "delete_file", "functions.delete_file", "delete_fil"] {
        let response = gw.client.execute(request(emitted, "{}", &["readonly"], None)).await.unwrap().into_inner();
        let err = error(&response);
        assert_eq!(ErrorKind::try_from(err.kind), Ok(ErrorKind::UnknownTool));
        // The only mention of delete_file is the emitted name itself.
        let rest = err.message.replacen(&format!("Tool '{emitted}' not found."), "", 1);
        assert!(!rest.contains("delete_file"), "{}", err.message);
        assert!(err.message.ends_with("Available tools: ['read_file', 'web_search']"), "{}", err.message);
        assert!(!err.suggestions.iter().any(|s| s == "delete_file"));
        assert_eq!(err.available_tools, ["read_file", "web_search"]);
        assert_eq!(err.available_tools_total, 2);
    }
    assert_eq!(http.seen.calls(), 1, "the denied tool never ran");
}

#[tokio::test]
async fn unknown_names_in_the_tool_set() {
    let http = backend::start().await;
    let mut gw = gateway(&http, false).await;
    // Non-strict: left out of the set.
    let response = gw.client.execute(request("read_file", "{}", &["read_file", "nope"], None)).await.unwrap();
    assert!(response.into_inner().ok);
    // Names that all match nothing give an empty set, never every tool.
    let response = gw.client.execute(request("read_file", "{}", &["nope"], None)).await.unwrap().into_inner();
    let err = error(&response);
    assert_eq!(err.message, "Tool 'read_file' not found. Available tools: []");
    assert_eq!(err.available_tools_total, 0);
    // Strict: the request fails with the Resolve message.
    let status =
        gw.client.execute(request("read_file", "{}", &["read_file", "reed_file"], Some(true))).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "Unknown tool 'reed_file'. Did you mean 'read_file'? Run 'toolgate tools list'.");
    // A malformed tool set is a malformed request.
    let status = gw.client.execute(request("read_file", "{}", &[""], None)).await.unwrap_err();
    assert_eq!((status.code(), status.message()), (Code::InvalidArgument, "tools[0] is empty"));
}

#[tokio::test]
async fn the_inventory_is_capped_and_counted() {
    let http = backend::start().await;
    let mut gw = TestGateway::registry(&registry(&http)).config("limits: {inventory_cap: 3}").start().await;
    let response = execute(&mut gw.client, "zzz", "{}").await;
    let err = error(&response);
    assert_eq!(
        err.message,
        "Tool 'zzz' not found. Available tools: ['GetOrder', 'calculator', 'current_time'] … and 5 more"
    );
    assert_eq!(err.available_tools, ["GetOrder", "calculator", "current_time"]);
    assert_eq!(err.available_tools_total, 8);
}

#[tokio::test]
async fn hostile_tool_names_are_answered_in_band_and_quoted_safely() {
    let http = backend::start().await;
    let mut gw = gateway(&http, false).await;
    let long = "x".repeat(100_000);
    let response = execute(&mut gw.client, &long, "{}").await;
    assert!(error_message(&response).starts_with(&format!("Tool '{}…' not found.", "x".repeat(64))));
    let response = execute(&mut gw.client, "rm\u{202e}fdp.exe\n\u{0}", "{}").await;
    assert!(
        error_message(&response).starts_with("Tool 'rm\\u202efdp.exe\\u000a\\u0000' not found."),
        "{}",
        error_message(&response)
    );
    let response = execute(&mut gw.client, "\u{200f}web_search", r#"{"query": "x"}"#).await;
    assert_eq!(kind(&response), ErrorKind::UnknownTool);
    assert!(execute(&mut gw.client, "web_search", r#"{"query": "still serving"}"#).await.ok);
}

/// Names as chat templates and output parsers leave them.
const WRAPPED: &[&str] = &[
    "web_search<|channel|>commentary",
    "<|start|>assistant<|channel|>commentary to=functions.web_search <|constrain|>json",
    "web_search <|constrain|>json",
    "[TOOL_CALLS]web_search",
    "<function=web_search>",
    "<tool_call>web_search</tool_call>",
    "web_search:0",
    "functions.WebSearch:1",
    "  .:web_search\n",
    "\"web_search\"",
    "`web_search()`",
    "brave:web_search",
    "brave.web_search",
    "brave__web_search",
    "BraveSearch__WebSearch",
];

#[tokio::test]
async fn names_wrapped_in_template_residue_are_repaired() {
    let http = backend::start().await;
    let mut gw = gateway(&http, false).await;
    for emitted in WRAPPED {
        let response = execute(&mut gw.client, emitted, r#"{"query": "rust"}"#).await;
        assert!(response.ok, "{emitted:?}: {response:?}");
        assert_eq!(
            response.repairs,
            [Repair {
                kind: RepairKind::ToolName as i32,
                original: emitted.to_string(),
                repaired: "web_search".into()
            }],
            "{emitted:?}"
        );
    }
    // Strict: none of them is repaired.
    let mut strict = gateway(&http, true).await;
    for emitted in WRAPPED {
        let response = execute(&mut strict.client, emitted, r#"{"query": "rust"}"#).await;
        assert_eq!(kind(&response), ErrorKind::UnknownTool, "{emitted:?}");
        assert!(response.repairs.is_empty());
    }
}

#[tokio::test]
async fn residue_with_two_meanings_or_unknown_words_is_never_dispatched() {
    let http = backend::start().await;
    let mut gw = gateway(&http, false).await;
    let suggested = |response: &toolgate::proto::v1::ExecuteResponse| error(response).suggestions.clone();
    // Two tools named; one word naming two tools.
    let response = execute(&mut gw.client, "web_search<|channel|>read_file", "{}").await;
    assert_eq!(kind(&response), ErrorKind::UnknownTool);
    assert_eq!(suggested(&response), ["read_file", "web_search"]);
    let response = execute(&mut gw.client, "<function=get-order>", "{}").await;
    assert_eq!(suggested(&response), ["GetOrder", "get_order"]);
    // A word that is not residue beside the name; a name glued to residue.
    for emitted in ["please web_search now", "web_search:force", "web_search.all"] {
        let response = execute(&mut gw.client, emitted, r#"{"query": "x"}"#).await;
        assert_eq!(kind(&response), ErrorKind::UnknownTool, "{emitted}");
    }
    let response = execute(&mut gw.client, "web_searchjson", r#"{"query": "x"}"#).await;
    assert_eq!(kind(&response), ErrorKind::UnknownTool);
    assert_eq!(suggested(&response), ["web_search"]);
    // The did-you-mean works on the word inside the residue.
    let response = execute(&mut gw.client, "<|channel|>web_serch json", "{}").await;
    assert_eq!(
        error_message(&response),
        format!("Tool '<|channel|>web_serch json' not found. Did you mean 'web_search'? Available tools: {ALL}")
    );
    // Residue never reaches outside the available set.
    let outside = request("<function=delete_file>", "{}", &["readonly"], None);
    let response = gw.client.execute(outside).await.unwrap().into_inner();
    assert_eq!(kind(&response), ErrorKind::UnknownTool);
    assert!(!suggested(&response).contains(&"delete_file".to_owned()), "{response:?}");
    assert_eq!(error(&response).available_tools, ["read_file", "web_search"]);
    assert_eq!(http.seen.calls(), 0, "delete_file never ran");
}

#[tokio::test]
async fn a_whole_call_in_the_arguments_names_the_tool() {
    let http = backend::start().await;
    let mut gw = gateway(&http, false).await;
    let whole = r#"{"name": "WebSearch", "arguments": {"query": "rust"}}"#;
    for emitted in ["", "<|tool_call|>"] {
        let response = execute(&mut gw.client, emitted, whole).await;
        assert!(response.ok, "{response:?}");
        let repairs: Vec<(i32, &str, &str)> =
            response.repairs.iter().map(|r| (r.kind, r.original.as_str(), r.repaired.as_str())).collect();
        assert_eq!(
            repairs,
            [
                (RepairKind::ToolName as i32, emitted, "web_search"),
                (RepairKind::ArgumentsEnvelope as i32, whole, r#"{"query":"rust"}"#),
            ]
        );
        assert_eq!(response.result_json, r#"{"query":"rust"}"#);
    }
    // The arguments as the JSON text of an object, as OpenAI sends them.
    let text = r#"{"type": "function", "name": "web_search", "arguments": "{\"query\": \"rust\"}"}"#;
    assert!(execute(&mut gw.client, "", text).await.ok);
    // That text is parsed like any arguments: a key given twice is refused.
    let twice = r#"{"name": "web_search", "arguments": "{\"query\": \"a\", \"query\": \"b\"}"}"#;
    assert_eq!(error_message(&execute(&mut gw.client, "", twice).await), "duplicate argument 'query'");
    // Only inside the available set; strict unwraps nothing.
    let outside = request("", r#"{"name": "delete_file", "arguments": {}}"#, &["readonly"], None);
    let response = gw.client.execute(outside).await.unwrap().into_inner();
    assert_eq!(kind(&response), ErrorKind::UnknownTool);
    assert_eq!(http.seen.calls(), 0);
    let strict = gw.client.execute(request("", whole, &[], Some(true))).await.unwrap().into_inner();
    assert!(error_message(&strict).starts_with("Tool '' not found."));
}
