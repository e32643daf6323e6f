//! What an Execute call ends with: the tool's result, or a [`ToolError`] of
//! one [`ErrorKind`] written for the model, and every repair made on the way.

use crate::{
    catalog::{Tool, ToolView},
    resolve::message::{is_bidi_control, is_invisible},
};

/// A tool's own error text reaches the model cut to this many characters.
pub(crate) const MAX_TOOL_MESSAGE_CHARS: usize = 2000;

/// A tool's own text as the model reads it: its words kept, terminal escape
/// sequences (colours, cursor moves, titles), other control characters but
/// newlines and tabs, bidirectional controls and invisible characters
/// dropped; trimmed and cut to [`MAX_TOOL_MESSAGE_CHARS`] (then `…`).
pub(crate) fn tool_text(text: &str) -> String {
    let clean = without_controls(text);
    let text = clean.trim();
    match text.char_indices().nth(MAX_TOOL_MESSAGE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// `text` without ANSI/VT escape sequences (CSI `ESC [ … final`, OSC
/// `ESC ] … BEL` or `ESC \\`, and two-character escapes) and without control,
/// bidirectional and invisible characters, newlines and tabs kept.
fn without_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates, then one final byte.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC, DCS, and the like: up to BEL or the string terminator.
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\n' | '\t' => out.push(c),
            c if c.is_control() || is_bidi_control(c) || is_invisible(c) => {}
            c => out.push(c),
        }
    }
    out
}

/// What went wrong, as the proto's `ErrorKind` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ErrorKind {
    /// No single tool in the available set matches the emitted name.
    UnknownTool,
    /// Bad JSON, wrong argument names or values (ours or the tool's).
    InvalidArguments,
    /// The tool ran; what was asked for does not exist.
    NotFound,
    /// The tool ran and refused (a business rule).
    Refused,
    /// The tool broke.
    ToolCrashed,
    /// The tool did not answer in time.
    Timeout,
    /// The backend cannot be reached (or is saturated).
    Unavailable,
    /// The session used its retries for this tool.
    RetryBudgetExhausted,
    /// A user or tool rate limit: the call did not run; it would pass
    /// after `retry_after`.
    RateLimited,
    /// A condition of the caller's principal (`principals[].when`) does not
    /// hold of the call's arguments: it did not run, and will not as asked.
    PermissionDenied,
}

impl ErrorKind {
    /// The proto's enum name without its prefix (`UNKNOWN_TOOL`), as front
    /// doors other than gRPC spell it.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::UnknownTool => "UNKNOWN_TOOL",
            ErrorKind::InvalidArguments => "INVALID_ARGUMENTS",
            ErrorKind::NotFound => "NOT_FOUND",
            ErrorKind::Refused => "REFUSED",
            ErrorKind::ToolCrashed => "TOOL_CRASHED",
            ErrorKind::Timeout => "TIMEOUT",
            ErrorKind::Unavailable => "UNAVAILABLE",
            ErrorKind::RetryBudgetExhausted => "RETRY_BUDGET_EXHAUSTED",
            ErrorKind::RateLimited => "RATE_LIMITED",
            ErrorKind::PermissionDenied => "PERMISSION_DENIED",
        }
    }

    /// The outcome label of metrics: the kind in snake case.
    pub(crate) fn label(self) -> &'static str {
        match self {
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::InvalidArguments => "invalid_arguments",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Refused => "refused",
            ErrorKind::ToolCrashed => "tool_crashed",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::RetryBudgetExhausted => "retry_budget_exhausted",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::PermissionDenied => "permission_denied",
        }
    }

    /// `error.type` of a failed call (docs/telemetry.md).
    pub(crate) fn error_type(self) -> &'static str {
        match self {
            ErrorKind::UnknownTool => "tool_not_found",
            ErrorKind::NotFound | ErrorKind::Refused => "tool_error",
            other => other.label(),
        }
    }

    /// Whether calling again can help (advice to the caller; toolgate never
    /// retries by itself). A timeout or an outage is retryable only for an
    /// idempotent tool.
    pub(crate) fn retryable(self, idempotent: bool) -> bool {
        match self {
            ErrorKind::UnknownTool | ErrorKind::InvalidArguments | ErrorKind::RateLimited => true,
            ErrorKind::Timeout | ErrorKind::Unavailable => idempotent,
            ErrorKind::NotFound
            | ErrorKind::Refused
            | ErrorKind::ToolCrashed
            | ErrorKind::RetryBudgetExhausted
            | ErrorKind::PermissionDenied => false,
        }
    }
}

/// The parameter hint: a tool's parameters by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ExpectedParameters {
    /// In the order of the schema's `required`.
    pub(crate) required: Vec<String>,
    /// In the order of the schema's `properties`.
    pub(crate) optional: Vec<String>,
}

/// One problem with one argument.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Violation {
    /// A JSON pointer into the arguments (`/items/0/name`); empty for the whole object.
    pub(crate) field: String,
    pub(crate) description: String,
}

/// A failed call, in words a model can act on.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolError {
    pub(crate) kind: ErrorKind,
    pub message: String,
    pub(crate) retryable: bool,
    pub suggestions: Vec<String>,
    /// Sorted, capped.
    pub(crate) available_tools: Vec<String>,
    /// How many tools the caller may use, uncapped.
    pub(crate) available_tools_total: u32,
    pub(crate) expected_parameters: Option<ExpectedParameters>,
    pub(crate) violations: Vec<Violation>,
    /// RATE_LIMITED: how long until the call would pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) retry_after: Option<std::time::Duration>,
}

