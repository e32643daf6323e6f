//! Execute against real backends: the built-ins, a local HTTP server and real
//! subprocesses. Outcomes and `retryable` as docs/repairs.md's error table says; crashes,
//! timeouts and outages worded without internals; children killed.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use toolgate::proto::v1::{ErrorKind, ExecuteRequest};

use crate::common::{
    backend::{self, closed_port, HttpBackend},
    error, execute, kind, CatalogDir, TestGateway,
};

/// A Python tool speaking the command protocol, written next to the registry.
fn script(dir: &CatalogDir, name: &str, body: &str) {
    let text = format!("import json, os, sys, time\nargs = json.load(sys.stdin)\n{body}\n");
    dir.file(&format!("registry/{name}.py"), &text);
}

/// A command tool running `<script>.py`; `extra` lines may replace the backend.
fn command_tool(name: &str, script: &str, extra: &str) -> String {
    let backend = match extra.contains("backend:") {
        true => String::new(),
        false => format!("    backend: {{command: {{argv: [python3, {script}.py]}}}}\n"),
    };
    format!("  - name: {name}\n    description: {name}\n{backend}{extra}")
}

fn http_tool(name: &str, url: &str, extra: &str) -> String {
    format!("  - name: {name}\n    description: {name}\n    backend: {{http: {{url: \"{url}\"}}}}\n{extra}")
}

/// A catalogue with HTTP tools on `http` and the command tools of `commands`.
fn catalogue(http: &HttpBackend, commands: &[(&str, &str, &str)]) -> CatalogDir {
    let dir = CatalogDir::new();
    let mut yaml = String::from("tools:\n");
    for route in [
        "result",
        "not_found",
        "conflict",
        "typed_error",
        "typed_not_found",
        "crash",
        "garbage",
        "empty",
        "huge",
        "redirect",
    ] {
        yaml.push_str(&http_tool(route, &http.url(&format!("/{route}")), ""));
    }
    yaml.push_str(&http_tool("slow", &http.url("/slow"), "    timeout: 300ms\n"));
    yaml.push_str(&http_tool("slow_idempotent", &http.url("/slow"), "    timeout: 300ms\n    idempotent: true\n"));
    yaml.push_str(&http_tool("offline", &format!("http://{}/x", closed_port()), ""));
    yaml.push_str(&http_tool("offline_idempotent", &format!("http://{}/x", closed_port()), "    idempotent: true\n"));
    yaml.push_str(
        &http_tool("with_secret", &http.url("/echo"), "")
            .replace("url: ", "headers: {Authorization: \"Bearer ${TOOL_TOKEN}\"}, url: "),
    );
    for (name, body, extra) in commands {
        script(&dir, name, body);
        yaml.push_str(&command_tool(name, name, extra));
    }
    dir.file("registry/tools.yaml", &yaml);
    dir
}

async fn gateway(dir: &CatalogDir) -> TestGateway {
    TestGateway::dir(dir).env(crate::common::test_env(&[("TOOL_TOKEN", "s3cret-token")])).start().await
}

fn message(response: &toolgate::proto::v1::ExecuteResponse) -> String {
    error(response).message.clone()
}

/// No URL, host, port, path, secret or trace in a message.
fn assert_no_internals(text: &str, http: &HttpBackend) {
    for leak in [
        "127.0.0.1",
        &http.addr.port().to_string(),
        "http://",
        "/tmp",
        ".py",
        "Traceback",
        "hunter2",
        "10.0.0.7",
        "s3cret",
    ] {
        assert!(!text.contains(leak), "{leak:?} leaked into: {text}");
    }
}

