//! Retry budgets (docs/architecture.md, "Once-only calls and budgets"):
//! consecutive failures the model could fix, counted per session and tool;
//! past the budget the call is answered RETRY_BUDGET_EXHAUSTED, so a confused
//! model stops repeating itself. With the store down, budgets fail open: the
//! outcome is unchanged.

use super::{call_state, Call, ErrorKind, Executor, Expiry, Outcome, ToolError};

/// The bucket of every name that resolved to no tool: no tool can be named
/// so (a tool name is letters, digits, `_` and `-`).
const UNRESOLVED: &str = "(unresolved)";

impl Executor {
    /// Counts a failure the model could fix against the session's budget for
    /// its tool (every unresolved name shares one), and past the budget
    /// answers RETRY_BUDGET_EXHAUSTED instead; a success resets the tool's
    /// count. Without a session, or with the store unreachable (the call
    /// proceeds), the outcome is unchanged.
    pub(super) async fn budgeted(&self, call: &Call, mut outcome: Outcome, expiry: Expiry) -> Outcome {
        if call.session_id.is_empty() || outcome.replayed {
            return outcome;
        }
        let state = &self.shared.state;
        let bucket = outcome.tool.clone().unwrap_or_else(|| UNRESOLVED.to_owned());
        let key = call_state::budget_key(&call.caller, &call.session_id, &bucket);
        let counted = match &outcome.result {
            Ok(_) => state.bounded(expiry, state.store.reset(&key)).await.map(|()| None),
            Err(error) if counts(error) => {
                state.bounded(expiry, state.store.increment(&key, state.session_ttl)).await.map(Some)
            }
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
                    outcome.result = Err(exhausted(&shown, failures - 1, last));
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
}

/// The RETRY_BUDGET_EXHAUSTED answer to a failing attempt; `tool` quoted.
fn exhausted(tool: &str, failures: u64, last: &ToolError) -> ToolError {
    let message = format!(
        "{tool} failed {failures} times in this session; stop calling it and tell the user what went wrong. \
         Last problem: {}",
        last.message
    );
    ToolError::new(ErrorKind::RetryBudgetExhausted, message, false)
}

/// Whether a failure is one the model could fix (and so counts).
fn counts(error: &ToolError) -> bool {
    matches!(error.kind, ErrorKind::UnknownTool | ErrorKind::InvalidArguments)
}
