//! Hardening, round 4, the MCP front door: what an attack on it found,
//! through the real binary and raw HTTP (what a well-behaved SDK never
//! sends).

use serde_json::{json, Value};

use crate::{
    common::{memory_kib, CatalogDir, LogLines, Reaped},
    mcp_front_door::{post, rpc, serve},
};

/// `n` tools on the built-in echo, each with a schema of a few parameters
/// (what a listing of them weighs is what a copy per listener cost).
fn tools(n: usize) -> String {
    let mut yaml = String::from("tools:\n");
    for i in 0..n {
        yaml.push_str(&format!(
            "  - name: service_{i}_action\n    description: Does action {i} of the service, with care and at length.\n    \
             parameters: {{type: object, properties: {{id: {{type: string, description: the id}}, \
             limit: {{type: integer, minimum: 1, maximum: 100}}, tags: {{type: array, items: {{type: string}}}}}}, \
             required: [id]}}\n    backend: {{builtin: echo}}\n"
        ));
    }
    yaml.push_str(
        "  - name: web_search\n    description: Search the web.\n    \
                   parameters: {type: object, properties: {query: {type: string}}, required: [query]}\n    \
                   backend: {builtin: echo}\n",
    );
    yaml
}

/// A gateway serving `tools(n)` with its MCP door; its process, MCP URL
/// and log.
fn gateway(n: usize) -> (CatalogDir, Reaped, String, LogLines) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &tools(n));
    let (child, url, log) = serve(dir.dir.path(), &[]);
    (dir, child, url, log)
}

/// A session-era session; the headers that send a request in it.
async fn session(url: &str) -> Vec<(&'static str, String)> {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (status, headers, body) = post(url, &[], init).await;
    assert_eq!(status, 200, "{body}");
    let id = headers["mcp-session-id"].to_str().unwrap().to_owned();
    vec![("mcp-session-id", id), ("mcp-protocol-version", "2025-06-18".to_owned())]
}

fn borrowed<'a>(headers: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    headers.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_saying_initialized_again_and_again_holds_one_listener_and_no_copy_of_its_tools() {
    let (_dir, child, url, _log) = gateway(300);
    let headers = session(&url).await;
    let headers = borrowed(&headers);
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    post(&url, &headers, initialized).await;
    let listed = post(&url, &headers, r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).await;
    let count = rpc(&listed.2)["result"]["tools"].as_array().unwrap().len();
    assert!(count > 300, "{count}");
    let before = memory_kib(child.id(), "VmRSS:");
    let client = reqwest::Client::new();
    let mut sent = tokio::task::JoinSet::new();
    for _ in 0..2_000 {
        let mut request = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialized);
        for (name, value) in &headers {
            request = request.header(*name, *value);
        }
        sent.spawn(async move { request.send().await.unwrap().status().as_u16() });
        while sent.len() >= 16 {
            assert_eq!(sent.join_next().await.unwrap().unwrap(), 202);
        }
    }
    while let Some(status) = sent.join_next().await {
        assert_eq!(status.unwrap(), 202);
    }
    // What the listeners hold is held once they have listed: a request
    // after them is served after their first listing.
    let listed = post(&url, &headers, r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#).await;
    assert_eq!(rpc(&listed.2)["result"]["tools"].as_array().unwrap().len(), count);
    let after = memory_kib(child.id(), "VmRSS:");
    println!("RSS: {before} KiB, then {after} KiB after 2,000 notifications/initialized");
    assert!(after < before + 32 * 1024, "one session grew from {before} KiB to {after} KiB");
}

