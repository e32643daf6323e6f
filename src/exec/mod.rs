//! The core every front door calls (docs/architecture.md, "The core"): one
//! tool call exactly as a model emitted it, repaired where that is safe,
//! validated, run on its backend, and answered with the result or an error
//! the model can act on; and the names and tools a caller may see.
//!
//! An [`Executor`] serves one catalogue snapshot. Its API is front-door
//! neutral: a [`Call`] (who calls, the emitted name and arguments, options)
//! gives an `Outcome`; `Executor::resolve` and `Executor::list` give
//! what Resolve and a tool listing show. A tool problem is never an error
//! of the request: it is an [`Outcome`] with a [`ToolError`]. Only a request
//! that cannot be executed as sent is a [`RequestError`].
//!
//! - `prepare`: the pure part, in named stages (name, syntax, envelope,
//!   values, validation, binding); never touches a backend.
//! - `dispatch`: the tool's timeout and concurrency limit,
//!   and its backend (`backends`).
//! - `once`: once-only calls (idempotency keys); `budget`: retry
//!   budgets; both over the state store (`call_state`).
//! - `call`: what the core is asked ([`Call`]), a call made ready
//!   ([`Ready`]) and a request it cannot run ([`RequestError`]).
//! - `listing`: Resolve and tool listings, inside the caller's grants.

pub(crate) mod backends;
mod budget;
mod builtins;
mod call;
pub(crate) mod call_state;
pub(crate) mod declared;
mod dispatch;
mod expiry;
pub(crate) mod limits;
mod listing;
mod observe;
mod once;
pub(crate) mod outcome;
mod prepare;
pub(crate) mod rate;

use std::{pin::pin, sync::Arc, time::Instant};

use tokio::sync::Semaphore;

pub use crate::mcp::{Progress, ProgressSink};
pub(crate) use backends::HttpClients;
pub use call::{Call, Ready, RequestError};
pub(crate) use call_state::CallState;
pub(crate) use expiry::Expiry;
pub(crate) use limits::{byte_size, readable_duration};
pub(crate) use limits::{ArgumentLimits, ExecLimits};
pub use outcome::{ErrorKind, Outcome, Repair, RepairKind, ToolError};

use crate::{
    catalog::Catalog,
    identity::{Caller, Granted},
    mcp::McpPool,
    process::Inherited,
    resolve::{check_names, AvailableSet, Resolution, INLINE_NAMES},
    telemetry::Observer,
};

/// Strict or non-strict (docs/catalogue.md, "Policy: strict and non-strict"): strict repairs nothing and
/// fails on unknown names. `strict` is the policy of a request that does
/// not say; a request's own choice wins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) strict: bool,
}

impl Policy {
    /// The policy for one request: its own `strict` when it sets one.
    pub(crate) fn strict_for(&self, requested: Option<bool>) -> bool {
        requested.unwrap_or(self.strict)
    }
}

/// What every snapshot's executor shares: HTTP clients, the connections to
/// MCP servers, what command backends inherit from the gateway's
/// environment, what records calls, and the state store's records.
pub(crate) struct Shared {
    http: HttpClients,
    mcp: Arc<McpPool>,
    inherited: Inherited,
    observer: Observer,
    state: CallState,
    /// Requests in flight per principal (`concurrent`), across snapshots.
    in_flight: rate::InFlight,
}

impl Shared {
    /// `http`: the HTTP backends' clients ([`HttpClients::new`]).
    pub(crate) fn new(
        mcp: Arc<McpPool>,
        inherited: Inherited,
        observer: Observer,
        state: CallState,
        http: HttpClients,
    ) -> Arc<Self> {
        Arc::new(Self { http, mcp, inherited, observer, state, in_flight: Default::default() })
    }

    pub(crate) fn mcp(&self) -> &Arc<McpPool> {
        &self.mcp
    }

    /// The state store (once-only records, budgets, rate limits, MCP
    /// tools' first sight).
    pub(crate) fn store(&self) -> &Arc<dyn crate::state::Store> {
        &self.state.store
    }

    pub(crate) fn observer(&self) -> &Observer {
        &self.observer
    }
}

