//! Core values to MCP's and back: catalogue tools as `tools/list` shows
//! them, outcomes as `tools/call` answers them, the request errors as
//! JSON-RPC errors.

use std::sync::Arc;

use rmcp::{
    model::{CallToolResult, ContentBlock, ErrorCode, JsonObject, MetaObject, Tool as McpTool},
    ErrorData,
};
use serde_json::{json, Map, Value};

use crate::{
    catalog::Tool,
    exec::{ErrorKind, Outcome, RequestError, ToolError},
};

/// The `_meta` names of results and requests.
pub(crate) const META_REPAIRS: &str = "dev.toolgate/repairs";
pub(crate) const META_REPLAYED: &str = "dev.toolgate/replayed";
pub(crate) const META_ERROR_KIND: &str = "dev.toolgate/error_kind";
pub(crate) const META_RETRYABLE: &str = "dev.toolgate/retryable";
/// RATE_LIMITED: seconds until the call would pass.
pub(crate) const META_RETRY_AFTER: &str = "dev.toolgate/retry_after";
pub(crate) const META_IDEMPOTENCY_KEY: &str = "dev.toolgate/idempotency_key";
pub(crate) const META_SESSION_ID: &str = "dev.toolgate/session_id";
/// Once the name under which the HTTP edge passed arguments sent as text
/// to the handler; never a client's to send (what runs would differ from
/// what a proxy or an audit of `params.arguments` saw).
pub(crate) const META_ARGUMENTS_TEXT: &str = "dev.toolgate/arguments_text";

/// A request's `_meta` checked: nothing only the gateway may set, and the
/// ids it reads are JSON strings (an idempotency key sent as a number was
/// ignored, and a retried call ran twice).
pub(crate) fn check_meta(meta: &Map<String, Value>) -> Result<(), ErrorData> {
    let invalid = |message: String| Err(ErrorData::new(ErrorCode::INVALID_PARAMS, message, None));
    if meta.contains_key(META_ARGUMENTS_TEXT) {
        return invalid(format!(
            "Invalid params: _meta[\"{META_ARGUMENTS_TEXT}\"] is not a client's to send: send the arguments as params.arguments"
        ));
    }
    for key in [META_IDEMPOTENCY_KEY, META_SESSION_ID] {
        match meta.get(key) {
            None | Some(Value::String(_)) => {}
            Some(other) => {
                let sent = match other {
                    Value::Number(_) => "a number",
                    Value::Bool(_) => "a boolean",
                    Value::Object(_) => "an object",
                    Value::Array(_) => "an array",
                    _ => "null",
                };
                return invalid(format!("Invalid params: _meta[\"{key}\"] must be a JSON string, not {sent}"));
            }
        }
    }
    Ok(())
}

/// A catalogue tool as `tools/list` shows it: the model-facing schema (bound
/// parameters left out) and what the tool's presentation says (for a
/// federated tool, what its server listed, unchanged).
pub(crate) fn tool(tool: &Tool) -> McpTool {
    let schema = match tool.parameters.json() {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    };
    let mut listed = McpTool::new(tool.name.clone(), tool.description.clone(), Arc::new(schema));
    let shown = &tool.presentation;
    listed.title = shown.title.clone();
    listed.annotations = shown.annotations.as_ref().and_then(|a| serde_json::from_value(Value::Object(a.clone())).ok());
    listed.output_schema = shown.output_schema.as_ref().map(|schema| Arc::new(schema.clone()));
    listed.icons = shown.icons.as_ref().and_then(|icons| serde_json::from_value(icons.clone()).ok());
    listed
}

/// The answer of a call: a federated tool's result as its server sent it;
/// else the result as text (a JSON string as itself, anything else as
/// compact JSON) and, for an object, as structured content; or the error,
/// flagged, its message exactly the gRPC `error.message`.
/// `_meta` says what was repaired, whether it was replayed, and for an error
/// its kind and whether retrying can help.
pub(crate) fn result(outcome: Outcome) -> CallToolResult {
    let mut meta = MetaObject::default();
    let repairs: Vec<Value> = outcome
        .repairs
        .iter()
        .map(|r| json!({"kind": r.kind.name(), "original": r.original, "repaired": r.repaired}))
        .collect();
    meta.0.insert(META_REPAIRS.to_owned(), Value::Array(repairs));
    meta.0.insert(META_REPLAYED.to_owned(), Value::Bool(outcome.replayed));
    // A federated tool's result as its server sent it: every content block
    // (images, audio, resources, links), `structuredContent`, `isError`,
    // and its own `_meta` beside toolgate's.
    let sent = outcome.sent.and_then(|sent| serde_json::from_value::<CallToolResult>(*sent).ok());
    if let Some(mut result) = sent {
        if let Err(error) = &outcome.result {
            meta.0.insert(META_ERROR_KIND.to_owned(), Value::String(error.kind.name().to_owned()));
            meta.0.insert(META_RETRYABLE.to_owned(), Value::Bool(error.retryable));
        }
        let mut theirs = result.meta.take().unwrap_or_default();
        theirs.0.extend(meta.0);
        result.meta = Some(theirs);
        return result;
    }
    let mut result = match outcome.result {
        Ok(text) => success(text.unwrap_or_default()),
        Err(error) => {
            meta.0.insert(META_ERROR_KIND.to_owned(), Value::String(error.kind.name().to_owned()));
            meta.0.insert(META_RETRYABLE.to_owned(), Value::Bool(error.retryable));
            if let Some(after) = error.retry_after {
                meta.0.insert(META_RETRY_AFTER.to_owned(), serde_json::json!(after.as_secs_f64()));
            }
            CallToolResult::error(vec![ContentBlock::text(error.message)])
        }
    };
    result.meta = Some(meta);
    result
}

fn success(json_text: String) -> CallToolResult {
    let value: Option<Value> = serde_json::from_str(&json_text).ok();
    let text = match &value {
        Some(Value::String(text)) => text.clone(),
        Some(other) => serde_json::to_string(other).expect("JSON values serialise"),
        None => json_text,
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    if let Some(object @ Value::Object(_)) = value {
        result.structured_content = Some(object);
    }
    result
}

/// A name that could not be repaired: JSON-RPC -32602, its message the
/// model-facing sentence, its data the name and the suggestions.
pub(crate) fn unknown_tool(emitted: &str, error: &ToolError) -> ErrorData {
    let data = json!({"unknown": emitted, "suggestions": error.suggestions});
    ErrorData::new(ErrorCode::INVALID_PARAMS, error.message.clone(), Some(data))
}

/// Whether an outcome is a name that matched no tool.
pub(crate) fn is_unknown_tool(outcome: &Outcome) -> Option<&ToolError> {
    outcome.result.as_ref().err().filter(|e| e.kind == ErrorKind::UnknownTool)
}

/// A request that cannot be executed as sent.
pub(crate) fn request_error(err: RequestError) -> ErrorData {
    ErrorData::new(ErrorCode::INVALID_PARAMS, err.to_string(), None)
}

/// The arguments of a call the transport parsed (stdio) as the text the
/// core parses: an object as JSON, absent as none.
pub(crate) fn arguments_text(arguments: Option<&Map<String, Value>>) -> String {
    match arguments {
        Some(object) => serde_json::to_string(object).expect("JSON values serialise"),
        None => String::new(),
    }
}