/// A `tools/call` body of tiny JSON values where `where_` says, about
/// `size` bytes long, as request `id`.
fn tiny_values(where_: &str, size: usize, id: usize) -> String {
    let values = "[]".repeat(size / 3).replace("][", "],[");
    match where_ {
        "arguments" => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"web_search","arguments":{{"query":"x","pad":[{values}]}}}}}}"#
        ),
        "_meta" => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"web_search","arguments":{{"query":"x"}},"_meta":{{"pad":[{values}]}}}}}}"#
        ),
        _ => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"pad":[{values}]}}}}"#),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_tiny_json_values_costs_about_its_size_and_the_limits_apply_before_any_tree() {
    let (_dir, child, url, _log) = gateway(1);
    let headers = session(&url).await;
    let headers = borrowed(&headers);
    let size = 3_700_000;
    let peak = memory_kib(child.id(), "VmHWM:");
    let mut answers = Vec::new();
    for round in 0..2 {
        let calls = (0..4).map(|i| post(&url, &headers, tiny_values("arguments", size, 10 * round + i)));
        for (status, _, body) in futures::future::join_all(calls).await {
            assert_eq!(status, 200, "{body}");
            answers.push(rpc(&body));
        }
        let (status, _, body) = post(&url, &headers, tiny_values("_meta", size, 10 * round + 5)).await;
        assert_eq!(
            (status, body.as_str()),
            (413, "a JSON-RPC message is at most 64 KiB beside a tools/call's arguments")
        );
        let (status, _, _) = post(&url, &headers, tiny_values("ping", size, 10 * round + 6)).await;
        assert_eq!(status, 413, "round {round}");
    }
    let after = memory_kib(child.id(), "VmHWM:");
    println!("peak RSS: {peak} KiB before, {after} KiB after 8 bodies of 3.7 MB of tiny values");
    // Four bodies at once are held as text (4 x 3.7 MB, and a copy of each's
    // arguments), never as trees of them (about 60 times their size).
    assert!(after < peak + 64 * 1024, "peak RSS grew from {peak} KiB to {after} KiB");
    for answer in answers {
        let result = &answer["result"];
        assert_eq!(result["isError"], true, "{answer}");
        let text = result["content"][0]["text"].as_str().unwrap();
        // The first answers say so; later ones, that the session's retry
        // budget for the tool is spent, naming the same problem.
        assert!(text.contains("arguments are 3700020 bytes long; the limit is 1 MiB"), "{text}");
    }
    // Beside the limits, a call still runs (in a session of its own: this
    // one's retry budget for the tool is spent).
    let headers = session(&url).await;
    let headers = borrowed(&headers);
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "web_search", "arguments": {"query": "rust"}}});
    let (_, _, body) = post(&url, &headers, call.to_string()).await;
    assert_eq!(rpc(&body)["result"]["isError"], false, "{body}");
}

