//! Rate limits (docs/rate-limits.md): how many requests a principal, and
//! how many calls a user or a tool, may make a minute, shared by every
//! replica through the state store. Off unless configured.
//!
//! Each limit is a GCRA bucket ([`crate::state::Bucket`]): `per_minute` the
//! sustained rate, `burst` how many may pass back to back on a full bucket
//! (default max(1, per_minute / 10), at least 2 when per_minute is 2 or
//! more). The buckets a call touches are
//! checked and taken in one atomic store operation, all or none, so a call
//! refused by its tool's limit does not use its user's. `concurrent` (a
//! principal's requests in flight) is counted in this replica only.
//!
//! Where each applies:
//! - `rate_limits.principal` (or the principal's own `rate`): every RPC and
//!   MCP request, before any work ([`Executor::admit`]); the anonymous
//!   caller of a gateway without principals is one principal;
//! - `rate_limits.user` (each principal and user) and `rate_limits.tools`
//!   (`per: user | principal | all`): calls that would run, after their
//!   preparation, never dry runs or replays ([`Executor::within_rate`]),
//!   answered in-band RATE_LIMITED with `retry_after`.
//!
//! With the store unreachable, limits fail open: the call proceeds, with a
//! warning (one a minute) and the store-error metric.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use super::{call_state, ErrorKind, Executor, ToolError};
pub(crate) use crate::state::{RateConfig, RateLimitsConfig};
use crate::{
    identity::{Caller, PrincipalConfig},
    state::{Admission, Bucket},
};

/// A checked limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rate {
    per_minute: Option<f64>,
    burst: u32,
    concurrent: Option<usize>,
}

impl Rate {
    /// The bucket of this limit under `key`. The key names the limit
    /// itself too, so that a reload that changes it starts a bucket of its
    /// own at once (a raised limit is not held back by the old one's time).
    fn bucket(&self, key: String) -> Option<Bucket> {
        let per_minute = self.per_minute?;
        let key = format!("{key}:{per_minute}/{}", self.burst);
        Some(Bucket { key, interval: Duration::from_secs_f64(60.0 / per_minute), burst: self.burst })
    }
}

/// Whose calls a tool's limit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Per {
    User,
    Principal,
    All,
}

/// The limits of one snapshot (they reload with it).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RateLimits {
    principal: Option<Rate>,
    user: Option<Rate>,
    tools: HashMap<String, (Rate, Per)>,
    /// Principals' own `rate`, by name.
    own: HashMap<String, Rate>,
}

/// What a limit is on, for messages and the metric's `scope`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    Principal,
    User,
    Tool(Per),
}

impl Scope {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Scope::Principal => "principal",
            Scope::User => "user",
            Scope::Tool(_) => "tool",
        }
    }
}

/// A request or call over a limit: which, and when it would pass.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Limited {
    pub(crate) scope: Scope,
    /// Whose limit: the principal's name (`anonymous` without principals).
    pub(crate) subject: String,
    pub(crate) retry_after: Duration,
    pub(crate) message: String,
}

impl Limited {
    /// When to try again in whole seconds, rounded up, at least 1: the
    /// HTTP doors' `Retry-After`, and the wait the message names.
    pub(crate) fn retry_after_seconds(&self) -> u64 {
        whole_seconds(self.retry_after)
    }
}

