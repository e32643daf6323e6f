//! Execute: one tool call exactly as a model emitted it, repaired where that
//! is safe, validated, run on its backend, and answered with the result or an
//! error the model can act on (DESIGN sections 3 to 5).
//!
//! [`Executor::prepare`] is the pure part (resolve the name inside the
//! available set, parse and repair the arguments, validate them); it never
//! touches a backend, so an invalid call can never reach one.
//! [`Executor::execute`] adds the dispatch under the tool's timeout (bounded
//! by the caller's deadline) and concurrency limit. A tool problem is never a
//! gRPC error: it is an [`Outcome`] with a [`ToolError`].

pub mod arguments;
pub mod backends;
mod builtins;
pub mod coerce;
pub mod envelope;
pub mod limits;
pub mod lookup;
mod observe;
pub mod once;
pub mod outcome;
pub mod validate;

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use serde_json::{Map, Value};
use tokio::sync::Semaphore;

use backends::{Failure, HttpClients};
pub use limits::{byte_size, readable_duration, ArgumentLimits, ExecLimits};
pub use lookup::AvailableSet;
use lookup::{Inventory, Resolved};
pub use once::CallState;
pub use outcome::{ErrorKind, ExpectedParameters, Outcome, Repair, RepairKind, ToolError, Violation};

use crate::{
    catalog::{Backend, BindSource, Catalog, Tool, ToolId},
    mcp::McpPool,
    process::Inherited,
    resolve::{self, check_names, NamesError, Resolution, INLINE_NAMES},
    telemetry::{self, Observer},
};

/// One call, as the agent sent it.
#[derive(Clone, Debug, Default)]
pub struct Call {
    /// The tool name as the model emitted it.
    pub tool: String,
    /// The model's tool-call id.
    pub call_id: String,
    /// The arguments as the model emitted them; empty means `{}`.
    pub arguments_json: String,
    /// The agent's tool set (tool, alias or toolset names); empty: every tool.
    pub tools: Vec<String>,
    pub strict: bool,
    /// Resolve, repair and validate only.
    pub dry_run: bool,
    /// How long the caller will wait, if it said.
    pub deadline: Option<Duration>,
    /// The caller's W3C `traceparent` header as sent, passed on to HTTP and
    /// MCP backends if it is well-formed, when spans are not exported.
    pub traceparent: Option<String>,
    /// Who sent the call (from the transport and metadata, never from the
    /// arguments).
    pub caller: Caller,
    /// Once-only delivery: empty for none.
    pub idempotency_key: String,
    /// The conversation, for retry budgets: empty for none.
    pub session_id: String,
}

/// Who a call is for: the principal that sent it, as authenticated from the
/// transport and the request's metadata. `None` when no principals are
/// configured: every tool is available, as before identity existed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub principal: Option<Arc<str>>,
    /// The end user the call acts for, from a verified token.
    pub user: Option<Arc<User>>,
}

/// An end user: a verified token's subject, and the token itself (passed on
/// only to tools that ask for it).
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    pub id: String,
    pub token: String,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User").field("id", &self.id).finish_non_exhaustive()
    }
}

impl Caller {
    /// What a tool is told about who calls: `(principal, user)`.
    pub fn identity(&self) -> (Option<&str>, Option<&str>) {
        (self.principal.as_deref(), self.user.as_ref().map(|u| u.id.as_str()))
    }
}

/// What each principal may use: its grants, tool, alias or toolset names, or
/// `"*"` for every tool. Resolved against each catalogue snapshot.
#[derive(Clone, Debug, Default)]
pub struct Grants {
    by_principal: Vec<(Arc<str>, Vec<String>)>,
}

impl Grants {
    pub fn new(by_principal: Vec<(Arc<str>, Vec<String>)>) -> Self {
        Self { by_principal }
    }

    pub fn is_empty(&self) -> bool {
        self.by_principal.is_empty()
    }

    /// The tools each principal may use in `catalog`.
    fn resolve(&self, catalog: &Catalog) -> HashMap<Arc<str>, AvailableSet> {
        let set = |names: &[String]| match names.iter().any(|n| n == "*") {
            true => AvailableSet::All,
            false => AvailableSet::of_tools(catalog, &resolve::resolve_suggesting(catalog, names, 0).tools),
        };
        self.by_principal.iter().map(|(name, names)| (Arc::clone(name), set(names))).collect()
    }
}

