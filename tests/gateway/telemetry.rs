//! Telemetry in memory: the SERVER span of each RPC joined to the caller's
//! trace, the `execute_tool` span with the GenAI attributes, repair and hint
//! events, privacy of emitted names and content, trace context passed to
//! backends, and the metrics.

use opentelemetry::trace::{SpanKind, Status};
use tonic::Request;
use toolgate::{
    proto::v1::{ExecuteRequest, ResolveRequest},
    telemetry::Observer,
};

use crate::common::{
    backend::{self, HttpBackend},
    mcp::stdio_server,
    telemetry::{attribute, events, Point, Recorded},
    test_env, CatalogDir, Client, TestGateway,
};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn registry(http: &HttpBackend) -> String {
    format!(
        r#"
tools:
  - name: web_search
    description: Search the web.
    parameters:
      type: object
      properties: {{query: {{type: string}}, limit: {{type: integer, maximum: 10}}}}
      required: [query]
      additionalProperties: false
    backend: {{http: {{url: "{}"}}}}
  - name: lookup_order
    description: Look up an order.
    backend: {{http: {{url: "{}"}}}}
"#,
        http.url("/echo"),
        http.url("/not_found")
    )
}

async fn gateway(http: &HttpBackend, observer: Observer) -> TestGateway {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(http));
    TestGateway::dir(&dir).observer(observer).start().await
}

async fn call(client: &mut Client, tool: &str, arguments: &str, traceparent: &str) {
    let mut request = Request::new(ExecuteRequest {
        tool: tool.into(),
        arguments_json: arguments.into(),
        call_id: "call_42".into(),
        ..Default::default()
    });
    request.metadata_mut().insert("traceparent", traceparent.parse().unwrap());
    client.execute(request).await.unwrap();
}

fn span<'a>(spans: &'a [opentelemetry_sdk::trace::SpanData], name: &str) -> &'a opentelemetry_sdk::trace::SpanData {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name}: {:?}", spans.iter().map(|s| s.name.to_string()).collect::<Vec<_>>()))
}

