//! The MCP front door and the federation client against the ecosystem's
//! own checks: the TypeScript reference SDK's client, and the
//! `@modelcontextprotocol/conformance` suite's server scenarios (against
//! the front door) and client scenarios (against toolgate's MCP client),
//! all with the real binary.

use serde_json::{json, Value};

use crate::{
    common::{mcp::node_command, repo, CatalogDir},
    mcp_front_door::{answer, catalogue, names, serve},
};

/// Runs the TypeScript SDK client; its JSON lines.
pub(crate) fn typescript(args: &[&str]) -> Vec<Value> {
    let out = node_command("node").arg(repo().join("tests/mcp/js/client.mjs")).args(args).output().unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    assert!(out.status.success(), "the TypeScript client failed: {lines:?}\n{}", String::from_utf8_lossy(&out.stderr));
    lines
}

#[test]
fn the_typescript_sdk_over_http_and_stdio_gets_the_catalogue_repaired() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let (_child, url, _log) = serve(dir.dir.path(), &[]);
    let calls = [
        r#"WebSearch={"query": "rust"}"#,
        r#"web_serch={"query": "x"}"#,
        r#"web_search={"query": 5}"#,
        // Malformed params, sent raw: a JSON-RPC error the SDK raises as one
        // (-32602), not a failed transport.
        r#"raw={"name": "web_search", "arguments": 5}"#,
    ];
    let binary = env!("CARGO_BIN_EXE_toolgate");
    let stdio = json!([binary, "mcp-stdio", "--catalog", "registry"]).to_string();
    let root = dir.dir.path().display().to_string();
    for args in [vec!["--url", url.as_str()], vec!["--stdio", stdio.as_str(), "--cwd", root.as_str()]] {
        let lines = typescript(&[args.as_slice(), calls.as_slice()].concat());
        assert_eq!(lines[0]["server"]["name"], "toolgate");
        assert_eq!(names(&lines), ["calculator", "current_time", "echo", "mark", "web_search"]);
        let repaired = &answer(&lines, "WebSearch")["result"];
        assert_eq!(repaired["structuredContent"], json!({"query": "rust"}), "{repaired}");
        assert_eq!(repaired["_meta"]["dev.toolgate/repairs"][0]["kind"], "TOOL_NAME");
        let unknown = &answer(&lines, "web_serch")["error"];
        assert_eq!(unknown["code"], -32602, "{unknown}");
        assert!(unknown["message"].as_str().unwrap().contains("Did you mean 'web_search'?"), "{unknown}");
        let invalid = &answer(&lines, "web_search")["result"];
        assert_eq!(invalid["isError"], true);
        assert_eq!(invalid["_meta"]["dev.toolgate/error_kind"], "INVALID_ARGUMENTS");
        let malformed = &answer(&lines, "raw")["error"];
        assert_eq!(malformed["code"], -32602, "{malformed}");
    }
    assert!(!dir.registry().join("ran").exists());
}

/// The server scenarios that apply to a tools server. Left out: logging,
/// completion, resources, prompts, sampling, elicitation and progress (the
/// gateway offers none of them), image, audio, embedded-resource and mixed
/// content (a tool's result is text or JSON), and SSE polling (a server
/// closing its own stream mid-call).
const SERVER_SCENARIOS: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-error",
    "json-schema-2020-12",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

/// Runs `conformance ARGS`; whether it ran checks and none failed (a
/// warning, such as a reconnection a little late on a loaded machine, is
/// not a failure), and its output.
fn conformance(args: &[&str]) -> (bool, String) {
    let out = node_command("conformance").args(args).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let passed = out.status.success()
        && text.contains("Passed: ")
        && text.contains(" 0 failed,")
        && !text.contains("Passed: 0/0");
    (passed, text)
}

#[test]
fn the_conformance_suites_server_scenarios_for_a_tools_server_pass() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: test_simple_text\n    description: Answers with text.\n    \
         backend: {command: {argv: [sh, -c, 'echo \"{\\\"ok\\\": true, \\\"result\\\": \\\"This is a simple text response for testing.\\\"}\"']}}\n  \
         - name: test_error_handling\n    description: Always fails.\n    \
         backend: {command: {argv: [sh, -c, 'echo \"{\\\"ok\\\": false, \\\"error\\\": \\\"This tool always fails.\\\"}\"']}}\n  \
         - name: json_schema_2020_12_tool\n    description: Tool with JSON Schema 2020-12 features\n    \
         parameters:\n      $schema: https://json-schema.org/draft/2020-12/schema\n      type: object\n      \
         $defs: {address: {type: object, properties: {street: {type: string}, city: {type: string}}}}\n      \
         properties: {name: {type: string}, address: {$ref: '#/$defs/address'}}\n      additionalProperties: false\n    \
         backend: {builtin: echo}\n",
    );
    let (_child, url, log) = serve(dir.dir.path(), &[]);
    for scenario in SERVER_SCENARIOS {
        let (passed, text) = conformance(&["server", "--url", &url, "--scenario", scenario]);
        assert!(passed, "{scenario}:\n{text}\n{}", log.text());
    }
}

#[test]
fn the_federation_client_passes_the_conformance_suites_client_scenarios() {
    let script = repo().join("tests/mcp/conformance_client.sh");
    let command = format!("bash {}", script.display());
    for scenario in ["initialize", "tools_call", "sse-retry"] {
        let args = ["client", "--command", &command, "--scenario", scenario];
        let (mut passed, mut text) = conformance(&args);
        if !passed {
            // The suite times the client by the wall clock (sse-retry fails
            // a reconnection more than 500 ms late), and the client is a
            // process started per scenario: on a loaded machine one run may
            // miss. A second run that fails too is a failure.
            eprintln!("{scenario}: failed once, run again:\n{text}");
            (passed, text) = conformance(&args);
        }
        assert!(passed, "{scenario}:\n{text}");
    }
}

/// The suite's tools scenarios through the front door against a federated
/// server holding the suite's test tools: every content type, progress and
/// errors arrive as the federated server sent them. Not run, with the
/// reason: `tools-call-with-logging` (a federated server's logging is not
/// relayed, docs/mcp.md), `tools-call-sampling` and
/// `tools-call-elicitation` (a federated server's requests to the caller's
/// client are not relayed).
#[test]
fn the_suites_tools_scenarios_pass_through_a_federated_server() {
    let dir = CatalogDir::new();
    let server = crate::common::mcp::stdio_server("suite", "conformance_tools_server.py", &[], "");
    dir.file("registry/tools.yaml", &format!("mcp_servers:\n{server}"));
    let (_child, url, log) = serve(dir.dir.path(), &[]);
    for scenario in [
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-with-progress",
        "tools-call-error",
    ] {
        let (passed, text) = conformance(&["server", "--url", &url, "--scenario", scenario]);
        assert!(passed, "{scenario}:\n{text}\n{}", log.text());
    }
}
