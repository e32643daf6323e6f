//! MCP backends: `tools/call` through the pool of connections. An `isError`
//! result is the tool's own refusal (REFUSED, its text unchanged but cut);
//! a server that failed the call or stopped is a crash; one that cannot be
//! reached is UNAVAILABLE.

use super::{Answer, Failure, Request};
use crate::{
    catalog::McpBackend,
    exec::outcome::{tool_text, ErrorKind},
    mcp::{CallMeta, McpError},
};

pub(crate) async fn run(backend: &McpBackend, request: &Request<'_>) -> Result<Answer, Failure> {
    let (principal, user) = request.caller.identity();
    let user_issuer = request.caller.user_issuer();
    let meta = CallMeta { traceparent: request.traceparent, principal, user, user_issuer };
    let called = request.mcp.call(&backend.server, &backend.tool, request.arguments, meta, request.progress).await;
    let answered = called.map_err(|err| match err {
        McpError::Refused(text, sent) => {
            Failure::Tool { kind: ErrorKind::Refused, message: tool_text(&text), sent: Some(sent) }
        }
        McpError::Crashed(message) => Failure::Crashed(message),
        McpError::Unavailable => Failure::Unavailable,
    })?;
    Ok(Answer { json: answered.json, sent: Some(Box::new(answered.result)) })
}
