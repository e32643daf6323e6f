//! Policy over arguments (`principals[].when`, docs/security.md), through
//! the real binary: conditions hold at the gRPC and MCP doors, for keys,
//! end users and OAuth users, on arguments that needed repair and in dry runs; a denied
//! call never runs, takes no idempotency key, and a bad condition stops the
//! start with its place.

use tonic::{metadata::MetadataValue, Request};
use toolgate::proto::v1::{tool_gateway_service_client::ToolGatewayServiceClient, ErrorKind, ExecuteRequest};

use crate::common::{jwt::Signer, stderr, toolgate, CatalogDir, LogLines};

const KEY_SUPPORT: &str = "tg_support_key_0123456789";
const KEY_ADMIN: &str = "tg_admin_key_9876543210";

/// `refund_payment` appends a line to `refunds` each time it runs.
fn catalogue(dir: &CatalogDir) {
    dir.file(
        "registry/refund.py",
        "import json, sys\nargs = json.load(sys.stdin)\nopen('refunds', 'a').write(str(args['amount']) + '\\n')\n\
         print(json.dumps({'ok': True, 'result': 'refunded'}))\n",
    );
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: refund_payment\n    description: Refund a payment.\n    \
         parameters: {type: object, properties: {amount: {type: number}, order: {type: string}}, required: [amount]}\n    \
         backend: {command: {argv: [python3, refund.py]}}\n  \
         - name: read_file\n    description: Read a file.\n    \
         parameters: {type: object, properties: {path: {type: string}}, required: [path]}\n    \
         backend: {builtin: echo}\n",
    );
}

fn config(when: &str) -> String {
    format!(
        "principals:\n  - name: support\n    api_key_sha256: {}\n    tools: [refund_payment, read_file]\n    when:\n{when}  \
         - name: admin\n    api_key_sha256: {}\n    tools: [\"*\"]\n\
         users:\n  jwt: {{issuer: \"https://idp.test/\", audience: toolgate, jwks_file: certs/jwks.json}}\n",
        toolgate::identity::hash_key(KEY_SUPPORT),
        toolgate::identity::hash_key(KEY_ADMIN),
    )
}

const WHEN: &str =
    "      refund_payment: {if: \"args.amount <= 100 || (user != null && user.claims.role == 'supervisor')\", \
                    message: \"refunds over 100 need a supervisor\"}\n      \
                    read_file: {if: \"args.path.startsWith('/srv/')\", message: \"only files under /srv\"}\n";

fn refunds(dir: &CatalogDir) -> usize {
    std::fs::read_to_string(dir.registry().join("refunds")).map_or(0, |text| text.lines().count())
}

fn call(key: &str, tool: &str, arguments: &str, token: Option<&str>) -> Request<ExecuteRequest> {
    let call = ExecuteRequest { tool: tool.into(), arguments_json: arguments.into(), ..Default::default() };
    with(call, key, token)
}

fn with(call: ExecuteRequest, key: &str, token: Option<&str>) -> Request<ExecuteRequest> {
    let mut request = Request::new(call);
    request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {key}")).unwrap());
    if let Some(token) = token {
        request.metadata_mut().insert("x-toolgate-user-token", MetadataValue::try_from(token).unwrap());
    }
    request
}

