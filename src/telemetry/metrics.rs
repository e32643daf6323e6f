//! The gateway's metrics: calls, repairs, hints and argument violations, and
//! call durations, labelled by canonical tool name (never by an emitted name)
//! and outcome; and `rpc.server.call.duration`.

use std::{
    cell::RefCell,
    collections::HashSet,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, RwLock,
    },
};

use hashbrown::{Equivalent, HashMap};
use opentelemetry::{
    metrics::{BoundCounter, BoundHistogram, Counter, Histogram, Meter, MeterProvider},
    KeyValue,
};

use super::semconv;

/// Distinct tool names that get a label of their own; the rest are `_OTHER`
/// (each instrument keeps a bounded number of attribute sets).
const MAX_TOOL_LABELS: usize = 500;

/// The buckets of the model door's durations (seconds), the GenAI
/// conventions' advice: from 10 ms to generations of minutes.
const SECONDS: [f64; 14] = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

/// The buckets of a generation's tokens (powers of 4, to 64M).
const TOKENS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];

/// The buckets of the time to a stream's first bytes (seconds).
const FIRST_TOKEN: [f64; 16] =
    [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];

/// Distinct model names (as requests name them) that get a label of their
/// own; the rest are `_OTHER`.
const MAX_MODEL_LABELS: usize = 100;

/// The instruments. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    calls: Counter<u64>,
    repairs: Counter<u64>,
    hints: Counter<u64>,
    violations: Counter<u64>,
    duration: Histogram<f64>,
    rpc_duration: Histogram<f64>,
    mcp_duration: Histogram<f64>,
    replays: Counter<u64>,
    exhaustions: Counter<u64>,
    state_errors: Counter<u64>,
    rate_limited: Counter<u64>,
    reloads: Counter<u64>,
    pin_changes: Counter<u64>,
    retries: Counter<u64>,
    failovers: Counter<u64>,
    door_duration: Histogram<f64>,
    operation_duration: Histogram<f64>,
    token_usage: Histogram<u64>,
    first_token: Histogram<f64>,
    labels: Arc<RwLock<HashSet<String>>>,
    models: Arc<RwLock<HashSet<String>>>,
    /// Tells this set of instruments (and its clones) apart in the threads'
    /// [`BOUND`] instruments.
    id: u64,
    /// False for the instruments of a gateway that exports no metrics:
    /// the per-call attributes (labels, strings) are not even built.
    enabled: bool,
}