/// A request that cannot be executed as sent (a gRPC INVALID_ARGUMENT).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Names(#[from] NamesError),
    /// Strict: names in `tools` that match nothing.
    #[error("{}", .0.message())]
    UnknownTools(Resolution),
    /// The tool acts for a user, and the request carries no user token.
    #[error("the tool '{0}' acts for a user, and the request carries no user token")]
    NoUser(String),
    /// An idempotency key or session id of the wrong shape.
    #[error("{0}")]
    BadId(String),
    /// An idempotency key already used for another call.
    #[error("idempotency key '{0}' was already used for a different call")]
    KeyReused(String),
}

/// A call that passed resolution, repair and validation.
#[derive(Debug)]
pub struct Ready {
    pub tool: ToolId,
    pub arguments: Map<String, Value>,
    /// The JSON text the backend receives: the arguments exactly as emitted
    /// when nothing was repaired, else the repaired object.
    pub arguments_json: String,
    pub repairs: Vec<Repair>,
}

/// What every catalogue snapshot's executor shares: HTTP clients, the
/// connections to MCP servers, what command backends inherit from the
/// gateway's environment, and what records calls.
pub struct Shared {
    http: HttpClients,
    mcp: Arc<McpPool>,
    inherited: Inherited,
    observer: Observer,
    /// Idempotency records and retry budgets.
    state: once::CallState,
}

impl Shared {
    /// Needs the process-wide crypto provider ([`crate::tls::install_crypto_provider`]).
    /// Calls may carry identity headers (principals can come with a
    /// reload), so HTTP redirects are followed within the origin only.
    pub fn new(mcp: Arc<McpPool>, inherited: Inherited, observer: Observer) -> Result<Arc<Self>, reqwest::Error> {
        let state = once::CallState::default();
        Ok(Arc::new(Self { http: HttpClients::new()?, mcp, inherited, observer, state }))
    }

    pub fn mcp(&self) -> &Arc<McpPool> {
        &self.mcp
    }

    /// Keeps idempotency records and retry budgets in `state` (by default
    /// in memory, with the default TTLs and budget).
    pub fn keeping(self: Arc<Self>, state: once::CallState) -> Arc<Self> {
        let mut shared = Arc::try_unwrap(self).unwrap_or_else(|_| panic!("set before the executor shares it"));
        shared.state = state;
        Arc::new(shared)
    }

    pub fn observer(&self) -> &Observer {
        &self.observer
    }
}

/// Runs calls against one catalogue snapshot.
pub struct Executor {
    catalog: Arc<Catalog>,
    limits: ExecLimits,
    shared: Arc<Shared>,
    /// Calls in flight, per tool.
    permits: Vec<Semaphore>,
    /// The inventory of every tool, for calls without a tool set.
    everything: Inventory,
    /// What each principal may use in this snapshot.
    granted: HashMap<Arc<str>, AvailableSet>,
}

impl Executor {
    /// An executor for `catalog`, running calls with `shared`, for callers
    /// without principals.
    pub fn new(catalog: Arc<Catalog>, limits: ExecLimits, shared: Arc<Shared>) -> Self {
        Self::granting(catalog, limits, shared, &Grants::default())
    }

    /// [`Executor::new`], for principals with these grants (each snapshot
    /// resolves its configuration's grants against its catalogue).
    pub fn granting(catalog: Arc<Catalog>, limits: ExecLimits, shared: Arc<Shared>, grants: &Grants) -> Self {
        let permits = catalog.tools().iter().map(|t| Semaphore::new(t.max_concurrency as usize)).collect();
        let everything = Inventory::of(&catalog, &AvailableSet::All, limits.inventory_cap);
        let granted = grants.resolve(&catalog);
        Self { catalog, limits, shared, permits, everything, granted }
    }

    /// The tools `caller` may use: every tool without principals, else its
    /// grants (nothing for a principal this snapshot does not know).
    pub fn visible(&self, caller: &Caller) -> AvailableSet {
        match &caller.principal {
            None => AvailableSet::All,
            Some(name) => self.granted.get(name).cloned().unwrap_or(AvailableSet::Only(Vec::new())),
        }
    }

