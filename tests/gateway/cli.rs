//! The `toolgate` binary as an operator uses it: validate, tools list,
//! resolve, and serve's life cycle (bind after load, log line, SIGTERM).

use std::{process::Command, time::Duration};

use toolgate::{
    catalog::BuiltinTool,
    proto::v1::{tool_gateway_service_client::ToolGatewayServiceClient, ResolveRequest},
};

use crate::common::{run, stderr, stdout, toolgate, CatalogDir};

const GOOD: &str = "tools:\n  - name: web_search\n    description: Search the web.\n    backend: {builtin: echo}\n";
const SHADOWING: &str = "tools:\n  - name: echo\n    description: mine\n    backend: {builtin: echo}\n";

fn assert_no_backtrace(text: &str) {
    for marker in ["panicked", "backtrace", "RUST_BACKTRACE", "stack backtrace"] {
        assert!(!text.contains(marker), "{marker} in:\n{text}");
    }
}

#[test]
fn validate_lists_every_problem_and_exits_non_zero() {
    let dir = CatalogDir::new();
    dir.file("registry/a.yaml", "tools:\n  - name: x\n    descripton: y\n    backend: {builtin: ech}\n");
    dir.file("registry/b.yaml", "tools: [\n");
    let out = run(dir.dir.path(), &["validate", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("error: registry/a.yaml: tools[0] (x): unknown field 'descripton', did you mean 'description'?"),
        "{err}"
    );
    assert!(
        err.contains(
            "error: registry/a.yaml: tools[0] (x).backend.builtin: unknown built-in tool 'ech', did you mean 'echo'?"
        ),
        "{err}"
    );
    assert!(err.contains("error: registry/b.yaml: line 2 column 1: invalid YAML"), "{err}");
    assert!(err.contains("error: the catalogue has 4 problems"), "{err}");
    assert_no_backtrace(&err);
}

#[test]
fn validate_strict_turns_warnings_into_errors() {
    let dir = CatalogDir::new();
    dir.file("registry/a.yaml", SHADOWING);
    let out = run(dir.dir.path(), &["validate", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("catalogue ok: 3 tools, 0 toolsets, 1 warning"), "{}", stdout(&out));
    assert!(stderr(&out).contains("warning: <builtin>: tools.echo: tool 'echo' is shadowed"), "{}", stderr(&out));

    let strict = run(dir.dir.path(), &["validate", "--catalog", "registry", "--strict"]);
    assert_eq!(strict.status.code(), Some(1));
    assert!(stderr(&strict).contains("(an error under strict validation)"), "{}", stderr(&strict));

    // TOOLGATE_STRICT_TOOLS makes the policy strict too.
    let env = toolgate()
        .current_dir(dir.dir.path())
        .env("TOOLGATE_STRICT_TOOLS", " Yes ")
        .args(["validate", "--catalog", "registry"])
        .output()
        .unwrap();
    assert_eq!(env.status.code(), Some(1));
}

#[test]
fn a_missing_default_catalog_is_a_clear_error() {
    let dir = CatalogDir::new();
    let out = run(dir.dir.path(), &["validate"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("error: catalog: no such file or folder"), "{}", stderr(&out));
}

#[test]
fn tools_list_formats() {
    let dir = CatalogDir::new();
    dir.file("registry/a.yaml", GOOD);
    let table = run(dir.dir.path(), &["tools", "list", "--catalog", "registry"]);
    let text = stdout(&table);
    assert!(text.starts_with("NAME "), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("web_search ") && l.contains("registry") && l.ends_with("Search the web.")),
        "{text}"
    );

    let json = stdout(&run(dir.dir.path(), &["tools", "list", "--catalog", "registry", "--format", "json"]));
    let list: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1 + BuiltinTool::ALL.len());
    let web_search = list.as_array().unwrap().iter().find(|t| t["name"] == "web_search").expect("listed");
    assert_eq!(web_search["source"], "registry");

    for (format, probe) in
        [("openai", "/0/function/name"), ("anthropic", "/0/input_schema/type"), ("mcp", "/tools/0/inputSchema/type")]
    {
        let out = stdout(&run(dir.dir.path(), &["tools", "list", "--catalog", "registry", "--format", format]));
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(value.pointer(probe).is_some(), "{format}: {out}");
    }
}

#[test]
fn resolve_suggests_and_strict_fails() {
    let dir = CatalogDir::new();
    dir.file("registry/a.yaml", GOOD);
    let out = run(dir.dir.path(), &["resolve", "web_serch", "echo", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).lines().nth(1).unwrap().starts_with("echo "), "{}", stdout(&out));
    assert_eq!(
        stderr(&out).trim(),
        "warning: Unknown tool 'web_serch'. Did you mean 'web_search'? Run 'toolgate tools list'."
    );
    let strict = run(dir.dir.path(), &["resolve", "web_serch", "--strict", "--catalog", "registry"]);
    assert_eq!(strict.status.code(), Some(1));
    assert_eq!(
        stderr(&strict).trim(),
        "Unknown tool 'web_serch'. Did you mean 'web_search'? Run 'toolgate tools list'."
    );
}

#[test]
fn serve_with_a_bad_catalogue_exits_before_binding() {
    let dir = CatalogDir::new();
    dir.file("registry/a.yaml", "tools:\n  - name: x\n");
    // The port is taken: had serve bound before loading, it would fail on
    // the port instead of listing the catalogue's problems.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let out = run(dir.dir.path(), &["serve", "--catalog", "registry", "--listen", &listen]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("registry/a.yaml: tools[0] (x): missing field 'description'"), "{err}");
    assert!(err.contains("registry/a.yaml: tools[0] (x): missing field 'backend'"), "{err}");
    assert!(!err.contains("listen"), "{err}");
    assert_no_backtrace(&err);

    // With a good catalogue the same port is the problem, and says so.
    dir.file("registry/a.yaml", GOOD);
    let out = run(dir.dir.path(), &["serve", "--catalog", "registry", "--listen", &listen]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(&format!("cannot listen on {listen}")), "{}", stderr(&out));
}

#[test]
fn serve_refuses_strict_warnings_and_remote_addresses() {
    let dir = CatalogDir::new();
    dir.file("registry/a.yaml", SHADOWING);
    let strict = run(dir.dir.path(), &["serve", "--catalog", "registry", "--strict", "--listen", "127.0.0.1:0"]);
    assert_eq!(strict.status.code(), Some(1));
    assert!(stderr(&strict).contains("is shadowed"), "{}", stderr(&strict));

    let remote = run(dir.dir.path(), &["serve", "--catalog", "registry", "--listen", "0.0.0.0:0"]);
    assert_eq!(remote.status.code(), Some(1));
    assert!(stderr(&remote).contains("refusing to listen on 0.0.0.0:0"), "{}", stderr(&remote));
}

#[tokio::test]
async fn serve_logs_its_address_answers_and_stops_on_sigterm() {
    let dir = CatalogDir::new();
    dir.file("registry/a.yaml", GOOD);
    let (child, lines, listening) = crate::common::serve_registry(dir.dir.path(), &[]);
    assert!(listening.ends_with(&format!(" ({} tools)", 1 + BuiltinTool::ALL.len())), "{listening}");
    let addr = listening.split(' ').next().unwrap();
    let mut client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let response = client.resolve(ResolveRequest { names: vec!["web_search".into()], strict: None }).await.unwrap();
    assert_eq!(response.into_inner().tools[0].name, "web_search");

    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let status = tokio::task::spawn_blocking(move || {
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        (child.wait().unwrap(), rest)
    });
    let (status, rest) = tokio::time::timeout(Duration::from_secs(20), status).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(0), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("toolgate stopped")), "{rest:?}");
}

