//! Telemetry over the wire: the real `toolgate serve` exporting to OTLP
//! receivers started here (gRPC, plain or TLS with gzip; HTTP/protobuf,
//! plain or TLS with gzip); and a collector that is down, refuses or is
//! slow, which must cost nothing but one warning, and one the gateway sends
//! more spans than it can take, which drops them with one warning.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use toolgate::proto::v1::{tool_gateway_service_client::ToolGatewayServiceClient, ErrorKind, ExecuteRequest};

use crate::common::{
    listening_after,
    otlp::{self, receiver, Received},
    pki::Ca,
    serve_registry, toolgate, CatalogDir, Client, Reaped, Stderr,
};

const REGISTRY: &str = "tools:\n  - name: web_search\n    description: Search.\n    parameters: {type: object, properties: {query: {type: string}}, required: [query], additionalProperties: false}\n    backend: {builtin: echo}\n";

/// `toolgate serve` on [`REGISTRY`], exporting to `collector` with the
/// `OTEL_*` settings in `env`, and a client of it.
async fn exporting(collector: std::net::SocketAddr, env: &[(&str, &str)]) -> (Reaped, Client, Stderr, CatalogDir) {
    exporting_to(&format!("http://{collector}"), CatalogDir::new(), env).await
}

/// As [`exporting`], to `endpoint`, in `dir`.
async fn exporting_to(endpoint: &str, dir: CatalogDir, env: &[(&str, &str)]) -> (Reaped, Client, Stderr, CatalogDir) {
    dir.file("registry/tools.yaml", REGISTRY);
    let env = [env, &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)]].concat();
    let (child, lines, listening) = serve_registry(dir.dir.path(), &env);
    let addr = listening.split(' ').next().unwrap();
    let client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();
    (child, client, lines, dir)
}

fn traceparent(trace: &str) -> String {
    format!("00-{trace}-00f067aa0ba902b7-01")
}

async fn call(client: &mut Client, tool: &str, args: &str, trace: &str) -> ErrorKind {
    let mut request =
        tonic::Request::new(ExecuteRequest { tool: tool.into(), arguments_json: args.into(), ..Default::default() });
    request.metadata_mut().insert("traceparent", traceparent(trace).parse().unwrap());
    let response = client.execute(request).await.unwrap().into_inner();
    response.error.map(|e| ErrorKind::try_from(e.kind).unwrap()).unwrap_or(ErrorKind::Unspecified)
}