    /// An executor with backends of its own, no MCP servers and no telemetry
    /// (tests, benchmarks); command backends inherit from `inherited`.
    pub fn standalone(catalog: Arc<Catalog>, limits: ExecLimits, inherited: Inherited) -> Result<Self, reqwest::Error> {
        Ok(Self::new(catalog, limits, Shared::new(McpPool::empty(), inherited, Observer::disabled())?))
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Resolves, repairs and validates; never runs anything.
    pub fn prepare(&self, call: &Call) -> Result<Result<Ready, Outcome>, RequestError> {
        check_names("tools", &call.tools)?;
        let within = self.visible(&call.caller);
        self.prepare_in(call, AvailableSet::of(&self.catalog, &call.tools, call.strict, &within))
    }

    /// [`Executor::prepare`], the names of `call.tools` checked and resolved
    /// (off the runtime's workers when there are many).
    async fn prepare_async(&self, call: &Call) -> Result<Result<Ready, Outcome>, RequestError> {
        if call.tools.len() <= INLINE_NAMES {
            return self.prepare(call);
        }
        check_names("tools", &call.tools)?;
        let (catalog, names, strict) = (Arc::clone(&self.catalog), call.tools.clone(), call.strict);
        let within = self.visible(&call.caller);
        let set = tokio::task::spawn_blocking(move || AvailableSet::of(&catalog, &names, strict, &within))
            .await
            .expect("resolving names does not panic");
        self.prepare_in(call, set)
    }

    fn prepare_in(
        &self,
        call: &Call,
        (set, resolution): (AvailableSet, Resolution),
    ) -> Result<Result<Ready, Outcome>, RequestError> {
        if call.strict && !resolution.unknown.is_empty() {
            return Err(RequestError::UnknownTools(resolution));
        }
        let failed = |tool: Option<&Tool>, repairs: Vec<Repair>, arguments_json: String, error: ToolError| Outcome {
            tool: tool.map(|t| t.name.clone()),
            repairs,
            arguments_json,
            result: Err(error),
            replayed: false,
            budget_remaining: None,
        };

        // A whole call in the arguments, its name left empty (or only
        // residue): the name and the arguments it carries.
        let named = match call.strict || self.catalog.lookup(&call.tool).is_some() {
            true => None,
            false => self.named_call(call),
        };
        let (emitted, arguments_text) = match &named {
            Some((name, inner)) => (name.as_str(), inner.as_str()),
            None => (call.tool.as_str(), call.arguments_json.as_str()),
        };

        let (id, name_repair) = match lookup::resolve_tool(&self.catalog, &set, emitted, call.strict) {
            Resolved::Tool(id, repair) => (id, repair),
            Resolved::Missing { suggestions } => {
                let error = match &set {
                    AvailableSet::All => lookup::unknown_tool_error(emitted, suggestions, &self.everything),
                    AvailableSet::Only(_) => {
                        let inventory = Inventory::of(&self.catalog, &set, self.limits.inventory_cap);
                        lookup::unknown_tool_error(emitted, suggestions, &inventory)
                    }
                };
                return Ok(Err(failed(None, Vec::new(), String::new(), error)));
            }
        };
        let tool = self.catalog.tool(id);
        if tool.binding.as_ref().is_some_and(|b| b.binds_user()) && call.caller.user.is_none() {
            return Err(RequestError::NoUser(tool.name.clone()));
        }
        let mut repairs: Vec<Repair> = match &named {
            Some((_, inner)) => vec![
                Repair { kind: RepairKind::ToolName, original: call.tool.clone(), repaired: tool.name.clone() },
                Repair {
                    kind: RepairKind::ArgumentsEnvelope,
                    original: call.arguments_json.clone(),
                    repaired: inner.clone(),
                },
            ],
            None => name_repair.into_iter().collect(),
        };

        let all_optional = tool.parameters.required().is_empty();
        let parsed = match arguments::parse(arguments_text, call.strict, self.limits.arguments, all_optional) {
            Ok(parsed) => parsed,
            Err(error) => return Ok(Err(failed(Some(tool), repairs, String::new(), error))),
        };
        repairs.extend(parsed.repairs);
        let mut object = parsed.object;
        if !call.strict {
            repairs.extend(arguments::repair_names(&mut object, &tool.parameters));
        }
        let arguments_changed = repairs.iter().any(|r| r.kind != RepairKind::ToolName);
        let arguments_json = if arguments_changed || arguments_text.trim().is_empty() {
            serde_json::to_string(&object).expect("JSON values serialise")
        } else {
            arguments_text.to_owned()
        };

        let mut value = Value::Object(object);
        let mut arguments_json = arguments_json;
        let validator = tool.parameters.validator();
        // Arguments inside an envelope, or beside call metadata, then
        // values of another type than their schema's: tried only when the
        // call fails validation (a valid call pays one `is_valid`), each
        // kept only if the call then passes, else the model hears about
        // what it sent.
        let mut valid = call.strict || validator.is_valid(&value);
        if !valid {
            let object = value.as_object().expect("built from an object");
            if let Some(inner) = envelope::unwrap(object, tool.parameters.parameters(), &tool.name) {
                let inner = Value::Object(inner);
                if validator.is_valid(&inner) {
                    let repaired = serde_json::to_string(&inner).expect("JSON values serialise");
                    let original = serde_json::to_string(&value).expect("JSON values serialise");
                    repairs.push(Repair { kind: RepairKind::ArgumentsEnvelope, original, repaired: repaired.clone() });
                    value = inner;
                    arguments_json = repaired;
                    valid = true;
                }
            }
        }
        if !valid {
            let mut coerced = value.as_object().cloned().unwrap_or_default();
            let changes = coerce::coerce(&mut coerced, tool.parameters.parsed(), self.limits.arguments);
            let coerced = Value::Object(coerced);
            if !changes.is_empty() && validator.is_valid(&coerced) {
                value = coerced;
                repairs.extend(changes);
                arguments_json = serde_json::to_string(&value).expect("JSON values serialise");
            }
        }
        let problems = validate::validate(tool, &value);
        if !problems.is_empty() {
            return Ok(Err(failed(Some(tool), repairs, arguments_json, problems.into_error(tool))));
        }
        let Value::Object(mut arguments) = value else { unreachable!("built from an object") };
        let Some(binding) = &tool.binding else {
            return Ok(Ok(Ready { tool: id, arguments, arguments_json, repairs }));
        };
        // Bound parameters are filled from who calls, after the model's
        // arguments passed, and the whole is checked against the full schema.
        for (name, source) in &binding.parameters {
            let value = match source {
                BindSource::User => call.caller.user.as_ref().map(|u| u.id.clone()),
                BindSource::Principal => call.caller.principal.as_deref().map(str::to_owned),
            };
            let Some(value) = value else {
                let message = format!("'{name}' is bound to the {}, and the call has none", source.word());
                let error = ToolError::invalid_arguments(message);
                return Ok(Err(failed(Some(tool), repairs, arguments_json, error)));
            };
            arguments.insert(name.clone(), Value::String(value));
        }
        let filled = Value::Object(arguments);
        if let Some(error) = binding.full.validator().iter_errors(&filled).next() {
            let at = error.instance_path().as_str().trim_start_matches('/').to_owned();
            let message = format!("'{at}', filled from who calls, is not valid for the tool: {error}");
            return Ok(Err(failed(Some(tool), repairs, arguments_json, ToolError::invalid_arguments(message))));
        }
        let Value::Object(arguments) = filled else { unreachable!("built from an object") };
        let arguments_json = serde_json::to_string(&arguments).expect("JSON values serialise");
        Ok(Ok(Ready { tool: id, arguments, arguments_json, repairs }))
    }

    /// The tool name and the arguments' text of a call sent whole in the
    /// arguments, its own name empty or only residue
    /// ([`envelope::named_call`]).
    fn named_call(&self, call: &Call) -> Option<(String, String)> {
        if !crate::similar::residue::words(&call.tool).iter().all(|w| w.markup) {
            return None;
        }
        let parsed = arguments::parse(&call.arguments_json, false, self.limits.arguments, false).ok()?;
        envelope::named_call(&parsed.object)
    }

    /// Prepares the call and, unless it is a dry run, runs it, under an
    /// `execute_tool` span; records the repairs, hints and outcome.
    pub async fn execute(&self, call: &Call) -> Result<Outcome, RequestError> {
        let started = Instant::now();
        let span = observe::span(&self.shared.observer, call);
        let outcome = span.run(self.run(call)).await?;
        observe::finished(span, &self.shared.observer, &self.catalog, call, &outcome, started.elapsed());
        Ok(outcome)
    }

    async fn run(&self, call: &Call) -> Result<Outcome, RequestError> {
        once::check_id("idempotency_key", &call.idempotency_key).map_err(RequestError::BadId)?;
        once::check_id("session_id", &call.session_id).map_err(RequestError::BadId)?;
        let ready = match self.prepare_async(call).await? {
            Ok(ready) => ready,
            Err(outcome) => return Ok(self.budgeted(call, outcome).await),
        };
        let tool = self.catalog.tool(ready.tool);
        if call.dry_run {
            return Ok(Outcome {
                tool: Some(tool.name.clone()),
                repairs: ready.repairs,
                arguments_json: ready.arguments_json,
                result: Ok(None),
                replayed: false,
                budget_remaining: None,
            });
        }
        let outcome = match call.idempotency_key.is_empty() {
            true => self.dispatched(ready, call).await,
            false => self.once(ready, call).await?,
        };
        Ok(self.budgeted(call, outcome).await)
    }

    /// Dispatches a ready call; its outcome.
    async fn dispatched(&self, ready: Ready, call: &Call) -> Outcome {
        let tool = self.catalog.tool(ready.tool);
        let result = self.dispatch(ready.tool, &ready, call).await.map(Some);
        Outcome {
            tool: Some(tool.name.clone()),
            repairs: ready.repairs,
            arguments_json: ready.arguments_json,
            result,
            replayed: false,
            budget_remaining: None,
        }
    }

    /// A call with an idempotency key: the first claims the key and runs;
    /// the same call again gets the first's answer, replayed; a different
    /// call with the key is refused.
    async fn once(&self, ready: Ready, call: &Call) -> Result<Outcome, RequestError> {
        let state = &self.shared.state;
        let tool = self.catalog.tool(ready.tool);
        let key = once::idempotency_key(&call.caller, &call.idempotency_key);
        let hash = once::call_hash(&tool.name, &ready.arguments);
        let limit = call.deadline.map_or(tool.timeout, |d| d.min(tool.timeout));
        let running = once::Record::running(&hash, limit);
        let in_band = |kind: ErrorKind, message: &str, retryable: bool| {
            let mut error = ToolError::new(kind, message, false);
            error.retryable = retryable;
            Outcome {
                tool: Some(tool.name.clone()),
                repairs: ready.repairs.clone(),
                arguments_json: ready.arguments_json.clone(),
                result: Err(error),
                replayed: false,
                budget_remaining: None,
            }
        };
        let existing = match state.store.claim(&key, &running, state.idempotency_ttl).await {
            Ok(existing) => existing,
            Err(err) => {
                state.warn_unreachable("idempotency keys cannot be checked", &err);
                self.shared.observer.metrics.store_error("idempotency");
                if tool.idempotent {
                    return Ok(self.dispatched(ready, call).await);
                }
                let message = "cannot guarantee once-only delivery right now; the call did not run";
                return Ok(in_band(ErrorKind::Unavailable, message, true));
            }
        };
        let Some(existing) = existing else {
            let idempotent = tool.idempotent;
            let outcome = self.dispatched(ready, call).await;
            let kept = once::to_store(&outcome, idempotent);
            let stored = match &kept {
                Some(kept) => state
                    .store
                    .replace(&key, &running, &once::Record::done(&hash, kept), state.idempotency_ttl)
                    .await
                    .map(|_| ()),
                None => state.store.remove(&key, &running).await,
            };
            if let Err(err) = stored {
                state.warn_unreachable("an idempotency record could not be written", &err);
                self.shared.observer.metrics.store_error("idempotency");
            }
            return Ok(outcome);
        };
        let replayed = |mut outcome: Outcome| {
            outcome.replayed = true;
            self.shared.observer.metrics.replayed(Some(&outcome.tool.clone().unwrap_or_default()));
            outcome
        };
        match once::Record::parse(&existing) {
            Some(record) if record.hash() != hash => Err(RequestError::KeyReused(call.idempotency_key.clone())),
            Some(once::Record::Done { outcome, .. }) => Ok(replayed(*outcome)),
            _ => {
                let deadline = Instant::now() + call.deadline.unwrap_or(limit + Duration::from_secs(5));
                match once::wait_for_first(state, &key, &hash, &tool.name, deadline).await {
                    Ok(once::Waited::Done(outcome)) => Ok(replayed(*outcome)),
                    Ok(once::Waited::Different) => Err(RequestError::KeyReused(call.idempotency_key.clone())),
                    Ok(once::Waited::StillRunning) => {
                        Ok(in_band(ErrorKind::Unavailable, "the first call with this key is still running", true))
                    }
                    Err(err) => {
                        state.warn_unreachable("idempotency keys cannot be checked", &err);
                        let message = "cannot guarantee once-only delivery right now; the call did not run";
                        Ok(in_band(ErrorKind::Unavailable, message, true))
                    }
                }
            }
        }
    }

    /// Counts a failure the model could fix against the session's budget for
    /// its tool (every unresolved name shares one), and past the budget
    /// answers RETRY_BUDGET_EXHAUSTED instead; a success resets the tool's
    /// count. Without a session, or with the store unreachable (the call
    /// proceeds), the outcome is unchanged.
    async fn budgeted(&self, call: &Call, mut outcome: Outcome) -> Outcome {
        if call.session_id.is_empty() || outcome.replayed {
            return outcome;
        }
        let state = &self.shared.state;
        let bucket = outcome.tool.clone().unwrap_or_else(|| once::UNRESOLVED.to_owned());
        let key = once::budget_key(&call.caller, &call.session_id, &bucket);
        let counted = match &outcome.result {
            Ok(_) => state.store.reset(&key).await.map(|()| None),
            Err(error) if once::counts(error) => state.store.increment(&key, state.session_ttl).await.map(Some),
            Err(_) => Ok(None),
        };
        let budget = u64::from(state.retry_budget);
        outcome.budget_remaining = match &counted {
            Ok(Some(failures)) => Some(budget.saturating_sub(*failures)),
            Ok(None) => Some(budget),
            Err(_) => None,
        };
        match counted {
            Ok(Some(failures)) if failures > budget => {
                let shown = match &outcome.tool {
                    Some(tool) => format!("'{tool}'"),
                    None => crate::resolve::message::quote_emitted(&call.tool),
                };
                if let Err(last) = &outcome.result {
                    outcome.result = Err(once::exhausted(&shown, failures - 1, last));
                }
                self.shared.observer.metrics.budget_exhausted(outcome.tool.as_deref());
            }
            Ok(_) => {}
            Err(err) => {
                state.warn_unreachable("retry budgets are not kept (the call proceeds)", &err);
                self.shared.observer.metrics.store_error("budget");
            }
        }
        outcome
    }

    /// Runs a ready call under the tool's timeout (or the caller's deadline,
    /// if sooner) and concurrency limit.
    async fn dispatch(&self, id: ToolId, ready: &Ready, call: &Call) -> Result<String, ToolError> {
        let tool = self.catalog.tool(id);
        let limit = call.deadline.map_or(tool.timeout, |d| d.min(tool.timeout));
        let started = AtomicBool::new(false);
        // Backends that carry trace context (HTTP, MCP) join the trace through
        // the span of this call when spans are exported, else through the
        // caller's own trace context.
        let traceparent = match tool.backend {
            Backend::Http(_) | Backend::Mcp(_) => {
                use telemetry::propagation;
                propagation::current_traceparent()
                    .or_else(|| call.traceparent.as_deref().and_then(propagation::checked))
            }
            Backend::Builtin(_) | Backend::Command(_) => None,
        };
        let run = async {
            let _permit = self.permits[id.0 as usize].acquire().await.expect("never closed");
            started.store(true, Ordering::Relaxed);
            backends::run(backends::Request {
                tool,
                arguments: &ready.arguments,
                arguments_json: &ready.arguments_json,
                max_result_bytes: self.limits.max_result_bytes,
                http: &self.shared.http,
                mcp: &self.shared.mcp,
                inherited: &self.shared.inherited,
                traceparent: traceparent.as_deref(),
                caller: &call.caller,
            })
            .await
        };
        let failure = match tokio::time::timeout(limit, run).await {
            Ok(Ok(result)) if result.len() > self.limits.max_result_bytes => Failure::TooLarge,
            Ok(Ok(result)) => return Ok(result),
            Ok(Err(failure)) => failure,
            Err(_) if !started.load(Ordering::Relaxed) => {
                let message = format!(
                    "the tool '{}' is busy: {} calls were already in flight for {}",
                    tool.name,
                    tool.max_concurrency,
                    readable_duration(limit)
                );
                return Err(ToolError::new(ErrorKind::Unavailable, message, tool.idempotent));
            }
            Err(_) => {
                let message = format!("the tool '{}' did not answer within {}", tool.name, readable_duration(limit));
                return Err(ToolError::new(ErrorKind::Timeout, message, tool.idempotent));
            }
        };
        Err(match failure {
            Failure::Tool { kind, message } => ToolError::new(kind, message, tool.idempotent),
            Failure::Crashed(message) => ToolError::new(ErrorKind::ToolCrashed, message, tool.idempotent),
            Failure::TooLarge => ToolError::new(
                ErrorKind::ToolCrashed,
                format!("the tool's result is larger than {}", byte_size(self.limits.max_result_bytes)),
                tool.idempotent,
            ),
            Failure::Unavailable => ToolError::new(
                ErrorKind::Unavailable,
                format!("the tool '{}' cannot be reached right now", tool.name),
                tool.idempotent,
            ),
        })
    }
}
