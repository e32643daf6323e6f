//! The gateway's metrics: calls, repairs, hints and argument violations, and
//! call durations, labelled by canonical tool name (never by an emitted name)
//! and outcome; and `rpc.server.call.duration`.

use std::{
    collections::HashSet,
    sync::{Arc, RwLock},
};

use opentelemetry::{
    metrics::{Counter, Histogram, Meter, MeterProvider},
    KeyValue,
};

use super::semconv;

/// Distinct tool names that get a label of their own; the rest are `_OTHER`
/// (each instrument keeps a bounded number of attribute sets).
const MAX_TOOL_LABELS: usize = 500;

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
    labels: Arc<RwLock<HashSet<String>>>,
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
            labels: Arc::default(),
            enabled: true,
        }
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
            Some(name) => {
                let known = self.labels.read().map(|l| l.contains(name)).unwrap_or(false);
                if known {
                    name.to_owned()
                } else {
                    let mut labels = self.labels.write().expect("not poisoned");
                    if labels.len() < MAX_TOOL_LABELS {
                        labels.insert(name.to_owned());
                        name.to_owned()
                    } else if labels.contains(name) {
                        name.to_owned()
                    } else {
                        semconv::OTHER.to_owned()
                    }
                }
            }
        };
        KeyValue::new(semconv::GEN_AI_TOOL_NAME, label)
    }

    /// One finished call: its outcome (`ok` or an error kind) and duration.
    /// `principal` labels it when principals are configured.
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
    pub(crate) fn reload(&self, result: &'static str) {
        self.reloads.add(1, &[KeyValue::new(semconv::RELOAD_RESULT, result)]);
    }

    pub(crate) fn rpc(&self, method: &'static str, status: &'static str, seconds: f64) {
        if !self.enabled {
            return;
        }
        let attributes = [
            KeyValue::new(semconv::RPC_SYSTEM_NAME, "grpc"),
            KeyValue::new(semconv::RPC_METHOD, method),
            KeyValue::new(semconv::RPC_RESPONSE_STATUS_CODE, status),
        ];
        self.rpc_duration.record(seconds, &attributes);
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