/// A `tools/call` of `find_tools` or `call_tool` on `/mcp/search`, its
/// arguments padded with about `size` bytes of tiny JSON values, as
/// request `id`.
fn padded_search(tool: &str, size: usize, id: usize) -> String {
    let values = "[]".repeat(size / 3).replace("][", "],[");
    let arguments = match tool {
        "find_tools" => format!(r#"{{"query":"search the web","pad":[{values}]}}"#),
        _ => format!(r#"{{"name":"web_search","arguments":{{"query":"x","pad":[{values}]}}}}"#),
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_arguments_of_tiny_values_stay_text_until_the_size_check() {
    let (_dir, child, url, _log) = gateway(1);
    let search = url.replace("/mcp", "/mcp/search");
    let headers = session(&search).await;
    let headers = borrowed(&headers);
    let size = 3_700_000;
    let peak = memory_kib(child.id(), "VmHWM:");
    for round in 0..2 {
        let calls = (0..4).map(|i| {
            let tool = if i % 2 == 0 { "find_tools" } else { "call_tool" };
            post(&search, &headers, padded_search(tool, size, 10 * round + i))
        });
        for (status, _, body) in futures::future::join_all(calls).await {
            assert_eq!(status, 200, "{body}");
            let answer = rpc(&body);
            assert_eq!(answer["result"]["isError"], true, "{answer}");
            let text = answer["result"]["content"][0]["text"].as_str().unwrap();
            assert!(text.contains("bytes long; the limit is 1 MiB"), "{text}");
        }
    }
    let after = memory_kib(child.id(), "VmHWM:");
    println!("peak RSS: {peak} KiB before, {after} KiB after 8 searches and calls of 3.7 MB of tiny values");
    // Four at once are held as text, never as trees (about 60 times their size).
    assert!(after < peak + 64 * 1024, "peak RSS grew from {peak} KiB to {after} KiB");
    // Beside them, a search and a call still run (in a session of their
    // own: this one's retry budget for web_search is spent).
    let headers = session(&search).await;
    let headers = borrowed(&headers);
    let find = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "find_tools", "arguments": {"query": "search the web", "limit": 1}}});
    let (_, _, body) = post(&search, &headers, find.to_string()).await;
    assert_eq!(rpc(&body)["result"]["structuredContent"]["tools"][0]["name"], "web_search", "{body}");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "call_tool", "arguments": {"name": "web_search", "arguments": {"query": "rust"}}}});
    let (_, _, body) = post(&search, &headers, call.to_string()).await;
    assert_eq!(rpc(&body)["result"]["isError"], false, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_only_the_gateway_sets_is_refused_and_ids_it_reads_must_be_strings() {
    let (dir, _child, url, _log) = gateway(1);
    let headers = session(&url).await;
    let headers = borrowed(&headers);
    let call = |meta: Value, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "web_search", "arguments": arguments, "_meta": meta}})
        .to_string()
    };
    // What runs is what `params.arguments` says, never a `_meta` beside it.
    let smuggled = call(json!({"dev.toolgate/arguments_text": "{\"query\": \"other\"}"}), json!({"query": "seen"}));
    let (status, _, body) = post(&url, &headers, smuggled).await;
    let error = &rpc(&body)["error"];
    assert_eq!((status, error["code"].as_i64()), (200, Some(-32602)), "{body}");
    assert!(error["message"].as_str().unwrap().contains("dev.toolgate/arguments_text"), "{body}");
    for key in [json!(5), json!({"k": 1}), json!(true)] {
        let (status, _, body) =
            post(&url, &headers, call(json!({"dev.toolgate/idempotency_key": key}), json!({"query": "pay"}))).await;
        let error = &rpc(&body)["error"];
        assert_eq!((status, error["code"].as_i64()), (200, Some(-32602)), "{body}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("_meta[\"dev.toolgate/idempotency_key\"] must be a JSON string"),
            "{body}"
        );
    }
    // Arguments sent as their JSON text still run, repaired like any emitted.
    let (_, _, body) = post(&url, &headers, call(json!({}), json!("{'query': 'as text'}"))).await;
    let result = &rpc(&body)["result"];
    assert_eq!(result["isError"], false, "{body}");
    assert!(result["content"][0]["text"].as_str().unwrap().contains("as text"), "{body}");
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toolset_outside_the_callers_grants_answers_as_an_absent_one() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: web_search\n    description: s\n    backend: {builtin: echo}\n  \
         - name: pay\n    description: p\n    backend: {builtin: echo}\n\
         toolsets:\n  research: [web_search]\n  payments: [pay]\n",
    );
    let hash = toolgate::identity::hash_key("k");
    dir.file(
        "toolgate.yaml",
        &format!("principals:\n  - name: researcher\n    api_key_sha256: {hash}\n    tools: [research]\n"),
    );
    let (_child, url, _log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let key = [("authorization", "Bearer k")];
    let at = |toolset: &str| url.replace("/mcp", &format!("/mcp/toolsets/{toolset}"));
    // Hidden, and absent: the same answer, and neither suggests the hidden one.
    let (hidden, _, hidden_body) = post(&at("payments"), &key, init).await;
    let (absent, _, absent_body) = post(&at("refunds"), &key, init).await;
    let message = |body: &str| rpc(body)["error"]["message"].as_str().unwrap().to_owned();
    assert_eq!((hidden, message(&hidden_body).as_str()), (404, "unknown toolset 'payments'"));
    assert_eq!((absent, message(&absent_body).as_str()), (404, "unknown toolset 'refunds'"));
    let (_, _, near_hidden) = post(&at("paymentz"), &key, init).await;
    assert_eq!(message(&near_hidden), "unknown toolset 'paymentz'");
    // A toolset inside the grants is served and suggested.
    let (status, _, _) = post(&at("research"), &key, init).await;
    assert_eq!(status, 200);
    let (_, _, near) = post(&at("reserch"), &key, init).await;
    assert_eq!(message(&near), "unknown toolset 'reserch', did you mean 'research'?");
}