impl Metrics {
    pub fn new(meter: &Meter) -> Self {
        Self {
            calls: meter.u64_counter(semconv::CALLS).with_description("Tool calls, by tool and outcome").build(),
            repairs: meter.u64_counter(semconv::REPAIRS).with_description("Repairs made to calls, by kind").build(),
            hints: meter.u64_counter(semconv::HINTS).with_description("Hints given to models, by kind").build(),
            violations: meter
                .u64_counter(semconv::VIOLATIONS)
                .with_description("Argument problems found by validation")
                .build(),
            duration: meter
                .f64_histogram(semconv::DURATION)
                .with_unit("s")
                .with_description("Duration of tool calls, from request to answer")
                .build(),
            rpc_duration: meter
                .f64_histogram(semconv::RPC_DURATION)
                .with_unit("s")
                .with_description("Duration of RPCs served")
                .build(),
            mcp_duration: meter
                .f64_histogram(semconv::MCP_DURATION)
                .with_unit("s")
                .with_description("Duration of MCP requests served, by method")
                .build(),
            replays: meter
                .u64_counter(semconv::REPLAYS)
                .with_description("Answers given again for a repeated idempotency key, by tool")
                .build(),
            exhaustions: meter
                .u64_counter(semconv::BUDGET_EXHAUSTIONS)
                .with_description("Failing calls answered RETRY_BUDGET_EXHAUSTED, by tool")
                .build(),
            state_errors: meter
                .u64_counter(semconv::STATE_ERRORS)
                .with_description("Times the state store (memory or Redis) could not answer, by use")
                .build(),
            rate_limited: meter
                .u64_counter(semconv::RATE_LIMITED)
                .with_description("Requests and calls refused by a rate limit, by scope and tool")
                .build(),
            reloads: meter
                .u64_counter(semconv::RELOADS)
                .with_description("Catalogue and configuration reloads, by result (ok, rejected)")
                .build(),
            pin_changes: meter
                .u64_counter(semconv::MCP_PIN_CHANGES)
                .with_description("Federated MCP tools that differ from their pins, by server, tool, action and fields")
                .build(),
            retries: meter
                .u64_counter(semconv::MODEL_DOOR_RETRIES)
                .with_description("Extra requests the model door made to have a call rewritten, by outcome")
                .build(),
            failovers: meter
                .u64_counter(semconv::MODEL_DOOR_FAILOVERS)
                .with_description("Requests the model door moved to the next upstream, by from and to")
                .build(),
            door_duration: meter
                .f64_histogram(semconv::HTTP_SERVER_REQUEST_DURATION)
                .with_unit("s")
                .with_boundaries(SECONDS.to_vec())
                .with_description("The model door's requests, by route and status")
                .build(),
            operation_duration: meter
                .f64_histogram(semconv::GEN_AI_CLIENT_OPERATION_DURATION)
                .with_unit("s")
                .with_boundaries(SECONDS.to_vec())
                .with_description("The model door's generations, by model, upstream and its status")
                .build(),
            token_usage: meter
                .u64_histogram(semconv::GEN_AI_CLIENT_TOKEN_USAGE)
                .with_unit("{token}")
                .with_boundaries(TOKENS.to_vec())
                .with_description("Tokens of the model door's generations, by type, model and upstream")
                .build(),
            first_token: meter
                .f64_histogram(semconv::GEN_AI_SERVER_TIME_TO_FIRST_TOKEN)
                .with_unit("s")
                .with_boundaries(FIRST_TOKEN.to_vec())
                .with_description("Time to a stream's first bytes through the model door, by model and upstream")
                .build(),
            models: Arc::default(),
            labels: Arc::default(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            enabled: true,
        }
    }

    /// Whether these instruments record (a gateway that exports metrics).
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Instruments that record nothing.
    pub(crate) fn disabled() -> Self {
        let metrics = Self::new(&opentelemetry::metrics::noop::NoopMeterProvider::new().meter("toolgate"));
        Self { enabled: false, ..metrics }
    }

    /// The label of a canonical tool name (`None`: unresolved).
    fn tool(&self, tool: Option<&str>) -> KeyValue {
        let label = match tool {
            None => semconv::OTHER.to_owned(),
            Some(name) => bounded(&self.labels, MAX_TOOL_LABELS, name),
        };
        KeyValue::new(semconv::GEN_AI_TOOL_NAME, label)
    }

    /// One finished call: its outcome (`ok` or an error kind) and duration.
    /// `principal` labels it when principals are configured.
    ///
    /// Recorded through this thread's instruments bound to the call's
    /// attributes ([`BOUND`]); the first call of a set, and any past the
    /// bound, build the attributes and let the SDK look them up.
    pub(crate) fn call(
        &self,
        tool: Option<&str>,
        principal: Option<&str>,
        front_door: &'static str,
        outcome: &'static str,
        error_type: Option<&'static str>,
        seconds: f64,
    ) {
        if !self.enabled {
            return;
        }
        let key = CallKey { metrics: self.id, tool, principal, front_door, outcome, error_type };
        BOUND.with_borrow_mut(|bound| {
            if let Some((calls, duration)) = bound.calls.get(&key) {
                calls.add(1);
                duration.record(seconds);
                return;
            }
            let mut attributes = vec![
                self.tool(tool),
                KeyValue::new(semconv::OUTCOME, outcome),
                KeyValue::new(semconv::FRONT_DOOR, front_door),
            ];
            if let Some(error_type) = error_type {
                attributes.push(KeyValue::new(semconv::ERROR_TYPE, error_type));
            }
            if let Some(principal) = principal {
                attributes.push(KeyValue::new(semconv::PRINCIPAL_LABEL, principal.to_owned()));
            }
            self.calls.add(1, &attributes);
            self.duration.record(seconds, &attributes);
            if bound.calls.len() < BOUND_PER_THREAD {
                let owned = CallKey {
                    metrics: self.id,
                    tool: tool.map(Box::from),
                    principal: principal.map(Box::from),
                    front_door,
                    outcome,
                    error_type,
                };
                bound.calls.insert(owned, (self.calls.bind(&attributes), self.duration.bind(&attributes)));
            }
        });
    }

    pub(crate) fn repair(&self, tool: Option<&str>, kind: &'static str) {
        self.repairs.add(1, &[self.tool(tool), KeyValue::new(semconv::REPAIR_KIND, kind)]);
    }

    pub(crate) fn hint(&self, tool: Option<&str>, kind: &'static str) {
        self.hints.add(1, &[self.tool(tool), KeyValue::new(semconv::HINT_KIND, kind)]);
    }

    pub(crate) fn violations(&self, tool: Option<&str>, count: usize) {
        self.violations.add(count as u64, &[self.tool(tool)]);
    }

    pub(crate) fn replayed(&self, tool: Option<&str>) {
        self.replays.add(1, &[self.tool(tool)]);
    }

    pub(crate) fn budget_exhausted(&self, tool: Option<&str>) {
        self.exhaustions.add(1, &[self.tool(tool)]);
    }

    /// `what`: `idempotency` or `budget`.
    pub(crate) fn store_error(&self, what: &'static str) {
        self.state_errors.add(1, &[KeyValue::new(semconv::STATE_USE, what)]);
    }

    /// `scope`: `principal`, `user` or `tool`; the tool of a call.
    pub(crate) fn rate_limited(&self, scope: &'static str, tool: Option<&str>) {
        self.rate_limited.add(1, &[KeyValue::new(semconv::RATE_SCOPE, scope), self.tool(tool)]);
    }

    /// `result`: `ok` or `rejected`.
    /// `tries` extra requests the model door made for one answer.
    pub(crate) fn retries(&self, tries: u64, outcome: &'static str) {
        self.retries.add(tries, &[KeyValue::new(semconv::RETRY_OUTCOME, outcome)]);
    }

    /// A model name as a label: its own among the first
    /// [`MAX_MODEL_LABELS`] seen, else `_OTHER`.
    fn model(&self, model: &str) -> KeyValue {
        KeyValue::new(semconv::GEN_AI_REQUEST_MODEL, bounded(&self.models, MAX_MODEL_LABELS, model))
    }

    /// One request of the model door: its route and status, how long it
    /// took; for a generation, its model, upstream (if one answered), the
    /// upstream's status and its tokens.
    pub(crate) fn door_request(&self, door: &DoorRequest<'_>) {
        if !self.enabled {
            return;
        }
        let status = i64::from(door.status);
        self.door_duration.record(
            door.seconds,
            &[
                KeyValue::new(semconv::HTTP_REQUEST_METHOD, "POST"),
                KeyValue::new(semconv::HTTP_ROUTE, door.route),
                KeyValue::new(semconv::HTTP_RESPONSE_STATUS_CODE, status),
            ],
        );
        let model = self.model(door.model);
        let upstream = KeyValue::new(semconv::UPSTREAM, door.upstream.unwrap_or(semconv::OTHER).to_owned());
        let operation = KeyValue::new(semconv::GEN_AI_OPERATION_NAME, "chat");
        self.operation_duration.record(
            door.seconds,
            &[
                operation.clone(),
                model.clone(),
                upstream.clone(),
                KeyValue::new(semconv::HTTP_RESPONSE_STATUS_CODE, status),
            ],
        );
        for (kind, tokens) in [("input", door.input_tokens), ("output", door.output_tokens)] {
            if let Some(tokens) = tokens {
                let kind = KeyValue::new(semconv::GEN_AI_TOKEN_TYPE, kind);
                self.token_usage.record(tokens, &[operation.clone(), kind, model.clone(), upstream.clone()]);
            }
        }
    }

    /// A stream's first bytes reached the client `seconds` after its
    /// request arrived.
    pub(crate) fn first_token(&self, seconds: f64, model: &str, upstream: &str) {
        if !self.enabled {
            return;
        }
        let labels = [self.model(model), KeyValue::new(semconv::UPSTREAM, upstream.to_owned())];
        self.first_token.record(seconds, &labels);
    }

    /// A request moved from the upstream `from` to `to` (the model door's
    /// failover).
    pub(crate) fn failover(&self, from: &str, to: &str) {
        let labels = [
            KeyValue::new(semconv::FAILOVER_FROM, from.to_owned()),
            KeyValue::new(semconv::FAILOVER_TO, to.to_owned()),
        ];
        self.failovers.add(1, &labels);
    }

    pub(crate) fn reload(&self, result: &'static str) {
        self.reloads.add(1, &[KeyValue::new(semconv::RELOAD_RESULT, result)]);
    }

    pub(crate) fn pin_change(&self, server: &str, tool: &str, action: &'static str, fields: &str) {
        let labels = [
            KeyValue::new(semconv::PIN_SERVER, server.to_owned()),
            KeyValue::new(semconv::PIN_TOOL, tool.to_owned()),
            KeyValue::new(semconv::PIN_ACTION, action),
            KeyValue::new(semconv::PIN_FIELDS, fields.to_owned()),
        ];
        self.pin_changes.add(1, &labels);
    }

    pub(crate) fn rpc(&self, method: &'static str, status: &'static str, seconds: f64) {
        if !self.enabled {
            return;
        }
        BOUND.with_borrow_mut(|bound| {
            let key = (self.id, method, status);
            if let Some(duration) = bound.rpcs.get(&key) {
                duration.record(seconds);
                return;
            }
            let attributes = [
                KeyValue::new(semconv::RPC_SYSTEM_NAME, "grpc"),
                KeyValue::new(semconv::RPC_METHOD, method),
                KeyValue::new(semconv::RPC_RESPONSE_STATUS_CODE, status),
            ];
            self.rpc_duration.record(seconds, &attributes);
            if bound.rpcs.len() < BOUND_PER_THREAD {
                bound.rpcs.insert(key, self.rpc_duration.bind(&attributes));
            }
        });
    }

    /// One MCP request answered: its method, the tool it called (resolved,
    /// labelled as calls are), and `error.type` when it failed.
    pub(crate) fn mcp(&self, method: &'static str, tool: Option<&str>, error: Option<&'static str>, seconds: f64) {
        let mut attributes = vec![KeyValue::new(semconv::MCP_METHOD_NAME, method)];
        if tool.is_some() {
            attributes.push(self.tool(tool));
        }
        if let Some(error) = error {
            attributes.push(KeyValue::new(semconv::ERROR_TYPE, error));
        }
        self.mcp_duration.record(seconds, &attributes);
    }
}

/// Numbers the sets of instruments made ([`Metrics::id`]).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Attribute sets a thread keeps bound instruments for, per kind; calls
/// past this are recorded unbound, as before.
const BOUND_PER_THREAD: usize = 4096;

/// The attributes of a call's metrics; `S` is `&str` to look up, `Box<str>`
/// to keep.
#[derive(Hash, PartialEq, Eq)]
struct CallKey<S> {
    metrics: u64,
    tool: Option<S>,
    principal: Option<S>,
    front_door: &'static str,
    outcome: &'static str,
    error_type: Option<&'static str>,
}

impl Equivalent<CallKey<Box<str>>> for CallKey<&str> {
    fn equivalent(&self, key: &CallKey<Box<str>>) -> bool {
        self.metrics == key.metrics
            && self.tool == key.tool.as_deref()
            && self.principal == key.principal.as_deref()
            && self.front_door == key.front_door
            && self.outcome == key.outcome
            && self.error_type == key.error_type
    }
}

/// A call's count and duration, bound to its attributes.
type BoundCall = (BoundCounter<u64>, BoundHistogram<f64>);

/// A thread's instruments bound to the attribute sets it has recorded.
#[derive(Default)]
struct Bound {
    calls: HashMap<CallKey<Box<str>>, BoundCall>,
    rpcs: HashMap<(u64, &'static str, &'static str), BoundHistogram<f64>>,
}

thread_local! {
    /// The SDK hashes a measurement's attributes on every record, under a
    /// lock the threads share; a bound instrument records straight into the
    /// set's aggregate. Kept per thread, so that looking one up takes no lock
    /// either. A call's tool label is decided when its set is first seen and
    /// does not change after (labels are only added), so the bound set stays
    /// right.
    static BOUND: RefCell<Bound> = RefCell::default();
}

/// `name` as a label: itself when it is one of the first `most` names
/// `seen` (kept there), else `_OTHER` (each instrument keeps a bounded
/// number of attribute sets).
fn bounded(seen: &RwLock<HashSet<String>>, most: usize, name: &str) -> String {
    if crate::lock::read(seen).contains(name) {
        return name.to_owned();
    }
    let mut labels = crate::lock::write(seen);
    if labels.len() < most || labels.contains(name) {
        labels.insert(name.to_owned());
        return name.to_owned();
    }
    semconv::OTHER.to_owned()
}

/// What the model door says of one request ([`Metrics::door_request`]).
pub(crate) struct DoorRequest<'a> {
    pub(crate) route: &'static str,
    pub(crate) status: u16,
    pub(crate) seconds: f64,
    pub(crate) model: &'a str,
    pub(crate) upstream: Option<&'a str>,
    pub(crate) input_tokens: Option<u64>,
    pub(crate) output_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use opentelemetry_sdk::metrics::{
        data::{AggregatedMetrics, MetricData},
        InMemoryMetricExporter, InMemoryMetricExporterBuilder, SdkMeterProvider, Temporality,
    };

