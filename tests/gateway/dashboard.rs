//! The Grafana dashboard in deploy/ queries only metrics and labels the
//! gateway really emits, under the names the OpenTelemetry Collector's
//! Prometheus exporter gives them, so the dashboard cannot silently rot.

use std::collections::BTreeSet;

use toolgate::proto::v1::{ExecuteRequest, ResolveRequest};

use crate::common::{repo, telemetry::Recorded, CatalogDir, TestGateway};

fn backend_closed() -> std::net::SocketAddr {
    crate::common::backend::closed_port()
}

/// Prometheus names of an OTel metric: dots to underscores, the unit as a
/// suffix (`s` → `_seconds`), then `_total` for a counter or the three series
/// of a histogram.
fn prometheus_names(name: &str, unit: &str, histogram: bool) -> Vec<String> {
    let mut base = name.replace('.', "_");
    if unit == "s" {
        base.push_str("_seconds");
    }
    match histogram {
        true => ["_bucket", "_sum", "_count"].iter().map(|s| format!("{base}{s}")).collect(),
        false => vec![format!("{base}_total")],
    }
}

#[tokio::test]
async fn every_metric_and_label_the_dashboard_queries_is_emitted() {
    let (recorded, observer) = Recorded::start(false);
    let recorded_observer = observer.clone();
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: web_search\n    description: x\n    parameters: {type: object, properties: {query: {type: string}, limit: {type: integer, maximum: 5}}, required: [query], additionalProperties: false}\n    backend: {builtin: echo}\n",
    );
    // A principal, so the `principal` label appears too.
    let principal =
        format!("principals: [{{name: bot, api_key_sha256: {}, tools: [\"*\"]}}]", toolgate::identity::hash_key("k"));
    let mut gw = TestGateway::dir(&dir).config(&principal).observer(observer).start().await;
    fn keyed<T>(message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.metadata_mut().insert("authorization", "Bearer k".parse().unwrap());
        request
    }
    // Calls that make every metric and label appear: ok, repaired, unknown, invalid.
    for (tool, args) in [
        ("web_search", r#"{"query": "a"}"#),
        ("WebSearch", r#"{"query": "a"}"#),
        ("web_serch", "{}"),
        ("web_search", r#"{"limit": 9}"#),
    ] {
        let request = ExecuteRequest { tool: tool.into(), arguments_json: args.into(), ..Default::default() };
        gw.client.execute(keyed(request)).await.unwrap();
    }
    // A key given twice (a replay), a session past its budget.
    for _ in 0..2 {
        let request = ExecuteRequest {
            tool: "web_search".into(),
            arguments_json: r#"{"query": "a"}"#.into(),
            idempotency_key: "k".into(),
            ..Default::default()
        };
        gw.client.execute(keyed(request)).await.unwrap();
    }
    for _ in 0..4 {
        let request = ExecuteRequest { tool: "web_search".into(), session_id: "s".into(), ..Default::default() };
        gw.client.execute(keyed(request)).await.unwrap();
    }
    // A store that cannot be reached: its errors are counted.
    let unreachable = backend_closed();
    let mut down = TestGateway::dir(&dir)
        .config(&format!("state: {{redis: \"redis://{unreachable}/0\"}}"))
        .observer(recorded_observer.clone())
        .start()
        .await;
    let request = ExecuteRequest { tool: "web_search".into(), session_id: "s".into(), ..Default::default() };
    down.client.execute(request).await.unwrap();
    // A rate limit reached.
    let mut limited = TestGateway::dir(&dir)
        .config("rate_limits:\n  tools:\n    web_search: {per_minute: 1, burst: 1, per: all}\n")
        .observer(recorded_observer.clone())
        .start()
        .await;
    for _ in 0..2 {
        let request = ExecuteRequest {
            tool: "web_search".into(),
            arguments_json: r#"{"query": "a"}"#.into(),
            ..Default::default()
        };
        limited.client.execute(request).await.unwrap();
    }
    let resolve = ResolveRequest { names: vec!["web_serch".into()], strict: None };
    gw.client.resolve(tonic::Request::new(resolve.clone())).await.unwrap_err();
    gw.client.resolve(keyed(resolve)).await.unwrap();

    let points = recorded.points();
    let mut metrics: BTreeSet<String> = BTreeSet::new();
    let mut labels: BTreeSet<String> = ["le".to_owned()].into();
    for point in &points {
        let histogram = point.name.ends_with("duration");
        let unit = if histogram { "s" } else { "" };
        metrics.extend(prometheus_names(&point.name, unit, histogram));
        labels.extend(point.attributes.keys().map(|k| k.replace('.', "_")));
    }

    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("deploy/grafana/dashboards/toolgate.json")).unwrap())
            .unwrap();
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        // The model door's panels are checked against its scrape
        // (door_deploy.rs).
        .filter(|p| !p["title"].as_str().unwrap_or_default().starts_with("Model door"))
        .flat_map(|p| p["targets"].as_array().unwrap().iter())
        .map(|t| t["expr"].as_str().unwrap().to_owned())
        .collect();
    assert!(exprs.len() >= 9, "{exprs:?}");
    let selector = regex::Regex::new(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[\{\[]").unwrap();
    let grouping = regex::Regex::new(r"\bby\s*\(([^)]*)\)").unwrap();
    let matcher = regex::Regex::new(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)").unwrap();
    let mut queried_metrics = BTreeSet::new();
    let mut queried_labels = BTreeSet::new();
    for expr in &exprs {
        queried_metrics.extend(selector.captures_iter(expr).map(|c| c[1].to_owned()));
        for group in grouping.captures_iter(expr) {
            queried_labels.extend(group[1].split(',').map(|l| l.trim().to_owned()).filter(|l| !l.is_empty()));
        }
        queried_labels.extend(matcher.captures_iter(expr).map(|c| c[1].to_owned()));
    }
    let missing: Vec<&String> = queried_metrics.difference(&metrics).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics the gateway does not emit: {missing:?}\nemitted: {metrics:?}"
    );
    let missing: Vec<&String> = queried_labels.difference(&labels).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries labels the gateway does not emit: {missing:?}\nemitted: {labels:?}"
    );
    for wanted in [
        "toolgate_tool_calls_total",
        "toolgate_tool_duration_seconds_bucket",
        "toolgate_tool_repairs_total",
        "toolgate_tool_hints_total",
        "toolgate_tool_violations_total",
        "toolgate_idempotency_replays_total",
        "toolgate_retry_budget_exhaustions_total",
        "toolgate_state_errors_total",
        "toolgate_rate_limited_total",
    ] {
        assert!(queried_metrics.contains(wanted), "the dashboard shows {wanted}");
    }
}