/// `wait` in whole seconds, rounded up, at least 1.
fn whole_seconds(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

impl RateLimits {
    /// Checks `rate_limits` and every principal's `rate` (`origin`: the
    /// file, for messages): a limit of 0 or less, `burst` without
    /// `per_minute`, an unknown `per` are errors naming their path.
    pub(crate) fn from_config(
        config: Option<&RateLimitsConfig>,
        principals: &[PrincipalConfig],
        origin: &str,
    ) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let mut limits = RateLimits::default();
        if let Some(config) = config {
            limits.principal =
                config.principal.as_ref().and_then(|c| rate(c, "rate_limits.principal", origin, &mut problems));
            limits.user = config.user.as_ref().and_then(|c| rate(c, "rate_limits.user", origin, &mut problems));
            for (name, tool) in &config.tools {
                let path = format!("rate_limits.tools.{name}");
                let written = RateConfig { per_minute: tool.per_minute, burst: tool.burst, concurrent: None };
                let per = match tool.per.as_deref() {
                    None | Some("user") => Some(Per::User),
                    Some("principal") => Some(Per::Principal),
                    Some("all") => Some(Per::All),
                    Some(other) => {
                        let statement = format!("unknown per '{other}'");
                        let message =
                            crate::similar::did_you_mean(&statement, other, ["user", "principal", "all"], || {
                                "; expected user, principal or all".to_owned()
                            });
                        problems.push(format!("{origin}: {path}.per: {message}"));
                        None
                    }
                };
                if tool.per_minute.is_none() {
                    problems.push(format!("{origin}: {path}: a tool's limit needs per_minute"));
                }
                if let (Some(rate), Some(per)) = (rate(&written, &path, origin, &mut problems), per) {
                    limits.tools.insert(name.clone(), (rate, per));
                }
            }
        }
        for (i, principal) in principals.iter().enumerate() {
            if let Some(config) = &principal.rate {
                let path = format!("principals[{i}] ({}).rate", principal.name);
                if let Some(rate) = rate(config, &path, origin, &mut problems) {
                    limits.own.insert(principal.name.clone(), rate);
                }
            }
        }
        match problems.is_empty() {
            true => Ok(limits),
            false => Err(problems),
        }
    }

    /// Whether any user or tool limit is configured (calls are checked).
    pub(crate) fn limits_calls(&self) -> bool {
        self.user.is_some() || !self.tools.is_empty()
    }

    /// The tools limited, for the catalogue's check of their names.
    pub(crate) fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    fn principal_rate(&self, caller: &Caller) -> Option<&Rate> {
        caller.principal.as_deref().and_then(|p| self.own.get(p)).or(self.principal.as_ref())
    }

    /// The message of a limit reached, for the model (calls) or the client
    /// (requests).
    fn message(scope: Scope, tool: &str, per_minute: f64, retry_after: Duration) -> String {
        let wait = whole_seconds(retry_after);
        let rate = match per_minute.fract() == 0.0 {
            true => format!("{per_minute:.0}"),
            false => format!("{per_minute}"),
        };
        let (times, requests) = match per_minute == 1.0 {
            true => ("time", "request"),
            false => ("times", "requests"),
        };
        match scope {
            Scope::Principal => {
                format!("this client may make at most {rate} {requests} a minute; try again in {wait} s.")
            }
            Scope::User => {
                format!("tools may be called at most {rate} {times} a minute for this user; try again in {wait} s.")
            }
            Scope::Tool(per) => {
                let whom = match per {
                    Per::User => "for this user",
                    Per::Principal => "for this client",
                    Per::All => "in all",
                };
                format!("'{tool}' may be called at most {rate} {times} a minute {whom}; try again in {wait} s.")
            }
        }
    }
}

/// Checks one written limit; `None` (and a problem) when it is wrong.
fn rate(config: &RateConfig, path: &str, origin: &str, problems: &mut Vec<String>) -> Option<Rate> {
    let before = problems.len();
    let mut positive = |key: &str, value: Option<f64>| {
        if let Some(value) = value {
            if value.is_nan() || value <= 0.0 || !value.is_finite() {
                problems.push(format!("{origin}: {path}.{key}: must be more than 0, got {value}"));
            }
        }
    };
    positive("per_minute", config.per_minute);
    positive("burst", config.burst);
    positive("concurrent", config.concurrent);
    if config.burst.is_some() && config.per_minute.is_none() {
        problems.push(format!("{origin}: {path}.burst: burst needs per_minute"));
    }
    let whole = |key: &str, value: Option<f64>, problems: &mut Vec<String>| {
        if let Some(value) = value.filter(|v| *v > 0.0 && v.fract() != 0.0) {
            problems.push(format!("{origin}: {path}.{key}: must be a whole number, got {value}"));
        }
    };
    whole("burst", config.burst, problems);
    whole("concurrent", config.concurrent, problems);
    if problems.len() > before {
        return None;
    }
    let burst = match (config.burst, config.per_minute) {
        (Some(burst), _) => burst as u32,
        // max(1, per_minute / 10), and never fewer than per_minute itself
        // allows up to 2: a limit of 2 a minute lets 2 calls through.
        (None, Some(per_minute)) => ((per_minute / 10.0) as u32).max((per_minute as u32).clamp(1, 2)),
        (None, None) => 1,
    };
    Some(Rate { per_minute: config.per_minute, burst, concurrent: config.concurrent.map(|c| c as usize) })
}

