//! The Execute core without dispatch (resolve the name, parse and repair the
//! arguments, validate them: `Executor::prepare`, the stages of
//! `src/exec/prepare/`) on gateways started as `serve` starts them, with catalogues of 100,
//! 1,000 and 10,000 tools: an exact hit, a drifted name repaired, a miss,
//! values coerced, a name in template residue, arguments in an envelope and
//! argument syntax repaired.
//!
//! And what telemetry adds to one whole Execute RPC handled in process (the
//! service's handler, dispatch to the built-in `echo`): nothing recorded,
//! metrics only, and metrics with both spans through the SDK's batch
//! processor into an exporter that discards them, every trace and 10 % of
//! traces (no protobuf, no network; the load tool measures those).
//!
//! `cargo bench --bench execute`; numbers in docs/benchmarks.md.

// Benchmarks report what they measured and start the processes they measure.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]
// The support modules are modules of this one binary.
#![allow(unreachable_pub)]

#[path = "support/catalogue.rs"]
mod catalogue;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::{
    error::OTelSdkResult,
    metrics::{InMemoryMetricExporter, SdkMeterProvider},
    trace::{Sampler, SpanData, SpanExporter, SpanLimits},
    Resource,
};
use tonic::Request;
use toolgate::{
    exec::Call,
    proto::v1::{tool_gateway_service_server::ToolGatewayService, ExecuteRequest},
    telemetry::{Batching, Metrics, Observer, Tracer},
};

/// A realistic tool: three typed parameters, one required, no extras.
const PARAMETERS: &str = "{type: object, properties: {id: {type: string, pattern: \"^[a-z0-9-]+$\"}, \
    limit: {type: integer, minimum: 1, maximum: 100}, include_archived: {type: boolean}}, \
    required: [id], additionalProperties: false}";

/// `github_list_issue` → `GithubListIssue`.
fn camel(name: &str) -> String {
    name.split('_').map(|w| w[..1].to_uppercase() + &w[1..]).collect()
}

