//! The model door (docs/model-door.md): an OpenAI-compatible endpoint
//! in front of OpenAI-compatible model servers. An agent changes its base
//! URL; its framework then receives the model's tool calls repaired where
//! one meaning is possible, against the `tools` its own request declared
//! (the stages of `Execute`, [`crate::exec::declared`]), and calls the model
//! wrote as text lifted into `tool_calls`. The door runs no tool.
//!
//! - [`http`]: the door and its edge (paths, identity, routing, forwarding).
//! - [`request`]: what the door reads of a request body (borrowed; the rest stays text).
//! - [`route`]: which upstream serves a model (`models` globs).
//! - [`tools`]: the request's tools, compiled once per distinct list.
//! - [`response`]: a whole completion repaired.
//! - [`retry`]: the second chance: the model asked again.
//! - [`stream`]: a streamed completion, held where a call may begin.
//! - [`stream_responses`]: a streamed Responses answer, under the same rules.
//! - [`stream_messages`]: a streamed Messages answer, under the same rules.
//! - [`first_text`]: the first text of a Responses or Messages stream, judged as it arrives.
//! - [`sse`]: server-sent events framed as they pass (CR, LF, CRLF).

mod driven;
mod first_text;
pub(crate) mod http;
mod observe;
mod request;
mod response;
mod retry;
mod route;
mod sse;
mod stream;
mod stream_messages;
mod stream_responses;
mod tools;

/// What the door calls itself (logs, listeners).
pub(crate) const NAME: &str = "model";

/// The request header that asks for every response unchanged.
pub(crate) const STRICT_HEADER: &str = "x-toolgate-strict";

/// The response header listing what was repaired (non-streaming).
pub(crate) const REPAIRS_HEADER: &str = "x-toolgate-repairs";

/// The response header that says why the request's tools were not read
/// against (`too many tools`, `too many patterns`): the answer passed
/// unchanged.
pub(crate) const UNREPAIRED_HEADER: &str = "x-toolgate-unrepaired";
