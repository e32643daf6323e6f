//! Identity and permissions (docs/identity.md), through the real
//! binary: API keys, client certificates over real TLS, grants, the health
//! listener, certificate rotation, and `toolgate auth`.

use std::{io::Write, path::Path, time::Duration};

use tonic::{
    metadata::MetadataValue,
    transport::{Certificate, Channel, ClientTlsConfig, Identity},
    Code, Request,
};
use toolgate::proto::v1::{
    tool_gateway_service_client::ToolGatewayServiceClient, ErrorKind, ExecuteRequest, ListToolsRequest, ResolveRequest,
};

use crate::common::{
    jwt::{b64, Signer},
    pki::Ca,
    stderr, stdout, toolgate, CatalogDir, Reaped, Stderr,
};

const KEY_SUPPORT: &str = "tg_support_key_0123456789";
const KEY_ADMIN: &str = "tg_admin_key_9876543210";

/// A registry whose `delete_file` writes a marker file when it runs.
fn catalogue(dir: &CatalogDir) {
    dir.file("registry/delete.py", "import json, sys\njson.load(sys.stdin)\nopen('deleted', 'w').write('x')\nprint(json.dumps({'ok': True, 'result': 'deleted'}))\n");
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: track_parcel\n    description: Track a parcel.\n    backend: {builtin: echo}\n  \
         - name: reschedule_delivery\n    description: Reschedule a delivery.\n    backend: {builtin: echo}\n  \
         - name: delete_file\n    description: Delete a file.\n    backend: {command: {argv: [python3, delete.py]}}\n\
         toolsets:\n  courier: [track_parcel, reschedule_delivery]\n",
    );
}

/// A configuration with one principal, `admin`, granted everything, and
/// `users.jwt` when given.
fn admin_config(jwt: Option<&str>) -> String {
    let admin = toolgate::identity::hash_key(KEY_ADMIN);
    let mut config = format!("principals:\n  - name: admin\n    api_key_sha256: {admin}\n    tools: [\"*\"]\n");
    if let Some(jwt) = jwt {
        config.push_str(&format!("users:\n  jwt: {jwt}\n"));
    }
    config
}

fn principals(extra: &str) -> String {
    format!(
        "principals:\n  - name: support-bot\n    api_key_sha256: {}\n    tools: [courier]\n  \
         - name: admin\n    api_key_sha256: {}\n    tools: [\"*\"]\n{extra}",
        toolgate::identity::hash_key(KEY_SUPPORT),
        toolgate::identity::hash_key(KEY_ADMIN)
    )
}

/// `toolgate serve --config toolgate.yaml --catalog registry` in `dir`.
fn serve(dir: &Path, args: &[&str]) -> (Reaped, Stderr, String) {
    crate::common::serve_config(dir, args)
}

fn with_key<T>(message: T, key: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(key) = key {
        request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {key}")).unwrap());
    }
    request
}