fn prepare(c: &mut Criterion) {
    let mut group = c.benchmark_group("prepare");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let arguments = r#"{"id": "issue-1042", "limit": 20, "include_archived": false}"#;
    for n in [100, 1_000, 10_000] {
        let (app, names) = catalogue::start(&runtime, n, PARAMETERS, "", Observer::disabled());
        let snapshot = app.snapshot();
        let executor = snapshot.executor();
        let target = &names[n / 2];
        let call = |tool: String| Call { tool, arguments_json: arguments.into(), ..Call::default() };
        let hit = call(target.clone());
        let repaired = call(camel(target));
        let miss = call(format!("{}x", &target[..target.len() - 1]));
        assert!(executor.prepare(&hit).unwrap().is_ok());
        let ready = executor.prepare(&repaired).unwrap().expect("the drifted name is repaired");
        assert_eq!(ready.repairs.len(), 1);
        let outcome = executor.prepare(&miss).unwrap().expect_err("a miss");
        let error = outcome.result.unwrap_err();
        assert_eq!(error.suggestions.first(), Some(target), "{}", error.message);
        group.bench_with_input(BenchmarkId::new("hit", n), &hit, |b, c| b.iter(|| executor.prepare(c)));
        group.bench_with_input(BenchmarkId::new("repaired_name", n), &repaired, |b, c| b.iter(|| executor.prepare(c)));
        group.bench_with_input(BenchmarkId::new("miss", n), &miss, |b, c| b.iter(|| executor.prepare(c)));
        // Values spelt as strings: coerced after validation fails.
        let coerced = Call {
            tool: target.clone(),
            arguments_json: r#"{"id": "issue-1042", "limit": "20", "include_archived": "false"}"#.into(),
            ..Call::default()
        };
        let ready = executor.prepare(&coerced).unwrap().expect("the values are coerced");
        assert_eq!(ready.repairs.len(), 2);
        group.bench_with_input(BenchmarkId::new("coerced_values", n), &coerced, |b, c| b.iter(|| executor.prepare(c)));
        // A name in chat-template residue, as a harmony-style template
        // leaves it: the whole-name lookups miss, then the words are tried.
        let residue = call(format!("<|channel|>commentary to=functions.{target} <|constrain|>json"));
        let ready = executor.prepare(&residue).unwrap().expect("the name is found in the residue");
        assert_eq!(ready.repairs.len(), 1);
        group.bench_with_input(BenchmarkId::new("residue_name", n), &residue, |b, c| b.iter(|| executor.prepare(c)));
        // Arguments in an envelope beside call metadata.
        let envelope = Call {
            tool: target.clone(),
            arguments_json: format!(r#"{{"name": "{target}", "type": "function", "arguments": {arguments}}}"#),
            ..Call::default()
        };
        let ready = executor.prepare(&envelope).unwrap().expect("the envelope is unwrapped");
        assert_eq!(ready.repairs.len(), 1);
        group.bench_with_input(BenchmarkId::new("envelope", n), &envelope, |b, c| b.iter(|| executor.prepare(c)));
        // Argument syntax: typographic quotes, an unquoted key, prose after.
        let syntax = Call {
            tool: target.clone(),
            arguments_json: "{\u{201c}id\u{201d}: \u{201c}issue-1042\u{201d}, limit: 20}\nLet me know!".into(),
            ..Call::default()
        };
        let ready = executor.prepare(&syntax).unwrap().expect("the syntax is repaired");
        assert_eq!(ready.repairs.len(), 1);
        group.bench_with_input(BenchmarkId::new("repaired_syntax", n), &syntax, |b, c| b.iter(|| executor.prepare(c)));
    }
    group.finish();
}

/// Takes the batches and drops them.
#[derive(Debug)]
struct Discard;

impl SpanExporter for Discard {
    async fn export(&self, _: Vec<SpanData>) -> OTelSdkResult {
        Ok(())
    }
}

fn telemetry(c: &mut Criterion) {
    let mut group = c.benchmark_group("execute_rpc");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _entered = runtime.enter();
    let meters = SdkMeterProvider::builder().with_periodic_exporter(InMemoryMetricExporter::default()).build();
    let resource = Resource::builder().build();
    let tracer =
        Tracer::new(Box::new(Sampler::AlwaysOn), SpanLimits::default(), Discard, &resource, Batching::default());
    // 10 % of traces, as OTEL_TRACES_SAMPLER=parentbased_traceidratio with 0.1 makes.
    let ratio = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(0.1)));
    let sampled = Tracer::new(Box::new(ratio), SpanLimits::default(), Discard, &resource, Batching::default());
    let metrics = Metrics::new(&meters.meter("toolgate"));
    let observers = [
        ("off", Observer::disabled()),
        ("metrics", Observer { metrics: metrics.clone(), tracer: None, record_content: false, scrape: None }),
        (
            "metrics_and_spans",
            Observer { metrics: metrics.clone(), tracer: Some(tracer.clone()), record_content: false, scrape: None },
        ),
        (
            "metrics_and_spans_10pct",
            Observer { metrics, tracer: Some(sampled.clone()), record_content: false, scrape: None },
        ),
    ];
    for (name, observer) in observers {
        let (app, _) = catalogue::start(&runtime, 0, PARAMETERS, "", observer);
        bench_echo(&mut group, &runtime, name, &app);
    }
    group.finish();
    tracer.shutdown();
    sampled.shutdown();
}

/// What rate limits add to one Execute handled in process, memory store: a
/// principal limit (checked per request) and a tool limit (per call), set
/// high enough never to refuse.
fn rate_limits(c: &mut Criterion) {
    let mut group = c.benchmark_group("execute_rpc_rate");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _entered = runtime.enter();
    let limits = "rate_limits:\n  principal: {per_minute: 60000000, burst: 1000000}\n  \
                  tools:\n    echo: {per_minute: 60000000, burst: 1000000, per: all}\n";
    for (name, config) in [("no_limits", ""), ("principal_and_tool_limits", limits)] {
        let (app, _) = catalogue::start(&runtime, 0, PARAMETERS, config, Observer::disabled());
        bench_echo(&mut group, &runtime, name, &app);
    }
    group.finish();
}

/// One Execute RPC of `echo` through `app`'s gRPC service, in process.
fn bench_echo(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    runtime: &tokio::runtime::Runtime,
    name: &str,
    app: &toolgate::app::App,
) {
    let gateway = app.grpc();
    let request = ExecuteRequest {
        tool: "echo".into(),
        arguments_json: r#"{"message": "hello", "n": 42}"#.into(),
        ..Default::default()
    };
    let response = runtime.block_on(gateway.execute(Request::new(request.clone()))).unwrap().into_inner();
    assert!(response.ok, "{response:?}");
    group
        .bench_function(name, |b| b.iter(|| runtime.block_on(gateway.execute(Request::new(request.clone()))).unwrap()));
}

criterion_group!(benches, prepare, telemetry, rate_limits);
criterion_main!(benches);