#[tokio::test]
async fn builtins_answer_and_their_own_errors_pass_unchanged() {
    let http = backend::start().await;
    let dir = catalogue(&http, &[]);
    let mut gw = gateway(&dir).await;
    let response = execute(&mut gw.client, "calculator", r#"{"expression": "(2 + 3) * 4.5"}"#).await;
    assert_eq!(response.result_json, r#"{"expression":"(2 + 3) * 4.5","result":22.5}"#);
    let response = execute(&mut gw.client, "calculator", r#"{"expression": "1 / (2 - 2)"}"#).await;
    assert_eq!(kind(&response), ErrorKind::InvalidArguments);
    assert_eq!(message(&response), "division by zero");
    assert!(error(&response).expected_parameters.is_none(), "a tool's own error has no hint");
    let response = execute(&mut gw.client, "current_time", r#"{"timezone": "Mars/Olympus"}"#).await;
    assert_eq!(
        message(&response),
        "unknown time zone 'Mars/Olympus'; use an IANA name such as Europe/Paris or America/New_York"
    );
    let response = execute(&mut gw.client, "current_time", r#"{"timezone": "Asia/Tokyo"}"#).await;
    let now: serde_json::Value = serde_json::from_str(&response.result_json).unwrap();
    assert_eq!(now["utc_offset"], "+09:00");
    let response = execute(&mut gw.client, "echo", r#"{"z": 1, "a": [true]}"#).await;
    assert_eq!(response.result_json, r#"{"z":1,"a":[true]}"#);
}

#[tokio::test]
async fn http_status_and_body_map_to_outcomes() {
    let http = backend::start().await;
    let dir = catalogue(&http, &[]);
    let mut gw = gateway(&dir).await;
    let response = execute(&mut gw.client, "result", "{}").await;
    assert!(response.ok);
    assert_eq!(response.result_json, "{\"b\": 2, \"a\": [1.50, 1e3], \"z\": null}", "passed through unchanged");

    let cases = [
        ("not_found", ErrorKind::NotFound, "no order 42 in this shop"),
        ("conflict", ErrorKind::Refused, "the order was already shipped"),
        ("typed_error", ErrorKind::InvalidArguments, "day 6 is a Saturday; we deliver Monday to Friday"),
        ("typed_not_found", ErrorKind::NotFound, "no parcel PK-9"),
        ("crash", ErrorKind::ToolCrashed, "the tool 'crash' failed (HTTP 500)"),
        ("garbage", ErrorKind::ToolCrashed, "the tool 'garbage' answered with something that is not JSON"),
        ("empty", ErrorKind::ToolCrashed, "the tool 'empty' answered with an empty body instead of JSON"),
        ("huge", ErrorKind::ToolCrashed, "the tool's result is larger than 1 MiB"),
        ("redirect", ErrorKind::ToolCrashed, "the tool 'redirect' answered HTTP 307, which is not an answer"),
        ("offline", ErrorKind::Unavailable, "the tool 'offline' cannot be reached right now"),
    ];
    for (tool, expected_kind, expected_message) in cases {
        let response = execute(&mut gw.client, tool, "{}").await;
        assert_eq!(kind(&response), expected_kind, "{tool}");
        assert_eq!(message(&response), expected_message, "{tool}");
        // Not idempotent: only a call with invalid arguments can be fixed and retried.
        assert_eq!(error(&response).retryable, expected_kind == ErrorKind::InvalidArguments, "{tool}");
        assert_no_internals(&message(&response), &http);
    }
    let response = execute(&mut gw.client, "offline_idempotent", "{}").await;
    assert_eq!(kind(&response), ErrorKind::Unavailable);
    assert!(error(&response).retryable, "an idempotent tool's outage is retryable");
}

#[tokio::test]
async fn http_timeouts_are_retryable_only_for_idempotent_tools() {
    let http = backend::start().await;
    let dir = catalogue(&http, &[]);
    let mut gw = gateway(&dir).await;
    let response = execute(&mut gw.client, "slow", "{}").await;
    assert_eq!(kind(&response), ErrorKind::Timeout);
    assert_eq!(message(&response), "the tool 'slow' did not answer within 300 ms");
    assert!(!error(&response).retryable);
    let response = execute(&mut gw.client, "slow_idempotent", "{}").await;
    assert_eq!(kind(&response), ErrorKind::Timeout);
    assert!(error(&response).retryable);
}

#[tokio::test]
async fn http_requests_carry_expanded_secrets_and_the_trace_context() {
    let http = backend::start().await;
    let dir = catalogue(&http, &[]);
    let mut gw = gateway(&dir).await;
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut request = tonic::Request::new(ExecuteRequest {
        tool: "with_secret".into(),
        arguments_json: r#"{"x": 1}"#.into(),
        ..Default::default()
    });
    request.metadata_mut().insert("traceparent", traceparent.parse().unwrap());
    let response = gw.client.execute(request).await.unwrap().into_inner();
    assert!(response.ok, "{response:?}");
    assert_eq!(http.seen.last_header("authorization").as_deref(), Some("Bearer s3cret-token"));
    assert_eq!(http.seen.last_header("traceparent").as_deref(), Some(traceparent));
    assert_eq!(http.seen.last_header("content-type").as_deref(), Some("application/json"));
    assert_eq!(http.seen.last_body().as_deref(), Some(r#"{"x": 1}"#));
}

const PROTOCOL_TOOLS: &[(&str, &str, &str)] = &[
    ("ok_tool", "print(json.dumps({'ok': True, 'result': {'got': args}}))", ""),
    (
        "missing_tool",
        "print(json.dumps({'ok': False, 'error': 'not_found', 'detail': 'no note named ' + args['name']}))",
        "",
    ),
    (
        "refusing_tool",
        "print(json.dumps({'ok': False, 'error': 'refused', 'detail': 'notes are read-only on Sundays'}))",
        "",
    ),
    (
        "picky_tool",
        "print(json.dumps({'ok': False, 'error': 'invalid_arguments', 'detail': 'name must be lower-case'}))",
        "",
    ),
    ("garbage_tool", "print('Segmentation fault at /srv/tools/x.py line 3')", ""),
    ("unknown_error_tool", "print(json.dumps({'ok': False, 'error': 'exploded', 'detail': 'x'}))", ""),
    ("exit_tool", "sys.stderr.write('password=hunter2 at /tmp/x\\n'); sys.exit(3)", ""),
    ("killed_tool", "os.kill(os.getpid(), 9)", ""),
    ("exit137_tool", "sys.exit(137)", ""),
    ("huge_tool", "print(json.dumps({'ok': True, 'result': 'x' * (2 * 1024 * 1024)}))", ""),
    ("answer_then_fail_tool", "print(json.dumps({'ok': True, 'result': 7})); sys.exit(1)", ""),
    (
        "env_tool",
        "print(json.dumps({'ok': True, 'result': sorted(os.environ.keys())}))",
        "    backend: {command: {argv: [python3, env_tool.py], env: {NOTES_DIR: /srv/notes}}}\n",
    ),
];

#[tokio::test]
async fn the_command_protocol_maps_to_outcomes() {
    let http = backend::start().await;
    let dir = catalogue(&http, PROTOCOL_TOOLS);
    let mut gw = gateway(&dir).await;
    let response = execute(&mut gw.client, "ok_tool", r#"{"name": "todo"}"#).await;
    assert!(response.ok, "{response:?}");
    assert_eq!(response.result_json, r#"{"got": {"name": "todo"}}"#);
    let response = execute(&mut gw.client, "answer_then_fail_tool", "{}").await;
    assert_eq!(response.result_json, "7", "a protocol answer counts even with a non-zero exit");

    let cases = [
        ("missing_tool", ErrorKind::NotFound, "no note named todo"),
        ("refusing_tool", ErrorKind::Refused, "notes are read-only on Sundays"),
        ("picky_tool", ErrorKind::InvalidArguments, "name must be lower-case"),
        (
            "garbage_tool",
            ErrorKind::ToolCrashed,
            "the tool 'garbage_tool' failed: it answered something that is not the tool protocol",
        ),
        (
            "unknown_error_tool",
            ErrorKind::ToolCrashed,
            "the tool 'unknown_error_tool' failed: it answered something that is not the tool protocol",
        ),
        ("exit_tool", ErrorKind::ToolCrashed, "the tool 'exit_tool' failed: it exited with code 3 without an answer"),
        ("killed_tool", ErrorKind::ToolCrashed, "the tool 'killed_tool' failed: it was killed before it answered"),
        (
            "exit137_tool",
            ErrorKind::ToolCrashed,
            "the tool 'exit137_tool' failed: it exited with code 137 without an answer",
        ),
        ("huge_tool", ErrorKind::ToolCrashed, "the tool's result is larger than 1 MiB"),
    ];
    for (tool, expected_kind, expected_message) in cases {
        let response = execute(&mut gw.client, tool, r#"{"name": "todo"}"#).await;
        assert_eq!(kind(&response), expected_kind, "{tool}: {response:?}");
        assert_eq!(message(&response), expected_message, "{tool}");
        assert_eq!(error(&response).retryable, expected_kind == ErrorKind::InvalidArguments, "{tool}");
        assert_no_internals(&message(&response), &http);
    }
}

#[tokio::test]
async fn commands_get_a_clean_environment() {
    let http = backend::start().await;
    let dir = catalogue(&http, PROTOCOL_TOOLS);
    let mut gw = gateway(&dir).await;
    let response = execute(&mut gw.client, "env_tool", "{}").await;
    let keys: Vec<String> = serde_json::from_str(&response.result_json).unwrap();
    assert!(keys.contains(&"NOTES_DIR".to_owned()) && keys.contains(&"PATH".to_owned()), "{keys:?}");
    // cargo sets CARGO_* for this test process, so the gateway has them: the tool must not.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    assert!(!keys.iter().any(|k| k.starts_with("CARGO")), "{keys:?}");
}

/// Waits until nothing runs in `dir` any more (the event; bounded at 30 s
/// so that a leak fails rather than hangs).
async fn wait_until_gone(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let running = crate::common::running_in(dir);
        if running.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "still running in {}: {running:?}", dir.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const HANGING: &str = "open('pid', 'w').write(str(os.getpid())); sys.stdout.flush(); time.sleep(60)";
/// Starts a helper that would outlive it (writes the helper's pid), then hangs.
const HANGING_WITH_HELPER: &str = "import subprocess; helper = subprocess.Popen(['sleep', '600']); \
open('helper', 'w').write(str(helper.pid)); open('pid', 'w').write(str(os.getpid())); time.sleep(60)";

#[tokio::test]
async fn a_command_that_never_exits_times_out_and_is_killed_with_what_it_started() {
    let http = backend::start().await;
    let dir = catalogue(&http, &[("hang_tool", HANGING_WITH_HELPER, "    timeout: 1s\n")]);
    let mut gw = gateway(&dir).await;
    let response = execute(&mut gw.client, "hang_tool", "{}").await;
    assert_eq!(kind(&response), ErrorKind::Timeout);
    assert_eq!(message(&response), "the tool 'hang_tool' did not answer within 1 s");
    wait_until_gone(&dir.registry()).await;
}

#[tokio::test]
async fn the_callers_deadline_bounds_the_timeout() {
    let http = backend::start().await;
    let dir = catalogue(&http, &[("hang_tool", HANGING, "    timeout: 30s\n")]);
    let mut gw = gateway(&dir).await;
    let mut request = tonic::Request::new(ExecuteRequest { tool: "hang_tool".into(), ..Default::default() });
    request.set_timeout(Duration::from_millis(500));
    let response = gw.client.execute(request).await.expect("answered in-band before the deadline").into_inner();
    assert_eq!(kind(&response), ErrorKind::Timeout, "{response:?}");
    // What was left of the 500 ms, less the 50 ms kept for the answer, when
    // the tool was started: at most 450 ms (less on a loaded machine), never
    // the tool's 30 s.
    let text = message(&response);
    let within = text
        .strip_prefix("the tool 'hang_tool' did not answer within ")
        .and_then(|rest| rest.strip_suffix(" ms"))
        .and_then(|ms| ms.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(within <= 450, "{text}");
    wait_until_gone(&dir.registry()).await;
}

#[tokio::test]
async fn a_caller_that_goes_away_takes_the_child_with_it() {
    let http = backend::start().await;
    let dir = catalogue(&http, &[("hang_tool", HANGING, "    timeout: 30s\n")]);
    let mut gw = gateway(&dir).await;
    let call = execute(&mut gw.client, "hang_tool", "{}");
    // The call goes away once its tool runs (what runs in the folder is seen).
    let started = async {
        while crate::common::running_in(&dir.registry()).is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        _ = call => panic!("the tool hangs"),
        () = started => {}
    }
    wait_until_gone(&dir.registry()).await;
    assert!(execute(&mut gw.client, "echo", "{}").await.ok, "still serving");
}

#[tokio::test]
async fn a_busy_tool_answers_unavailable_after_its_wait() {
    let http = backend::start().await;
    let dir = catalogue(
        &http,
        &[("single_tool", HANGING, "    timeout: 5s\n    max_concurrency: 1\n    idempotent: true\n")],
    );
    let mut gw = gateway(&dir).await;
    let mut first = gw.client.clone();
    let running = tokio::spawn(async move { execute(&mut first, "single_tool", "{}").await });
    while !dir.registry().join("pid").exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut request = tonic::Request::new(ExecuteRequest { tool: "single_tool".into(), ..Default::default() });
    request.set_timeout(Duration::from_millis(400));
    let response = gw.client.execute(request).await.unwrap().into_inner();
    assert_eq!(kind(&response), ErrorKind::Unavailable);
    // The wait is what the caller's deadline leaves after the margin: about
    // 360 ms of its 400, a millisecond either way as the clock reads it.
    let said = message(&response);
    let waited = said
        .strip_prefix("the tool 'single_tool' is busy: 1 calls were already in flight for ")
        .and_then(|rest| rest.strip_suffix(" ms"))
        .and_then(|ms| ms.parse::<u64>().ok());
    assert!(waited.is_some_and(|ms| (340..=370).contains(&ms)), "{said}");
    assert!(error(&response).retryable);
    running.abort();
}

#[tokio::test]
async fn a_program_that_cannot_start_is_unavailable() {
    // The program exists at load (which checks it), and is gone by the call.
    let dir = CatalogDir::new();
    let program = dir.file("registry/ghost-tool", "#!/bin/sh\necho '{\"ok\": true}'\n");
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: ghost\n    description: x\n    backend: {command: {argv: [./ghost-tool]}}\n",
    );
    let mut gw = TestGateway::dir(&dir).start().await;
    std::fs::remove_file(&program).unwrap();
    let response = execute(&mut gw.client, "ghost", "{}").await;
    assert_eq!(kind(&response), ErrorKind::Unavailable);
    assert_eq!(message(&response), "the tool 'ghost' cannot be reached right now");
}

#[tokio::test]
async fn invalid_calls_never_start_a_command() {
    let counting = "open('calls', 'a').write('x'); print(json.dumps({'ok': True, 'result': args}))";
    let dir = CatalogDir::new();
    script(&dir, "count_tool", counting);
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: count_tool\n    description: x\n    parameters: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}\n    backend: {command: {argv: [python3, count_tool.py]}}\n",
    );
    let mut gw = TestGateway::dir(&dir).start().await;
    for args in [r#"{}"#, r#"{"n": "one"}"#, r#"{"n": 1, "m": 2}"#, "[1]", "{", &"[".repeat(1000)] {
        let response = execute(&mut gw.client, "count_tool", args).await;
        assert_eq!(kind(&response), ErrorKind::InvalidArguments, "{args}");
    }
    assert!(!dir.registry().join("calls").exists(), "no invalid call started the tool");
    assert!(execute(&mut gw.client, "count_tool", r#"{"n": 1}"#).await.ok);
    assert_eq!(std::fs::read_to_string(dir.registry().join("calls")).unwrap(), "x");
}

/// A command tool that prints something other than the protocol: the
/// caller (and the model) get the crash without the output; the gateway's
/// log quotes what it printed, for the operator.
#[test]
fn the_log_quotes_what_a_command_tool_printed_instead_of_the_protocol() {
    let dir = CatalogDir::new();
    dir.file("tools/garbage.py", "print('Segmentation fault at /srv/tools/x.py line 3')\n");
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: garbage_tool\n    description: x\n    backend: {command: {argv: [python3, ../tools/garbage.py]}}\n",
    );
    let mut command = crate::common::toolgate();
    command.current_dir(dir.dir.path()).args(["serve", "--catalog", "registry", "--listen", "127.0.0.1:0"]);
    let (_gateway, lines, listening, _) = crate::common::listening_after(&mut command);
    let log = crate::common::LogLines::follow(lines);
    let addr = listening.split(' ').next().unwrap().to_owned();
    let out = crate::common::toolgate().args(["call", "garbage_tool", "{}", "--addr", &addr]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("it answered something that is not the tool protocol") && !said.contains("/srv/tools"),
        "{said}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while log.count("command backend crashed") == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let text = log.text();
    assert!(
        text.contains(r#"it printed "Segmentation fault at /srv/tools/x.py line 3", not the tool protocol's"#),
        "{text}"
    );
}