/// Name and arguments longer than this together are prepared off the
/// runtime's workers ([`Executor::prepare_async`]).
const INLINE_TEXT_BYTES: usize = 64 * 1024;

/// Runs calls against one catalogue snapshot, under one configuration's
/// policy and grants.
pub struct Executor {
    catalog: Arc<Catalog>,
    limits: ExecLimits,
    policy: Policy,
    shared: Arc<Shared>,
    /// Calls in flight, per tool.
    permits: Vec<Semaphore>,
    /// The inventory of every tool, for calls that may use every tool.
    everything: prepare::Inventory,
    /// What each principal may use in this snapshot.
    granted: Granted,
    /// This snapshot's rate limits.
    rates: Arc<rate::RateLimits>,
}

impl Executor {
    pub(crate) fn new(
        catalog: Arc<Catalog>,
        limits: ExecLimits,
        policy: Policy,
        shared: Arc<Shared>,
        granted: Granted,
        rates: Arc<rate::RateLimits>,
    ) -> Self {
        let permits = catalog.tools().iter().map(|t| Semaphore::new(t.max_concurrency as usize)).collect();
        let everything = prepare::Inventory::of(&*catalog, &AvailableSet::All, limits.inventory_cap);
        Self { catalog, limits, policy, shared, permits, everything, granted, rates }
    }

    pub(crate) fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// This snapshot's limits on a call.
    pub(crate) fn limits(&self) -> ExecLimits {
        self.limits
    }

    /// The `rate_limits.tools` entries that apply to no call, each with
    /// why (a warning at start and reload, an error under `--strict`): a
    /// tool no principal may use, and an entry keyed by an alias or a
    /// toolset (limits are kept by a tool's own name), naming the tools it
    /// meant.
    pub(crate) fn idle_limits(&self) -> Vec<(String, String)> {
        use crate::catalog::Name;
        let mut idle: Vec<(String, String)> = self
            .rates
            .tool_names()
            .filter_map(|name| {
                let why = match self.catalog.lookup(name)? {
                    Name::Tool(id) if !self.granted.anyone_may_use(id) => {
                        format!("no principal is granted '{name}': this limit applies to no call")
                    }
                    Name::Tool(_) => return None,
                    Name::Alias(id) => {
                        let tool = &self.catalog.tool(id).name;
                        format!(
                            "'{name}' is an alias of '{tool}', and a limit is kept under a tool's own name: \
                             this one applies to no call; write it as rate_limits.tools.{tool}"
                        )
                    }
                    Name::Toolset(id) => {
                        let tools: Vec<&str> = self
                            .catalog
                            .toolset(id)
                            .tools
                            .iter()
                            .map(|&t| self.catalog.tool(t).name.as_str())
                            .collect();
                        format!(
                            "'{name}' is a toolset, and a limit is kept under a tool's own name: this one applies \
                             to no call; write one entry for each tool it meant ({})",
                            tools.join(", ")
                        )
                    }
                };
                Some((name.to_owned(), why))
            })
            .collect();
        idle.sort();
        idle
    }

    pub(crate) fn observer(&self) -> &Observer {
        &self.shared.observer
    }

    /// The tools `caller` may use.
    pub(crate) fn visible(&self, caller: &Caller) -> AvailableSet {
        self.granted.visible(caller)
    }

    /// Resolves, repairs and validates; never runs anything.
    pub fn prepare(&self, call: &Call) -> Result<Result<Ready, Outcome>, RequestError> {
        check_names("tools", &call.tools)?;
        let strict = self.policy.strict_for(call.strict);
        let within = self.visible(&call.caller);
        self.prepare_in(call, strict, AvailableSet::of(&self.catalog, &call.tools, strict, &within))
    }

