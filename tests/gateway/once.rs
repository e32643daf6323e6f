//! Once-only calls and retry budgets (docs/once-only.md): in memory
//! through a real client, and on a real Redis shared by two real gateway
//! processes.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use tonic::{transport::Channel, Code};
use toolgate::proto::v1::{
    tool_gateway_service_client::ToolGatewayServiceClient, ErrorKind, ExecuteRequest, ExecuteResponse,
};

use crate::common::{backend, redis::Redis, stderr, CatalogDir, Reaped, TestGateway};

type Client = ToolGatewayServiceClient<Channel>;

fn registry(http: &backend::HttpBackend) -> String {
    format!(
        "tools:\n  - name: send_money\n    description: x\n    \
         parameters: {{type: object, properties: {{to: {{type: string}}, amount: {{type: integer}}}}, required: [to, amount], additionalProperties: false}}\n    \
         backend: {{http: {{url: \"{}\"}}}}\n  \
         - name: slow_transfer\n    description: x\n    timeout: 300ms\n    backend: {{http: {{url: \"{}\"}}}}\n  \
         - name: careful_transfer\n    description: x\n    backend: {{http: {{url: \"{}\"}}}}\n  \
         - name: lookup\n    description: x\n    idempotent: true\n    timeout: 300ms\n    backend: {{http: {{url: \"{}\"}}}}\n",
        http.url("/echo"),
        http.url("/slow"),
        http.url("/pause"),
        http.url("/slow"),
    )
}

