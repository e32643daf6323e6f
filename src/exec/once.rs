//! Once-only calls (docs/architecture.md, "Once-only calls and budgets"): the
//! first call with an idempotency key claims it and runs; the same call again
//! gets the first's answer, replayed; a different call with the key is
//! refused. With the store down, an idempotent tool runs anyway and any other
//! is refused in-band: once-only fails closed.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{
    call_state::{self, now_ms, CallState},
    Call, ErrorKind, Executor, Outcome, Ready, RequestError, ToolError,
};
use crate::state::StoreError;

/// A running claim lasts the tool's timeout and this much more.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// How often a call waiting for the first with its key looks again.
const POLL: Duration = Duration::from_millis(20);
/// What a call is told when once-only delivery cannot be checked.
const CANNOT_GUARANTEE: &str = "cannot guarantee once-only delivery right now; the call did not run";

impl Executor {
    /// A call with an idempotency key: the first claims the key and runs;
    /// the same call again gets the first's answer, replayed; a different
    /// call with the key is refused.
    pub(super) async fn once(&self, ready: Ready, call: &Call) -> Result<Outcome, RequestError> {
        let state = &self.shared.state;
        let metrics = &self.shared.observer.metrics;
        let tool = self.catalog.tool(ready.tool);
        let key = call_state::idempotency_key(&call.caller, &call.idempotency_key);
        let hash = call_state::call_hash(&tool.name, &ready.arguments);
        let limit = call.deadline.map_or(tool.timeout, |d| d.min(tool.timeout));
        let running = Record::running(&hash, limit);
        let in_band = |ready: Ready, message: &str, retryable: bool| {
            let mut error = ToolError::new(ErrorKind::Unavailable, message, false);
            error.retryable = retryable;
            Outcome::of(tool, ready, Err(error))
        };
        let existing = match state.store.claim(&key, &running, state.idempotency_ttl).await {
            Ok(existing) => existing,
            Err(err) => {
                state.warn_unreachable("idempotency keys cannot be checked", &err);
                metrics.store_error("idempotency");
                if tool.idempotent {
                    return Ok(self.dispatched(ready, call).await);
                }
                return Ok(in_band(ready, CANNOT_GUARANTEE, true));
            }
        };
        let Some(existing) = existing else {
            let outcome = self.dispatched(ready, call).await;
            let stored = match to_store(&outcome, tool.idempotent) {
                Some(kept) => {
                    let done = Record::done(&hash, &kept);
                    state.store.replace(&key, &running, &done, state.idempotency_ttl).await.map(|_| ())
                }
                None => state.store.remove(&key, &running).await,
            };
            if let Err(err) = stored {
                state.warn_unreachable("an idempotency record could not be written", &err);
                metrics.store_error("idempotency");
            }
            return Ok(outcome);
        };
        let replayed = |mut outcome: Outcome| {
            outcome.replayed = true;
            metrics.replayed(Some(&tool.name));
            outcome
        };
        let reused = || RequestError::KeyReused(call.idempotency_key.clone());
        match Record::parse(&existing) {
            Some(record) if record.hash() != hash => Err(reused()),
            Some(Record::Done { outcome, .. }) => Ok(replayed(*outcome)),
            _ => {
                let deadline = Instant::now() + call.deadline.unwrap_or(limit + LEASE_MARGIN);
                match wait_for_first(state, &key, &hash, &tool.name, deadline).await {
                    Ok(Waited::Done(outcome)) => Ok(replayed(*outcome)),
                    Ok(Waited::Different) => Err(reused()),
                    Ok(Waited::StillRunning) => {
                        Ok(in_band(ready, "the first call with this key is still running", true))
                    }
                    Err(err) => {
                        state.warn_unreachable("idempotency keys cannot be checked", &err);
                        Ok(in_band(ready, CANNOT_GUARANTEE, true))
                    }
                }
            }
        }
    }
}

/// An idempotency record.
#[derive(Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum Record {
    Running { hash: String, until: u64 },
    Done { hash: String, outcome: Box<Outcome> },
}