    /// [`Executor::prepare`], a large tool set resolved off the runtime's
    /// workers, and a long text read on a thread the runtime has handed its
    /// other tasks away from (reading is linear, but 1 MiB of hostile text
    /// is still milliseconds no other request should wait behind).
    async fn prepare_async(&self, call: &Call) -> Result<Result<Ready, Outcome>, RequestError> {
        if call.tools.len() <= INLINE_NAMES {
            let long = call.tool.len() + call.arguments_json.len() > INLINE_TEXT_BYTES;
            let multi_thread = tokio::runtime::Handle::try_current()
                .is_ok_and(|runtime| runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
            return match long && multi_thread {
                true => tokio::task::block_in_place(|| self.prepare(call)),
                false => self.prepare(call),
            };
        }
        check_names("tools", &call.tools)?;
        let strict = self.policy.strict_for(call.strict);
        let (catalog, names, within) = (Arc::clone(&self.catalog), call.tools.clone(), self.visible(&call.caller));
        let set = tokio::task::spawn_blocking(move || AvailableSet::of(&catalog, &names, strict, &within))
            .await
            .expect("resolving names does not panic");
        self.prepare_in(call, strict, set)
    }

    fn prepare_in(
        &self,
        call: &Call,
        strict: bool,
        (set, resolution): (AvailableSet, Resolution),
    ) -> Result<Result<Ready, Outcome>, RequestError> {
        if strict && !resolution.unknown.is_empty() {
            return Err(RequestError::UnknownTools(resolution));
        }
        let cx = prepare::Context {
            tools: &*self.catalog,
            limits: self.limits,
            call,
            strict,
            set: &set,
            everything: &self.everything,
        };
        prepare::prepare(&cx)
    }

    /// Prepares the call and, unless it is a dry run, runs it (once, when
    /// it has an idempotency key), counts it against its session's budget,
    /// under an `execute_tool` span that records the repairs, hints and
    /// outcome.
    pub(crate) async fn execute(&self, call: &Call) -> Result<Outcome, RequestError> {
        let started = Instant::now();
        let span = observe::span(&self.shared.observer, call);
        let outcome = span.run(pin!(self.run(call))).await?;
        observe::finished(span, &self.shared.observer, &self.catalog, call, &outcome, started.elapsed());
        Ok(outcome)
    }

    async fn run(&self, call: &Call) -> Result<Outcome, RequestError> {
        let expiry = Expiry::of(call);
        call_state::check_id("idempotency_key", &call.idempotency_key).map_err(RequestError::BadId)?;
        call_state::check_id("session_id", &call.session_id).map_err(RequestError::BadId)?;
        let prepared = match self.prepare_async(call).await? {
            Ok(ready) => {
                let tool = self.catalog.tool(ready.tool);
                // Conditions see what the tool would receive; a denied call
                // takes no idempotency key and no retry budget.
                if let Err(message) = self.granted.permits(&call.caller, ready.tool, &tool.name, &ready.arguments) {
                    let denied = ToolError::new(ErrorKind::PermissionDenied, message, false);
                    return Ok(Outcome::of(tool, ready, Err(denied)));
                }
                Ok(ready)
            }
            Err(outcome) => Err(outcome),
        };
        let outcome = match prepared {
            Ok(ready) if call.dry_run => {
                let tool = self.catalog.tool(ready.tool);
                return Ok(Outcome::of(tool, ready, Ok(None)));
            }
            Ok(ready) if call.idempotency_key.is_empty() => {
                let tool = self.catalog.tool(ready.tool);
                let rated = match self.rates.limits_calls() {
                    true => Box::pin(self.within_rate(&call.caller, &tool.name)).await,
                    false => Ok(None),
                };
                match rated {
                    Ok(room) => {
                        let mut outcome = self.dispatched(ready, call, expiry).await;
                        outcome.rate_remaining = room;
                        outcome
                    }
                    Err(limited) => Outcome::of(tool, ready, Err(limited)),
                }
            }
            // Boxed: the once-only and budget machinery is large, and
            // only calls that use it should carry (and move) its state.
            Ok(ready) => Box::pin(self.once(ready, call, expiry)).await?,
            Err(outcome) => outcome,
        };
        // A call with a session counts against its budget (a replayed one
        // was counted when it ran).
        if call.session_id.is_empty() || outcome.replayed {
            return Ok(outcome);
        }
        Ok(Box::pin(self.budgeted(call, outcome, expiry)).await)
    }
}