#[tokio::test]
async fn a_repaired_call_is_a_server_span_and_an_execute_tool_span_in_the_callers_trace() {
    let http = backend::start().await;
    let (recorded, observer) = Recorded::start(false);
    let mut gw = gateway(&http, observer).await;
    call(&mut gw.client, "WebSearch", r#"{"Query": "rust"}"#, CALLER).await;
    let spans = recorded.spans();

    let server = span(&spans, "toolgate.v1.ToolGatewayService/Execute");
    assert_eq!(server.span_kind, SpanKind::Server);
    assert_eq!(server.span_context.trace_id().to_string(), TRACE_ID, "joined to the caller's trace");
    assert_eq!(server.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert_eq!(attribute(server, "rpc.system.name").as_deref(), Some("grpc"));
    assert_eq!(attribute(server, "rpc.method").as_deref(), Some("toolgate.v1.ToolGatewayService/Execute"));
    assert_eq!(attribute(server, "rpc.response.status_code").as_deref(), Some("OK"));

    let tool = span(&spans, "execute_tool web_search");
    assert_eq!(tool.span_kind, SpanKind::Internal);
    assert_eq!(tool.parent_span_id, server.span_context.span_id());
    assert_eq!(tool.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(attribute(tool, "gen_ai.operation.name").as_deref(), Some("execute_tool"));
    assert_eq!(attribute(tool, "gen_ai.tool.name").as_deref(), Some("web_search"));
    assert_eq!(attribute(tool, "gen_ai.tool.call.id").as_deref(), Some("call_42"));
    assert_eq!(attribute(tool, "gen_ai.tool.type").as_deref(), Some("function"));
    assert_eq!(attribute(tool, "error.type"), None, "a call that succeeded after a repair is not an error");
    assert_ne!(tool.status, Status::error(""));
    let events = events(tool);
    let repairs: Vec<_> = events.iter().filter(|(n, _)| n == "toolgate.repair").map(|(_, a)| a).collect();
    assert_eq!(repairs.len(), 2);
    assert_eq!(repairs[0]["toolgate.repair.kind"], "tool_name");
    assert_eq!(repairs[0]["toolgate.repair.from"], "WebSearch");
    assert_eq!(repairs[0]["toolgate.repair.to"], "web_search");
    assert_eq!(repairs[1]["toolgate.repair.kind"], "argument_name");
    assert_eq!(
        (repairs[1]["toolgate.repair.from"].as_str(), repairs[1]["toolgate.repair.to"].as_str()),
        ("Query", "query")
    );

    // The HTTP backend joined the trace as a child of the execute_tool span.
    let sent = http.seen.last_header("traceparent").expect("traceparent sent");
    assert_eq!(sent, format!("00-{TRACE_ID}-{}-01", tool.span_context.span_id()));
}

#[tokio::test]
async fn an_unknown_tool_is_tool_not_found_with_hints_and_no_emitted_name_in_the_span_name() {
    let http = backend::start().await;
    let (recorded, observer) = Recorded::start(false);
    let mut gw = gateway(&http, observer).await;
    call(&mut gw.client, "web_serch_secret_project", "{}", CALLER).await;
    call(&mut gw.client, "web_serch", "{}", CALLER).await;
    let spans = recorded.spans();
    let tools: Vec<_> = spans.iter().filter(|s| s.name.starts_with("execute_tool")).collect();
    assert_eq!(tools.len(), 2);
    for tool in &tools {
        assert_eq!(tool.name, "execute_tool", "an emitted unknown name never names a span");
        assert_eq!(attribute(tool, "error.type").as_deref(), Some("tool_not_found"));
        assert_eq!(attribute(tool, "gen_ai.tool.name"), None);
        assert!(matches!(tool.status, Status::Error { .. }));
    }
    let hints: Vec<_> = events(tools[1]).into_iter().filter(|(n, _)| n == "toolgate.hint").map(|(_, a)| a).collect();
    assert_eq!(hints[0]["toolgate.hint.kind"], "did_you_mean");
    assert_eq!(hints[0]["toolgate.hint.suggestions"], "web_search");
    assert_eq!(hints[1]["toolgate.hint.kind"], "available_tools");
    assert_eq!(hints[1]["toolgate.hint.suggestions"], "calculator,current_time,echo,lookup_order,web_search");
    assert!(spans.iter().all(|s| !s.name.contains("serch")));
}

#[tokio::test]
async fn invalid_arguments_and_tool_errors_have_their_error_type_and_hints() {
    let http = backend::start().await;
    let (recorded, observer) = Recorded::start(false);
    let mut gw = gateway(&http, observer).await;
    call(&mut gw.client, "web_search", r#"{"q": "x", "limit": 99}"#, CALLER).await;
    call(&mut gw.client, "lookup_order", "{}", CALLER).await;
    let spans = recorded.spans();
    let invalid = span(&spans, "execute_tool web_search");
    assert_eq!(attribute(invalid, "error.type").as_deref(), Some("invalid_arguments"));
    let hints: Vec<_> = events(invalid).into_iter().filter(|(n, _)| n == "toolgate.hint").map(|(_, a)| a).collect();
    let kinds: Vec<&str> = hints.iter().map(|h| h["toolgate.hint.kind"].as_str()).collect();
    assert_eq!(kinds, ["expected_parameters", "violations"]);
    assert_eq!(hints[0]["toolgate.hint.suggestions"], "query,limit");
    assert_eq!(hints[1]["toolgate.hint.suggestions"], "/query,/q,/limit", "fields only: values are content");
    let refused = span(&spans, "execute_tool lookup_order");
    assert_eq!(attribute(refused, "error.type").as_deref(), Some("tool_error"));
}

#[tokio::test]
async fn content_is_recorded_only_on_opt_in() {
    let http = backend::start().await;
    for opt_in in [false, true] {
        let (recorded, observer) = Recorded::start(opt_in);
        let mut gw = gateway(&http, observer).await;
        call(&mut gw.client, "web_search", "{'query': 'private words',}", CALLER).await;
        let spans = recorded.spans();
        let tool = span(&spans, "execute_tool web_search");
        let arguments = attribute(tool, "gen_ai.tool.call.arguments");
        let result = attribute(tool, "gen_ai.tool.call.result");
        let repair = events(tool).into_iter().find(|(n, _)| n == "toolgate.repair").unwrap().1;
        if opt_in {
            assert_eq!(arguments.as_deref(), Some("{'query': 'private words',}"));
            assert_eq!(result.as_deref(), Some(r#"{"query":"private words"}"#));
            assert_eq!(repair["toolgate.repair.to"], r#"{"query": "private words"}"#);
        } else {
            assert_eq!((arguments, result), (None, None));
            assert_eq!(repair["toolgate.repair.kind"], "arguments_json");
            assert!(!repair.contains_key("toolgate.repair.from"));
            let all = format!("{spans:?}");
            assert!(!all.contains("private words"), "no argument text without the opt-in");
        }
    }
}

#[tokio::test]
async fn a_malformed_traceparent_starts_a_new_trace_and_resolve_has_its_span() {
    let http = backend::start().await;
    let (recorded, observer) = Recorded::start(false);
    let mut gw = gateway(&http, observer).await;
    let mut request =
        Request::new(ResolveRequest { names: vec!["web_serch".into(), "web_search".into()], strict: None });
    request.metadata_mut().insert("traceparent", "00-zzzz-not-a-trace".parse().unwrap());
    gw.client.resolve(request).await.unwrap();
    let spans = recorded.spans();
    let resolve = span(&spans, "toolgate.v1.ToolGatewayService/Resolve");
    assert!(resolve.span_context.trace_id().to_string() != "00000000000000000000000000000000");
    assert_eq!(resolve.parent_span_id.to_string(), "0000000000000000", "a root span: a new trace");
    let hint = events(resolve).into_iter().find(|(n, _)| n == "toolgate.hint").expect("a hint event").1;
    assert_eq!(hint["toolgate.hint.kind"], "did_you_mean");
    assert_eq!(hint["toolgate.hint.suggestions"], "web_search");
}

fn sum(points: &[Point], name: &str, filter: &[(&str, &str)]) -> f64 {
    points
        .iter()
        .filter(|p| p.name == name && filter.iter().all(|(k, v)| p.attributes.get(*k).map(String::as_str) == Some(*v)))
        .map(|p| p.value)
        .sum()
}

#[tokio::test]
async fn metrics_count_calls_repairs_hints_and_violations_by_canonical_tool() {
    let http = backend::start().await;
    let (recorded, observer) = Recorded::start(false);
    let mut gw = gateway(&http, observer).await;
    call(&mut gw.client, "WebSearch", r#"{"query": "a"}"#, CALLER).await;
    call(&mut gw.client, "web_search", r#"{"query": "b"}"#, CALLER).await;
    call(&mut gw.client, "web_search", r#"{"limit": 99}"#, CALLER).await;
    call(&mut gw.client, "launch_rocket_secretly", "{}", CALLER).await;
    let points = recorded.points();
    let calls = "toolgate.tool.calls";
    assert_eq!(sum(&points, calls, &[("gen_ai.tool.name", "web_search"), ("toolgate.outcome", "ok")]), 2.0);
    assert_eq!(
        sum(
            &points,
            calls,
            &[
                ("gen_ai.tool.name", "web_search"),
                ("toolgate.outcome", "invalid_arguments"),
                ("error.type", "invalid_arguments")
            ]
        ),
        1.0
    );
    assert_eq!(sum(&points, calls, &[("gen_ai.tool.name", "_OTHER"), ("toolgate.outcome", "unknown_tool")]), 1.0);
    assert_eq!(sum(&points, "toolgate.tool.repairs", &[("toolgate.repair.kind", "tool_name")]), 1.0);
    assert_eq!(sum(&points, "toolgate.tool.hints", &[("toolgate.hint.kind", "available_tools")]), 1.0);
    assert_eq!(sum(&points, "toolgate.tool.hints", &[("toolgate.hint.kind", "expected_parameters")]), 1.0);
    assert_eq!(sum(&points, "toolgate.tool.violations", &[("gen_ai.tool.name", "web_search")]), 2.0);
    assert_eq!(sum(&points, "toolgate.tool.duration", &[("gen_ai.tool.name", "web_search")]), 3.0);
    assert_eq!(
        sum(
            &points,
            "rpc.server.call.duration",
            &[("rpc.method", "toolgate.v1.ToolGatewayService/Execute"), ("rpc.response.status_code", "OK")]
        ),
        4.0
    );
    let labels = format!("{points:?}");
    assert!(!labels.contains("launch_rocket") && !labels.contains("WebSearch"), "no emitted name is a label");
}

#[tokio::test]
async fn a_tool_of_an_mcp_server_is_an_extension_also_when_its_answer_is_replayed() {
    let dir = CatalogDir::new();
    let registry = format!(
        "mcp_servers:\n{}tools:\n  - name: local_echo\n    description: Echo.\n    backend: {{builtin: echo}}\n",
        stdio_server("notes", "notes_server.py", &[], "")
    );
    dir.file("registry/tools.yaml", &registry);
    let (recorded, observer) = Recorded::start(false);
    let mut gw = TestGateway::dir(&dir).env(test_env(&[])).observer(observer).start().await;
    // The second answer comes from the once-only store, not the call.
    for (tool, key, replayed) in [("list_notes", "k1", false), ("list_notes", "k1", true), ("local_echo", "", false)] {
        let request = ExecuteRequest { tool: tool.into(), idempotency_key: key.into(), ..Default::default() };
        let response = gw.client.execute(request).await.unwrap().into_inner();
        assert!(response.ok && response.replayed == replayed, "{response:?}");
    }
    let spans = recorded.spans();
    let types: Vec<_> = spans
        .iter()
        .filter(|s| s.name.starts_with("execute_tool"))
        .map(|s| (s.name.to_string(), attribute(s, "gen_ai.tool.type").unwrap_or_default()))
        .collect();
    assert_eq!(
        types,
        [
            ("execute_tool list_notes".to_string(), "extension".to_string()),
            ("execute_tool list_notes".to_string(), "extension".to_string()),
            ("execute_tool local_echo".to_string(), "function".to_string()),
        ]
    );
    gw.shutdown().await;
}