/// Sends SIGTERM and waits; the rest of stderr.
fn stop(child: Reaped, lines: Stderr) -> (Option<i32>, Vec<String>) {
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    (child.wait().unwrap().code(), rest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_metrics_reach_an_otlp_receiver_in_the_callers_traces() {
    let (collector, received) = receiver(Duration::ZERO).await;
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "100"), ("OTEL_METRIC_EXPORT_INTERVAL", "200")];
    let (child, mut client, lines, _dir) = exporting(collector, &env).await;
    let repaired = "11111111111111111111111111111111";
    let unknown = "22222222222222222222222222222222";
    let invalid = "33333333333333333333333333333333";
    assert_eq!(call(&mut client, "WebSearch", r#"{"query": "x"}"#, repaired).await, ErrorKind::Unspecified);
    assert_eq!(call(&mut client, "launch_rocket", "{}", unknown).await, ErrorKind::UnknownTool);
    assert_eq!(call(&mut client, "web_search", r#"{"q": "x"}"#, invalid).await, ErrorKind::InvalidArguments);
    let (code, _) = tokio::task::spawn_blocking(move || stop(child, lines)).await.unwrap();
    assert_eq!(code, Some(0));

    // Everything pending was flushed on the way out.
    let spans = received.span_list();
    let in_trace = |trace: &str, name: &str| spans.iter().find(|(t, n, _)| t == trace && n == name).cloned();
    for trace in [repaired, unknown, invalid] {
        assert!(
            in_trace(trace, "toolgate.v1.ToolGatewayService/Execute").is_some(),
            "server span of {trace}: {spans:?}"
        );
    }
    assert!(in_trace(repaired, "execute_tool web_search").is_some(), "{spans:?}");
    let (_, _, attributes) = in_trace(unknown, "execute_tool").expect("the unknown call's span");
    assert!(attributes.iter().any(|(k, v)| k == "error.type" && v.contains("tool_not_found")), "{attributes:?}");
    let (_, _, attributes) = in_trace(invalid, "execute_tool web_search").expect("the invalid call's span");
    assert!(attributes.iter().any(|(k, v)| k == "error.type" && v.contains("invalid_arguments")), "{attributes:?}");
    assert!(received.service_names().iter().all(|s| s.contains("toolgate")), "{:?}", received.service_names());
    let metrics = received.metric_names();
    for name in ["rpc.server.call.duration", "toolgate.tool.calls", "toolgate.tool.duration", "toolgate.tool.repairs"] {
        assert!(metrics.contains(&name.to_owned()), "{name} in {metrics:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_span_limit_and_sampler_variables_apply() {
    let (collector, received) = receiver(Duration::ZERO).await;
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_METRICS_EXPORTER", "none"),
        ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "1"),
        ("OTEL_TRACES_SAMPLER", "parentbased_always_off"),
    ];
    let (child, mut client, lines, _dir) = exporting(collector, &env).await;
    // Sampled by the caller: kept, whatever the root sampler says.
    let sampled = "66666666666666666666666666666666";
    assert_eq!(call(&mut client, "web_search", r#"{"query": "x"}"#, sampled).await, ErrorKind::Unspecified);
    // No caller's trace: the root sampler (always off) drops it.
    let request =
        ExecuteRequest { tool: "web_search".into(), arguments_json: r#"{"query": "y"}"#.into(), ..Default::default() };
    client.execute(request).await.unwrap();
    let (code, _) = tokio::task::spawn_blocking(move || stop(child, lines)).await.unwrap();
    assert_eq!(code, Some(0));
    let spans = received.span_list();
    assert_eq!(spans.len(), 2, "the sampled call's SERVER and execute_tool spans only: {spans:?}");
    assert!(spans.iter().all(|(trace, _, _)| trace == sampled), "{spans:?}");
    assert!(spans.iter().all(|(_, _, attributes)| attributes.len() == 1), "one attribute a span: {spans:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn span_exports_carry_the_configured_headers() {
    let (collector, received) = receiver(Duration::ZERO).await;
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_METRICS_EXPORTER", "none"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-general=ignored"),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "authorization=Bearer%20abc,x-tenant=blue"),
    ];
    let (child, mut client, lines, _dir) = exporting(collector, &env).await;
    let trace = "44444444444444444444444444444444";
    assert_eq!(call(&mut client, "web_search", r#"{"query": "x"}"#, trace).await, ErrorKind::Unspecified);
    let (code, _) = tokio::task::spawn_blocking(move || stop(child, lines)).await.unwrap();
    assert_eq!(code, Some(0));
    assert!(received.span_list().iter().any(|(t, n, _)| t == trace && n == "execute_tool web_search"));
    let exports = received.span_metadata.lock().unwrap().clone();
    assert!(!exports.is_empty());
    for metadata in exports {
        assert_eq!(metadata.get("authorization").and_then(|v| v.to_str().ok()), Some("Bearer abc"));
        assert_eq!(metadata.get("x-tenant").and_then(|v| v.to_str().ok()), Some("blue"));
        assert!(metadata.get("x-general").is_none(), "the traces variable is used, not both");
        assert!(metadata.get("grpc-encoding").is_none(), "not compressed unless asked");
    }
}

/// A collector's certificate, signed by a CA of the test's own (no system
/// root), and that CA's certificate written into `dir` as `ca.pem`.
fn collector_identity(dir: &CatalogDir) -> (String, String) {
    let ca = Ca::new("collector CA");
    let server = ca.issue("collector", &["127.0.0.1", "localhost"]);
    dir.file("ca.pem", &ca.pem());
    (server.cert, server.key)
}

/// One call in trace `trace`, then the gateway stopped; its exit code and
/// the rest of its log.
async fn one_call_then_stop(
    exporting: (Reaped, Client, Stderr, CatalogDir),
    trace: &str,
) -> (Option<i32>, Vec<String>, CatalogDir) {
    let (child, mut client, lines, dir) = exporting;
    assert_eq!(call(&mut client, "web_search", r#"{"query": "x"}"#, trace).await, ErrorKind::Unspecified);
    let (code, rest) = tokio::task::spawn_blocking(move || stop(child, lines)).await.unwrap();
    (code, rest, dir)
}

/// A collector whose certificate is its CA's own (telemetry.md: it must be a
/// leaf signed by the CA): over HTTP, the failed exports are one warning
/// that says why, and no ERROR line of the TLS verifier's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_serving_its_ca_as_its_certificate_is_one_warning_with_the_cause() {
    let dir = CatalogDir::new();
    let served = crate::common::pki::Ca::self_signed_ca_for(&["127.0.0.1", "localhost"]);
    dir.file("ca.pem", &served.cert);
    let (collector, _received) =
        otlp::start_http(Received::keeping(Duration::ZERO), Some((served.cert, served.key))).await;
    let ca = dir.dir.path().join("ca.pem").display().to_string();
    let env = [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_METRICS_EXPORTER", "none"),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.as_str()),
    ];
    let endpoint = format!("https://localhost:{}", collector.port());
    let exporting = exporting_to(&endpoint, dir, &env).await;
    let (code, rest, _dir) = one_call_then_stop(exporting, "77777777777777777777777777777777").await;
    assert_eq!(code, Some(0));
    let warnings: Vec<&String> = rest.iter().filter(|l| l.contains("could not be exported")).collect();
    assert_eq!(warnings.len(), 1, "{rest:#?}");
    assert!(warnings[0].contains("CaUsedAsEndEntity"), "the cause is said: {warnings:#?}");
    assert!(!rest.iter().any(|l| l.contains("ERROR")), "{rest:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_metrics_go_gzipped_over_grpc_with_tls_to_a_collector_trusted_by_its_certificate() {
    let dir = CatalogDir::new();
    let identity = collector_identity(&dir);
    let (collector, received) = otlp::start_grpc(Received::keeping(Duration::ZERO), Some(identity)).await;
    let endpoint = format!("https://127.0.0.1:{}", collector.port());
    let ca = dir.dir.path().join("ca.pem").display().to_string();
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200"),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.as_str()),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
    ];
    let trace = "77777777777777777777777777777777";
    let (code, rest, dir) = one_call_then_stop(exporting_to(&endpoint, dir, &env).await, trace).await;
    assert_eq!(code, Some(0));
    assert!(!rest.iter().any(|l| l.contains("could not be exported")), "{rest:#?}");
    assert!(received.span_list().iter().any(|(t, n, _)| t == trace && n == "execute_tool web_search"));
    let exports = received.span_metadata.lock().unwrap().clone();
    assert!(exports.iter().all(|m| m.get("grpc-encoding").is_some_and(|v| v == "gzip")), "{exports:?}");
    assert!(received.metric_names().contains(&"toolgate.tool.calls".to_owned()), "{:?}", received.metric_names());

    // Without the certificate the collector is not trusted: nothing is
    // sent, one warning per signal says so, and calls are served.
    let untrusted = [("OTEL_BSP_SCHEDULE_DELAY", "100"), ("OTEL_METRIC_EXPORT_INTERVAL", "200")];
    let before = received.span_count.load(std::sync::atomic::Ordering::Relaxed);
    let (code, rest, _dir) = one_call_then_stop(exporting_to(&endpoint, dir, &untrusted).await, trace).await;
    assert_eq!(code, Some(0));
    assert_eq!(received.span_count.load(std::sync::atomic::Ordering::Relaxed), before);
    let warnings: Vec<&String> = rest.iter().filter(|l| l.contains("could not be exported")).collect();
    assert!((1..=2).contains(&warnings.len()), "{rest:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_metrics_reach_an_otlp_http_receiver_as_protobuf_plain_and_over_tls_with_gzip() {
    // Plain HTTP, the general endpoint (the signal's path appended), and
    // attribute values cut to the configured length.
    let (collector, received) = otlp::start_http(Received::keeping(Duration::ZERO), None).await;
    let env = [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200"),
        ("TOOLGATE_TRACE_CONTENT", "1"),
        ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "40"),
    ];
    let (child, mut client, lines, _dir) = exporting(collector, &env).await;
    let trace = "88888888888888888888888888888888";
    let long = format!(r#"{{"query": "{}"}}"#, "y".repeat(500));
    assert_eq!(call(&mut client, "web_search", &long, trace).await, ErrorKind::Unspecified);
    let (code, rest) = tokio::task::spawn_blocking(move || stop(child, lines)).await.unwrap();
    assert_eq!(code, Some(0), "{rest:#?}");
    let spans = received.span_list();
    let (_, _, attributes) = spans.iter().find(|(t, n, _)| t == trace && n == "execute_tool web_search").unwrap();
    let (_, arguments) = attributes.iter().find(|(k, _)| k == "gen_ai.tool.call.arguments").expect("content recorded");
    let cut = format!(r#"{{"query": "{}"#, "y".repeat(29)); // 40 characters
    assert_eq!(*arguments, format!("Some(StringValue({cut:?}))"));
    let requests = received.http_requests.lock().unwrap().clone();
    let paths: std::collections::BTreeSet<&str> = requests.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["/v1/metrics", "/v1/traces"].into());
    for (_, headers) in &requests {
        assert_eq!(headers["content-type"], "application/x-protobuf");
        assert!(headers.get("content-encoding").is_none());
    }
    assert!(received.metric_names().contains(&"toolgate.tool.calls".to_owned()));

    // Over TLS, trusted by the collector's CA, compressed.
    let dir = CatalogDir::new();
    let identity = collector_identity(&dir);
    let (collector, received) = otlp::start_http(Received::keeping(Duration::ZERO), Some(identity)).await;
    let ca = dir.dir.path().join("ca.pem").display().to_string();
    let traces = format!("https://localhost:{}/v1/traces", collector.port());
    let env = [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces.as_str()),
        ("OTEL_METRICS_EXPORTER", "none"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.as_str()),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
    ];
    let trace = "99999999999999999999999999999999";
    let endpoint = format!("https://localhost:{}", collector.port());
    let (code, rest, _dir) = one_call_then_stop(exporting_to(&endpoint, dir, &env).await, trace).await;
    assert_eq!(code, Some(0));
    assert!(!rest.iter().any(|l| l.contains("could not be exported")), "{rest:#?}");
    assert!(received.span_list().iter().any(|(t, n, _)| t == trace && n == "execute_tool web_search"));
    let requests = received.http_requests.lock().unwrap().clone();
    assert!(!requests.is_empty());
    for (path, headers) in &requests {
        assert_eq!(path, "/v1/traces");
        assert_eq!(headers["content-encoding"], "gzip");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_this_gateway_does_not_send_is_said_at_start_and_calls_are_served() {
    let (collector, received) = receiver(Duration::ZERO).await;
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", REGISTRY);
    let mut command = toolgate();
    command
        .current_dir(dir.dir.path())
        .args(["serve", "--catalog", "registry", "--listen", "127.0.0.1:0"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{collector}"))
        .env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
        .env("OTEL_METRICS_EXPORTER", "none");
    let (child, lines, listening, before) = listening_after(&mut command);
    let said: Vec<_> = before.iter().filter(|l| l.contains("traces will not be exported")).collect();
    assert_eq!(said.len(), 1, "{before:#?}");
    assert!(said[0].contains("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json"), "{said:?}");
    let addr = listening.split(' ').next().unwrap();
    let mut client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let trace = "12121212121212121212121212121212";
    assert_eq!(call(&mut client, "web_search", r#"{"query": "x"}"#, trace).await, ErrorKind::Unspecified);
    let (code, _) = tokio::task::spawn_blocking(move || stop(child, lines)).await.unwrap();
    assert_eq!(code, Some(0));
    assert_eq!(received.span_count.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_costs_one_warning_and_nothing_else() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    costs_one_warning_and_nothing_else(closed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_refuses_costs_one_warning_and_nothing_else() {
    let (refusing, _) = otlp::start(otlp::Received::refusing(tonic::Code::ResourceExhausted)).await;
    costs_one_warning_and_nothing_else(refusing).await;
}

/// 200 calls exporting to `collector`, which takes nothing: every call
/// answers, and the failed exports are one warning per signal.
async fn costs_one_warning_and_nothing_else(collector: std::net::SocketAddr) {
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "50"), ("OTEL_METRIC_EXPORT_INTERVAL", "100")];
    let (child, mut client, lines, _dir) = exporting(collector, &env).await;
    let started = Instant::now();
    for i in 0..200 {
        let trace = format!("{:032x}", i + 1);
        assert_eq!(call(&mut client, "web_search", r#"{"query": "x"}"#, &trace).await, ErrorKind::Unspecified);
        if i % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(150)).await; // let exports fail meanwhile
        }
    }
    assert!(started.elapsed() < Duration::from_secs(10), "calls are never held up by export");
    let (code, rest) = tokio::task::spawn_blocking(move || stop(child, lines)).await.unwrap();
    assert_eq!(code, Some(0));
    let warnings: Vec<&String> = rest.iter().filter(|l| l.contains("could not be exported")).collect();
    assert!((1..=2).contains(&warnings.len()), "one warning per signal, rate-limited: {warnings:#?}\n{rest:#?}");
    assert!(!rest.iter().any(|l| l.contains("ERROR")), "{rest:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_collector_never_slows_a_call() {
    let (collector, _received) = receiver(Duration::from_secs(20)).await;
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "100"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "500"),
    ];
    let (child, mut client, lines, _dir) = exporting(collector, &env).await;
    let mut slowest = Duration::ZERO;
    for i in 0..100 {
        let at = Instant::now();
        call(&mut client, "web_search", r#"{"query": "x"}"#, &format!("{:032x}", i + 1)).await;
        slowest = slowest.max(at.elapsed());
        if i % 25 == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert!(slowest < Duration::from_millis(250), "slowest call {slowest:?}");
    let (code, _) = tokio::task::spawn_blocking(move || stop(child, lines)).await.unwrap();
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_past_a_full_export_queue_are_dropped_with_one_warning_and_counted_at_shutdown() {
    // A collector that takes 300 ms a batch, batches of 2 and a queue of 4:
    // 40 calls (80 spans) at full speed overflow the queue.
    let (collector, received) = receiver(Duration::from_millis(300)).await;
    let env =
        [("OTEL_BSP_MAX_QUEUE_SIZE", "4"), ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2"), ("OTEL_METRICS_EXPORTER", "none")];
    let (child, mut client, lines, _dir) = exporting(collector, &env).await;
    for i in 0..40 {
        let trace = format!("{:032x}", i + 1);
        assert_eq!(call(&mut client, "web_search", r#"{"query": "x"}"#, &trace).await, ErrorKind::Unspecified);
    }
    let (code, rest) = tokio::task::spawn_blocking(move || stop(child, lines)).await.unwrap();
    assert_eq!(code, Some(0));
    let started: Vec<&String> = rest.iter().filter(|l| l.contains("SpanDroppingStarted")).collect();
    assert_eq!(started.len(), 1, "one warning when dropping starts: {rest:#?}");
    let counted: Vec<&String> = rest.iter().filter(|l| l.contains("dropped_span_count=")).collect();
    assert_eq!(counted.len(), 1, "the count at shutdown: {rest:#?}");
    let dropped: u64 =
        counted[0].split("dropped_span_count=").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    let arrived = received.span_count.load(std::sync::atomic::Ordering::Relaxed);
    assert!(dropped > 0 && arrived > 0, "dropped {dropped}, arrived {arrived}");
    assert_eq!(dropped + arrived, 80, "every span either arrived or was counted as dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_recorded_with_their_content_ship_in_requests_a_collector_takes() {
    // 600 calls of 4,000 characters, recorded with their content (the
    // arguments and the echoed result on each `execute_tool` span): about
    // 5 MB of spans, shipped at shutdown as one batch of the default size,
    // past the 4 MiB a gRPC server takes unless told otherwise.
    let (collector, received) = receiver(Duration::ZERO).await;
    let env =
        [("TOOLGATE_TRACE_CONTENT", "1"), ("OTEL_BSP_SCHEDULE_DELAY", "60000"), ("OTEL_METRICS_EXPORTER", "none")];
    let (child, mut client, lines, _dir) = exporting(collector, &env).await;
    let arguments = format!(r#"{{"query": "{}"}}"#, "x".repeat(4000));
    for i in 0..600 {
        let trace = format!("{:032x}", i + 1);
        assert_eq!(call(&mut client, "web_search", &arguments, &trace).await, ErrorKind::Unspecified);
    }
    let (code, rest) = tokio::task::spawn_blocking(move || stop(child, lines)).await.unwrap();
    assert_eq!(code, Some(0));
    assert!(!rest.iter().any(|line| line.contains("could not be exported")), "{rest:#?}");
    assert_eq!(received.span_count.load(std::sync::atomic::Ordering::Relaxed), 1200);
    let requests = received.span_metadata.lock().unwrap().len();
    assert!(requests >= 2, "the batch went as {requests} request(s)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_holds_up_the_exit_two_seconds_at_most() {
    let (collector, _received) = receiver(Duration::from_secs(60)).await;
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "60000"), ("OTEL_METRIC_EXPORT_INTERVAL", "60000")];
    let (child, mut client, lines, _dir) = exporting(collector, &env).await;
    for i in 0..5 {
        call(&mut client, "web_search", r#"{"query": "x"}"#, &format!("{:032x}", i + 1)).await;
    }
    // Spans and metrics are pending; the collector takes a minute to answer.
    let started = Instant::now();
    let (code, rest) = tokio::task::spawn_blocking(move || stop(child, lines)).await.unwrap();
    let took = started.elapsed();
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_secs(4), "the exit took {took:?}: {rest:#?}");
    assert!(rest.iter().any(|l| l.contains("telemetry not flushed within 2s")), "{rest:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_requests_have_server_spans_in_the_callers_trace_and_the_front_door_label() {
    use crate::mcp_front_door::{catalogue, post, rpc, serve_env};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (collector, received) = receiver(Duration::ZERO).await;
    let dir = CatalogDir::new();
    catalogue(&dir);
    let hash = toolgate::identity::hash_key("k");
    dir.file("toolgate.yaml", &format!("principals:\n  - name: bot\n    api_key_sha256: {hash}\n    tools: [\"*\"]\n"));
    let endpoint = format!("http://{collector}");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200"),
    ];
    let (child, url, log) = serve_env(dir.dir.path(), &["--config", "toolgate.yaml"], &env);
    let key = ("authorization", "Bearer k");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (_, headers, _) = post(&url, &[key], init).await;
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let in_session = [key, ("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
    post(&url, &in_session, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
    // The caller's trace in _meta, and in the HTTP header.
    let in_meta = "44444444444444444444444444444444";
    let in_header = "55555555555555555555555555555555";
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"WebSearch","arguments":{{"query":"x"}},"_meta":{{"traceparent":"{}"}}}}}}"#,
        traceparent(in_meta)
    );
    let (status, _, body) = post(&url, &in_session, call).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(rpc(&body)["result"]["isError"], false, "{body}");
    let header = traceparent(in_header);
    let headed = [in_session.as_slice(), &[("traceparent", header.as_str())]].concat();
    let call =
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"web_search","arguments":{"query":"y"}}}"#;
    let (status, _, _) = post(&url, &headed, call).await;
    assert_eq!(status, 200);
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    assert_eq!(tokio::task::spawn_blocking(move || child.wait().unwrap().code()).await.unwrap(), Some(0));

    let spans = received.span_list();
    let in_trace = |trace: &str, name: &str| spans.iter().find(|(t, n, _)| t == trace && n == name).cloned();
    let (_, _, attributes) = in_trace(in_meta, "tools/call web_search").unwrap_or_else(|| panic!("{spans:?}"));
    let has = |key: &str, value: &str| attributes.iter().any(|(k, v)| k == key && v.contains(value));
    assert!(has("mcp.method.name", "tools/call"), "{attributes:?}");
    assert!(has("mcp.session.id", &session), "{attributes:?}");
    assert!(has("mcp.protocol.version", "2025-06-18"), "{attributes:?}");
    assert!(has("jsonrpc.request.id", "7"), "{attributes:?}");
    assert!(has("toolgate.front_door", "mcp"), "{attributes:?}");
    let (_, _, attributes) = in_trace(in_meta, "execute_tool web_search").expect("the call's span");
    assert!(attributes.iter().any(|(k, v)| k == "toolgate.front_door" && v.contains("mcp")), "{attributes:?}");
    assert!(in_trace(in_header, "tools/call web_search").is_some(), "{spans:?}");
    // The chain: the caller's span, the MCP request's, the call's.
    let parents = received.span_parents();
    let request = parents.iter().find(|(n, _, p)| n == "tools/call web_search" && p == "00f067aa0ba902b7");
    let (_, request_id, _) = request.unwrap_or_else(|| panic!("{parents:?}"));
    assert!(parents.iter().any(|(n, _, p)| n == "execute_tool web_search" && p == request_id), "{parents:?}");
    let metrics = received.metric_names();
    assert!(metrics.contains(&"mcp.server.operation.duration".to_owned()), "{metrics:?}");
    let audit = log.text();
    assert!(
        audit.lines().any(|l| l.contains("audit: execute") && l.contains("front_door") && l.contains("mcp")),
        "{audit}"
    );
}
