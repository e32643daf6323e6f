//! Rate limits (docs/rate-limits.md) through the real binary: a tool's
//! limit answered in-band RATE_LIMITED with when to try again, a
//! principal's limit as RESOURCE_EXHAUSTED with RetryInfo and QuotaFailure
//! (and 429 with Retry-After at the MCP front door), limits shared by two
//! gateways on one real Redis, failing open when Redis goes away, reloads,
//! and the load errors of a wrong limit.

use std::path::Path;

use prost::Message;
use tonic::{transport::Channel, Code};
use toolgate::proto::v1::{
    tool_gateway_service_client::ToolGatewayServiceClient, ErrorKind, ExecuteRequest, ExecuteResponse,
};

use crate::{
    common::{backend, redis::Redis, serve_config, stderr, CatalogDir, LogLines, Reaped},
    mcp_front_door::{serve as serve_mcp, stateless},
};

type Client = ToolGatewayServiceClient<Channel>;

fn registry(http: &backend::HttpBackend) -> String {
    format!(
        "tools:\n  - name: send_payment\n    description: Pay.\n    backend: {{http: {{url: \"{0}\"}}}}\n  \
         - name: lookup\n    description: Look up.\n    backend: {{http: {{url: \"{0}\"}}}}\n",
        http.url("/echo")
    )
}

async fn call(client: &mut Client, tool: &str, key: &str) -> ExecuteResponse {
    let request = ExecuteRequest {
        tool: tool.into(),
        arguments_json: "{}".into(),
        idempotency_key: key.into(),
        ..Default::default()
    };
    client.execute(request).await.unwrap().into_inner()
}

fn serve(dir: &Path) -> (Reaped, LogLines, Client) {
    let (child, lines, addr) = serve_config(dir, &[]);
    let client = ToolGatewayServiceClient::new(
        tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect_lazy(),
    );
    (child, LogLines::follow(lines), client)
}

