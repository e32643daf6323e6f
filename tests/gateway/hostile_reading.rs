//! Hardening, round 4, the reader: text shaped to make a reader work
//! quadratically (the attack's shapes, each near the 1 MiB argument limit)
//! is answered by the real binary, as the name or the arguments, while the
//! gateway goes on answering other calls.

use std::time::Duration;

use toolgate::proto::v1::{tool_gateway_service_client::ToolGatewayServiceClient, ErrorKind, ExecuteRequest};

use crate::common::{serve_registry, CatalogDir, SEARCH_REGISTRY};

/// `head`, then `unit` repeated up to `size` bytes.
fn shape(head: &str, unit: &str, size: usize) -> String {
    let mut text = head.to_owned();
    while text.len() + unit.len() <= size {
        text.push_str(unit);
    }
    text
}

/// Every shape the attack held a worker with, at just under 1 MiB: where
/// it is sent (the name or the arguments) and under which name.
fn hostile() -> Vec<(&'static str, String, String)> {
    let size = 1024 * 1024 - 16;
    let arguments = |text: String| ("x".to_owned(), text);
    let mut shapes = vec![
        ("braces as arguments", arguments(shape("x{}\"", "{", size))),
        ("braces as the name", (shape("x{}\"", "{", size), String::new())),
        ("braces after a real tool's arguments", ("web_search".to_owned(), shape(r#"{"query": "a"}"#, "{", size))),
        ("dotted words", arguments(shape("x{} ", "a.", size))),
        ("hyphened words", arguments(shape("x{} ", "a-", size))),
        ("unclosed elements", arguments(shape("", "<a>", size))),
        ("unclosed comments", arguments(shape(r#"{"a": 1 "#, "/* ", size))),
        ("call wrappers", arguments(shape("", "<tool_call>", size))),
        ("function tags", arguments(shape("", "<function=", size))),
        ("unclosed elements with spaces", arguments(shape("", "<a ", size))),
        ("calls in the name", (shape("x{} ", "a(b=\"", size), String::new())),
    ];
    // The same shapes after a complete call written whole.
    shapes.push((
        "a call, then unclosed elements",
        arguments(shape(r#"{"name": "web_search", "arguments": {}}"#, "<a>", size)),
    ));
    shapes.into_iter().map(|(what, (tool, arguments))| (what, tool, arguments)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_shaped_against_the_reader_is_answered_and_holds_no_other_call() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", SEARCH_REGISTRY);
    let (_child, _lines, listening) = serve_registry(dir.dir.path(), &[]);
    let addr = format!("http://{}", listening.split(' ').next().unwrap());
    let client = ToolGatewayServiceClient::connect(addr).await.unwrap().max_encoding_message_size(8 << 20);

    // All at once, on one connection: on quadratic readers these held the
    // gateway's two workers for hours.
    let mut calls = tokio::task::JoinSet::new();
    for (what, tool, arguments) in hostile() {
        let mut client = client.clone();
        calls.spawn(async move {
            let mut request =
                tonic::Request::new(ExecuteRequest { tool, arguments_json: arguments, ..Default::default() });
            // A bound for a broken build only: a linear reader answers in milliseconds.
            request.set_timeout(Duration::from_secs(300));
            let answer = client.execute(request).await.unwrap_or_else(|s| panic!("{what}: {s:?}")).into_inner();
            (what, answer)
        });
    }
    // A call beside them is answered.
    let mut beside = client.clone();
    let request = ExecuteRequest {
        tool: "web_search".into(),
        arguments_json: r#"{"query": "rust"}"#.into(),
        ..Default::default()
    };
    let answer = beside.execute(request).await.unwrap().into_inner();
    assert!(answer.ok, "{answer:?}");

    while let Some(joined) = calls.join_next().await {
        let (what, answer) = joined.unwrap();
        assert!(!answer.ok, "{what}: ran: {answer:?}");
        let error = answer.error.unwrap();
        let kind = ErrorKind::try_from(error.kind).unwrap();
        assert!(
            matches!(kind, ErrorKind::InvalidArguments | ErrorKind::UnknownTool),
            "{what}: {kind:?}: {}",
            error.message
        );
        assert!(error.message.len() < 64 * 1024, "{what}: an answer as long as the text");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_size_limit_holds_the_raw_name_and_arguments_before_any_reading() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", SEARCH_REGISTRY);
    let (_child, _lines, listening) = serve_registry(dir.dir.path(), &[]);
    let addr = format!("http://{}", listening.split(' ').next().unwrap());
    let mut client = ToolGatewayServiceClient::connect(addr).await.unwrap().max_encoding_message_size(8 << 20);
    let over = 1024 * 1024 + 1;
    for (tool, arguments, expected) in [
        (shape("x{}\"", "{", over), String::new(), format!("the tool name is {over} bytes long; the limit is 1 MiB")),
        ("x".to_owned(), shape("x{}\"", "{", over), format!("arguments are {over} bytes long; the limit is 1 MiB")),
        (
            "web_search".to_owned(),
            shape(r#"{"query": ""#, "a", over - 2) + "\"}",
            format!("arguments are {over} bytes long; the limit is 1 MiB"),
        ),
    ] {
        let request = ExecuteRequest { tool, arguments_json: arguments, ..Default::default() };
        let answer = client.execute(request).await.unwrap().into_inner();
        let error = answer.error.unwrap();
        assert_eq!(ErrorKind::try_from(error.kind).unwrap(), ErrorKind::InvalidArguments);
        assert_eq!(error.message, expected);
    }
}

#[tokio::test]
async fn a_call_naming_a_tool_outside_the_grants_reads_as_one_naming_nothing() {
    use crate::common::TestGateway;
    let dir = CatalogDir::new();
    let tool = |name: &str| {
        format!(
            "  - name: {name}\n    description: x\n    \
             parameters: {{type: object, properties: {{q: {{type: string}}}}, required: [q]}}\n    \
             backend: {{builtin: echo}}\n"
        )
    };
    dir.file("registry/tools.yaml", &format!("tools:\n{}{}", tool("visible"), tool("secret_tool")));
    let principal =
        format!("principals: [{{name: bot, api_key_sha256: {}, tools: [visible]}}]", toolgate::identity::hash_key("k"));
    let gw = TestGateway::dir(&dir).config(&principal).start().await;
    let answer = |tool: &str| {
        let mut request = tonic::Request::new(ExecuteRequest {
            tool: tool.into(),
            arguments_json: r#"{"name": "visible", "arguments": {"q": "x"}}"#.into(),
            ..Default::default()
        });
        request.metadata_mut().insert("authorization", "Bearer k".parse().unwrap());
        let mut client = gw.client.clone();
        async move { client.execute(request).await.unwrap().into_inner() }
    };
    // A hidden tool's name (as it is, or drifted) and names of nothing: the
    // same reading, the call written in the arguments.
    for (hidden, absent) in [("secret_tool", "other_tool"), ("secret_tol", "zzz_tol")] {
        let (hidden_answer, absent_answer) = (answer(hidden).await, answer(absent).await);
        for response in [&hidden_answer, &absent_answer] {
            assert!(response.ok, "{hidden} / {absent}: {response:?}");
            assert_eq!(response.tool, "visible");
            assert_eq!(response.result_json, r#"{"q":"x"}"#);
        }
    }
}

#[tokio::test]
async fn a_second_call_without_arguments_is_never_dropped() {
    use crate::common::{execute, TestGateway};
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: add_marker\n    description: x\n    \
         parameters: {type: object, properties: {id: {type: string}}, required: [id]}\n    \
         backend: {builtin: echo}\n  \
         - name: delete_marker\n    description: x\n    backend: {builtin: echo}\n",
    );
    let mut gw = TestGateway::dir(&dir).start().await;
    let seconds = [
        " delete_marker()",
        "\n<tool_call>\n<function=delete_marker>\n</function>\n</tool_call>",
        "\n<tool_call>{\"name\": \"delete_marker\"}</tool_call>",
        "\n<tool_call>{\"name\": \"delete_marker\", \"arguments\": {}}</tool_call>",
        "\nAction: delete_marker\nAction Input: {}",
        "\nAction: delete_marker",
    ];
    for second in seconds {
        // After the first call's arguments, and after the first call written whole.
        for (tool, first) in
            [("add_marker", r#"{"id": "m1"}"#), ("", r#"{"name": "add_marker", "arguments": {"id": "m1"}}"#)]
        {
            let response = execute(&mut gw.client, tool, &format!("{first}{second}")).await;
            let error = response.error.as_ref().unwrap_or_else(|| panic!("{first}{second:?} ran: {response:?}"));
            assert_eq!(error.kind, ErrorKind::InvalidArguments as i32, "{tool:?} {second:?}: {error:?}");
            let named = ["('add_marker', then 'delete_marker')", "('delete_marker')"];
            let said = named.map(|n| format!("2 tool calls arrived in one {n}, and none was run"));
            assert!(said.iter().any(|said| error.message.starts_with(said)), "{second:?}: {error:?}");
        }
    }
    // Prose after the arguments is no call: the first runs.
    let response = execute(&mut gw.client, "add_marker", r#"{"id": "m1"} Done (marker added)."#).await;
    assert!(response.ok, "{response:?}");
}