    use super::*;

    fn provider(temporality: Temporality) -> (SdkMeterProvider, InMemoryMetricExporter) {
        let exporter = InMemoryMetricExporterBuilder::new().with_temporality(temporality).build();
        (SdkMeterProvider::builder().with_periodic_exporter(exporter.clone()).build(), exporter)
    }

    /// The points of the last export: metric name and attributes to a sum's
    /// value or a histogram's count.
    fn points(
        provider: &SdkMeterProvider,
        exporter: &InMemoryMetricExporter,
    ) -> BTreeMap<(String, BTreeMap<String, String>), u64> {
        exporter.reset();
        provider.force_flush().unwrap();
        let mut points = BTreeMap::new();
        let exported = exporter.get_finished_metrics().unwrap();
        for scope in exported.last().expect("an export").scope_metrics() {
            for metric in scope.metrics() {
                let attributes = |kv: &mut dyn Iterator<Item = &KeyValue>| -> BTreeMap<String, String> {
                    kv.map(|kv| (kv.key.to_string(), kv.value.to_string())).collect()
                };
                match metric.data() {
                    AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                        for p in sum.data_points() {
                            points.insert((metric.name().to_owned(), attributes(&mut p.attributes())), p.value());
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(histogram)) => {
                        for p in histogram.data_points() {
                            points.insert((metric.name().to_owned(), attributes(&mut p.attributes())), p.count());
                        }
                    }
                    other => panic!("unexpected data for {}: {other:?}", metric.name()),
                }
            }
        }
        points
    }