fn replace(path: &Path, text: &str) {
    let temporary = path.with_extension("swp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_limit_answers_rate_limited_in_band_and_the_tool_runs_no_more() {
    let http = backend::start().await;
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&http));
    let config = dir.file("toolgate.yaml", "rate_limits:\n  tools:\n    send_payment: {per_minute: 2, per: all}\n");
    let (_child, log, mut client) = serve(dir.dir.path());

    for _ in 0..2 {
        let response = call(&mut client, "send_payment", "").await;
        assert!(response.ok, "{response:?}");
    }
    let third = call(&mut client, "send_payment", "").await;
    let error = third.error.expect("limited");
    assert_eq!(error.kind, ErrorKind::RateLimited as i32);
    assert!(error.retryable);
    let retry = error.retry_after.expect("retry_after");
    assert!(retry.seconds > 0 && retry.seconds <= 30, "{retry:?}");
    assert!(
        error.message.starts_with("'send_payment' may be called at most 2 times a minute in all; try again in "),
        "{}",
        error.message
    );
    assert_eq!(http.seen.calls(), 2, "the tool ran twice");
    // Another tool is unaffected; a dry run is not counted.
    assert!(call(&mut client, "lookup", "").await.ok);
    let dry = ExecuteRequest { tool: "send_payment".into(), dry_run: true, ..Default::default() };
    assert!(client.execute(dry).await.unwrap().into_inner().ok, "a dry run is not limited");
    // A replay does not count: a keyed call after the limit was reached is
    // limited; its key is not burned.
    assert_eq!(call(&mut client, "send_payment", "k1").await.error.unwrap().kind, ErrorKind::RateLimited as i32);

    // A reload raising the limit applies at once; removing it too.
    replace(&config, "rate_limits:\n  tools:\n    send_payment: {per_minute: 600, per: all}\n");
    log.wait_for("catalogue and configuration reloaded", 1).await;
    assert!(call(&mut client, "send_payment", "k1").await.ok, "a raised limit applies at once");
    let replay = call(&mut client, "send_payment", "k1").await;
    assert!(replay.ok && replay.replayed);
    replace(&config, "policy: {strict: false}\n");
    log.wait_for("catalogue and configuration reloaded", 2).await;
    for _ in 0..5 {
        assert!(call(&mut client, "send_payment", "").await.ok, "no limit once removed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_limit_is_resource_exhausted_with_retry_info_and_429_at_the_mcp_door() {
    let http = backend::start().await;
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&http));
    dir.file(
        "toolgate.yaml",
        &format!(
            "principals:\n  - name: bot\n    api_key_sha256: {}\n    tools: ['*']\n    rate: {{per_minute: 2, burst: 2}}\n",
            toolgate::identity::hash_key("k")
        ),
    );
    let (_child, _log, mut client) = serve(dir.dir.path());
    let request = || {
        let mut request = tonic::Request::new(ExecuteRequest { tool: "lookup".into(), ..Default::default() });
        request.metadata_mut().insert("authorization", "Bearer k".parse().unwrap());
        request
    };
    for _ in 0..2 {
        assert!(client.execute(request()).await.unwrap().into_inner().ok);
    }
    let status = client.execute(request()).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().starts_with("this client may make at most 2 requests a minute; try again in "));
    let details = tonic_types::pb::Status::decode(status.details()).unwrap();
    let retry = details.details.iter().find(|d| d.type_url.ends_with("google.rpc.RetryInfo")).expect("RetryInfo");
    let retry = tonic_types::pb::RetryInfo::decode(retry.value.as_slice()).unwrap();
    assert!(retry.retry_delay.unwrap().seconds > 0);
    let quota = details.details.iter().find(|d| d.type_url.ends_with("google.rpc.QuotaFailure")).expect("QuotaFailure");
    let quota = tonic_types::pb::QuotaFailure::decode(quota.value.as_slice()).unwrap();
    assert_eq!(quota.violations[0].subject, "principal:bot");
    assert_eq!(http.seen.calls(), 2);

    // The MCP front door: the same limit, 429 with Retry-After.
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&http));
    dir.file("toolgate.yaml", "rate_limits:\n  principal: {per_minute: 1, burst: 1}\n");
    let (_child, url, _log) = serve_mcp(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let params = serde_json::json!({"name": "lookup", "arguments": {}});
    let first = stateless(&url, "tools/call", Some("lookup"), params.clone()).await;
    assert_eq!(first.status(), 200);
    let second = stateless(&url, "tools/call", Some("lookup"), params).await;
    assert_eq!(second.status(), 429);
    let after: u64 = second.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&after), "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_and_tool_limit_at_the_mcp_door_is_is_error_with_retry_after() {
    let http = backend::start().await;
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&http));
    dir.file("toolgate.yaml", "rate_limits:\n  tools:\n    send_payment: {per_minute: 1, per: principal}\n");
    let (_child, url, _log) = serve_mcp(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let params = serde_json::json!({"name": "send_payment", "arguments": {}});
    let first: serde_json::Value = crate::mcp_front_door::rpc(
        &stateless(&url, "tools/call", Some("send_payment"), params.clone()).await.text().await.unwrap(),
    );
    assert_eq!(first["result"]["isError"], false, "{first}");
    let second: serde_json::Value = crate::mcp_front_door::rpc(
        &stateless(&url, "tools/call", Some("send_payment"), params).await.text().await.unwrap(),
    );
    let result = &second["result"];
    assert_eq!(result["isError"], true, "{second}");
    assert_eq!(result["_meta"]["dev.toolgate/error_kind"], "RATE_LIMITED");
    assert_eq!(result["_meta"]["dev.toolgate/retryable"], true);
    assert!(result["_meta"]["dev.toolgate/retry_after"].as_f64().unwrap() > 0.0, "{result}");
    assert!(result["content"][0]["text"].as_str().unwrap().contains("for this client; try again in"), "{result}");
    assert_eq!(http.seen.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_on_one_redis_share_a_tool_limit_and_fail_open_without_it() {
    let mut redis = Redis::start();
    let http = backend::start().await;
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&http));
    dir.file(
        "toolgate.yaml",
        &format!(
            "state: {{redis: \"{}\"}}\nrate_limits:\n  tools:\n    send_payment: {{per_minute: 3, burst: 3, per: all}}\n",
            redis.url()
        ),
    );
    let (_one, _log_one, mut a) = serve(dir.dir.path());
    let (_two, log_two, mut b) = serve(dir.dir.path());
    let mut passed = 0;
    let mut limited = 0;
    for i in 0..6 {
        let client = if i % 2 == 0 { &mut a } else { &mut b };
        let response = call(client, "send_payment", "").await;
        match response.error {
            None => passed += 1,
            Some(error) => {
                assert_eq!(error.kind, ErrorKind::RateLimited as i32);
                limited += 1;
            }
        }
    }
    assert_eq!((passed, limited), (3, 3), "one limit across two replicas");
    assert_eq!(http.seen.calls(), 3);

    // Redis goes away: the calls pass, and a warning says why.
    redis.kill();
    for client in [&mut a, &mut b] {
        let response = call(client, "send_payment", "").await;
        assert!(response.ok, "limits fail open: {response:?}");
    }
    log_two.wait_for("rate limits are not enforced (the call proceeds)", 1).await;
}