/// `App::serve` runs every door over one snapshot, as `serve` does: the
/// test gateway's gRPC and MCP doors answer the same catalogue, and both
/// stop with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_serve_runs_both_doors_and_stops_both() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut gw = crate::common::TestGateway::registry(crate::common::SEARCH_REGISTRY).start().await;
    let answer = crate::common::execute(&mut gw.client, "WebSearch", r#"{"query": "grpc"}"#).await;
    assert!(answer.ok, "{answer:?}");
    let headers = session(&gw.mcp_url).await;
    let headers = borrowed(&headers);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "WebSearch", "arguments": {"query": "mcp"}}});
    let (_, _, body) = post(&gw.mcp_url, &headers, call.to_string()).await;
    let result = &rpc(&body)["result"];
    assert_eq!(result["isError"], false, "{body}");
    assert_eq!(result["_meta"]["dev.toolgate/repairs"][0]["repaired"], "web_search", "{body}");
    let (url, addr) = (gw.mcp_url.clone(), gw.addr);
    gw.shutdown().await;
    assert!(reqwest::Client::new().post(&url).body("{}").send().await.is_err(), "the MCP door stopped");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the gRPC door stopped");
}

/// A session-era `tools/call` holds its place under the principal's
/// `concurrent` limit until its answer is sent (rmcp answers with a stream
/// at once, and the call runs on): the third call at once under
/// `concurrent: 2` is refused, and once the two end, a call runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_bounds_session_era_calls_until_their_answers() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = CatalogDir::new();
    dir.file(
        "registry/hold.py",
        "import json, os, sys, time\nargs = json.load(sys.stdin)\nopen('started-' + str(args['n']), 'w').close()\n\
         while not os.path.exists('release'):\n    time.sleep(0.01)\nprint(json.dumps({'ok': True, 'result': 'done'}))\n",
    );
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: hold\n    description: Holds until released.\n    \
         parameters: {type: object, properties: {n: {type: integer}}, required: [n]}\n    \
         backend: {command: {argv: [python3, hold.py]}}\n",
    );
    let hash = toolgate::identity::hash_key("k");
    dir.file(
        "toolgate.yaml",
        &format!(
            "principals:\n  - name: bot\n    api_key_sha256: {hash}\n    tools: [hold]\n    rate: {{concurrent: 2}}\n"
        ),
    );
    let (_child, url, _log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (status, headers, _) = post(&url, &[("authorization", "Bearer k")], init).await;
    assert_eq!(status, 200);
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let call = |n: u32| {
        let (url, session) = (url.clone(), session.clone());
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                "params": {"name": "hold", "arguments": {"n": n}}});
            let headers = [
                ("authorization", "Bearer k"),
                ("mcp-session-id", session.as_str()),
                ("mcp-protocol-version", "2025-06-18"),
            ];
            post(&url, &headers, body.to_string()).await
        }
    };
    let first = tokio::spawn(call(1));
    let second = tokio::spawn(call(2));
    // Both run (each wrote its marker), and hold.
    let started = |n: u32| dir.registry().join(format!("started-{n}"));
    while !(started(1).exists() && started(2).exists()) {
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let (status, _, body) = call(3).await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("at most 2 requests may be in flight"), "{body}");
    assert!(!started(3).exists(), "the third call never ran");
    std::fs::write(dir.registry().join("release"), "").unwrap();
    for running in [first, second] {
        let (status, _, body) = running.await.unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(rpc(&body)["result"]["isError"], false, "{body}");
    }
    let (status, _, body) = call(4).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(rpc(&body)["result"]["isError"], false, "{body}");
}

