//! The MCP front door, through the real binary: the Python reference SDK
//! (both protocol eras, over streamable HTTP and stdio), and raw HTTP for
//! what a well-behaved SDK never sends.

use std::{path::Path, time::Duration};

use serde_json::{json, Value};

use crate::common::{
    listening_after, logged_after, mcp::python, pki::Ca, repo, toolgate, CatalogDir, LogLines, Reaped,
};

/// A registry: a search tool on the built-in echo, and a tool whose run
/// leaves a marker file (for grants: it must never run when not granted).
pub(crate) fn catalogue(dir: &CatalogDir) {
    dir.file(
        "registry/mark.py",
        "import json, sys\nargs = json.load(sys.stdin)\nopen('ran', 'a').write('x')\nprint(json.dumps({'ok': True, 'result': 'marked'}))\n",
    );
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: web_search\n    description: Search the web.\n    \
         parameters: {type: object, properties: {query: {type: string}, limit: {type: integer}}, required: [query], additionalProperties: false}\n    \
         backend: {builtin: echo}\n  \
         - name: mark\n    description: Leaves a mark.\n    backend: {command: {argv: [python3, mark.py]}}\n\
         toolsets:\n  research: [web_search]\n",
    );
}

/// `toolgate serve` with the MCP front door on a free port; its MCP URL and
/// its log.
pub(crate) fn serve(dir: &Path, args: &[&str]) -> (Reaped, String, LogLines) {
    serve_env(dir, args, &[])
}

/// The same, with `env` set for the gateway.
pub(crate) fn serve_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Reaped, String, LogLines) {
    let mut command = toolgate();
    command
        .current_dir(dir)
        .args(["serve", "--catalog", "registry", "--listen", "127.0.0.1:0", "--mcp-listen", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied());
    serve_command(command)
}

/// Runs a `serve` command with an MCP listener; its MCP URL and its log.
fn serve_command(mut command: std::process::Command) -> (Reaped, String, LogLines) {
    let (child, lines, _, seen) = listening_after(&mut command);
    (child, logged_after(&seen, "MCP (streamable HTTP) on "), LogLines::follow(lines))
}

/// Runs the SDK client script; its JSON lines.
pub(crate) fn sdk(args: &[&str]) -> Vec<Value> {
    let out = std::process::Command::new(python())
        .arg(repo().join("tests/mcp/front_door_client.py"))
        .args(args)
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    assert!(out.status.success(), "the SDK client failed: {lines:?}\n{}", String::from_utf8_lossy(&out.stderr));
    lines
}

/// The names `tools/list` gave, from the SDK's lines.
pub(crate) fn names(lines: &[Value]) -> Vec<String> {
    let tools = lines.iter().find_map(|l| l.get("tools")).expect("a listing");
    tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

pub(crate) fn answer<'a>(lines: &'a [Value], tool: &str) -> &'a Value {
    lines.iter().find(|l| l["call"] == tool).unwrap_or_else(|| panic!("no answer for {tool}: {lines:?}"))
}