impl Record {
    fn hash(&self) -> &str {
        match self {
            Record::Running { hash, .. } | Record::Done { hash, .. } => hash,
        }
    }

    fn running(hash: &str, timeout: Duration) -> Vec<u8> {
        let until = now_ms() + (timeout + LEASE_MARGIN).as_millis() as u64;
        serde_json::to_vec(&Record::Running { hash: hash.to_owned(), until }).expect("records serialise")
    }

    fn done(hash: &str, outcome: &Outcome) -> Vec<u8> {
        serde_json::to_vec(&Record::Done { hash: hash.to_owned(), outcome: Box::new(outcome.clone()) })
            .expect("records serialise")
    }

    fn parse(bytes: &[u8]) -> Option<Record> {
        serde_json::from_slice(bytes).ok()
    }
}

/// What to do with a claimed key once the call has an outcome: keep the
/// outcome (`Some`, perhaps reworded for replays), or release the key.
fn to_store(outcome: &Outcome, idempotent: bool) -> Option<Outcome> {
    let Err(error) = &outcome.result else { return Some(outcome.clone()) };
    match error.kind {
        ErrorKind::NotFound | ErrorKind::Refused | ErrorKind::ToolCrashed => Some(outcome.clone()),
        // The tool did not act, or never got the call: the key may be used again.
        ErrorKind::InvalidArguments | ErrorKind::UnknownTool | ErrorKind::RetryBudgetExhausted => None,
        ErrorKind::Unavailable => None,
        // It may have acted: an idempotent tool may run again, any other
        // must not.
        ErrorKind::Timeout if idempotent => None,
        ErrorKind::Timeout => {
            let mut kept = outcome.clone();
            if let Err(error) = &mut kept.result {
                error.message = format!(
                    "{}; this is the answer of an earlier call with the same idempotency key: its effect is \
                     unknown, and the call was not run twice",
                    error.message
                );
                error.retryable = false;
            }
            Some(kept)
        }
    }
}

/// The answer when a running claim's holder vanished (its lease ran out):
/// stored in its place, never a second run.
fn vanished(tool: &str) -> Outcome {
    let message = format!(
        "an earlier call with this idempotency key to '{tool}' ended without an answer; its effect is unknown, \
         and the call was not run twice"
    );
    Outcome {
        tool: Some(tool.to_owned()),
        repairs: Vec::new(),
        arguments_json: String::new(),
        result: Err(ToolError::new(ErrorKind::Unavailable, message, false)),
        replayed: true,
        budget_remaining: None,
    }
}

/// Waits for the first call with a key to finish; its outcome, or why not.
enum Waited {
    Done(Box<Outcome>),
    /// Our deadline came first.
    StillRunning,
    /// The record changed to another call's (its hash differs).
    Different,
}

/// Polls the record of `key` until it is done, its lease runs out (then it
/// becomes "effect unknown" for every caller), or `deadline` passes.
async fn wait_for_first(
    state: &CallState,
    key: &str,
    hash: &str,
    tool: &str,
    deadline: Instant,
) -> Result<Waited, StoreError> {
    loop {
        let Some(bytes) = state.store.get(key).await? else {
            // Released (the first call never reached its backend): treat as
            // still running for this request; a retry claims it afresh.
            return Ok(Waited::StillRunning);
        };
        match Record::parse(&bytes) {
            Some(record) if record.hash() != hash => return Ok(Waited::Different),
            Some(Record::Done { outcome, .. }) => return Ok(Waited::Done(outcome)),
            Some(Record::Running { until, .. }) if until <= now_ms() => {
                let outcome = vanished(tool);
                let stored = Record::done(hash, &outcome);
                if state.store.replace(key, &bytes, &stored, state.idempotency_ttl).await? {
                    return Ok(Waited::Done(Box::new(outcome)));
                }
            }
            _ => {}
        }
        if Instant::now() + POLL > deadline {
            return Ok(Waited::StillRunning);
        }
        tokio::time::sleep(POLL).await;
    }
}