/// Requests in flight per principal, in this replica (`concurrent`).
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    counts: Mutex<HashMap<String, Arc<AtomicUsize>>>,
}

/// A request admitted under a `concurrent` limit: one of the principal's
/// requests in flight until dropped.
#[derive(Debug)]
pub(crate) struct Admitted {
    held: Option<Arc<AtomicUsize>>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(held) = &self.held {
            held.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl InFlight {
    fn enter(&self, principal: &str, cap: usize) -> Option<Admitted> {
        let count = {
            let mut counts = crate::lock::lock(&self.counts);
            Arc::clone(counts.entry(principal.to_owned()).or_default())
        };
        let before = count.fetch_add(1, Ordering::AcqRel);
        let admitted = Admitted { held: Some(count) };
        (before < cap).then_some(admitted)
    }
}

/// The principal a request limit belongs to, for clients.
fn subject(caller: &Caller) -> String {
    caller.principal.as_deref().unwrap_or("anonymous").to_owned()
}

/// How long a request refused for `concurrent` is told to wait.
const CONCURRENT_RETRY: Duration = Duration::from_secs(1);

impl Executor {
    /// The principal's limits on one request (every RPC and MCP request):
    /// admitted (holding a place under `concurrent` while the guard lives),
    /// or over its limit. Fails open when the store is unreachable.
    /// One more request of `caller` against its principal's `rate` (each
    /// try of the model door's second chance counts as a request): whether
    /// it may be made. Concurrency is not counted again: the try belongs
    /// to the request already admitted.
    pub(crate) async fn admit_again(&self, caller: &Caller) -> bool {
        let Some(rate) = self.rates.principal_rate(caller).copied() else { return true };
        let Some(bucket) = rate.bucket(call_state::rate_key(caller, "principal")) else { return true };
        let taken = self.take(std::slice::from_ref(&bucket)).await.is_ok();
        if !taken {
            self.shared.observer.metrics.rate_limited(Scope::Principal.label(), None);
        }
        taken
    }

    pub(crate) async fn admit(&self, caller: &Caller) -> Result<Admitted, Limited> {
        let Some(rate) = self.rates.principal_rate(caller).copied() else { return Ok(Admitted { held: None }) };
        let principal = caller.principal.as_deref().unwrap_or(call_state::ANONYMOUS_OWNER);
        let admitted = match rate.concurrent {
            None => Admitted { held: None },
            Some(cap) => match self.shared.in_flight.enter(principal, cap) {
                Some(admitted) => admitted,
                None => {
                    self.shared.observer.metrics.rate_limited(Scope::Principal.label(), None);
                    let message = format!(
                        "at most {cap} requests may be in flight for this client; try again in {} s.",
                        CONCURRENT_RETRY.as_secs()
                    );
                    return Err(Limited {
                        scope: Scope::Principal,
                        subject: subject(caller),
                        retry_after: CONCURRENT_RETRY,
                        message,
                    });
                }
            },
        };
        let Some(bucket) = rate.bucket(call_state::rate_key(caller, "principal")) else { return Ok(admitted) };
        match self.take(std::slice::from_ref(&bucket)).await {
            Ok(_) => Ok(admitted),
            Err((_, retry_after)) => {
                self.shared.observer.metrics.rate_limited(Scope::Principal.label(), None);
                let per_minute = rate.per_minute.unwrap_or_default();
                let message = RateLimits::message(Scope::Principal, "", per_minute, retry_after);
                Err(Limited { scope: Scope::Principal, subject: subject(caller), retry_after, message })
            }
        }
    }

    /// The user and tool limits on a call about to run: `Ok` with the room
    /// left in the tightest bucket (none configured: `None`), or the
    /// RATE_LIMITED answer.
    #[allow(clippy::result_large_err)] // the error is the call's answer, built once
    pub(crate) async fn within_rate(&self, caller: &Caller, tool: &str) -> Result<Option<u32>, ToolError> {
        let mut limits: Vec<(Scope, f64)> = Vec::new();
        let mut buckets: Vec<Bucket> = Vec::new();
        if let Some(rate) = &self.rates.user {
            if let Some(user) = &caller.user {
                let key = call_state::rate_key(caller, &format!("user:{}", call_state::digest(&user.key())));
                if let Some(bucket) = rate.bucket(key) {
                    buckets.push(bucket);
                    limits.push((Scope::User, rate.per_minute.unwrap_or_default()));
                }
            }
        }
        if let Some((rate, per)) = self.rates.tools.get(tool) {
            let key = match per {
                Per::User => caller.user.as_ref().map(|user| {
                    call_state::rate_key(caller, &format!("tool:{tool}:{}", call_state::digest(&user.key())))
                }),
                Per::Principal => Some(call_state::rate_key(caller, &format!("tool:{tool}"))),
                Per::All => Some(format!("toolgate:rate:*:tool:{tool}")),
            };
            // A per-user limit on a call without a user counts its principal.
            let key = key.unwrap_or_else(|| call_state::rate_key(caller, &format!("tool:{tool}")));
            if let Some(bucket) = rate.bucket(key) {
                buckets.push(bucket);
                limits.push((Scope::Tool(*per), rate.per_minute.unwrap_or_default()));
            }
        }
        if buckets.is_empty() {
            return Ok(None);
        }
        match self.take(&buckets).await {
            Ok(room) => Ok(room),
            Err((index, retry_after)) => {
                let (scope, per_minute) = limits[index];
                let mut error = ToolError::new(
                    ErrorKind::RateLimited,
                    RateLimits::message(scope, tool, per_minute, retry_after),
                    false,
                );
                error.retry_after = Some(retry_after);
                self.shared.observer.metrics.rate_limited(scope.label(), Some(tool));
                Err(error)
            }
        }
    }

    /// One call through `buckets`: the least room left, or the bucket that
    /// refused and when it would pass. An unreachable store admits.
    async fn take(&self, buckets: &[Bucket]) -> Result<Option<u32>, (usize, Duration)> {
        let state = &self.shared.state;
        // Each store answers within its own deadline (Redis: 500 ms,
        // reconnection included; memory: at once).
        match state.store.admit(buckets).await {
            Ok(Admission::Admitted(rooms)) => Ok(rooms.into_iter().min()),
            Ok(Admission::Limited { index, retry_after }) => Err((index, retry_after)),
            Err(err) => {
                state.warn_unreachable("rate limits are not enforced (the call proceeds)", &err);
                self.shared.observer.metrics.store_error("rate_limit");
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str) -> Result<RateLimits, Vec<String>> {
        let config: RateLimitsConfig = serde_yaml::from_str(yaml).unwrap();
        RateLimits::from_config(Some(&config), &[], "gateway.yaml")
    }

    #[test]
    fn limits_are_checked_with_their_paths() {
        let limits = load("principal: {per_minute: 600}\ntools: {pay: {per_minute: 10, burst: 2, per: all}}").unwrap();
        assert_eq!(limits.principal.unwrap().burst, 60);
        assert_eq!(limits.tools["pay"].1, Per::All);
        let problems = load(
            "principal: {per_minute: 0}\nuser: {burst: 3}\ntools: {pay: {per_minute: -1, per: usr}, other: {burst: 1}}",
        )
        .unwrap_err();
        assert_eq!(
            problems,
            [
                "gateway.yaml: rate_limits.principal.per_minute: must be more than 0, got 0",
                "gateway.yaml: rate_limits.user.burst: burst needs per_minute",
                "gateway.yaml: rate_limits.tools.other: a tool's limit needs per_minute",
                "gateway.yaml: rate_limits.tools.other.burst: burst needs per_minute",
                "gateway.yaml: rate_limits.tools.pay.per: unknown per 'usr', did you mean 'user'?",
                "gateway.yaml: rate_limits.tools.pay.per_minute: must be more than 0, got -1",
            ]
        );
    }

    #[test]
    fn messages_say_when_to_try_again() {
        let wait = Duration::from_millis(41_200);
        assert_eq!(
            RateLimits::message(Scope::Tool(Per::User), "send_payment", 10.0, wait),
            "'send_payment' may be called at most 10 times a minute for this user; try again in 42 s."
        );
        assert_eq!(
            RateLimits::message(Scope::User, "x", 600.0, Duration::from_millis(10)),
            "tools may be called at most 600 times a minute for this user; try again in 1 s."
        );
    }
}
