//! Dispatch: a ready call run on its tool's backend under the tool's timeout
//! (or the caller's deadline, if sooner) and concurrency limit, its failures
//! worded for the model without internals.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{
    backends::{self, Failure},
    byte_size, readable_duration, Call, ErrorKind, Executor, Expiry, Outcome, Ready, ToolError,
};
use crate::{
    catalog::{Backend, ToolId},
    telemetry::propagation,
};

impl Executor {
    /// Dispatches a ready call; its outcome.
    pub(super) async fn dispatched(&self, ready: Ready, call: &Call, expiry: Expiry) -> Outcome {
        let (result, sent) = self.dispatch(ready.tool, &ready, call, expiry).await;
        let mut outcome = Outcome::of(self.catalog.tool(ready.tool), ready, result.map(Some));
        outcome.sent = sent;
        outcome
    }

    /// Runs a ready call under the tool's timeout (or what is left of the
    /// caller's deadline, if less) and concurrency limit.
    async fn dispatch(&self, id: ToolId, ready: &Ready, call: &Call, expiry: Expiry) -> Dispatched {
        let tool = self.catalog.tool(id);
        // A built-in answers at once, in this task (nothing to time out):
        // with a place free under its limit it runs without a timer.
        if let Backend::Builtin(builtin) = tool.backend {
            if let Ok(_permit) = self.permits[id.0 as usize].try_acquire() {
                let failure = match backends::builtin::run(builtin, &ready.arguments) {
                    Ok(result) if result.len() > self.limits.max_result_bytes => Failure::TooLarge,
                    Ok(result) => return (Ok(result), None),
                    Err(failure) => failure,
                };
                return self.failed(id, failure);
            }
        }
        // Boxed: a backend's future is large, and a built-in's call should
        // not carry (and move) it.
        Box::pin(self.on_backend(id, ready, call, expiry)).await
    }

    /// [`Executor::dispatch`] for a call that waits: on its backend, or for
    /// a place under its tool's limit.
    async fn on_backend(&self, id: ToolId, ready: &Ready, call: &Call, expiry: Expiry) -> Dispatched {
        let tool = self.catalog.tool(id);
        let limit = expiry.cap(tool.timeout);
        let started = AtomicBool::new(false);
        // Backends that carry trace context (HTTP, MCP) join the trace through
        // the span of this call when spans are exported, else through the
        // caller's own trace context.
        let traceparent = match tool.backend {
            Backend::Http(_) | Backend::Mcp(_) => propagation::current_traceparent()
                .or_else(|| call.traceparent.as_deref().and_then(propagation::checked)),
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
                progress: call.progress.as_ref(),
            })
            .await
        };
        let failure = match tokio::time::timeout(limit, run).await {
            Ok(Ok(answer)) if answer.json.len() > self.limits.max_result_bytes => Failure::TooLarge,
            Ok(Ok(answer)) => return (Ok(answer.json), answer.sent),
            Ok(Err(failure)) => failure,
            Err(_) if !started.load(Ordering::Relaxed) => {
                let message = format!(
                    "the tool '{}' is busy: {} calls were already in flight for {}",
                    tool.name,
                    tool.max_concurrency,
                    readable_duration(limit)
                );
                return (Err(ToolError::new(ErrorKind::Unavailable, message, tool.idempotent)), None);
            }
            Err(_) => {
                let message = format!("the tool '{}' did not answer within {}", tool.name, readable_duration(limit));
                return (Err(ToolError::new(ErrorKind::Timeout, message, tool.idempotent)), None);
            }
        };
        self.failed(id, failure)
    }

    /// A backend's failure, worded for the model (and an MCP tool's own
    /// refusal as its server sent it).
    fn failed(&self, id: ToolId, failure: Failure) -> Dispatched {
        let tool = self.catalog.tool(id);
        let error = match failure {
            Failure::Tool { kind, message, sent } => {
                return (Err(ToolError::new(kind, message, tool.idempotent)), sent)
            }
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
        };
        (Err(error), None)
    }
}

/// A dispatched call's result, and an MCP tool's result as its server sent
/// it.
type Dispatched = (Result<String, ToolError>, Option<Box<serde_json::Value>>);