fn signed(signer: &Signer, role: &str) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    signer.token(serde_json::json!({
        "sub": "alice", "iss": "https://idp.test/", "aud": "toolgate", "exp": now + 600, "role": role,
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditions_hold_at_the_grpc_door_for_keys_and_users() {
    let signer = Signer::new(jsonwebtoken::Algorithm::ES256, "es-1");
    let dir = CatalogDir::new();
    catalogue(&dir);
    dir.file("certs/jwks.json", &serde_json::json!({"keys": [signer.jwk()]}).to_string());
    dir.file("toolgate.yaml", &config(WHEN));
    let (mut child, log, addr) = crate::common::serve_config(dir.dir.path(), &[]);
    let log = LogLines::follow(log);
    let mut client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();

    let ok = client.execute(call(KEY_SUPPORT, "refund_payment", r#"{"amount": 50}"#, None)).await.unwrap();
    assert!(ok.into_inner().ok);
    assert_eq!(refunds(&dir), 1);

    // Over the line: denied, not retryable, the condition's message; the
    // tool never runs. Arguments that needed repair are judged repaired.
    for arguments in [r#"{"amount": 150}"#, r#"{"amount": 150,}"#, r#"{"Amount": 150}"#] {
        let denied = client.execute(call(KEY_SUPPORT, "refund_payment", arguments, None)).await.unwrap().into_inner();
        let error = denied.error.unwrap_or_else(|| panic!("{arguments} ran"));
        assert_eq!(error.kind, ErrorKind::PermissionDenied as i32, "{arguments}: {error:?}");
        assert_eq!(error.message, "refunds over 100 need a supervisor");
        assert!(!error.retryable);
    }
    // A drifted name is repaired to the tool, and still judged.
    let denied = client.execute(call(KEY_SUPPORT, "refundPayment", r#"{"amount": 500}"#, None)).await.unwrap();
    assert_eq!(denied.into_inner().error.unwrap().kind, ErrorKind::PermissionDenied as i32);
    assert_eq!(refunds(&dir), 1, "a denied call ran");

    // A dry run is judged too.
    let dry = ExecuteRequest {
        tool: "refund_payment".into(),
        arguments_json: r#"{"amount": 150}"#.into(),
        dry_run: true,
        ..Default::default()
    };
    let denied = client.execute(with(dry, KEY_SUPPORT, None)).await.unwrap().into_inner();
    assert_eq!(denied.error.unwrap().kind, ErrorKind::PermissionDenied as i32);

    // A denied call takes no idempotency key: the same key then runs.
    let keyed = |amount: u32| ExecuteRequest {
        tool: "refund_payment".into(),
        arguments_json: format!(r#"{{"amount": {amount}}}"#),
        idempotency_key: "refund-A1".into(),
        ..Default::default()
    };
    let denied = client.execute(with(keyed(150), KEY_SUPPORT, None)).await.unwrap().into_inner();
    assert_eq!(denied.error.unwrap().kind, ErrorKind::PermissionDenied as i32);
    let ran = client.execute(with(keyed(60), KEY_SUPPORT, None)).await.unwrap().into_inner();
    assert!(ran.ok, "{ran:?}");
    assert_eq!(refunds(&dir), 2);

    // The end user's claims count: a supervisor may refund more.
    let supervisor = signed(&signer, "supervisor");
    let ran = client.execute(call(KEY_SUPPORT, "refund_payment", r#"{"amount": 150}"#, Some(&supervisor))).await;
    assert!(ran.unwrap().into_inner().ok);
    let agent = signed(&signer, "agent");
    let denied = client.execute(call(KEY_SUPPORT, "refund_payment", r#"{"amount": 150}"#, Some(&agent))).await;
    assert_eq!(denied.unwrap().into_inner().error.unwrap().kind, ErrorKind::PermissionDenied as i32);
    assert_eq!(refunds(&dir), 3);

    // Each tool its own condition; a principal without conditions is free.
    let denied = client.execute(call(KEY_SUPPORT, "read_file", r#"{"path": "/etc/passwd"}"#, None)).await.unwrap();
    assert_eq!(denied.into_inner().error.unwrap().message, "only files under /srv");
    let read = client.execute(call(KEY_SUPPORT, "read_file", r#"{"path": "/srv/notes.txt"}"#, None)).await.unwrap();
    assert!(read.into_inner().ok);
    let admin = client.execute(call(KEY_ADMIN, "refund_payment", r#"{"amount": 900}"#, None)).await.unwrap();
    assert!(admin.into_inner().ok);
    assert_eq!(refunds(&dir), 4);

    // A reload with a bad condition is refused and the conditions in force
    // stay; a good one takes effect.
    let replace = |text: &str| {
        std::fs::write(dir.dir.path().join("toolgate.swp"), text).unwrap();
        std::fs::rename(dir.dir.path().join("toolgate.swp"), dir.dir.path().join("toolgate.yaml")).unwrap();
    };
    replace(&config("      refund_payment: {if: \"args.amount <=\", message: no}\n"));
    log.wait_for("reload rejected", 1).await;
    assert!(log.text().contains("when.refund_payment: the condition"), "{}", log.text());
    let denied = client.execute(call(KEY_SUPPORT, "refund_payment", r#"{"amount": 150}"#, None)).await.unwrap();
    assert_eq!(denied.into_inner().error.unwrap().kind, ErrorKind::PermissionDenied as i32);
    replace(&config("      refund_payment: {if: \"args.amount <= 1000\", message: no}\n"));
    log.wait_for("catalogue and configuration reloaded", 1).await;
    let ran = client.execute(call(KEY_SUPPORT, "refund_payment", r#"{"amount": 150}"#, None)).await.unwrap();
    assert!(ran.into_inner().ok);
    assert_eq!(refunds(&dir), 5);
    child.kill().unwrap();
    let _ = child.wait();
}

/// `refund_payment` called at the MCP door (the stateless era) with
/// `arguments`, as `bearer`; the JSON-RPC answer.
async fn mcp_refund(url: &str, bearer: &str, arguments: serde_json::Value) -> serde_json::Value {
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "refund_payment", "arguments": arguments, "_meta": meta},
    });
    let answer = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "refund_payment")
        .header("authorization", format!("Bearer {bearer}"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    crate::mcp_front_door::rpc(&answer.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditions_hold_at_the_mcp_door() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let signer = Signer::new(jsonwebtoken::Algorithm::ES256, "es-1");
    dir.file("certs/jwks.json", &serde_json::json!({"keys": [signer.jwk()]}).to_string());
    dir.file("toolgate.yaml", &config(WHEN));
    let (_child, url, _log) = crate::mcp_front_door::serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ok = mcp_refund(&url, KEY_SUPPORT, serde_json::json!({"amount": 20})).await;
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    let denied = mcp_refund(&url, KEY_SUPPORT, serde_json::json!({"amount": 200})).await;
    let result = &denied["result"];
    assert_eq!(result["isError"], true, "{denied}");
    assert_eq!(result["_meta"]["dev.toolgate/error_kind"], "PERMISSION_DENIED");
    assert_eq!(result["_meta"]["dev.toolgate/retryable"], false);
    assert!(result["content"][0]["text"].as_str().unwrap().contains("refunds over 100 need a supervisor"), "{result}");
    assert_eq!(refunds(&dir), 1);
}

/// The MCP door as an OAuth resource server: a client's access token names
/// its principal, and its claims are the `user` a condition reads, on
/// arguments as repaired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditions_hold_at_the_mcp_door_for_oauth_users() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let idp = Signer::new(jsonwebtoken::Algorithm::ES256, "idp-1");
    dir.file("certs/jwks.json", &serde_json::json!({"keys": [idp.jwk()]}).to_string());
    dir.file(
        "toolgate.yaml",
        &format!(
            "principals:\n  - name: support\n    oauth_client_id: support-app\n    tools: [refund_payment]\n    \
             when:\n      refund_payment: {{if: \"args.amount <= 100 || user.claims.role == 'supervisor'\", \
             message: \"refunds over 100 need a supervisor\"}}\n  \
             - name: mcp-users\n    api_key_sha256: {}\n    tools: [read_file]\n\
             mcp_front_door:\n  oauth:\n    resource: https://tools.example.test/mcp\n    \
             authorization_servers: [https://idp.example.test]\n    issuer: https://idp.example.test\n    \
             jwks_file: certs/jwks.json\n    scopes: [tools]\n    principal: mcp-users\n",
            toolgate::identity::hash_key(KEY_ADMIN),
        ),
    );
    let (_child, url, _log) = crate::mcp_front_door::serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let token = |role: &str| {
        idp.token(serde_json::json!({
            "sub": "alice", "iss": "https://idp.example.test", "aud": "https://tools.example.test/mcp",
            "exp": now + 600, "client_id": "support-app", "scope": "tools", "role": role,
        }))
    };
    let ok = mcp_refund(&url, &token("clerk"), serde_json::json!({"amount": 20})).await;
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    // "200" is repaired to 200 before the condition reads it.
    let denied = mcp_refund(&url, &token("clerk"), serde_json::json!({"amount": "200"})).await;
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert_eq!(denied["result"]["_meta"]["dev.toolgate/error_kind"], "PERMISSION_DENIED", "{denied}");
    assert!(denied["result"]["content"][0]["text"].as_str().unwrap().contains("refunds over 100 need a supervisor"));
    let supervised = mcp_refund(&url, &token("supervisor"), serde_json::json!({"amount": "200"})).await;
    assert_eq!(supervised["result"]["isError"], false, "{supervised}");
    assert_eq!(std::fs::read_to_string(dir.registry().join("refunds")).unwrap(), "20\n200\n");
}

#[test]
fn a_bad_condition_stops_the_start_with_its_place() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let signer = Signer::new(jsonwebtoken::Algorithm::ES256, "es-1");
    dir.file("certs/jwks.json", &serde_json::json!({"keys": [signer.jwk()]}).to_string());
    let cases = [
        ("      refund_payment: {if: \"args.amount <=\", message: no}\n", "when.refund_payment: the condition"),
        ("      refund_payment: {if: \"true\"}\n", "when.refund_payment: expected {if: CEL expression, message: text}"),
        ("      refund_paymnt: {if: \"true\", message: no}\n", "names unknown tool 'refund_paymnt'"),
    ];
    for (when, expected) in cases {
        dir.file("toolgate.yaml", &config(when));
        let out = toolgate()
            .current_dir(dir.dir.path())
            .args(["validate", "--catalog", "registry", "--config", "toolgate.yaml"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{when}");
        let said = stderr(&out);
        assert!(said.contains(expected), "{when}: {said}");
        assert!(said.contains("principals[0] (support)"), "{said}");
    }
}