#[test]
fn the_python_sdk_in_both_eras_gets_the_catalogue_repaired_and_mapped() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let (_child, url, _log) = serve(dir.dir.path(), &[]);
    for (era, version) in [("discover", "2026-07-28"), ("initialize", "2025-11-25")] {
        let lines = sdk(&[
            "--url",
            &url,
            "--era",
            era,
            r#"WebSearch={"query": "rust"}"#,
            r#"web_search={"query": 5}"#,
            r#"web_serch={"query": "x"}"#,
        ]);
        assert_eq!(lines[0]["protocol_version"], version, "{era}");
        assert_eq!(names(&lines), ["calculator", "current_time", "echo", "mark", "web_search"], "{era}");
        // A drifted name: repaired, said in _meta, the result as text and structured.
        let repaired = &answer(&lines[1..], "WebSearch")["result"];
        assert_eq!(repaired["isError"], false, "{era}: {repaired}");
        assert_eq!(repaired["content"][0]["text"], r#"{"query":"rust"}"#);
        assert_eq!(repaired["structuredContent"], json!({"query": "rust"}));
        assert_eq!(
            repaired["_meta"]["dev.toolgate/repairs"],
            json!([{"kind": "TOOL_NAME", "original": "WebSearch", "repaired": "web_search"}])
        );
        assert_eq!(repaired["_meta"]["dev.toolgate/replayed"], false);
        // A value the schema refuses: an error result, its text the gRPC message.
        let invalid = &answer(&lines[1..], "web_search")["result"];
        assert_eq!(invalid["isError"], true);
        assert_eq!(invalid["_meta"]["dev.toolgate/error_kind"], "INVALID_ARGUMENTS");
        assert_eq!(invalid["_meta"]["dev.toolgate/retryable"], true);
        assert!(invalid["content"][0]["text"].as_str().unwrap().contains("'query'"), "{invalid}");
        // A name that cannot be repaired: -32602 with the did-you-mean.
        let unknown = &answer(&lines[1..], "web_serch")["error"];
        assert_eq!(unknown["code"], -32602, "{unknown}");
        assert!(unknown["message"]
            .as_str()
            .unwrap()
            .starts_with("Tool 'web_serch' not found. Did you mean 'web_search'?"));
        assert_eq!(unknown["data"], json!({"unknown": "web_serch", "suggestions": ["web_search"]}));
    }
    // One toolset's endpoint offers its tools only.
    let lines = sdk(&["--url", &url.replace("/mcp", "/mcp/toolsets/research"), r#"mark={}"#]);
    assert_eq!(names(&lines), ["web_search"]);
    assert_eq!(answer(&lines, "mark")["error"]["code"], -32602, "outside the toolset: unknown");
    assert!(!dir.registry().join("ran").exists(), "mark never ran");
}

#[test]
fn mcp_stdio_serves_the_same_catalogue_for_one_principal() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let hash = toolgate::identity::hash_key("k");
    dir.file(
        "toolgate.yaml",
        &format!("principals:\n  - name: researcher\n    api_key_sha256: {hash}\n    tools: [research]\n"),
    );
    let root = dir.dir.path().display().to_string();
    let stdio = |principal: &str| {
        let argv = mcp_stdio_argv(principal, &[]);
        sdk(&["--stdio", &argv, "--cwd", &root, "--era", "initialize", r#"web-search={"query": "rust"}"#, r#"mark={}"#])
    };
    let lines = stdio("researcher");
    assert_eq!(names(&lines), ["web_search"], "the principal's grants");
    assert_eq!(answer(&lines, "web-search")["result"]["isError"], false);
    assert_eq!(answer(&lines, "mark")["error"]["code"], -32602);
    assert!(!dir.registry().join("ran").exists(), "mark never ran");
}

/// The argv (as JSON, for the SDK client's `--stdio`) of `toolgate
/// mcp-stdio` on `toolgate.yaml` and `registry` for `principal`, with
/// `more` flags.
pub(crate) fn mcp_stdio_argv(principal: &str, more: &[&str]) -> String {
    let binary = env!("CARGO_BIN_EXE_toolgate");
    let mut argv =
        vec![binary, "mcp-stdio", "--config", "toolgate.yaml", "--catalog", "registry", "--principal", principal];
    argv.extend_from_slice(more);
    json!(argv).to_string()
}

/// A raw POST to the front door; the status, headers and body.
pub(crate) async fn post(
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<reqwest::Body>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let client = reqwest::Client::new();
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.body(body).timeout(Duration::from_secs(10)).send().await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (status, headers, response.text().await.unwrap())
}

/// The JSON-RPC message of an answer (plain JSON, or the data of an SSE event).
pub(crate) fn rpc(body: &str) -> Value {
    if let Ok(value) = serde_json::from_str(body) {
        return value;
    }
    let data = body.lines().filter_map(|l| l.strip_prefix("data: ")).find(|d| d.starts_with('{'));
    serde_json::from_str(data.unwrap_or_else(|| panic!("no message in {body}"))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_specs_answer_and_nothing_runs() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = CatalogDir::new();
    catalogue(&dir);
    dir.file("toolgate.yaml", "mcp_front_door: {allowed_origins: [\"https://app.example.com\"]}\n");
    let (_child, url, log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    // A session-era session to send requests in.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (status, headers, body) = post(&url, &[], init).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(rpc(&body)["result"]["protocolVersion"], "2025-06-18");
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let in_session = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
    post(&url, &in_session, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;

    /// What is sent (headers, body), the status wanted, and the JSON-RPC error code.
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, u16, Option<i64>);
    let cases: Vec<Case> = vec![
        ("invalid JSON", in_session.to_vec(), "{nope".into(), 400, Some(-32700)),
        ("a batch", in_session.to_vec(), r#"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#.into(), 400, Some(-32600)),
        (
            "tools/call without a name",
            in_session.to_vec(),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{}}}"#.into(),
            200,
            Some(-32602),
        ),
        (
            "arguments that are a number",
            in_session.to_vec(),
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mark","arguments":5}}"#.into(),
            200,
            Some(-32602),
        ),
        (
            "an unknown method",
            in_session.to_vec(),
            r#"{"jsonrpc":"2.0","id":5,"method":"nope/x"}"#.into(),
            200,
            Some(-32601),
        ),
        (
            "a notification with an id",
            in_session.to_vec(),
            r#"{"jsonrpc":"2.0","id":6,"method":"notifications/initialized"}"#.into(),
            200,
            Some(-32601),
        ),
        (
            "a 5 MiB body",
            in_session.to_vec(),
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"mark","arguments":{{"x":"{}"}}}}}}"#,
                "a".repeat(5 << 20)
            ),
            413,
            None,
        ),
        (
            "a wrong session id",
            vec![("mcp-session-id", "nope"), ("mcp-protocol-version", "2025-06-18")],
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#.into(),
            404,
            None,
        ),
        (
            "an unsupported protocol version",
            vec![("mcp-session-id", session.as_str()), ("mcp-protocol-version", "1999-01-01")],
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#.into(),
            400,
            None,
        ),
        (
            "an Origin not allowed",
            [in_session.to_vec(), vec![("origin", "https://evil.example")]].concat(),
            r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"mark","arguments":{}}}"#.into(),
            403,
            None,
        ),
    ];
    for (what, headers, body, want, code) in cases {
        let (status, _, answered) = post(&url, &headers, body).await;
        assert_eq!(status, want, "{what}: {answered}");
        if let Some(code) = code {
            assert_eq!(rpc(&answered)["error"]["code"], code, "{what}: {answered}");
        }
    }
    // Arguments sent as their JSON text are repaired like any emitted ones.
    let text = r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"web_search","arguments":"{'query': 'rust',}"}}"#;
    let (status, _, answered) = post(&url, &in_session, text).await;
    assert_eq!(status, 200, "{answered}");
    let result = &rpc(&answered)["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["_meta"]["dev.toolgate/repairs"][0]["kind"], "ARGUMENTS_JSON");
    // An allowed Origin passes.
    let allowed = [in_session.to_vec(), vec![("origin", "https://app.example.com")]].concat();
    let (status, _, answered) = post(&url, &allowed, r#"{"jsonrpc":"2.0","id":12,"method":"tools/list"}"#).await;
    assert_eq!(status, 200, "{answered}");
    // After DELETE the session is gone.
    let client = reqwest::Client::new();
    let deleted = client.delete(&url).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(deleted.status().as_u16(), 200);
    let (status, _, _) = post(&url, &in_session, r#"{"jsonrpc":"2.0","id":13,"method":"tools/list"}"#).await;
    assert_eq!(status, 404);
    assert!(!dir.registry().join("ran").exists(), "nothing ran");
    // Still serving.
    let (status, _, _) = post(&url, &[], init).await;
    assert_eq!(status, 200, "{}", log.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_principals_a_caller_without_a_key_gets_401_and_grants_bound_what_it_sees() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = CatalogDir::new();
    catalogue(&dir);
    let hash = toolgate::identity::hash_key("k");
    dir.file(
        "toolgate.yaml",
        &format!("principals:\n  - name: researcher\n    api_key_sha256: {hash}\n    tools: [research]\n"),
    );
    let (_child, url, _log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (status, headers, _) = post(&url, &[], list).await;
    assert_eq!(status, 401);
    assert_eq!(headers["www-authenticate"], "Bearer");
    let (status, headers, _) = post(&url, &[("authorization", "Bearer wrong")], list).await;
    assert_eq!(status, 401);
    assert_eq!(headers["www-authenticate"], r#"Bearer error="invalid_token""#);
    let lines =
        sdk(&["--url", &url, "--header", "Authorization=Bearer k", r#"mark={}"#, r#"WebSearch={"query": "x"}"#]);
    assert_eq!(names(&lines), ["web_search"]);
    assert_eq!(answer(&lines, "mark")["error"]["code"], -32602, "not granted: unknown, never suggested");
    assert!(!answer(&lines, "mark")["error"]["message"].as_str().unwrap().contains("Did you mean"));
    assert_eq!(answer(&lines, "WebSearch")["result"]["isError"], false);
    assert!(!dir.registry().join("ran").exists(), "mark never ran");
    // An unknown toolset: 404 with a did-you-mean.
    let (status, _, body) =
        post(&url.replace("/mcp", "/mcp/toolsets/reserch"), &[("authorization", "Bearer k")], list).await;
    assert_eq!(status, 404);
    assert_eq!(rpc(&body)["error"]["message"], "unknown toolset 'reserch', did you mean 'research'?");
    // Where the SDK shows it: its error is the did-you-mean, not "Not Found".
    let url = url.replace("/mcp", "/mcp/toolsets/reserch");
    let out = std::process::Command::new(python())
        .arg(repo().join("tests/mcp/front_door_client.py"))
        .args(["--url", &url, "--header", "Authorization=Bearer k", "--era", "initialize"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("did you mean 'research'"), "{said}");
}

#[test]
fn over_tls_a_client_certificate_names_its_principal_as_on_grpc() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let (server_ca, client_ca, stranger_ca) = (Ca::new("server CA"), Ca::new("client CA"), Ca::new("another CA"));
    let server = server_ca.issue("toolgate", &["127.0.0.1", "localhost"]);
    dir.file("certs/server.pem", &server.cert);
    dir.file("certs/server.key", &server.key);
    dir.file("certs/server-ca.pem", &server_ca.pem());
    dir.file("certs/clients.pem", &client_ca.pem());
    for (name, issued) in
        [("researcher", client_ca.issue("researcher", &[])), ("stranger", stranger_ca.issue("researcher", &[]))]
    {
        dir.file(&format!("certs/{name}.pem"), &issued.cert);
        dir.file(&format!("certs/{name}.key"), &issued.key);
    }
    let hash = toolgate::identity::hash_key("k");
    dir.file(
        "toolgate.yaml",
        &format!(
            "principals:\n  - name: researcher\n    client_cert: researcher\n    tools: [research]\n  \
             - name: admin\n    api_key_sha256: {hash}\n    tools: [\"*\"]\n\
             tls: {{cert: certs/server.pem, key: certs/server.key, client_ca: certs/clients.pem}}\n"
        ),
    );
    let (_child, url, _log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    assert!(url.starts_with("https://"), "{url}");
    let certs = dir.dir.path().join("certs");
    let path = |file: &str| certs.join(file).display().to_string();
    let tls = |client: Option<&str>| {
        let mut args = vec!["--ca".to_owned(), path("server-ca.pem")];
        if let Some(name) = client {
            args.extend([
                "--cert".to_owned(),
                path(&format!("{name}.pem")),
                "--key".to_owned(),
                path(&format!("{name}.key")),
            ]);
        }
        args
    };
    // The certificate's CN names the principal: its grants bound the listing.
    let mut args = tls(Some("researcher"));
    args.extend(["--url".to_owned(), url.clone(), r#"web_search={"query": "x"}"#.to_owned()]);
    let lines = sdk(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(names(&lines), ["web_search"]);
    assert_eq!(answer(&lines, "web_search")["result"]["isError"], false);
    // An API key over TLS without a certificate, in the session era too.
    let mut args = tls(None);
    args.extend(["--url", &url, "--era", "initialize", "--header", "Authorization=Bearer k"].map(str::to_owned));
    let lines = sdk(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(names(&lines), ["calculator", "current_time", "echo", "mark", "web_search"]);
    // A certificate from another CA is refused at the handshake; no credential at all is a 401.
    for client in [Some("stranger"), None] {
        let mut args = tls(client);
        args.extend(["--url".to_owned(), url.clone()]);
        let out = std::process::Command::new(python())
            .arg(repo().join("tests/mcp/front_door_client.py"))
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{client:?} was let in: {}", String::from_utf8_lossy(&out.stdout));
    }
}

/// The SDK client with `--watch`, its JSON lines as they come.
struct Watching {
    _child: Reaped,
    lines: std::sync::mpsc::Receiver<Value>,
}

impl Watching {
    fn start(args: &[&str]) -> Self {
        use std::io::BufRead;
        let mut command = std::process::Command::new(python());
        command.arg(repo().join("tests/mcp/front_door_client.py")).arg("--watch").args(args);
        let mut child = Reaped::spawn(command.stdout(std::process::Stdio::piped()));
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = send.send(serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}")));
            }
        });
        let watching = Self { _child: child, lines };
        watching.until("listening");
        watching
    }

    /// The next line with `key` (others skipped); a failure ends the test.
    fn until(&self, key: &str) -> Value {
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("no {key} line"));
            assert!(line.get("failed").is_none(), "{line}");
            if let Some(value) = line.get(key) {
                return value.clone();
            }
        }
    }
}

#[test]
fn listening_clients_are_told_when_a_reload_changes_what_they_see() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let (_child, url, _log) = serve(dir.dir.path(), &[]);
    let research = url.replace("/mcp", "/mcp/toolsets/research");
    let everything = Watching::start(&["--url", &url, "--era", "discover"]);
    let session = Watching::start(&["--url", &url, "--era", "initialize"]);
    let toolset = Watching::start(&["--url", &research, "--era", "initialize"]);
    // A new tool outside the toolset: the clients of /mcp are told.
    let tools = std::fs::read_to_string(dir.registry().join("tools.yaml")).unwrap();
    let added = tools.replace(
        "toolsets:",
        "  - name: weather\n    description: The weather.\n    backend: {builtin: echo}\ntoolsets:",
    );
    dir.file("registry/tools.yaml", &added);
    for watching in [&everything, &session] {
        let changed = watching.until("changed");
        assert!(changed.get("weather").is_some(), "{changed}");
    }
    // web_search's description changes: the toolset's client is told now
    // (had it been told before, it would have listed the old description).
    dir.file("registry/tools.yaml", &added.replace("Search the web.", "Search the whole web."));
    let changed = toolset.until("changed");
    assert_eq!(changed, json!({"web_search": "Search the whole web."}));
}

/// The resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_idle_sessions_are_bounded_and_the_oldest_idle_ends_first() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    use futures::StreamExt;
    let dir = CatalogDir::new();
    catalogue(&dir);
    // One principal (every caller, anonymous) may hold them all here.
    dir.file("toolgate.yaml", "mcp_front_door: {sessions_per_principal: 20000, sessions_per_user: 20000}\n");
    let (child, url, log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let client = reqwest::Client::new();
    let open = |n: usize| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let init = format!(
                r#"{{"jsonrpc":"2.0","id":{n},"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"idle","version":"1"}}}}}}"#
            );
            let response = client
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(init)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
            let id = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
            response.bytes().await.unwrap();
            id
        }
    };
    let list = |session: String| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            in_session(&client, &url, &session, json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await.0
        }
    };
    let before = rss_kib(child.id());
    let first = open(0).await;
    let second = open(1).await;
    // The second is used again: the first is now the one idle longest.
    assert_eq!(list(second.clone()).await, 200);
    let rest: Vec<String> = futures::stream::iter(2..10_000).map(open).buffer_unordered(16).collect().await;
    let at_bound = rss_kib(child.id());
    assert_eq!(list(first.clone()).await, 200, "10,000 sessions fit");
    assert_eq!(list(second.clone()).await, 200);
    // Past the bound: each new session ends the one idle longest.
    let newest = open(10_000).await;
    let third = open(10_001).await;
    assert_eq!(list(first).await, 200, "used recently: kept");
    assert_eq!(list(newest).await, 200);
    assert_eq!(list(third).await, 200);
    // Two of those opened in bulk (the first opened, idle since) ended.
    let statuses: Vec<u16> = futures::stream::iter(rest[..64].to_vec()).map(list).buffered(16).collect().await;
    assert_eq!(statuses.iter().filter(|&&s| s == 404).count(), 2, "{statuses:?}");
    assert!(statuses.iter().all(|&s| s == 200 || s == 404));
    let more: Vec<String> = futures::stream::iter(10_002..12_000).map(open).buffer_unordered(16).collect().await;
    assert_eq!(list(more[more.len() - 1].clone()).await, 200);
    let after = rss_kib(child.id());
    println!("RSS: {before} KiB at start, {at_bound} KiB with 10,000 sessions, {after} KiB after 12,000");
    assert!(after < at_bound + at_bound / 4, "memory stays bounded: {at_bound} KiB then {after} KiB");
    assert!(log.text().contains("session idle longest is ended"), "{}", log.text());
}

/// A POST of one 2026-07-28 request (no session: the headers and `_meta`
/// carry the protocol version); the response, not yet read.
pub(crate) async fn stateless(url: &str, method: &str, name: Option<&str>, params: Value) -> reqwest::Response {
    stateless_as(url, method, method, name, params).await
}

/// The same, with an `Mcp-Method` header that may say another method.
async fn stateless_as(url: &str, header: &str, method: &str, name: Option<&str>, params: Value) -> reqwest::Response {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", header);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    request.body(body.to_string()).send().await.unwrap()
}

/// Waits until `path` names a process (the tool wrote its pid), and returns it.
async fn started(path: &Path) -> i32 {
    for _ in 0..200 {
        if let Some(pid) = std::fs::read_to_string(path).ok().and_then(|p| p.trim().parse().ok()) {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the tool did not start");
}

/// Waits until process `pid` is gone.
async fn ended(pid: i32) {
    for _ in 0..200 {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("process {pid} still runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_kills_the_tools_processes_in_both_eras() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = CatalogDir::new();
    let pids = dir.dir.path().join("pids");
    std::fs::create_dir(&pids).unwrap();
    dir.file(
        "registry/tools.yaml",
        &format!(
            "tools:\n  - name: slow\n    description: Sleeps.\n    parameters: {{type: object, properties: {{n: {{type: string}}}}}}\n    \
             backend: {{command: {{argv: [sh, -c, 'echo $$ > {}/$(cat | tr -dc a-z0-9); exec sleep 60']}}}}\n",
            pids.display()
        ),
    );
    let (_child, url, log) = serve(dir.dir.path(), &[]);
    // 2026-07-28: the client closes the response stream mid-call.
    let call = tokio::spawn({
        let url = url.clone();
        async move {
            let response =
                stateless(&url, "tools/call", Some("slow"), json!({"name": "slow", "arguments": {"n": "a"}})).await;
            let _ = response.bytes().await;
        }
    });
    let pid = started(&pids.join("na")).await;
    call.abort();
    ended(pid).await;
    // Headers that disagree with the body, and a version no one speaks: the
    // spec's errors, and nothing runs.
    let mismatch = stateless(&url, "tools/call", Some("other"), json!({"name": "slow", "arguments": {"n": "b"}})).await;
    assert_eq!(mismatch.status().as_u16(), 400);
    assert_eq!(rpc(&mismatch.text().await.unwrap())["error"]["code"], -32020);
    let mismatch =
        stateless_as(&url, "tools/list", "tools/call", None, json!({"name": "slow", "arguments": {"n": "b"}})).await;
    assert_eq!(mismatch.status().as_u16(), 400);
    assert_eq!(rpc(&mismatch.text().await.unwrap())["error"]["code"], -32020);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow", "arguments": {"n": "b"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2030-01-01", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let unsupported = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2030-01-01")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "slow")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(unsupported.status().as_u16(), 400);
    let error = rpc(&unsupported.text().await.unwrap())["error"].clone();
    assert_eq!(error["code"], -32022, "{error}");
    assert_eq!(error["data"]["supported"], json!(["2026-07-28", "2025-11-25", "2025-06-18"]));
    // Session era: a closed stream is not cancellation; notifications/cancelled is.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (_, headers, _) = post(&url, &[], init).await;
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let in_session = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25")];
    post(&url, &in_session, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
    let call = tokio::spawn({
        let (url, session) = (url.clone(), session.clone());
        async move {
            let in_session = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25")];
            let body =
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{"n":"c"}}}"#;
            post(&url, &in_session, body).await
        }
    });
    let pid = started(&pids.join("nc")).await;
    let cancel =
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"the user stopped"}}"#;
    let (status, _, _) = post(&url, &in_session, cancel).await;
    assert_eq!(status, 202);
    ended(pid).await;
    call.abort();
    assert!(!pids.join("nb").exists(), "a refused request ran nothing");
    // Still serving.
    let (status, _, _) = post(&url, &[], init).await;
    assert_eq!(status, 200, "{}", log.text());
}

#[test]
fn tools_show_their_title_and_annotations_and_federated_ones_what_their_server_listed() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        &format!(
            "tools:\n  - name: wipe\n    title: Wipe the disk\n    description: Wipes.\n    \
             annotations: {{destructiveHint: true, openWorldHint: false}}\n    backend: {{builtin: echo}}\n  \
             - name: lookup\n    description: Looks up.\n    idempotent: true\n    backend: {{builtin: echo}}\n\
             mcp_servers:\n{}",
            crate::common::mcp::stdio_server(
                "notes",
                "notes_server.py",
                &[],
                "    prefix: notes_\n    include: [list_notes, add_note]\n"
            )
        ),
    );
    let hash = toolgate::identity::hash_key("k");
    dir.file("toolgate.yaml", &format!("principals:\n  - name: all\n    api_key_sha256: {hash}\n    tools: [\"*\"]\n"));
    let (_child, url, _log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let lines = sdk(&["--url", &url, "--header", "Authorization=Bearer k", r#"notes_list_notes={}"#]);
    let tools = lines.iter().find_map(|l| l.get("tools")).unwrap().as_array().unwrap();
    let tool = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("no {name}"));
    // A registry tool: its title and hints; idempotentHint from `idempotent`.
    assert_eq!(tool("wipe")["title"], "Wipe the disk");
    assert_eq!(
        tool("wipe")["annotations"],
        json!({"destructiveHint": true, "idempotentHint": false, "openWorldHint": false})
    );
    assert_eq!(tool("lookup")["annotations"], json!({"idempotentHint": true}));
    assert!(tool("lookup").get("title").is_none());
    // A federated tool: what the server listed, unchanged.
    let listed = tool("notes_list_notes");
    assert_eq!(listed["title"], "List notes");
    assert_eq!(listed["annotations"], json!({"readOnlyHint": true, "openWorldHint": false}));
    assert_eq!(listed["icons"], json!([{"src": "data:image/png;base64,iVBORw0KGgo=", "mimeType": "image/png"}]));
    assert_eq!(listed["outputSchema"]["properties"]["result"]["type"], "array", "{listed}");
    // Its structured result passes through.
    let result = &answer(&lines, "notes_list_notes")["result"];
    assert_eq!(result["structuredContent"], json!({"result": ["ideas", "todo"]}), "{result}");
}

#[test]
fn a_title_or_annotations_the_catalogue_cannot_take_are_reported_at_load() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: a\n    title: \" \"\n    description: A.\n    backend: {builtin: echo}\n  \
         - name: b\n    description: B.\n    annotations: {readOnly: true}\n    backend: {builtin: echo}\n  \
         - name: c\n    description: C.\n    annotations: {destructiveHint: \"yes\"}\n    backend: {builtin: echo}\n",
    );
    let out = toolgate().current_dir(dir.dir.path()).args(["validate", "--catalog", "registry"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("tools[0] (a).title: must not be empty"), "{text}");
    assert!(text.contains("tools[1] (b).annotations: unknown field `readOnly`"), "{text}");
    assert!(text.contains("tools[2] (c).annotations"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_an_oauth_resource_server_access_tokens_name_principals_and_are_never_passed_on() {
    use crate::common::jwt::Signer;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let backend = crate::common::backend::start().await;
    let (idp, stranger) =
        (Signer::new(jsonwebtoken::Algorithm::ES256, "idp-1"), Signer::new(jsonwebtoken::Algorithm::ES256, "idp-1"));
    let dir = CatalogDir::new();
    catalogue(&dir);
    let tools = std::fs::read_to_string(dir.registry().join("tools.yaml")).unwrap();
    dir.file(
        "registry/tools.yaml",
        &tools.replace(
            "toolsets:",
            &format!(
                "  - name: whoami\n    description: Says who calls.\n    \
                 backend: {{http: {{url: \"{}\", forward_user_token: true}}}}\ntoolsets:",
                backend.url("/echo")
            ),
        ),
    );
    dir.file("jwks.json", &json!({"keys": [idp.jwk()]}).to_string());
    let hash = toolgate::identity::hash_key("ops-key");
    dir.file(
        "toolgate.yaml",
        &format!(
            "principals:\n  - name: researcher\n    oauth_client_id: research-app\n    tools: [research, whoami]\n  \
             - name: mcp-users\n    api_key_sha256: {hash}\n    tools: [calculator]\n\
             mcp_front_door:\n  oauth:\n    resource: https://tools.example.test/mcp\n    \
             authorization_servers: [https://idp.example.test]\n    issuer: https://idp.example.test\n    \
             jwks_file: jwks.json\n    scopes: [tools]\n    principal: mcp-users\n"
        ),
    );
    let (_child, url, _log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    // The protected resource metadata (RFC 9728), at both well-known paths.
    let base = url.trim_end_matches("/mcp");
    for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"] {
        let response = reqwest::get(format!("{base}{path}")).await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let metadata: Value = response.json().await.unwrap();
        assert_eq!(
            metadata,
            json!({"resource": "https://tools.example.test/mcp", "authorization_servers": ["https://idp.example.test"],
                   "scopes_supported": ["tools"], "bearer_methods_supported": ["header"]})
        );
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let claims = |client: &str, scope: &str, audience: &str| {
        json!({"sub": "alice", "iss": "https://idp.example.test", "aud": audience, "exp": now + 600,
               "client_id": client, "scope": scope})
    };
    let resource = "https://tools.example.test/mcp";
    let metadata = r#"resource_metadata="https://tools.example.test/.well-known/oauth-protected-resource/mcp""#;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    // No credential: 401 pointing at the metadata.
    let (status, headers, _) = post(&url, &[], init).await;
    assert_eq!((status, headers["www-authenticate"].to_str().unwrap()), (401, format!("Bearer {metadata}").as_str()));
    // A token for another audience, signed by a stranger, or expired: 401 invalid_token.
    let expired = json!({"sub": "alice", "iss": "https://idp.example.test", "aud": resource, "exp": now - 3600,
                         "client_id": "research-app", "scope": "tools"});
    for token in [
        idp.token(claims("research-app", "tools", "https://elsewhere.test/mcp")),
        stranger.token(claims("research-app", "tools", resource)),
        idp.token(expired),
    ] {
        let bearer = format!("Bearer {token}");
        let (status, headers, _) = post(&url, &[("authorization", &bearer)], init).await;
        assert_eq!(status, 401);
        assert_eq!(headers["www-authenticate"], format!(r#"Bearer error="invalid_token", {metadata}"#).as_str());
    }
    // Without the scope: 403 insufficient_scope.
    let bearer = format!("Bearer {}", idp.token(claims("research-app", "read", resource)));
    let (status, headers, _) = post(&url, &[("authorization", &bearer)], init).await;
    assert_eq!(status, 403);
    assert_eq!(
        headers["www-authenticate"],
        format!(r#"Bearer error="insufficient_scope", scope="tools", {metadata}"#).as_str()
    );
    // The token's client names its principal; another client gets oauth.principal's grants.
    let researcher = format!("Authorization=Bearer {}", idp.token(claims("research-app", "tools openid", resource)));
    let lines = sdk(&["--url", &url, "--header", &researcher, r#"whoami={}"#, r#"mark={}"#]);
    assert_eq!(names(&lines), ["web_search", "whoami"]);
    assert_eq!(answer(&lines, "whoami")["result"]["isError"], false, "{lines:?}");
    assert_eq!(backend.seen.last_header("x-toolgate-principal").as_deref(), Some("researcher"));
    assert_eq!(backend.seen.last_header("x-toolgate-user").as_deref(), Some("alice"));
    assert_eq!(backend.seen.last_header("authorization"), None, "the access token is never passed on");
    let other = format!("Authorization=Bearer {}", idp.token(claims("other-app", "tools", resource)));
    assert_eq!(names(&sdk(&["--url", &url, "--header", &other])), ["calculator"]);
    // The principal's API key still works beside OAuth.
    assert_eq!(names(&sdk(&["--url", &url, "--header", "Authorization=Bearer ops-key"])), ["calculator"]);
    assert!(!dir.registry().join("ran").exists(), "mark never ran");
}

/// The MCP front door's document.
fn readme_section() -> String {
    std::fs::read_to_string(repo().join("docs/mcp.md")).unwrap()
}

#[test]
fn the_readmes_client_snippets_are_valid_and_work_on_the_shipped_catalogue() {
    let section = readme_section();
    let blocks: Vec<Value> = section
        .split("```json\n")
        .skip(1)
        .map(|rest| {
            let block = &rest[..rest.find("```").unwrap()];
            serde_json::from_str(block).unwrap_or_else(|err| panic!("a JSON snippet does not parse ({err}):\n{block}"))
        })
        .collect();
    assert_eq!(blocks.len(), 3, "Claude Desktop, Cursor and VS Code");
    // Claude Desktop's: the command it launches serves the shipped catalogue over stdio.
    let server = &blocks[0]["mcpServers"]["toolgate"];
    assert_eq!(server["command"], "toolgate");
    let mut argv = vec![Value::String(env!("CARGO_BIN_EXE_toolgate").to_owned())];
    argv.extend(server["args"].as_array().unwrap().iter().cloned());
    let argv = Value::Array(argv).to_string();
    let root = repo().display().to_string();
    let lines = sdk(&["--stdio", &argv, "--cwd", &root, "--era", "initialize", r#"TrackParcel={"code": "PK-1001"}"#]);
    assert!(names(&lines).contains(&"track_parcel".to_owned()), "{lines:?}");
    assert!(answer(&lines, "TrackParcel").get("result").is_some(), "{lines:?}");
    // VS Code's: one toolset's endpoint, on the shipped catalogue with the courier pack.
    let url = blocks[2]["servers"]["toolgate"]["url"].as_str().unwrap();
    let path = &url[url.find("/mcp").unwrap()..];
    assert_eq!(blocks[1]["mcpServers"]["toolgate"]["url"], url.replace("/toolsets/courier", ""));
    let mut command = toolgate();
    command.current_dir(repo()).args([
        "serve",
        "--pack",
        "courier",
        "--listen",
        "127.0.0.1:0",
        "--mcp-listen",
        "127.0.0.1:0",
    ]);
    let (_child, served, _log) = serve_command(command);
    let lines = sdk(&["--url", &served.replace("/mcp", path)]);
    assert_eq!(names(&lines), ["reschedule_delivery", "track_parcel"]);
    // The documented names are the gateway's own.
    for name in ["dev.toolgate/repairs", "dev.toolgate/replayed", "dev.toolgate/error_kind", "dev.toolgate/retryable"] {
        assert!(section.contains(name), "{name}");
    }
}

/// A session-era request of `session` to `url` (a call's answer comes as
/// server-sent events: its text is returned whole).
async fn in_session(client: &reqwest::Client, url: &str, session: &str, body: Value) -> (u16, String) {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Reads `events` until their text holds `needle`; `None` if they end first.
async fn read_until(
    events: &mut (impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    needle: &str,
) -> Option<String> {
    use futures::StreamExt;
    let mut text = String::new();
    while !text.contains(needle) {
        let chunk = tokio::time::timeout(Duration::from_secs(60), events.next()).await.expect("an event in time")?;
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    Some(text)
}

/// Waits (at most a minute) until `needle` is logged once more than `seen`.
async fn logged(log: &LogLines, needle: &str, seen: usize) {
    for _ in 0..1200 {
        if log.count(needle) > seen {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("'{needle}' not logged:\n{}", log.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_parked_and_keeps_its_stream_its_calls_and_its_id() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = CatalogDir::new();
    catalogue(&dir);
    let filter = "info,rmcp=warn,rmcp::service=error,toolgate::front::mcp::sessions=debug";
    let (_child, url, log) = serve_env(dir.dir.path(), &[], &[("TOOLGATE_LOG", filter)]);
    let client = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "idle", "version": "1"}}});
    let response = client
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    response.bytes().await.unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(in_session(&client, &url, &session, initialized).await.0, 202);
    // The session's GET stream opens with its priming event.
    let stream = client
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let mut events = Box::pin(stream.bytes_stream());
    read_until(&mut events, "id: 0").await.expect("a priming event");
    let call = |id: u64, tool: &str| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {"query": "tides"}}});
    let (status, answer) = in_session(&client, &url, &session, call(2, "web_search")).await;
    assert_eq!(status, 200);
    assert!(answer.contains("tides") && answer.contains(r#""id":2"#), "{answer}");
    // Idle, the session is parked: what answered it stops.
    let parked = format!("MCP session {session} parked");
    logged(&log, &parked, 0).await;
    // Its stream still tells it of a change.
    let tools = std::fs::read_to_string(dir.registry().join("tools.yaml")).unwrap();
    let added = tools.replace(
        "toolsets:",
        "  - name: weather\n    description: The weather.\n    backend: {builtin: echo}\ntoolsets:",
    );
    dir.file("registry/tools.yaml", &added);
    read_until(&mut events, "notifications/tools/list_changed").await.expect("told of the change");
    // Its next call, under the same id, wakes it and sees the new tool.
    let (status, answer) = in_session(&client, &url, &session, call(3, "weather")).await;
    assert_eq!(status, 200);
    assert!(answer.contains("tides") && answer.contains(r#""id":3"#), "{answer}");
    // The log is read as it comes: wait for the line, then count it.
    let woken = format!("MCP session {session} woken");
    logged(&log, &woken, 0).await;
    assert_eq!(log.count(&woken), 1, "{}", log.text());
    // Parked again, then ended by DELETE: its stream ends with it.
    logged(&log, &parked, 1).await;
    let delete = |session: String| {
        let client = client.clone();
        let url = url.clone();
        async move { client.delete(&url).header("mcp-session-id", session).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(delete(session.clone()).await, 200);
    assert!(read_until(&mut events, "never sent").await.is_none(), "the stream ends");
    assert_eq!(delete(session.clone()).await, 404);
    assert_eq!(in_session(&client, &url, &session, call(4, "web_search")).await.0, 404);
    assert!(!log.text().contains("ERROR"), "{}", log.text());
}