#[tokio::test]
async fn call_prints_the_outcome_and_fails_when_the_call_does() {
    let gw = crate::common::TestGateway::registry(crate::common::SEARCH_REGISTRY).start().await;
    let addr = format!("http://{}", gw.addr);
    let call = move |args: Vec<String>| {
        tokio::task::spawn_blocking(move || toolgate().arg("call").args(args).output().unwrap())
    };
    let ok =
        call(vec!["WebSearch".into(), r#"{"query": "rust",}"#.into(), "--addr".into(), addr.clone()]).await.unwrap();
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(
        stdout(&ok),
        "ok: web_search\nrepaired tool name: \"WebSearch\" -> \"web_search\"\n\
         repaired arguments JSON: \"{\\\"query\\\": \\\"rust\\\",}\" -> \"{\\\"query\\\": \\\"rust\\\"}\"\n\
         arguments: {\"query\":\"rust\"}\nresult: {\n  \"query\": \"rust\"\n}\n"
    );
    let failed = call(vec!["web_search".into(), "{}".into(), "--addr".into(), addr.clone()]).await.unwrap();
    assert_eq!(failed.status.code(), Some(1));
    assert_eq!(
        stdout(&failed),
        "error: INVALID_ARGUMENTS (retryable)\nmissing a required argument: 'query'. \
         Expected parameters for 'web_search' — required: ['query'], optional: ['limit'].\n"
    );
    // A misspelt key: not renamed (the schema allows other keys), but named.
    let misspelt = call(vec!["web_search".into(), r#"{"qeury": "rust"}"#.into(), "--addr".into(), addr.clone()]);
    let misspelt = misspelt.await.unwrap();
    assert_eq!(misspelt.status.code(), Some(1));
    let said = "missing a required argument: 'query'; 'qeury' was given, did you mean 'query'?";
    assert!(stdout(&misspelt).contains(said), "{}", stdout(&misspelt));
    let dry = call(vec![
        "search_the_web".into(),
        r#"{"query": "x"}"#.into(),
        "--dry-run".into(),
        "--addr".into(),
        addr.clone(),
    ])
    .await
    .unwrap();
    assert_eq!(dry.status.code(), Some(0));
    assert_eq!(stdout(&dry), "ok: web_search\narguments: {\"query\": \"x\"}\n");
    // The same idempotency key again: the first answer, said to be one.
    let once = |addr: String| {
        vec!["echo".into(), r#"{"n": 1}"#.into(), "--idempotency-key".into(), "k-1".into(), "--addr".into(), addr]
    };
    let first = call(once(addr.clone())).await.unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert!(!stdout(&first).contains("replayed"), "{}", stdout(&first));
    let again = call(once(addr.clone())).await.unwrap();
    assert_eq!(again.status.code(), Some(0));
    let text = stdout(&again);
    assert!(text.starts_with("ok: echo\nreplayed: the first answer to this idempotency key"), "{text}");
    let nowhere = format!("http://{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap());
    let down = call(vec!["echo".into(), "--addr".into(), nowhere.clone()]).await.unwrap();
    assert_eq!(down.status.code(), Some(1));
    assert!(stderr(&down).starts_with(&format!("error: cannot reach the gateway at {nowhere}")), "{}", stderr(&down));
    assert_no_backtrace(&stderr(&down));
}

#[test]
fn validate_warns_of_a_tool_bound_to_the_user_without_users_jwt_and_strict_fails() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: my_orders\n    description: The caller's orders.\n    parameters:\n      type: object\n      \
         properties: {customer: {type: string}}\n      required: [customer]\n    bind: {customer: user}\n    \
         backend: {builtin: echo}\n",
    );
    let out = run(dir.dir.path(), &["validate", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("1 warning\n"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            "warning: registry/tools.yaml: tools[0] (my_orders).bind: the tool 'my_orders' binds a parameter to the \
             user, but no users.jwt is configured"
        ),
        "{}",
        stderr(&out)
    );
    let strict = run(dir.dir.path(), &["validate", "--catalog", "registry", "--strict"]);
    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
    assert!(stderr(&strict).contains("(an error under strict validation)"), "{}", stderr(&strict));
}

#[test]
fn call_reaches_a_tls_gateway_by_host_and_port_with_its_ca_and_checks_an_https_url_against_the_system() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", GOOD);
    let ca = crate::common::pki::Ca::new("call test CA");
    let server = ca.issue("localhost", &["localhost"]);
    dir.file("server.pem", &server.cert);
    dir.file("server.key", &server.key);
    dir.file("ca.pem", &ca.pem());
    let (_child, _log, addr) =
        crate::common::serve_args(dir.dir.path(), &["--tls-cert", "server.pem", "--tls-key", "server.key"]);
    let port = addr.rsplit(':').next().unwrap();
    let by_port = format!("localhost:{port}");
    // host:port with --cacert: over TLS, verified against that CA.
    let ok =
        run(dir.dir.path(), &["call", "web_search", r#"{"query": "x"}"#, "--addr", &by_port, "--cacert", "ca.pem"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(stdout(&ok).starts_with("ok: web_search\n"), "{}", stdout(&ok));
    // An https URL without --cacert: TLS too, checked against the system's
    // roots, which do not hold this CA.
    let url = format!("https://localhost:{port}");
    let refused = run(dir.dir.path(), &["call", "web_search", r#"{"query": "x"}"#, "--addr", &url]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains("invalid peer certificate"), "{}", stderr(&refused));
}

#[test]
fn validate_reports_every_configuration_problem_not_the_first() {
    let dir = crate::common::CatalogDir::new();
    dir.file("registry/tools.yaml", "tools:\n  - name: lookup\n    description: x\n    backend: {builtin: echo}\n");
    dir.file(
        "toolgate.yaml",
        "listen: nowhere\n\
         principals:\n  - name: bot\n    api_key_sha256: not-hex\n    tools: [lookup]\n\
         rate_limits:\n  tools:\n    lookup: {per_minute: 0}\n",
    );
    let out = crate::common::run(dir.dir.path(), &["validate", "--catalog", "registry", "--config", "toolgate.yaml"]);
    let text = crate::common::stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{text}");
    for expected in [
        "invalid listen address 'nowhere'",
        "principals[0] (bot): api_key_sha256 must be 64 hexadecimal digits",
        "rate_limits.tools.lookup",
    ] {
        assert!(text.contains(expected), "{expected}\nnot in:\n{text}");
    }
}
