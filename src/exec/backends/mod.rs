//! Runs a validated call on the tool's backend: a closed set of kinds, one
//! file each. Backends answer the tool's result as JSON text, the tool's own
//! error, or a failure worded without internals (no URL, host, port, path,
//! stderr line or trace); the details go to the gateway's log.

pub(crate) mod builtin;
mod command;
mod http;
mod mcp;

pub(crate) use http::HttpClients;

use serde_json::{Map, Value};

use super::outcome::ErrorKind;
use crate::{
    catalog::{Backend, Tool},
    mcp::McpPool,
    process::Inherited,
};

/// A backend's result: JSON text, and for an MCP tool the result as its
/// server sent it (every content block, for the MCP door to pass on).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) json: String,
    pub(crate) sent: Option<Box<Value>>,
}

impl From<String> for Answer {
    fn from(json: String) -> Self {
        Self { json, sent: None }
    }
}

/// Why a backend gave no result.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The tool ran and answered with its own error (`NotFound`, `Refused`
    /// or `InvalidArguments`); the message is the tool's, unchanged; for an
    /// MCP tool, its result as its server sent it too.
    Tool { kind: ErrorKind, message: String, sent: Option<Box<Value>> },
    /// The tool broke; the reason is safe to show a model.
    Crashed(String),
    /// The backend cannot be reached.
    Unavailable,
    /// The result is larger than the limit.
    TooLarge,
}

/// What one backend call needs.
pub(crate) struct Request<'a> {
    pub(crate) tool: &'a Tool,
    /// The validated arguments, as an object and as the JSON text sent.
    pub(crate) arguments: &'a Map<String, Value>,
    pub(crate) arguments_json: &'a str,
    pub(crate) max_result_bytes: usize,
    pub(crate) http: &'a HttpClients,
    pub(crate) mcp: &'a McpPool,
    /// What command backends inherit from the gateway's environment.
    pub(crate) inherited: &'a Inherited,
    /// The caller's W3C `traceparent`, if it sent a valid one.
    pub(crate) traceparent: Option<&'a str>,
    /// Who calls: told to the tool (headers, environment, `_meta`).
    pub(crate) caller: &'a crate::identity::Caller,
    /// Where the tool's progress goes, if the caller asked for it.
    pub(crate) progress: Option<&'a crate::mcp::ProgressSink>,
}

pub(crate) use crate::catalog::identity_names::{
    PRINCIPAL_ENV, PRINCIPAL_HEADER, USER_ENV, USER_HEADER, USER_ISSUER_ENV, USER_ISSUER_HEADER,
};

/// Runs the call; `Ok` is the result as JSON text.
///
/// The futures of the backends that leave the process are boxed: they are
/// large (tens of KiB for HTTP), and unboxed they would make every call's
/// future, built-in ones too, that large, to be copied at each step.
pub(crate) async fn run(request: Request<'_>) -> Result<Answer, Failure> {
    match &request.tool.backend {
        Backend::Builtin(builtin) => builtin::run(*builtin, request.arguments).map(Answer::from),
        Backend::Http(http) => Box::pin(http::run(http, &request)).await.map(Answer::from),
        Backend::Command(command) => Box::pin(command::run(command, &request)).await.map(Answer::from),
        Backend::Mcp(mcp) => Box::pin(mcp::run(mcp, &request)).await,
    }
}

/// The tool's own error kinds, as backends spell them.
pub(crate) fn tool_error_kind(name: &str) -> Option<ErrorKind> {
    match name {
        "not_found" => Some(ErrorKind::NotFound),
        "refused" => Some(ErrorKind::Refused),
        "invalid_arguments" => Some(ErrorKind::InvalidArguments),
        _ => None,
    }
}

/// Whether `bytes` are one JSON value (checked without building it).
pub(crate) fn is_json(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}