impl ToolError {
    /// An error of `kind` with nothing but its message; `idempotent` decides
    /// whether a timeout or an outage is retryable.
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>, idempotent: bool) -> Self {
        Self {
            kind,
            message: message.into(),
            retryable: kind.retryable(idempotent),
            suggestions: Vec::new(),
            available_tools: Vec::new(),
            available_tools_total: 0,
            expected_parameters: None,
            violations: Vec::new(),
            retry_after: None,
        }
    }

    /// Invalid arguments, with nothing but a message.
    pub(crate) fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArguments, message, false)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum RepairKind {
    ToolName,
    ArgumentName,
    ArgumentsJson,
    /// A value coerced to the one type its schema allows (`"5"` → 5).
    ArgumentValue,
    /// Arguments unwrapped from an envelope, or call metadata dropped.
    ArgumentsEnvelope,
    /// Words before a call read whole (a preamble), set aside.
    WordsDropped,
}

impl RepairKind {
    /// The proto's enum name without its prefix (`TOOL_NAME`).
    pub fn name(self) -> &'static str {
        match self {
            RepairKind::ToolName => "TOOL_NAME",
            RepairKind::ArgumentName => "ARGUMENT_NAME",
            RepairKind::ArgumentsJson => "ARGUMENTS_JSON",
            RepairKind::ArgumentValue => "ARGUMENT_VALUE",
            RepairKind::ArgumentsEnvelope => "ARGUMENTS_ENVELOPE",
            RepairKind::WordsDropped => "WORDS_DROPPED",
        }
    }

    /// `toolgate.repair.kind`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            RepairKind::ToolName => "tool_name",
            RepairKind::ArgumentName => "argument_name",
            RepairKind::ArgumentsJson => "arguments_json",
            RepairKind::ArgumentValue => "argument_value",
            RepairKind::ArgumentsEnvelope => "arguments_envelope",
            RepairKind::WordsDropped => "words_dropped",
        }
    }
}

/// One repair made to a call.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Repair {
    pub(crate) kind: RepairKind,
    pub(crate) original: String,
    pub(crate) repaired: String,
}

/// The end of one Execute call.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    /// The canonical tool name; `None` when the name resolved to no tool.
    pub(crate) tool: Option<String>,
    pub(crate) repairs: Vec<Repair>,
    /// The arguments as validated, after repair (empty when they never parsed).
    pub(crate) arguments_json: String,
    /// The tool's result as JSON text, unchanged (`None` for a dry run), or the error.
    pub result: Result<Option<String>, ToolError>,
    /// The stored answer of an earlier call with the same idempotency key.
    #[serde(default)]
    pub(crate) replayed: bool,
    /// An MCP tool's result as its server sent it (every content block,
    /// `structuredContent`, `_meta`, `isError`), for the MCP door to pass
    /// on; kept with a once-only call's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sent: Option<Box<serde_json::Value>>,
    /// Failing attempts of this tool the session has left before
    /// RETRY_BUDGET_EXHAUSTED, when the call has a session (for telemetry).
    #[serde(skip)]
    pub(crate) budget_remaining: Option<u64>,
    /// Calls the tightest of its rate limits would still take (none
    /// configured: `None`).
    #[serde(skip)]
    pub(crate) rate_remaining: Option<u32>,
    /// The tool's `gen_ai.tool.type`, set where the call found its tool;
    /// `None` unresolved, or read back from the once-only store (its span
    /// looks it up then).
    #[serde(skip)]
    pub(crate) tool_type: Option<ToolType>,
}

/// A tool's `gen_ai.tool.type` (a byte, where the name would be two words
/// in every outcome).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToolType {
    /// A tool of an MCP server.
    Extension,
    /// Every other tool.
    Function,
}

impl ToolType {
    pub(crate) fn of(tool: &Tool) -> Self {
        match tool.backend {
            crate::catalog::Backend::Mcp(_) => Self::Extension,
            _ => Self::Function,
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Extension => "extension",
            Self::Function => "function",
        }
    }
}

impl Outcome {
    /// The answer of a call that passed preparation: its `result`.
    pub(crate) fn of(tool: &Tool, ready: super::Ready, result: Result<Option<String>, ToolError>) -> Self {
        Self {
            tool: Some(tool.name.clone()),
            repairs: ready.repairs,
            arguments_json: ready.arguments_json,
            result,
            replayed: false,
            sent: None,
            budget_remaining: None,
            rate_remaining: None,
            tool_type: Some(ToolType::of(tool)),
        }
    }

    /// A call that ended with `error`: of `tool` when the name resolved to
    /// one, with the repairs made and the arguments as far as they got.
    pub(crate) fn failed(
        tool: Option<ToolView<'_>>,
        repairs: Vec<Repair>,
        arguments_json: String,
        error: ToolError,
    ) -> Self {
        Self {
            tool: tool.map(|t| t.name.to_owned()),
            repairs,
            arguments_json,
            result: Err(error),
            replayed: false,
            sent: None,
            budget_remaining: None,
            rate_remaining: None,
            tool_type: tool.map(|t| match t.federated {
                true => ToolType::Extension,
                false => ToolType::Function,
            }),
        }
    }
}
