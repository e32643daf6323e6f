//! What the core is asked and what stops a request: one [`Call`] as the
//! agent sent it, a call made [`Ready`] by the stages, and a
//! [`RequestError`] (a request that cannot be executed as sent).

use std::time::Duration;

use serde_json::{Map, Value};

use super::{ProgressSink, Repair};
use crate::{
    catalog::ToolId,
    identity::Caller,
    resolve::{NamesError, Resolution},
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
    /// The agent's tool set (tool, alias or toolset names); empty: every
    /// tool the caller may use.
    pub tools: Vec<String>,
    /// The request's own policy, when it chose one.
    pub strict: Option<bool>,
    /// Resolve, repair and validate only.
    pub dry_run: bool,
    /// How long the caller will wait, if it said.
    pub deadline: Option<Duration>,
    /// The caller's W3C `traceparent` as sent, passed on to HTTP and MCP
    /// backends if it is well-formed, when spans are not exported.
    pub traceparent: Option<String>,
    /// Who sent the call (from the transport and metadata, never from the
    /// arguments).
    pub caller: Caller,
    /// Once-only delivery: empty for none.
    pub idempotency_key: String,
    /// The conversation, for retry budgets: empty for none.
    pub session_id: String,
    /// The front door the call came in by, as the door names itself
    /// (`grpc`, `mcp`): the `toolgate.front_door` attribute and label of
    /// its span, metrics and audit line. Empty for a call made in process.
    pub front_door: &'static str,
    /// Where the tool's progress goes (an MCP caller's progress token): a
    /// federated tool's `notifications/progress` are relayed there.
    pub progress: Option<ProgressSink>,
}

impl Call {
    /// The same call, sent by `caller`.
    pub(crate) fn by(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }
}

/// A request that cannot be executed as sent; front doors answer it as an
/// error of the request, not in-band.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Names of the wrong shape: too many, empty, too long.
    #[error(transparent)]
    Names(#[from] NamesError),
    /// Strict: names in a call's tool set that match nothing.
    #[error("{}", .0.message())]
    UnknownTools(Resolution),
    /// Names that must all resolve and did not (a strict Resolve, a
    /// listing of named tools).
    #[error("{}", .0.message())]
    UnknownNames(Resolution),
    /// A search's toolset that names nothing the caller may see: the
    /// resolution of the name, and its message (`unknown toolset 'x'`,
    /// with a did-you-mean among the caller's toolsets).
    #[error("{message}")]
    UnknownToolset { resolution: Resolution, message: String },
    /// The tool acts for a user, and the request carries no user token.
    #[error("the tool '{0}' acts for a user, and the request carries no user token")]
    NoUser(String),
    /// An idempotency key or session id of the wrong shape.
    #[error("{0}")]
    BadId(String),
    /// An idempotency key already used for another call (the key quoted as
    /// emitted names are: cut, invisible and control characters escaped).
    #[error("idempotency key {} was already used for a different call", crate::resolve::message::quote_emitted(.0))]
    KeyReused(String),
    /// A tool search that cannot be run as asked (an empty query, a limit
    /// above the most).
    #[error("{0}")]
    BadSearch(String),
}

/// A call that passed every stage of `prepare`.
#[derive(Debug)]
pub struct Ready {
    pub(crate) tool: ToolId,
    pub(crate) arguments: Map<String, Value>,
    /// The JSON text the backend receives: the arguments exactly as emitted
    /// when nothing was repaired, else the repaired object.
    pub(crate) arguments_json: String,
    pub repairs: Vec<Repair>,
}