/// The stateless era's `tools/call` of `name`, as the caller `auth`
/// (headers), with `_meta`; the JSON-RPC answer.
async fn stateless_call(url: &str, auth: &[(&str, &str)], name: &str, arguments: Value, meta: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta}});
    let mut headers = vec![("mcp-protocol-version", "2025-06-18")];
    headers.extend_from_slice(auth);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (status, answer, body_text) = post(url, auth, init).await;
    assert_eq!(status, 200, "{body_text}");
    let id = answer["mcp-session-id"].to_str().unwrap().to_owned();
    headers.push(("mcp-session-id", &id));
    let (status, _, text) = post(url, &headers, body.to_string()).await;
    assert_eq!(status, 200, "{text}");
    rpc(&text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_issuers_subjects_of_one_name_are_two_users() {
    use crate::common::jwt::Signer;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let backend = crate::common::backend::start().await;
    let (users, idp) =
        (Signer::new(jsonwebtoken::Algorithm::ES256, "users-1"), Signer::new(jsonwebtoken::Algorithm::ES256, "idp-1"));
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        &format!(
            "tools:\n  - name: whoami\n    description: Says who calls.\n    \
             backend: {{http: {{url: \"{}\"}}}}\n  \
             - name: my_orders\n    description: The caller's orders.\n    \
             parameters: {{type: object, properties: {{customer: {{type: string}}}}, required: [customer]}}\n    \
             bind: {{customer: user}}\n    backend: {{builtin: echo}}\n",
            backend.url("/echo")
        ),
    );
    dir.file("users.json", &json!({"keys": [users.jwk()]}).to_string());
    dir.file("idp.json", &json!({"keys": [idp.jwk()]}).to_string());
    let hash = toolgate::identity::hash_key("ops-key");
    dir.file(
        "toolgate.yaml",
        &format!(
            "principals:\n  - name: ops\n    api_key_sha256: {hash}\n    tools: [\"*\"]\n\
             users:\n  jwt: {{issuer: https://users.example.test, audience: toolgate, jwks_file: users.json}}\n\
             mcp_front_door:\n  oauth:\n    resource: https://tools.example.test/mcp\n    \
             authorization_servers: [https://idp.example.test]\n    issuer: https://idp.example.test\n    \
             jwks_file: idp.json\n    principal: ops\n"
        ),
    );
    let (_child, url, _log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let user_token = users.token(json!({"sub": "alice", "iss": "https://users.example.test", "aud": "toolgate",
        "exp": now + 600}));
    let access = idp.token(json!({"sub": "alice", "iss": "https://idp.example.test",
        "aud": "https://tools.example.test/mcp", "exp": now + 600}));
    let oauth_bearer = format!("Bearer {access}");
    let by_key: &[(&str, &str)] = &[("authorization", "Bearer ops-key"), ("x-toolgate-user-token", &user_token)];
    let by_oauth: &[(&str, &str)] = &[("authorization", &oauth_bearer)];

    // The tool hears the subject and its issuer.
    let meta = json!({"dev.toolgate/idempotency_key": "pay-1"});
    let answer = stateless_call(&url, by_key, "whoami", json!({}), meta.clone()).await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(backend.seen.last_header("x-toolgate-user").as_deref(), Some("alice"));
    assert_eq!(backend.seen.last_header("x-toolgate-user-issuer").as_deref(), Some("https://users.example.test"));
    // The other issuer's alice, with the same principal and key, is someone
    // else: her call runs, and is not answered with the first one's record.
    let answer = stateless_call(&url, by_oauth, "whoami", json!({}), meta.clone()).await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(backend.seen.calls(), 2, "each user's once-only record is their own");
    assert_eq!(backend.seen.last_header("x-toolgate-user-issuer").as_deref(), Some("https://idp.example.test"));
    // The same user again: the record answers, nothing runs.
    stateless_call(&url, by_oauth, "whoami", json!({}), meta).await;
    assert_eq!(backend.seen.calls(), 2, "a retry runs nothing");

    // A bound parameter tells them apart too: users.jwt's subject as it is,
    // the other issuer's with its issuer.
    let answer = stateless_call(&url, by_key, "my_orders", json!({}), json!({})).await;
    let text = answer["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.contains(r#""customer":"alice""#), "{text}");
    let answer = stateless_call(&url, by_oauth, "my_orders", json!({}), json!({})).await;
    let text = answer["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.contains(r#""customer":"https://idp.example.test#alice""#), "{text}");
}

/// A session-era session of the caller `key` (an API key); the headers that
/// send a request in it, the key's included.
async fn session_of(url: &str, key: &str) -> Vec<(&'static str, String)> {
    session_of_with(url, key, &[]).await
}

/// The same request as another caller: `headers` with `key` instead.
fn as_key(headers: &[(&'static str, String)], key: &str) -> Vec<(&'static str, String)> {
    let mut headers = headers.to_vec();
    headers.retain(|(name, _)| *name != "authorization");
    headers.push(("authorization", format!("Bearer {key}")));
    headers
}

/// `tools/list` in a session; the status.
async fn list(url: &str, headers: &[(&'static str, String)]) -> u16 {
    post(url, &borrowed(headers), r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).await.0
}

/// A GET stream of a session (server-sent events), open while the
/// response lives.
async fn listen(url: &str, headers: &[(&'static str, String)]) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(url).header("accept", "text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_its_principals_and_each_principal_has_its_own_bounds() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &tools(2));
    let (a, b) = (toolgate::identity::hash_key("key-a"), toolgate::identity::hash_key("key-b"));
    dir.file(
        "toolgate.yaml",
        &format!(
            "principals:\n  - name: a\n    api_key_sha256: {a}\n    tools: [\"*\"]\n  \
             - name: b\n    api_key_sha256: {b}\n    tools: [\"*\"]\n\
             mcp_front_door: {{sessions_per_principal: 3, streams_per_principal: 2}}\n"
        ),
    );
    let (_child, url, _log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let first = session_of(&url, "key-a").await;
    assert_eq!(list(&url, &first).await, 200);

    // Another principal holding the id: the session does not exist for it,
    // whatever it asks (a call, a cancellation, a resumption, DELETE).
    let stranger = as_key(&first, "key-b");
    assert_eq!(list(&url, &stranger).await, 404);
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#;
    assert_eq!(post(&url, &borrowed(&stranger), cancel).await.0, 404);
    let mut resumed = stranger.clone();
    resumed.push(("last-event-id", "0".to_owned()));
    assert_eq!(listen(&url, &resumed).await.status().as_u16(), 404);
    let deleted = reqwest::Client::new()
        .delete(&url)
        .header("mcp-session-id", &first[0].1)
        .header("authorization", "Bearer key-b")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 404);
    assert_eq!(list(&url, &first).await, 200, "the owner's session is untouched");

    // Past a principal's bound its own idlest session ends, never another's.
    let theirs = session_of(&url, "key-b").await;
    let second = session_of(&url, "key-a").await;
    let third = session_of(&url, "key-a").await;
    assert_eq!(list(&url, &first).await, 200);
    let fourth = session_of(&url, "key-a").await;
    assert_eq!(list(&url, &second).await, 404, "a's session idle longest ended");
    for kept in [&first, &third, &fourth, &theirs] {
        assert_eq!(list(&url, kept).await, 200);
    }

    // GET streams: two open per principal; the third is refused, another
    // principal's is its own, and a closed one makes room.
    let one = listen(&url, &first).await;
    let two = listen(&url, &third).await;
    assert_eq!((one.status().as_u16(), two.status().as_u16()), (200, 200));
    let refused = listen(&url, &fourth).await;
    assert_eq!(refused.status().as_u16(), 429);
    assert!(refused.text().await.unwrap().contains("2 MCP streams open"));
    let other = listen(&url, &theirs).await;
    assert_eq!(other.status().as_u16(), 200);
    drop(one);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let again = listen(&url, &fourth).await;
        if again.status().as_u16() == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "a closed stream never made room");
        drop(again);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    drop((two, other));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_arrives_is_answered_408_within_the_connections_deadline() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_dir, _child, url, _log) = gateway(1);
    let address = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: 200\r\n\r\n{{\"jsonrpc\":"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // Nothing more is sent: the answer comes when the body's deadline
    // passes (the handshake deadline, 10 s), and the gateway serves others
    // meanwhile.
    let headers = session(&url).await;
    assert_eq!(list(&url, &headers).await, 200);
    let mut answer = Vec::new();
    let mut buffer = [0u8; 1024];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buffer).await.unwrap();
        assert!(n > 0, "closed without an answer");
        answer.extend_from_slice(&buffer[..n]);
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
}

#[test]
fn mcp_stdio_reads_a_tools_call_as_http_does() {
    use std::io::{BufRead, Write};
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &tools(1));
    // Ends when its stdin closes (as it does when this test ends, however).
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .current_dir(dir.dir.path())
        .args(["mcp-stdio", "--catalog", "registry"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut answers = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |line: &str| -> Value {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        serde_json::from_str(&answers.next().expect("an answer").unwrap()).unwrap()
    };
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    assert!(ask(init)["result"]["serverInfo"].is_object());
    let call = |id: u32, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    // Arguments sent as their JSON text: repaired and run, as over HTTP.
    let answer = ask(&call(2, json!({"name": "web_search", "arguments": "{'query': 'as text'}"})).to_string());
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("as text"), "{answer}");
    // What is no call: invalid params, with the request's id.
    for (id, params) in [
        (3, json!({"name": "web_search", "arguments": 5})),
        (4, json!({"name": "web_search", "arguments": ["a"]})),
        (5, json!({"arguments": {"query": "x"}})),
        (6, json!({"name": 7})),
    ] {
        let answer = ask(&call(id, params).to_string());
        assert_eq!(
            (answer["id"].as_u64(), answer["error"]["code"].as_i64()),
            (Some(id as u64), Some(-32602)),
            "{answer}"
        );
    }
    // Not JSON, a batch: the JSON-RPC errors, and the session goes on.
    assert_eq!(ask("{not json")["error"]["code"], -32700);
    assert_eq!(ask("[]")["error"]["code"], -32600);
    let answer = ask(&call(7, json!({"name": "web_search", "arguments": {"query": "still here"}})).to_string());
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    // A line over 4 MiB: -32600, and the session goes on.
    let long = call(8, json!({"name": "web_search", "arguments": {"query": "x".repeat(4 * 1024 * 1024)}})).to_string();
    assert_eq!(ask(&long)["error"]["code"], -32600);
    let answer = ask(&call(9, json!({"name": "web_search", "arguments": {"query": "after a long line"}})).to_string());
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// The end users of one principal each have their own bounds within the
/// principal's: past `sessions_per_user`, that user's own idlest session
/// ends, never another user's; past `streams_per_user`, that user's next
/// GET stream is 429 while another user's opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_of_a_principal_has_bounds_of_their_own() {
    use crate::common::jwt::Signer;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let signer = Signer::new(jsonwebtoken::Algorithm::ES256, "users-1");
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &tools(1));
    dir.file("users.json", &json!({"keys": [signer.jwk()]}).to_string());
    let hash = toolgate::identity::hash_key("ops-key");
    dir.file(
        "toolgate.yaml",
        &format!(
            "principals:\n  - name: ops\n    api_key_sha256: {hash}\n    tools: [\"*\"]\n\
             users:\n  jwt: {{issuer: https://users.example.test, audience: toolgate, jwks_file: users.json}}\n\
             mcp_front_door: {{sessions_per_principal: 4, sessions_per_user: 2, streams_per_user: 1}}\n"
        ),
    );
    let (_child, url, _log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let token = |user: &str| {
        signer.token(json!({"sub": user, "iss": "https://users.example.test", "aud": "toolgate", "exp": now + 600}))
    };
    let session_as = |user: &str| {
        let token = token(user);
        let url = url.clone();
        async move {
            let mut headers = session_of_with(&url, "ops-key", &[("x-toolgate-user-token", &token)]).await;
            headers.push(("x-toolgate-user-token", token));
            headers
        }
    };
    let bob = session_as("bob").await;
    let alice_1 = session_as("alice").await;
    let alice_2 = session_as("alice").await;
    assert_eq!(list(&url, &alice_1).await, 200);
    let alice_3 = session_as("alice").await;
    assert_eq!(list(&url, &alice_2).await, 404, "alice's own idlest session ended");
    for kept in [&bob, &alice_1, &alice_3] {
        assert_eq!(list(&url, kept).await, 200);
    }

    let alices = listen(&url, &alice_1).await;
    assert_eq!(alices.status().as_u16(), 200);
    let refused = listen(&url, &alice_3).await;
    assert_eq!(refused.status().as_u16(), 429);
    assert!(refused.text().await.unwrap().contains("this user has 1 MCP streams open"));
    let bobs = listen(&url, &bob).await;
    assert_eq!(bobs.status().as_u16(), 200, "another user's stream is their own");
    drop((alices, bobs));
}

/// [`session_of`] with more headers on its `initialize`.
async fn session_of_with(url: &str, key: &str, more: &[(&str, &str)]) -> Vec<(&'static str, String)> {
    let bearer = format!("Bearer {key}");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let mut headers = vec![("authorization", bearer.as_str())];
    headers.extend_from_slice(more);
    let (status, answered, body) = post(url, &headers, init).await;
    assert_eq!(status, 200, "{body}");
    let id = answered["mcp-session-id"].to_str().unwrap().to_owned();
    vec![("mcp-session-id", id), ("mcp-protocol-version", "2025-06-18".to_owned()), ("authorization", bearer)]
}