async fn call(client: &mut Client, tool: &str, arguments: &str, key: &str, session: &str) -> ExecuteResponse {
    let request = ExecuteRequest {
        tool: tool.into(),
        arguments_json: arguments.into(),
        idempotency_key: key.into(),
        session_id: session.into(),
        call_id: "call_0".into(),
        ..Default::default()
    };
    client.execute(request).await.unwrap().into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_runs_a_call_once_and_answers_retries_with_its_outcome() {
    let http = backend::start().await;
    let mut gw = TestGateway::registry(&registry(&http)).start().await;
    let client = &mut gw.client;
    let args = r#"{"to": "bob", "amount": 5}"#;
    let first = call(client, "send_money", args, "k1", "").await;
    assert!(first.ok && !first.replayed, "{first:?}");
    let again = call(client, "SendMoney", args, "k1", "").await;
    assert!(again.ok && again.replayed, "{again:?}");
    assert_eq!(again.result_json, first.result_json);
    assert_eq!(again.call_id, "call_0");
    assert_eq!(http.seen.calls(), 1, "the tool ran once");

    // The same key for another call: refused.
    let status = client
        .execute(ExecuteRequest {
            tool: "send_money".into(),
            arguments_json: r#"{"to": "eve", "amount": 500}"#.into(),
            idempotency_key: "k1".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "idempotency key 'k1' was already used for a different call");
    // A key holding a bidi control is shown escaped, as names are.
    let sneaky = "pay\u{202e}1";
    assert!(call(client, "send_money", args, sneaky, "").await.ok);
    let other = ExecuteRequest {
        tool: "send_money".into(),
        arguments_json: r#"{"to": "eve", "amount": 500}"#.into(),
        idempotency_key: sneaky.into(),
        ..Default::default()
    };
    let status = client.execute(other).await.unwrap_err();
    assert_eq!(status.message(), "idempotency key 'pay\\u202e1' was already used for a different call");

    // A call that never reached the backend releases its key.
    let invalid = call(client, "send_money", r#"{"to": "bob"}"#, "k2", "").await;
    assert_eq!(invalid.error.unwrap().kind, ErrorKind::InvalidArguments as i32);
    let fixed = call(client, "send_money", args, "k2", "").await;
    assert!(fixed.ok && !fixed.replayed, "{fixed:?}");
    assert_eq!(http.seen.calls(), 3, "k1, pay\u{202e}1 and k2 each ran once");

    // A timeout of a tool that is not idempotent: a retry does not run it again.
    let timed_out = call(client, "slow_transfer", "{}", "k3", "").await;
    assert_eq!(timed_out.error.as_ref().unwrap().kind, ErrorKind::Timeout as i32);
    let before = http.seen.calls();
    let retried = call(client, "slow_transfer", "{}", "k3", "").await;
    assert!(retried.replayed);
    let error = retried.error.unwrap();
    assert!(error.message.contains("its effect is unknown, and the call was not run twice"), "{}", error.message);
    assert!(!error.retryable);
    assert_eq!(http.seen.calls(), before, "not run twice");
    // …of an idempotent tool: the key is released, a retry runs again.
    call(client, "lookup", "{}", "k4", "").await;
    let before = http.seen.calls();
    let again = call(client, "lookup", "{}", "k4", "").await;
    assert!(!again.replayed);
    assert_eq!(http.seen.calls(), before + 1);

    // Keys and session ids are bounded and printable.
    for (key, session) in [
        ("k".repeat(1024 * 1024), String::new()),
        ("a\u{7}b".to_owned(), String::new()),
        (String::new(), "s".repeat(300)),
    ] {
        let request = ExecuteRequest {
            tool: "send_money".into(),
            arguments_json: args.into(),
            idempotency_key: key,
            session_id: session,
            ..Default::default()
        };
        assert_eq!(client.execute(request).await.unwrap_err().code(), Code::InvalidArgument);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_duplicate_waits_for_the_first_and_gets_its_answer() {
    let http = backend::start().await;
    let gw = TestGateway::registry(&registry(&http)).start().await;
    let (mut a, mut b) = (gw.client.clone(), gw.client.clone());
    let first = tokio::spawn(async move { call(&mut a, "careful_transfer", r#"{"n": 1}"#, "same", "").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = call(&mut b, "careful_transfer", r#"{"n": 1}"#, "same", "").await;
    let first = first.await.unwrap();
    assert!(first.ok && !first.replayed, "{first:?}");
    assert!(second.ok && second.replayed, "{second:?}");
    assert_eq!(http.seen.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_budget_stops_a_model_that_keeps_failing() {
    let http = backend::start().await;
    let mut gw = TestGateway::registry(&registry(&http)).start().await;
    let client = &mut gw.client;
    let bad = r#"{"to": "bob"}"#;
    for _ in 0..3 {
        let response = call(client, "send_money", bad, "", "s1").await;
        assert_eq!(response.error.unwrap().kind, ErrorKind::InvalidArguments as i32);
    }
    let response = call(client, "send_money", bad, "", "s1").await;
    let error = response.error.unwrap();
    assert_eq!(error.kind, ErrorKind::RetryBudgetExhausted as i32);
    assert!(!error.retryable);
    assert!(
        error.message.starts_with(
            "'send_money' failed 3 times in this session; stop calling it and tell the user what went wrong. \
             Last problem: missing a required argument: 'amount'"
        ),
        "{}",
        error.message
    );
    // Another session, or another tool, has its own budget.
    assert_eq!(call(client, "send_money", bad, "", "s2").await.error.unwrap().kind, ErrorKind::InvalidArguments as i32);
    // A valid call is always dispatched, and resets the tool's count.
    let ok = call(client, "send_money", r#"{"to": "bob", "amount": 1}"#, "", "s1").await;
    assert!(ok.ok, "{ok:?}");
    assert_eq!(call(client, "send_money", bad, "", "s1").await.error.unwrap().kind, ErrorKind::InvalidArguments as i32);
    // Invented names share one bucket per session.
    for name in ["nope_a", "nope_b", "nope_c"] {
        assert_eq!(call(client, name, "{}", "", "s3").await.error.unwrap().kind, ErrorKind::UnknownTool as i32);
    }
    let error = call(client, "nope_d", "{}", "", "s3").await.error.unwrap();
    assert_eq!(error.kind, ErrorKind::RetryBudgetExhausted as i32);
    assert!(error.message.starts_with("'nope_d' failed 3 times in this session"), "{}", error.message);
}

/// `toolgate serve` in `dir` with `toolgate.yaml`; its address, and its
/// log from then on, collected.
fn serve(dir: &Path) -> (Reaped, std::thread::JoinHandle<Vec<String>>, String) {
    let (child, lines, addr) = crate::common::serve_config(dir, &[]);
    (child, std::thread::spawn(move || lines.map_while(Result::ok).collect()), addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_on_one_redis_run_a_key_once_and_survive_redis_going_away() {
    let mut redis = Redis::start();
    let http = backend::start().await;
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&http));
    dir.file("toolgate.yaml", &format!("state: {{redis: \"{}\"}}\n", redis.url()));
    let (mut one, _log_one, addr_one) = serve(dir.dir.path());
    let (mut two, log_two, addr_two) = serve(dir.dir.path());
    let mut a = ToolGatewayServiceClient::connect(format!("http://{addr_one}")).await.unwrap();
    let mut b = ToolGatewayServiceClient::connect(format!("http://{addr_two}")).await.unwrap();

    // The same key to both at once: one run, two answers.
    let (ra, rb) = tokio::join!(
        call(&mut a, "careful_transfer", r#"{"n": 7}"#, "shared", ""),
        call(&mut b, "careful_transfer", r#"{"n": 7}"#, "shared", "")
    );
    assert!(ra.ok && rb.ok, "{ra:?} {rb:?}");
    assert!(ra.replayed != rb.replayed, "exactly one replayed: {ra:?} {rb:?}");
    assert_eq!(http.seen.calls(), 1, "the tool ran once across two replicas");
    // Budgets are shared too.
    call(&mut a, "send_money", "{}", "", "shared-session").await;
    call(&mut b, "send_money", "{}", "", "shared-session").await;
    call(&mut a, "send_money", "{}", "", "shared-session").await;
    let error = call(&mut b, "send_money", "{}", "", "shared-session").await.error.unwrap();
    assert_eq!(error.kind, ErrorKind::RetryBudgetExhausted as i32);

    // Redis goes away: keys on a tool that is not idempotent are refused in
    // band (nothing runs), budgets fail open, everything else works.
    redis.kill();
    let before = http.seen.calls();
    let refused = call(&mut a, "send_money", r#"{"to": "bob", "amount": 1}"#, "while-down", "").await;
    let error = refused.error.expect("refused");
    assert_eq!(error.kind, ErrorKind::Unavailable as i32);
    assert!(error.retryable);
    assert_eq!(error.message, "cannot guarantee once-only delivery right now; the call did not run");
    assert_eq!(http.seen.calls(), before);
    let open = call(&mut a, "send_money", r#"{"to": "bob", "amount": 1}"#, "", "budget-while-down").await;
    assert!(open.ok, "{open:?}");
    assert!(call(&mut b, "send_money", r#"{"to": "bob", "amount": 2}"#, "", "").await.ok);

    // It comes back: keys work again without a restart of the gateways.
    redis.restart();
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let response = call(&mut a, "send_money", r#"{"to": "carol", "amount": 3}"#, "after", "").await;
        if response.ok {
            break;
        }
        assert!(Instant::now() < until, "no recovery: {response:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    loop {
        let replay = call(&mut b, "send_money", r#"{"to": "carol", "amount": 3}"#, "after", "").await;
        if replay.ok {
            assert!(replay.replayed, "{replay:?}");
            break;
        }
        assert!(Instant::now() < until, "no recovery: {replay:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    one.kill().unwrap();
    two.kill().unwrap();
    let _ = two.wait();
    let log = log_two.join().unwrap().join("\n");
    assert!(log.contains("the state store is unreachable"), "a warning says so: {log}");
}

#[test]
fn a_malformed_redis_url_is_a_load_error_and_one_pointing_nowhere_is_not() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", "tools:\n  - name: t\n    description: x\n    backend: {builtin: echo}\n");
    dir.file("toolgate.yaml", "state: {redis: \"not a url\"}\n");
    let out = crate::common::run(dir.dir.path(), &["validate", "--config", "toolgate.yaml", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("state.redis: invalid Redis URL"), "{}", stderr(&out));
    let nowhere = backend::closed_port();
    dir.file("toolgate.yaml", &format!("state: {{redis: \"redis://{nowhere}/0\"}}\n"));
    let (mut child, _log, _addr) = serve(dir.dir.path());
    child.kill().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_reused_by_another_principal_is_another_key() {
    use toolgate::identity::hash_key;
    let http = backend::start().await;
    let principal =
        |name: &str| format!("{{name: {name}, api_key_sha256: {}, tools: [\"*\"]}}", hash_key(&format!("key-{name}")));
    let gw = TestGateway::registry(&registry(&http))
        .config(&format!("principals: [{}, {}]", principal("a"), principal("b")))
        .start()
        .await;
    let mut client = gw.client.clone();
    for (who, amount) in [("a", 1), ("b", 2), ("a", 1)] {
        let mut request = tonic::Request::new(ExecuteRequest {
            tool: "send_money".into(),
            arguments_json: format!(r#"{{"to": "bob", "amount": {amount}}}"#),
            idempotency_key: "call_0".into(),
            ..Default::default()
        });
        request.metadata_mut().insert("authorization", format!("Bearer key-{who}").parse().unwrap());
        let response = client.execute(request).await.unwrap().into_inner();
        assert!(response.ok, "{who}: {response:?}");
    }
    // a's and b's `call_0` are two keys: two runs, and a's second call a replay.
    assert_eq!(http.seen.calls(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principal_s_flood_of_keys_never_evicts_another_s_records() {
    use toolgate::identity::hash_key;
    let http = backend::start().await;
    let principal = |name: &str| format!("{{name: {name}, api_key_sha256: {}, tools: [\"*\"]}}", hash_key(name));
    // A small store: 400 records, 100 per principal.
    let gw = TestGateway::registry(&registry(&http))
        .config(&format!("principals: [{}, {}]", principal("victim"), principal("flood")))
        .config("state: {max_records: 400}")
        .start()
        .await;
    let mut client = gw.client.clone();
    let keyed = |who: &str, key: String| {
        let mut request = tonic::Request::new(ExecuteRequest {
            tool: "send_money".into(),
            arguments_json: r#"{"to": "bob", "amount": 5}"#.into(),
            idempotency_key: key,
            ..Default::default()
        });
        request.metadata_mut().insert("authorization", format!("Bearer {who}").parse().unwrap());
        request
    };
    let first = client.execute(keyed("victim", "pay-1".into())).await.unwrap().into_inner();
    assert!(first.ok && !first.replayed, "{first:?}");
    // Another principal sends far more keyed calls than the store holds.
    let (mut ran, mut refused) = (0, 0);
    for i in 0..1_000 {
        let response = client.execute(keyed("flood", format!("k{i}"))).await.unwrap().into_inner();
        match response.error {
            None => ran += 1,
            Some(error) => {
                assert_eq!(error.kind, ErrorKind::Unavailable as i32, "{error:?}");
                assert!(error.retryable && error.message.contains("cannot guarantee once-only delivery"), "{error:?}");
                refused += 1;
            }
        }
    }
    assert_eq!((ran, refused), (100, 900), "the flood fills its own quarter, then is refused in band");
    // The victim's retry is still answered from its record: it never runs twice.
    let retry = client.execute(keyed("victim", "pay-1".into())).await.unwrap().into_inner();
    assert!(retry.ok && retry.replayed, "{retry:?}");
    assert_eq!(http.seen.calls(), 1 + 100);
    // And the victim can still make new keyed calls.
    let second = client.execute(keyed("victim", "pay-2".into())).await.unwrap().into_inner();
    assert!(second.ok && !second.replayed, "{second:?}");
}

#[tokio::test]
async fn names_that_resolve_to_no_tool_share_a_budget_no_tool_can_share() {
    // A tool may be named `_unresolved`; it keeps a budget of its own.
    let registry = "tools:\n  - name: _unresolved\n    description: x\n    \
                    parameters: {type: object, properties: {n: {type: integer}}, required: [n]}\n    \
                    backend: {builtin: echo}\n";
    let mut gw = TestGateway::registry(registry).start().await;
    for name in ["nope_1", "nope_2", "nope_3"] {
        let response = call(&mut gw.client, name, "{}", "", "s").await;
        assert_eq!(response.error.unwrap().kind, ErrorKind::UnknownTool as i32);
    }
    let response = call(&mut gw.client, "_unresolved", "{}", "", "s").await;
    assert_eq!(response.error.unwrap().kind, ErrorKind::InvalidArguments as i32, "its own budget, untouched");
    let response = call(&mut gw.client, "nope_4", "{}", "", "s").await;
    assert_eq!(response.error.unwrap().kind, ErrorKind::RetryBudgetExhausted as i32, "the shared one, spent");
}

/// A gateway on `registry` with its state in Redis behind `proxy`.
async fn behind(proxy: &crate::common::proxy::DelayingProxy, http: &backend::HttpBackend) -> TestGateway {
    TestGateway::registry(&registry(http)).config(&format!("state: {{redis: \"{}\"}}", proxy.url())).start().await
}

const DID_NOT_RUN: &str = "cannot guarantee once-only delivery right now; the call did not run";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_answered_too_late_never_burns_its_key() {
    let redis = Redis::start();
    let proxy = crate::common::proxy::DelayingProxy::start(([127, 0, 0, 1], redis.port).into()).await;
    let http = backend::start().await;
    let mut gw = behind(&proxy, &http).await;
    let args = r#"{"to": "bob", "amount": 5}"#;
    assert!(call(&mut gw.client, "send_money", args, "warm-up", "").await.ok, "connected");
    // Redis answers, but after the store's deadline: the claim lands, the
    // gateway cannot know it, and says the call did not run.
    proxy.delay(Duration::from_millis(800));
    let started = std::time::Instant::now();
    let late = call(&mut gw.client, "send_money", args, "pay-7", "").await;
    let took = started.elapsed();
    let error = late.error.expect("not run");
    assert_eq!((error.kind, error.message.as_str()), (ErrorKind::Unavailable as i32, DID_NOT_RUN));
    assert!(error.retryable);
    assert!(took < Duration::from_millis(1_500), "answered in {took:?}");
    assert_eq!(http.seen.calls(), 1, "only the warm-up ran");
    // Redis is fast again (the answers already on their way still arrive
    // late): the retry runs the tool, once; never "effect unknown".
    proxy.delay(Duration::ZERO);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let retry = call(&mut gw.client, "send_money", args, "pay-7", "").await;
    assert!(retry.ok && !retry.replayed, "{retry:?}");
    let again = call(&mut gw.client, "send_money", args, "pay-7", "").await;
    assert!(again.ok && again.replayed, "{again:?}");
    assert_eq!(http.seen.calls(), 2, "the key ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_store_answers_did_not_run_at_once_and_the_retry_runs_once() {
    let redis = Redis::start();
    let proxy = crate::common::proxy::DelayingProxy::start(([127, 0, 0, 1], redis.port).into()).await;
    let http = backend::start().await;
    let gw = behind(&proxy, &http).await;
    let args = r#"{"to": "bob", "amount": 5}"#;
    assert!(call(&mut gw.client.clone(), "send_money", args, "warm-up", "").await.ok);
    redis.pause();
    let started = std::time::Instant::now();
    let calls: Vec<_> = (0..10)
        .map(|i| {
            let mut client = gw.client.clone();
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let response = call(&mut client, "send_money", args, &format!("stopped-{i}"), "").await;
                (response, started.elapsed())
            })
        })
        .collect();
    for answered in calls {
        let (response, took) = answered.await.unwrap();
        let error = response.error.expect("not run");
        assert_eq!(error.message, DID_NOT_RUN);
        assert!(took < Duration::from_millis(1_500), "a call waited {took:?} for a stopped store");
    }
    assert!(started.elapsed() < Duration::from_secs(3));
    redis.resume();
    for i in 0..10 {
        let response = call(&mut gw.client.clone(), "send_money", args, &format!("stopped-{i}"), "").await;
        assert!(response.ok && !response.replayed, "{response:?}");
    }
    assert_eq!(http.seen.calls(), 11, "each key ran once, after the store came back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_comes_before_the_callers_deadline_however_slow_the_store() {
    let redis = Redis::start();
    let proxy = crate::common::proxy::DelayingProxy::start(([127, 0, 0, 1], redis.port).into()).await;
    let http = backend::start().await;
    let gw = behind(&proxy, &http).await;
    let args = r#"{"to": "bob", "amount": 5}"#;
    assert!(call(&mut gw.client.clone(), "send_money", args, "warm-up", "").await.ok);
    proxy.delay(Duration::from_secs(2));
    let mut request = tonic::Request::new(ExecuteRequest {
        tool: "send_money".into(),
        arguments_json: args.into(),
        idempotency_key: "hurry".into(),
        ..Default::default()
    });
    request.set_timeout(Duration::from_millis(300));
    let response = gw.client.clone().execute(request).await.expect("an answer, not a deadline exceeded").into_inner();
    let error = response.error.expect("not run");
    assert_eq!(error.message, DID_NOT_RUN);
    assert!(error.retryable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_the_store_takes_late_is_written_again_and_replayed() {
    let redis = Redis::start();
    let proxy = crate::common::proxy::DelayingProxy::start(([127, 0, 0, 1], redis.port).into()).await;
    let http = backend::start().await;
    let gw = behind(&proxy, &http).await;
    // careful_transfer takes 500 ms: the store slows down while it runs, so
    // writing its answer misses the deadline.
    let mut client = gw.client.clone();
    let first =
        tokio::spawn(async move { call(&mut client, "careful_transfer", r#"{"n": 1}"#, "slow-write", "").await });
    tokio::time::sleep(Duration::from_millis(250)).await;
    proxy.delay(Duration::from_millis(800));
    let first = first.await.unwrap();
    assert!(first.ok && !first.replayed, "the caller has its answer: {first:?}");
    proxy.delay(Duration::ZERO);
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The answer is written again in the background; the retry replays it.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let retry = loop {
        let retry = call(&mut gw.client.clone(), "careful_transfer", r#"{"n": 1}"#, "slow-write", "").await;
        if retry.replayed || std::time::Instant::now() > until {
            break retry;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(retry.ok && retry.replayed, "{retry:?}");
    assert_eq!(retry.result_json, first.result_json);
    assert_eq!(http.seen.calls(), 1, "never run twice");
}