#[test]
fn wrong_limits_are_load_errors_naming_the_file_and_path() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: send_payment\n    description: x\n    backend: {builtin: echo}\n",
    );
    for (config, expected) in [
        ("rate_limits:\n  principal: {per_minute: 0}\n", "toolgate.yaml: rate_limits.principal.per_minute: must be more than 0, got 0"),
        ("rate_limits:\n  user: {per_minute: -5}\n", "toolgate.yaml: rate_limits.user.per_minute: must be more than 0, got -5"),
        ("rate_limits:\n  user: {burst: 5}\n", "toolgate.yaml: rate_limits.user.burst: burst needs per_minute"),
        (
            "rate_limits:\n  tools:\n    send_payment: {per_minute: 5, per: usr}\n",
            "toolgate.yaml: rate_limits.tools.send_payment.per: unknown per 'usr', did you mean 'user'?",
        ),
        (
            "rate_limits:\n  tools:\n    send_paymnt: {per_minute: 5}\n",
            "rate_limits.tools.send_paymnt: rate_limits.tools names unknown tool 'send_paymnt', did you mean 'send_payment'?",
        ),
    ] {
        dir.file("toolgate.yaml", config);
        let out = crate::common::run(dir.dir.path(), &["validate", "--config", "toolgate.yaml", "--catalog", "registry"]);
        assert_eq!(out.status.code(), Some(1), "{config}");
        assert!(stderr(&out).contains(expected), "{config}: {}", stderr(&out));
    }
    // A limit under a tool no principal may use: a warning.
    dir.file(
        "toolgate.yaml",
        &format!(
            "principals:\n  - name: bot\n    api_key_sha256: {}\n    tools: [lookup]\nrate_limits:\n  tools:\n    send_payment: {{per_minute: 5}}\n",
            toolgate::identity::hash_key("k")
        ),
    );
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: send_payment\n    description: x\n    backend: {builtin: echo}\n  - name: lookup\n    description: x\n    backend: {builtin: echo}\n",
    );
    let out = crate::common::run(dir.dir.path(), &["validate", "--config", "toolgate.yaml", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "warning: toolgate.yaml: rate_limits.tools.send_payment: no principal is granted 'send_payment': this limit applies to no call"
        ),
        "{}",
        stderr(&out)
    );
    // A limit keyed by an alias or a toolset applies to no call either: a
    // warning naming the tools it meant, an error under --strict.
    dir.file(
        "toolgate.yaml",
        "rate_limits:\n  tools:\n    pay: {per_minute: 5}\n    payments: {per_minute: 5}\n    lookup: {per_minute: 5}\n",
    );
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: send_payment\n    description: x\n    aliases: [pay]\n    backend: {builtin: echo}\n  \
         - name: refund\n    description: x\n    backend: {builtin: echo}\n  \
         - name: lookup\n    description: x\n    backend: {builtin: echo}\n\
         toolsets:\n  payments: [send_payment, refund]\n",
    );
    let pay = "toolgate.yaml: rate_limits.tools.pay: 'pay' is an alias of 'send_payment', and a limit is kept under a \
               tool's own name: this one applies to no call; write it as rate_limits.tools.send_payment";
    let payments = "toolgate.yaml: rate_limits.tools.payments: 'payments' is a toolset, and a limit is kept under a \
                    tool's own name: this one applies to no call; write one entry for each tool it meant \
                    (send_payment, refund)";
    let args = ["validate", "--config", "toolgate.yaml", "--catalog", "registry"];
    let out = crate::common::run(dir.dir.path(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for expected in [pay, payments] {
        assert!(stderr(&out).contains(&format!("warning: {expected}")), "{}", stderr(&out));
    }
    assert!(!stderr(&out).contains("rate_limits.tools.lookup"), "{}", stderr(&out));
    let out = crate::common::run(dir.dir.path(), &[&args[..], &["--strict"]].concat());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    for expected in [pay, payments] {
        let refused = format!("{expected} (an error under strict validation)");
        assert!(stderr(&out).contains(&refused), "{}", stderr(&out));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_limit_counts_each_user_apart_and_a_per_user_tool_limit_too() {
    use crate::common::jwt::Signer;
    let http = backend::start().await;
    let signer = Signer::new(jsonwebtoken::Algorithm::ES256, "es-1");
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&http));
    dir.file("certs/jwks.json", &serde_json::json!({"keys": [signer.jwk()]}).to_string());
    dir.file(
        "toolgate.yaml",
        "users:\n  jwt: {issuer: \"https://idp.test/\", audience: toolgate, jwks_file: certs/jwks.json}\n\
         rate_limits:\n  user: {per_minute: 3, burst: 3}\n  tools:\n    send_payment: {per_minute: 1, burst: 1}\n",
    );
    let (_child, _log, mut client) = serve(dir.dir.path());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let token = |sub: &str| {
        signer.token(serde_json::json!({"sub": sub, "iss": "https://idp.test/", "aud": "toolgate", "exp": now + 600}))
    };
    let (alice, bob) = (token("alice"), token("bob"));
    let mut as_user = async |token: &str, tool: &str| {
        let mut request = tonic::Request::new(ExecuteRequest { tool: tool.into(), ..Default::default() });
        request.metadata_mut().insert("x-toolgate-user-token", token.parse().unwrap());
        client.execute(request).await.unwrap().into_inner()
    };
    // The tool's limit is per user (the default): one call each.
    assert!(as_user(&alice, "send_payment").await.ok);
    let error = as_user(&alice, "send_payment").await.error.expect("limited");
    assert!(
        error.message.starts_with("'send_payment' may be called at most 1 time a minute for this user"),
        "{}",
        error.message
    );
    assert!(as_user(&bob, "send_payment").await.ok, "bob has his own");
    // The user limit: alice's fourth call (her refused one did not count).
    assert!(as_user(&alice, "lookup").await.ok);
    assert!(as_user(&alice, "lookup").await.ok);
    let error = as_user(&alice, "lookup").await.error.expect("limited");
    assert_eq!(error.kind, ErrorKind::RateLimited as i32);
    assert!(
        error.message.starts_with("tools may be called at most 3 times a minute for this user"),
        "{}",
        error.message
    );
    assert!(as_user(&bob, "lookup").await.ok);
}