async fn names(client: &mut ToolGatewayServiceClient<Channel>, key: &str) -> Vec<String> {
    let response = client.list_tools(with_key(ListToolsRequest::default(), Some(key))).await.unwrap().into_inner();
    response.tools.into_iter().map(|t| t.name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principals_see_and_run_only_what_they_are_granted() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    dir.file("toolgate.yaml", &principals(""));
    let (mut child, log, addr) = serve(dir.dir.path(), &[]);
    let log = std::thread::spawn(move || log.map_while(Result::ok).collect::<Vec<String>>());
    let mut client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();

    // No credential, a wrong one, or a malformed one: one answer.
    for key in [None, Some("tg_wrong"), Some("")] {
        let status = client.list_tools(with_key(ListToolsRequest::default(), key)).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{key:?}");
        assert_eq!(status.message(), "missing or invalid credentials");
    }
    for header in [format!("Basic {KEY_SUPPORT}"), KEY_SUPPORT.to_owned(), "Bearer".to_owned()] {
        let mut request = Request::new(ResolveRequest { names: vec!["courier".into()], strict: None });
        request.metadata_mut().insert("authorization", MetadataValue::try_from(header.as_str()).unwrap());
        assert_eq!(client.resolve(request).await.unwrap_err().code(), Code::Unauthenticated, "{header}");
    }
    let mut twice = Request::new(ResolveRequest { names: vec!["courier".into()], strict: None });
    let value = MetadataValue::try_from(format!("Bearer {KEY_SUPPORT}")).unwrap();
    twice.metadata_mut().append("authorization", value.clone());
    twice.metadata_mut().append("authorization", value);
    assert_eq!(client.resolve(twice).await.unwrap_err().code(), Code::Unauthenticated);

    // The grants bound everything the caller sees.
    assert_eq!(names(&mut client, KEY_SUPPORT).await, ["reschedule_delivery", "track_parcel"]);
    assert_eq!(names(&mut client, KEY_ADMIN).await.len(), 3 + toolgate::catalog::BuiltinTool::ALL.len());
    let resolve = ResolveRequest { names: vec!["delete_file".into(), "delete_fil".into()], strict: None };
    let resolved = client.resolve(with_key(resolve, Some(KEY_SUPPORT))).await.unwrap().into_inner();
    assert!(resolved.tools.is_empty());
    assert_eq!(resolved.unknown.len(), 2);
    assert!(resolved.unknown.iter().all(|u| u.suggestions.is_empty()), "{:?}", resolved.unknown);
    assert!(!resolved.message.contains("delete_file'?"), "{}", resolved.message);

    // A drifted name of a tool outside the grants never runs.
    let call = ExecuteRequest { tool: "DeleteFile".into(), arguments_json: "{}".into(), ..Default::default() };
    let response = client.execute(with_key(call.clone(), Some(KEY_SUPPORT))).await.unwrap().into_inner();
    let error = response.error.unwrap();
    assert_eq!(error.kind, ErrorKind::UnknownTool as i32);
    assert_eq!(error.available_tools, ["reschedule_delivery", "track_parcel"]);
    assert_eq!(error.available_tools_total, 2);
    assert!(!error.message.contains("delete_file"), "{}", error.message);
    let strict = ExecuteRequest { tools: vec!["delete_file".into()], strict: Some(true), ..call.clone() };
    let status = client.execute(with_key(strict, Some(KEY_SUPPORT))).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "Unknown tool 'delete_file'. Run 'toolgate tools list'.");
    assert!(!dir.registry().join("deleted").exists(), "a tool outside the grants ran");

    // The same drifted name from a principal granted everything runs.
    let response = client.execute(with_key(call, Some(KEY_ADMIN))).await.unwrap().into_inner();
    assert!(response.ok, "{response:?}");
    assert_eq!(response.repairs[0].repaired, "delete_file");
    assert!(dir.registry().join("deleted").exists());

    // Health and reflection need no credential.
    let channel = Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let check = tonic_health::pb::HealthCheckRequest { service: String::new() };
    assert_eq!(health.check(check).await.unwrap().into_inner().status, 1);
    child.kill().unwrap();
    let _ = child.wait();
    // One audit line per Execute: who, what, how it ended; no arguments.
    let log = log.join().unwrap();
    let audit: Vec<&String> = log.iter().filter(|l| l.contains("audit: execute")).collect();
    assert_eq!(audit.len(), 2, "{log:?}");
    assert!(
        audit[0].contains(r#"principal="support-bot""#) && audit[0].contains(r#"tool="_unresolved""#),
        "{}",
        audit[0]
    );
    assert!(audit[0].contains(r#"outcome="unknown_tool""#), "{}", audit[0]);
    assert!(audit[1].contains(r#"principal="admin""#) && audit[1].contains(r#"tool="delete_file""#), "{}", audit[1]);
    assert!(audit[1].contains(r#"outcome="ok""#) && audit[1].contains("repairs=1"), "{}", audit[1]);
}

#[test]
fn principals_and_grants_are_checked_at_load() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let hash = toolgate::identity::hash_key("k");
    dir.file(
        "toolgate.yaml",
        &format!(
            "principals:\n  - name: a\n    api_key_sha256: {hash}\n    tools: [track_parcl, courier]\n  \
             - name: b\n    api_key_sha256: {hash}\n    tools: [\"*\"]\n  - name: c\n    tools: [courier]\n"
        ),
    );
    let out = crate::common::run(dir.dir.path(), &["validate", "--config", "toolgate.yaml", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    assert!(
        text.contains("toolgate.yaml: principals[1] (b): the same API key is also the key of principals[0] (a)"),
        "{text}"
    );
    assert!(
        text.contains(
            "toolgate.yaml: principals[2] (c): a principal needs a credential: api_key_sha256, client_cert or oauth_client_id"
        ),
        "{text}"
    );
    // Fixed, an unknown grant is a catalogue error with a did-you-mean.
    dir.file(
        "toolgate.yaml",
        &format!("principals:\n  - name: a\n    api_key_sha256: {hash}\n    tools: [track_parcl, courier]\n"),
    );
    let out = crate::common::run(dir.dir.path(), &["validate", "--config", "toolgate.yaml", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(
            "toolgate.yaml: principals[0] (a).tools[0]: principal 'a' is granted unknown tool 'track_parcl', did you mean 'track_parcel'?"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn auth_new_key_and_hash_key() {
    let out = toolgate().args(["auth", "new-key"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let key = text.lines().find_map(|l| l.strip_prefix("key:")).unwrap().trim().to_owned();
    let hash = text.lines().find_map(|l| l.strip_prefix("api_key_sha256:")).unwrap().trim().to_owned();
    let mut child = toolgate()
        .args(["auth", "hash-key"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{key}\n").as_bytes()).unwrap();
    let hashed = child.wait_with_output().unwrap();
    assert_eq!(stdout(&hashed).trim(), hash);
    let empty = toolgate().args(["auth", "hash-key"]).stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(empty.status.code(), Some(1));
}

/// Writes the PEM files of a server certificate for 127.0.0.1 signed by `ca`.
fn server_files(dir: &CatalogDir, ca: &Ca) {
    let server = ca.issue("toolgate", &["127.0.0.1", "localhost"]);
    dir.file("certs/server.pem", &server.cert);
    dir.file("certs/server.key", &server.key);
}

async fn tls_client(
    addr: &str,
    ca: &Ca,
    identity: Option<(&str, &str)>,
) -> Result<ToolGatewayServiceClient<Channel>, String> {
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca.pem())).domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    let channel = Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok(ToolGatewayServiceClient::new(channel))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_over_tls_name_principals_and_certificates_rotate_on_sighup() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let (server_ca, client_ca, stranger_ca) = (Ca::new("server CA"), Ca::new("client CA"), Ca::new("another CA"));
    server_files(&dir, &server_ca);
    dir.file("certs/clients.pem", &client_ca.pem());
    let billing = client_ca.issue("billing-agent", &[]);
    let by_san = client_ca.issue("someone", &["ops.example"]);
    let stranger = stranger_ca.issue("billing-agent", &[]);
    let health_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    dir.file(
        "toolgate.yaml",
        &principals(&format!(
            "  - name: billing-agent\n    client_cert: billing-agent\n    tools: [track_parcel]\n  \
             - name: ops\n    client_cert: ops.example\n    tools: [reschedule_delivery]\n\
             tls: {{cert: certs/server.pem, key: certs/server.key, client_ca: certs/clients.pem}}\n\
             health_listen: 127.0.0.1:{health_port}\n"
        )),
    );
    let (mut child, log, addr) = serve(dir.dir.path(), &[]);
    let log = std::thread::spawn(move || log.map_while(Result::ok).collect::<Vec<String>>());

    // A client certificate names its principal: by CN, or by SAN.
    let mut billing_client = tls_client(&addr, &server_ca, Some((&billing.cert, &billing.key))).await.unwrap();
    let listed = billing_client.list_tools(ListToolsRequest::default()).await.unwrap().into_inner();
    assert_eq!(listed.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["track_parcel"]);
    let mut ops = tls_client(&addr, &server_ca, Some((&by_san.cert, &by_san.key))).await.unwrap();
    let listed = ops.list_tools(ListToolsRequest::default()).await.unwrap().into_inner();
    assert_eq!(listed.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["reschedule_delivery"]);
    // A key works over TLS without a certificate; a certificate and a key of
    // two principals do not.
    let mut keyed = tls_client(&addr, &server_ca, None).await.unwrap();
    assert_eq!(names(&mut keyed, KEY_SUPPORT).await, ["reschedule_delivery", "track_parcel"]);
    let status = keyed.list_tools(ListToolsRequest::default()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    let status = billing_client.list_tools(with_key(ListToolsRequest::default(), Some(KEY_SUPPORT))).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    // A certificate from another CA does not get through the handshake.
    let refused = match tls_client(&addr, &server_ca, Some((&stranger.cert, &stranger.key))).await {
        Err(_) => true,
        Ok(mut client) => client.list_tools(ListToolsRequest::default()).await.is_err(),
    };
    assert!(refused, "a client certificate of another CA was accepted");
    // Plaintext on the TLS port fails; the health listener answers in plaintext.
    let plain = ToolGatewayServiceClient::connect(format!("http://{addr}")).await;
    let plain_failed = match plain {
        Err(_) => true,
        Ok(mut client) => client.list_tools(with_key(ListToolsRequest::default(), Some(KEY_ADMIN))).await.is_err(),
    };
    assert!(plain_failed);
    let health_channel =
        Channel::from_shared(format!("http://127.0.0.1:{health_port}")).unwrap().connect().await.unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(health_channel);
    let check = tonic_health::pb::HealthCheckRequest { service: "toolgate.v1.ToolGatewayService".into() };
    assert_eq!(health.check(check).await.unwrap().into_inner().status, 1);

    // Rotation: a certificate from a new CA, then SIGHUP; new connections get it.
    let new_ca = Ca::new("new server CA");
    server_files(&dir, &new_ca);
    assert!(std::process::Command::new("kill").args(["-HUP", &child.id().to_string()]).status().unwrap().success());
    let mut rotated = None;
    for _ in 0..50 {
        if let Ok(client) = tls_client(&addr, &new_ca, None).await {
            rotated = Some(client);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut rotated = rotated.expect("a client trusting only the new CA connects after SIGHUP");
    assert_eq!(names(&mut rotated, KEY_ADMIN).await.len(), 3 + toolgate::catalog::BuiltinTool::ALL.len());
    assert!(tls_client(&addr, &server_ca, None).await.is_err(), "the old certificate is no longer served");
    // The connection opened before the rotation keeps working.
    assert!(billing_client.list_tools(ListToolsRequest::default()).await.is_ok());
    // A broken file on SIGHUP keeps the certificate in use.
    dir.file("certs/server.key", "not a key");
    assert!(std::process::Command::new("kill").args(["-HUP", &child.id().to_string()]).status().unwrap().success());
    // Reloads start once triggers have stopped for half a second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(tls_client(&addr, &new_ca, None).await.is_ok());
    child.kill().unwrap();
    let _ = child.wait();
    let log = log.join().unwrap().join("\n");
    assert!(log.contains("TLS certificate, key and client CA re-read"), "{log}");
    assert!(log.contains("TLS files not re-read, the ones in use stay"), "{log}");
}

#[test]
fn a_remote_listen_with_principals_needs_tls() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    dir.file("toolgate.yaml", &principals(""));
    let out = toolgate()
        .current_dir(dir.dir.path())
        .args(["serve", "--config", "toolgate.yaml", "--catalog", "registry", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("without TLS: API keys would travel in clear"), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_backend_is_told_who_calls_and_no_one_else_can_say() {
    // (A catalogue cannot say it either: setting an X-Toolgate-* header or
    // TOOLGATE_PRINCIPAL/TOOLGATE_USER is refused at load; see
    // catalog_problems::the_names_that_say_who_calls_are_the_gateways.)
    let http = crate::common::backend::start().await;
    let elsewhere = crate::common::backend::start().await;
    let dir = CatalogDir::new();
    dir.file(
        "registry/env.py",
        "import json, os, sys\njson.load(sys.stdin)\n\
         print(json.dumps({'ok': True, 'result': {k: os.environ.get(k) for k in ['TOOLGATE_PRINCIPAL', 'TOOLGATE_USER']}}))\n",
    );
    let server = crate::common::mcp::stdio_server("notes", "notes_server.py", &[], "");
    dir.file(
        "registry/tools.yaml",
        &format!(
            "tools:\n  - name: http_echo\n    description: x\n    \
             backend: {{http: {{url: \"{}\"}}}}\n  \
             - name: same_origin\n    description: x\n    \
             backend: {{http: {{url: \"{}\", follow_redirects: true}}}}\n  \
             - name: other_origin\n    description: x\n    \
             backend: {{http: {{url: \"{}\", follow_redirects: true, headers: {{X-Redirect-To: \"{}\"}}}}}}\n  \
             - name: env_tool\n    description: x\n    \
             backend: {{command: {{argv: [python3, env.py]}}}}\n\
             mcp_servers:\n{server}",
            http.url("/echo"),
            http.url("/redirect"),
            http.url("/away"),
            elsewhere.url("/echo"),
        ),
    );
    dir.file("toolgate.yaml", &admin_config(None));
    let (mut child, _log, addr) = serve(dir.dir.path(), &[]);
    let mut client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let call = |tool: &str, arguments: &str| {
        let mut request = with_key(
            ExecuteRequest { tool: tool.into(), arguments_json: arguments.into(), ..Default::default() },
            Some(KEY_ADMIN),
        );
        // Other metadata cannot say who calls.
        request.metadata_mut().insert("x-toolgate-principal", MetadataValue::from_static("forged-too"));
        request
    };
    let response =
        client.execute(call("http_echo", r#"{"x-toolgate-principal": "forged"}"#)).await.unwrap().into_inner();
    assert!(response.ok, "{response:?}");
    assert_eq!(http.seen.last_header("x-toolgate-principal").as_deref(), Some("admin"));
    assert_eq!(http.seen.last_header("x-toolgate-user"), None, "no user token was sent");
    // A redirect is followed within the origin, with the headers; never to another.
    let response = client.execute(call("same_origin", r#"{"a": 1}"#)).await.unwrap().into_inner();
    assert!(response.ok, "{response:?}");
    assert_eq!(http.seen.last_header("x-toolgate-principal").as_deref(), Some("admin"));
    let response = client.execute(call("other_origin", "{}")).await.unwrap().into_inner();
    assert!(!response.ok, "{response:?}");
    assert_eq!(elsewhere.seen.calls(), 0, "identity headers followed a redirect to another origin");
    let response = client.execute(call("env_tool", "{}")).await.unwrap().into_inner();
    assert_eq!(response.result_json, r#"{"TOOLGATE_PRINCIPAL": "admin", "TOOLGATE_USER": null}"#);
    let response = client.execute(call("whoami", "{}")).await.unwrap().into_inner();
    let seen: serde_json::Value = serde_json::from_str(&response.result_json).unwrap();
    assert_eq!(seen["principal"], "admin", "{seen}");
    assert_eq!(seen["user"], serde_json::Value::Null);
    child.kill().unwrap();
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

fn claims(sub: &str) -> serde_json::Value {
    serde_json::json!({"sub": sub, "iss": "https://idp.test/", "aud": "toolgate", "exp": now() + 600})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_tokens_are_verified_and_reach_the_tool() {
    let (es, ed, stranger) = (
        Signer::new(jsonwebtoken::Algorithm::ES256, "es-1"),
        Signer::new(jsonwebtoken::Algorithm::EdDSA, "ed-1"),
        Signer::new(jsonwebtoken::Algorithm::ES256, "es-1"),
    );
    let dir = CatalogDir::new();
    dir.file("certs/jwks.json", &serde_json::json!({"keys": [es.jwk(), ed.jwk()]}).to_string());
    dir.file(
        "registry/env.py",
        "import json, os, sys\njson.load(sys.stdin)\nprint(json.dumps({'ok': True, 'result': \
         os.environ.get('TOOLGATE_USER', '-') + ' of ' + os.environ.get('TOOLGATE_USER_ISSUER', '-')}))\n",
    );
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: whoami\n    description: x\n    backend: {command: {argv: [python3, env.py]}}\n",
    );
    dir.file(
        "toolgate.yaml",
        &admin_config(Some("{issuer: \"https://idp.test/\", audience: toolgate, jwks_file: certs/jwks.json}")),
    );
    let (mut child, _log, addr) = serve(dir.dir.path(), &[]);
    let mut client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let call = |token: Option<&str>| {
        let mut request = with_key(ExecuteRequest { tool: "whoami".into(), ..Default::default() }, Some(KEY_ADMIN));
        if let Some(token) = token {
            request.metadata_mut().insert("x-toolgate-user-token", MetadataValue::try_from(token).unwrap());
        }
        request
    };
    // No token: no user. A valid ES256 or EdDSA token: its subject.
    let response = client.execute(call(None)).await.unwrap().into_inner();
    assert_eq!(response.result_json, "\"- of -\"", "{response:?}");
    let token = es.token(claims("alice"));
    for _ in 0..2 {
        // The second time from the cache.
        let response = client.execute(call(Some(&token))).await.unwrap().into_inner();
        assert_eq!(response.result_json, "\"alice of https://idp.test/\"", "{response:?}");
    }
    let response = client.execute(call(Some(&ed.token(claims("bob"))))).await.unwrap().into_inner();
    assert_eq!(response.result_json, "\"bob of https://idp.test/\"");

    // Every kind of bad token: UNAUTHENTICATED, and the tool never runs.
    let mut expired = claims("carol");
    expired["exp"] = (now() - 3600).into();
    let mut early = claims("carol");
    early["nbf"] = (now() + 3600).into();
    let mut wrong_issuer = claims("carol");
    wrong_issuer["iss"] = "https://evil.test/".into();
    let mut wrong_audience = claims("carol");
    wrong_audience["aud"] = "someone-else".into();
    let payload = b64(claims("carol").to_string().as_bytes());
    let unsigned = format!("{}.{payload}.", b64(br#"{"alg":"none","typ":"JWT"}"#));
    let public_jwk = es.jwk().to_string();
    let hs256 = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims("carol"),
        &jsonwebtoken::EncodingKey::from_secret(public_jwk.as_bytes()),
    )
    .unwrap();
    let good = es.token(claims("carol"));
    for (what, token) in [
        ("expired", es.token(expired)),
        ("not yet valid", es.token(early)),
        ("wrong issuer", es.token(wrong_issuer)),
        ("wrong audience", es.token(wrong_audience)),
        ("unsigned", unsigned),
        ("HS256 with the public key", hs256),
        ("truncated", good[..good.len() - 10].to_owned()),
        ("signed by another key", stranger.token(claims("carol"))),
        ("not a token", "hello".to_owned()),
    ] {
        let status = client.execute(call(Some(&token))).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{what}");
        assert_eq!(status.message(), "missing or invalid credentials", "{what}");
    }
    child.kill().unwrap();
}

#[test]
fn a_jwks_file_that_is_not_json_stops_the_start_and_a_jwks_url_that_is_down_does_not() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    dir.file("certs/jwks.json", "not json");
    let config = |jwt: &str| admin_config(Some(jwt));
    dir.file("toolgate.yaml", &config("{issuer: i, audience: a, jwks_file: certs/jwks.json}"));
    let out = crate::common::run(dir.dir.path(), &["validate", "--config", "toolgate.yaml", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("certs/jwks.json: not a JWKS (JSON Web Key Set)"), "{}", stderr(&out));
    let down = crate::common::backend::closed_port();
    dir.file("toolgate.yaml", &config(&format!("{{issuer: i, audience: a, jwks_url: \"http://{down}/jwks\"}}")));
    // The whole log, from the start: the first fetch may fail before the
    // gateway says it is listening.
    let mut command = toolgate();
    command.current_dir(dir.dir.path()).args([
        "serve",
        "--config",
        "toolgate.yaml",
        "--catalog",
        "registry",
        "--listen",
        "127.0.0.1:0",
    ]);
    let mut child = Reaped::spawn(&mut command);
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    assert!(log.contains("toolgate listening on "), "{log}");
    assert!(log.contains("cannot fetch the JWKS for user tokens"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_arguments_come_from_who_calls_and_never_from_the_model() {
    let es = Signer::new(jsonwebtoken::Algorithm::ES256, "es-1");
    let http = crate::common::backend::start().await;
    let dir = CatalogDir::new();
    dir.file("certs/jwks.json", &serde_json::json!({"keys": [es.jwk()]}).to_string());
    dir.file(
        "registry/orders.py",
        "import json, sys\nargs = json.load(sys.stdin)\nopen('ran', 'a').write('x')\nprint(json.dumps({'ok': True, 'result': args}))\n",
    );
    dir.file(
        "registry/tools.yaml",
        &format!(
            "tools:\n  - name: list_orders\n    description: x\n    \
             parameters: {{type: object, properties: {{customer_id: {{type: string, pattern: \"^[a-z]+$\"}}, status: {{type: string}}}}, \
             required: [customer_id, status]}}\n    bind: {{customer_id: user}}\n    \
             backend: {{command: {{argv: [python3, orders.py]}}}}\n  \
             - name: profile\n    description: x\n    backend: {{http: {{url: \"{}\", forward_user_token: true}}}}\n",
            http.url("/echo")
        ),
    );
    dir.file(
        "toolgate.yaml",
        &admin_config(Some("{issuer: \"https://idp.test/\", audience: toolgate, jwks_file: certs/jwks.json}")),
    );
    let (mut child, _log, addr) = serve(dir.dir.path(), &[]);
    let mut client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let token = es.token(claims("alice"));
    let call = |tool: &str, arguments: &str, user: bool| {
        let message = ExecuteRequest { tool: tool.into(), arguments_json: arguments.into(), ..Default::default() };
        let mut request = with_key(message, Some(KEY_ADMIN));
        if user {
            request.metadata_mut().insert("x-toolgate-user-token", MetadataValue::try_from(token.as_str()).unwrap());
        }
        request
    };

    // The model never sees the bound parameter.
    let listed = client
        .list_tools(with_key(ListToolsRequest { tools: vec!["list_orders".into()], format: 1 }, Some(KEY_ADMIN)))
        .await
        .unwrap()
        .into_inner();
    assert!(!listed.tools[0].parameters_json.contains("customer_id"), "{}", listed.tools[0].parameters_json);
    assert!(!listed.formatted_json.contains("customer_id"), "{}", listed.formatted_json);
    assert!(listed.tools[0].parameters_json.contains("status"));

    // Filled from the verified user.
    let response = client.execute(call("list_orders", r#"{"status": "open"}"#, true)).await.unwrap().into_inner();
    assert!(response.ok, "{response:?}");
    let received: serde_json::Value = serde_json::from_str(&response.result_json).unwrap();
    assert_eq!(received, serde_json::json!({"status": "open", "customer_id": "alice"}));

    // Sent by the model, in any spelling: unexpected, and the tool does not run.
    for key in ["customer_id", "CUSTOMER_ID", "customerId"] {
        let arguments = format!(r#"{{"status": "open", "{key}": "bob"}}"#);
        let response = client.execute(call("list_orders", &arguments, true)).await.unwrap().into_inner();
        let error = response.error.expect("refused");
        assert_eq!(error.kind, ErrorKind::InvalidArguments as i32, "{key}");
        assert_eq!(
            error.message,
            "unexpected argument: 'customer_id'. Expected parameters for 'list_orders' — required: ['status'], optional: [].",
            "{key}"
        );
    }
    // No user token: UNAUTHENTICATED before anything runs.
    let status = client.execute(call("list_orders", r#"{"status": "open"}"#, false)).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    assert_eq!(status.message(), "the tool 'list_orders' acts for a user, and the request carries no user token");
    assert_eq!(std::fs::read_to_string(dir.registry().join("ran")).unwrap(), "x", "the tool ran once, for alice");

    // forward_user_token: the user's token as Authorization.
    let response = client.execute(call("profile", "{}", true)).await.unwrap().into_inner();
    assert!(response.ok, "{response:?}");
    assert_eq!(http.seen.last_header("authorization"), Some(format!("Bearer {token}")));
    assert_eq!(http.seen.last_header("x-toolgate-user").as_deref(), Some("alice"));
    child.kill().unwrap();
}

#[test]
fn a_tool_forwarding_the_user_token_cannot_set_its_own_authorization() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: profile\n    description: x\n    backend: {http: {url: \"http://127.0.0.1:9/x\", forward_user_token: true, headers: {Authorization: \"Bearer mine\"}}}\n  \
         - name: orders\n    description: x\n    parameters: {type: object, properties: {status: {type: string}}}\n    bind: {customer_id: user, status: friend}\n    backend: {builtin: echo}\n",
    );
    let out = crate::common::run(dir.dir.path(), &["validate", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    assert!(
        text.contains("tools[0] (profile).backend.http.forward_user_token: forward_user_token sends the user's token"),
        "{text}"
    );
    assert!(
        text.contains("tools[1] (orders).bind.customer_id: 'customer_id' is not a parameter of the tool"),
        "{text}"
    );
    assert!(
        text.contains("tools[1] (orders).bind.status: binds to 'friend'; a parameter binds to user or principal"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_ascii_authorization_header_is_refused_and_the_gateway_keeps_serving() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    dir.file("toolgate.yaml", &principals(""));
    let (mut child, _log, addr) = serve(dir.dir.path(), &[]);
    let mut client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let mut request = Request::new(ListToolsRequest::default());
    let value = MetadataValue::try_from("Bearer clé".as_bytes()).unwrap();
    request.metadata_mut().insert("authorization", value);
    assert_eq!(client.list_tools(request).await.unwrap_err().code(), Code::Unauthenticated);
    assert_eq!(names(&mut client, KEY_SUPPORT).await.len(), 2);
    child.kill().unwrap();
}

#[test]
fn a_grant_of_a_tool_from_a_server_still_down_waits_for_it() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let server = crate::common::mcp::stdio_server("late", "odd_server.py", &["exit"], "    startup_timeout: 3s\n");
    dir.file("registry/servers.yaml", &format!("mcp_servers:\n{server}"));
    let hash = toolgate::identity::hash_key("k");
    dir.file(
        "toolgate.yaml",
        &format!("principals:\n  - name: a\n    api_key_sha256: {hash}\n    tools: [courier, list_notes]\n"),
    );
    let out = crate::common::run(dir.dir.path(), &["validate", "--config", "toolgate.yaml", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "principal 'a': 'list_notes' may be a tool of the MCP server 'late', whose tools have not arrived"
        ),
        "{}",
        stderr(&out)
    );
    let strict = toolgate()
        .current_dir(dir.dir.path())
        .args(["validate", "--strict", "--config", "toolgate.yaml", "--catalog", "registry"])
        .output()
        .unwrap();
    assert_eq!(strict.status.code(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_jwks_file_takes_effect_without_a_restart() {
    let (old, new) =
        (Signer::new(jsonwebtoken::Algorithm::ES256, "old"), Signer::new(jsonwebtoken::Algorithm::ES256, "new"));
    let dir = CatalogDir::new();
    let jwks = dir.file("certs/jwks.json", &serde_json::json!({"keys": [old.jwk()]}).to_string());
    catalogue(&dir);
    dir.file(
        "toolgate.yaml",
        &admin_config(Some("{issuer: \"https://idp.test/\", audience: toolgate, jwks_file: certs/jwks.json}")),
    );
    let (mut child, log, addr) = serve(dir.dir.path(), &[]);
    let log = crate::common::LogLines::follow(log);
    let mut client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let user = |token: &str| {
        let mut request = with_key(ListToolsRequest::default(), Some(KEY_ADMIN));
        request.metadata_mut().insert("x-toolgate-user-token", MetadataValue::try_from(token).unwrap());
        request
    };
    let (old_token, new_token) = (old.token(claims("alice")), new.token(claims("alice")));
    assert!(client.list_tools(user(&old_token)).await.is_ok());
    assert_eq!(client.list_tools(user(&new_token)).await.unwrap_err().code(), Code::Unauthenticated);

    // The identity provider rotates its keys: the file is replaced by a
    // rename, in a watched folder; no signal.
    let temporary = jwks.with_extension("tmp");
    std::fs::write(&temporary, serde_json::json!({"keys": [new.jwk()]}).to_string()).unwrap();
    std::fs::rename(&temporary, &jwks).unwrap();
    log.wait_for("catalogue and configuration reloaded", 1).await;
    assert!(client.list_tools(user(&new_token)).await.is_ok(), "the new key verifies");
    // The old key is revoked, cached verification or not.
    assert_eq!(client.list_tools(user(&old_token)).await.unwrap_err().code(), Code::Unauthenticated);
    child.kill().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_that_names_no_one_is_refused_and_every_user_reaches_http_tools() {
    let es = Signer::new(jsonwebtoken::Algorithm::ES256, "es-1");
    let http = crate::common::backend::start().await;
    let dir = CatalogDir::new();
    dir.file("certs/jwks.json", &serde_json::json!({"keys": [es.jwk()]}).to_string());
    dir.file(
        "registry/tools.yaml",
        &format!(
            "tools:\n  - name: orders\n    description: x\n    backend: {{http: {{url: \"{}\"}}}}\n",
            http.url("/echo")
        ),
    );
    dir.file(
        "toolgate.yaml",
        &admin_config(Some("{issuer: \"https://idp.test/\", audience: toolgate, jwks_file: certs/jwks.json}")),
    );
    let (mut child, _log, addr) = serve(dir.dir.path(), &[]);
    let mut client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let call = |token: &str| {
        let mut request = with_key(ExecuteRequest { tool: "orders".into(), ..Default::default() }, Some(KEY_ADMIN));
        request.metadata_mut().insert("x-toolgate-user-token", MetadataValue::try_from(token).unwrap());
        request
    };
    // Empty, or holding a newline, a NUL or a tab: never a user, never "no user".
    for sub in ["", "alice\nx-toolgate-user: root", "bob\u{0}", "\t"] {
        let status = client.execute(call(&es.token(claims(sub)))).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{sub:?}");
    }
    assert_eq!(http.seen.calls(), 0, "the tool never ran");
    // A subject beyond ASCII reaches the tool as itself.
    let response = client.execute(call(&es.token(claims("josé")))).await.unwrap().into_inner();
    assert!(response.ok, "{response:?}");
    assert_eq!(http.seen.last_header("x-toolgate-user").as_deref(), Some("josé"));
    child.kill().unwrap();
}

/// The certificate recipe of `docs/identity.md`, run as written (from
/// `Certificates` to `cd ..`) in `dir`.
fn readme_certificates(dir: &Path) {
    let readme = std::fs::read_to_string(crate::common::repo().join("docs/identity.md")).unwrap();
    let found = readme.find("Certificates (any CA will do").expect("the recipe is in docs/identity.md");
    let start = readme[..found].rfind('\n').map_or(0, |at| at + 1);
    let end = start + readme[start..].find("cd ..\n").expect("the recipe ends with cd ..") + "cd ..\n".len();
    let out = crate::common::bash(&readme[start..end], dir, true, &[]);
    assert!(out.status.success(), "the docs' recipe failed: {}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_certificates_work_and_refused_handshakes_and_credentials_are_logged() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    readme_certificates(dir.dir.path());
    // An X.509 v1 client certificate, as `openssl x509 -req` makes one
    // without extensions: rustls refuses it.
    let v1 = "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=billing-agent \
              -keyout old.key -out old.csr 2>/dev/null && \
              openssl x509 -req -in old.csr -CA ca.pem -CAkey ca.key -days 30 -out old.pem 2>/dev/null";
    let made = std::process::Command::new("bash").args(["-c", v1]).current_dir(dir.dir.path().join("certs")).status();
    assert!(made.unwrap().success());
    dir.file(
        "toolgate.yaml",
        &format!(
            "tls: {{cert: certs/server.pem, key: certs/server.key, client_ca: certs/ca.pem}}\n{}  \
             - name: billing-agent\n    client_cert: billing-agent\n    tools: [\"*\"]\n",
            admin_config(None)
        ),
    );
    let (mut child, log, addr) = serve(dir.dir.path(), &[]);
    let log = crate::common::LogLines::follow(log);
    let read = |name: &str| std::fs::read_to_string(dir.dir.path().join("certs").join(name)).unwrap();
    let ca = read("ca.pem");
    let client = |cert: &str, key: &str| {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&ca))
            .domain_name("localhost")
            .identity(Identity::from_pem(read(cert), read(key)));
        Channel::from_shared(format!("https://{addr}"))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect_timeout(Duration::from_secs(5))
    };
    // The recipe's client certificate proves billing-agent.
    let channel = client("billing.pem", "billing.key").connect().await.expect("the recipe's certificate is accepted");
    let names = ToolGatewayServiceClient::new(channel).list_tools(ListToolsRequest::default()).await.unwrap();
    assert!(!names.into_inner().tools.is_empty());

    // The v1 certificate (which rustls will not even send; openssl does) is
    // refused, and the operator is told why.
    let certs = dir.dir.path().join("certs");
    std::process::Command::new("openssl")
        .args(["s_client", "-connect", &addr, "-cert", "old.pem", "-key", "old.key", "-CAfile", "ca.pem"])
        .args(["-alpn", "h2", "-servername", "localhost"])
        .current_dir(&certs)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    log.wait_for("TLS handshake refused", 1).await;
    let line = log.text().lines().find(|l| l.contains("TLS handshake refused")).unwrap().to_owned();
    assert!(line.contains("WARN") && line.to_lowercase().contains("version"), "{line}");

    // A wrong key: refused, logged with the reason, never the key.
    let channel = client("billing.pem", "billing.key").connect().await.unwrap();
    let status = ToolGatewayServiceClient::new(channel)
        .list_tools(with_key(ListToolsRequest::default(), Some("tg_not_a_key_of_anyone")))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    log.wait_for("authentication refused: an API key of no principal", 1).await;
    assert!(!log.text().contains("tg_not_a_key_of_anyone"), "{}", log.text());
    child.kill().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_client_ca_checks_again_the_connections_made_before() {
    let (server_ca, old_ca, new_ca) = (Ca::new("server CA"), Ca::new("old client CA"), Ca::new("new client CA"));
    let dir = CatalogDir::new();
    catalogue(&dir);
    server_files(&dir, &server_ca);
    let client_ca = dir.file("certs/client-ca.pem", &old_ca.pem());
    dir.file(
        "toolgate.yaml",
        "tls: {cert: certs/server.pem, key: certs/server.key, client_ca: certs/client-ca.pem}\n\
         principals:\n  - name: agent\n    client_cert: agent\n    tools: [\"*\"]\n",
    );
    let (mut child, log, addr) = serve(dir.dir.path(), &[]);
    let log = crate::common::LogLines::follow(log);
    let (old, new) = (old_ca.issue("agent", &[]), new_ca.issue("agent", &[]));
    let mut before = tls_client(&addr, &server_ca, Some((&old.cert, &old.key))).await.unwrap();
    assert!(before.list_tools(ListToolsRequest::default()).await.is_ok());

    // The client CA is rotated: the connection made before keeps its TLS
    // session, not its proof.
    let temporary = client_ca.with_extension("tmp");
    std::fs::write(&temporary, new_ca.pem()).unwrap();
    std::fs::rename(&temporary, &client_ca).unwrap();
    log.wait_for("TLS certificate, key and client CA re-read", 1).await;
    let status = before.list_tools(ListToolsRequest::default()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    let mut after = tls_client(&addr, &server_ca, Some((&new.cert, &new.key))).await.unwrap();
    assert!(after.list_tools(ListToolsRequest::default()).await.is_ok());
    child.kill().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_client_of_the_tls_port_is_told_it_is_one() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    server_files(&dir, &Ca::new("server CA"));
    dir.file("toolgate.yaml", &principals("tls: {cert: certs/server.pem, key: certs/server.key}\n"));
    let (_child, _log, addr) = serve(dir.dir.path(), &[]);
    // gRPC in plaintext: UNAVAILABLE, saying why.
    let mut plain = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let status = plain.list_tools(ListToolsRequest::default()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().starts_with("this port speaks TLS"), "{status:?}");
    // The CLI says the same.
    let out = toolgate().args(["call", "track_parcel", "{}", "--addr", &addr]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("this port speaks TLS: connect over TLS"), "{}", stderr(&out));
    // Plain HTTP/1.1: a 400 that says it.
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("this port speaks TLS"), "{answer}");
}