    fn point(name: &str, attributes: &[(&str, &str)]) -> (String, BTreeMap<String, String>) {
        (name.to_owned(), attributes.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    const ECHO_OK: [(&str, &str); 3] =
        [("gen_ai.tool.name", "echo"), ("toolgate.outcome", "ok"), ("toolgate.front_door", "grpc")];

    #[test]
    fn calls_recorded_again_count_on_every_thread_and_in_their_own_provider() {
        let (provider_a, exporter_a) = provider(Temporality::Cumulative);
        let (provider_b, exporter_b) = provider(Temporality::Cumulative);
        let a = Metrics::new(&provider_a.meter("toolgate"));
        let b = Metrics::new(&provider_b.meter("toolgate"));
        for _ in 0..3 {
            a.call(Some("echo"), None, "grpc", "ok", None, 0.001);
            a.rpc("toolgate.v1.ToolGatewayService/Execute", "OK", 0.001);
        }
        // The same attributes on the same thread, other instruments.
        b.call(Some("echo"), None, "grpc", "ok", None, 0.001);
        b.rpc("toolgate.v1.ToolGatewayService/Execute", "OK", 0.001);
        let other = a.clone();
        std::thread::spawn(move || {
            other.call(Some("echo"), None, "grpc", "ok", None, 0.001);
            other.call(Some("echo"), Some("ci"), "grpc", "ok", None, 0.001);
            other.call(Some("echo"), Some("ci"), "grpc", "ok", None, 0.001);
        })
        .join()
        .unwrap();
        a.call(Some("echo"), Some("ci"), "grpc", "ok", None, 0.001);
        a.call(Some("echo"), None, "grpc", "invalid_arguments", Some("invalid_arguments"), 0.001);
        a.call(None, None, "grpc", "unknown_tool", Some("unknown_tool"), 0.001);
        a.call(None, None, "grpc", "unknown_tool", Some("unknown_tool"), 0.001);

        let seen = points(&provider_a, &exporter_a);
        let with_principal = [&ECHO_OK[..], &[("principal", "ci")]].concat();
        let invalid = [
            ("gen_ai.tool.name", "echo"),
            ("toolgate.outcome", "invalid_arguments"),
            ("toolgate.front_door", "grpc"),
            ("error.type", "invalid_arguments"),
        ];
        let unknown = [
            ("gen_ai.tool.name", "_OTHER"),
            ("toolgate.outcome", "unknown_tool"),
            ("toolgate.front_door", "grpc"),
            ("error.type", "unknown_tool"),
        ];
        let rpc = [
            ("rpc.system.name", "grpc"),
            ("rpc.method", "toolgate.v1.ToolGatewayService/Execute"),
            ("rpc.response.status_code", "OK"),
        ];
        let expected = BTreeMap::from([
            (point(semconv::CALLS, &ECHO_OK), 4),
            (point(semconv::DURATION, &ECHO_OK), 4),
            (point(semconv::CALLS, &with_principal), 3),
            (point(semconv::DURATION, &with_principal), 3),
            (point(semconv::CALLS, &invalid), 1),
            (point(semconv::DURATION, &invalid), 1),
            (point(semconv::CALLS, &unknown), 2),
            (point(semconv::DURATION, &unknown), 2),
            (point(semconv::RPC_DURATION, &rpc), 3),
        ]);
        assert_eq!(seen, expected);
        let seen = points(&provider_b, &exporter_b);
        let expected = BTreeMap::from([
            (point(semconv::CALLS, &ECHO_OK), 1),
            (point(semconv::DURATION, &ECHO_OK), 1),
            (point(semconv::RPC_DURATION, &rpc), 1),
        ]);
        assert_eq!(seen, expected);
    }

    #[test]
    fn with_delta_temporality_each_export_counts_the_calls_since_the_last() {
        let (provider, exporter) = provider(Temporality::Delta);
        let metrics = Metrics::new(&provider.meter("toolgate"));
        metrics.call(Some("echo"), None, "grpc", "ok", None, 0.001);
        metrics.call(Some("echo"), None, "grpc", "ok", None, 0.001);
        assert_eq!(points(&provider, &exporter).get(&point(semconv::CALLS, &ECHO_OK)), Some(&2));
        metrics.call(Some("echo"), None, "grpc", "ok", None, 0.001);
        assert_eq!(points(&provider, &exporter).get(&point(semconv::CALLS, &ECHO_OK)), Some(&1));
    }
}
