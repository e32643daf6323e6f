//! A `tools/call` result as toolgate answers it: `isError` is the tool's own
//! refusal with its text unchanged; otherwise the structured content, or the
//! text content (parsed when it is JSON), or the content blocks, as JSON.
//! The result as the server sent it goes along (every content block, image
//! and audio included, `structuredContent`, `_meta`, `isError`), for the MCP
//! door to pass on unchanged.

use rmcp::model::CallToolResult;
use serde_json::Value;

use super::McpError;

pub(crate) fn answer(result: &CallToolResult) -> Result<Answered, McpError> {
    let value = serde_json::to_value(result).unwrap_or_default();
    let content: &[Value] = value.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let texts: Vec<&str> = content.iter().filter(|c| c["type"] == "text").filter_map(|c| c["text"].as_str()).collect();
    if result.is_error == Some(true) {
        let message = match texts.is_empty() {
            true => Value::Array(content.to_vec()).to_string(),
            false => texts.join("\n"),
        };
        return Err(McpError::Refused(message, Box::new(value)));
    }
    let json = match value.get("structuredContent") {
        Some(structured) if !structured.is_null() => structured.clone(),
        _ if !content.is_empty() && texts.len() == content.len() => {
            let mut parsed: Vec<Value> = texts
                .iter()
                .map(|t| serde_json::from_str(t).unwrap_or_else(|_| Value::String((*t).to_owned())))
                .collect();
            match parsed.len() {
                1 => parsed.remove(0),
                _ => Value::Array(parsed),
            }
        }
        _ => Value::Array(content.to_vec()),
    };
    Ok(Answered { json: json.to_string(), result: value })
}

/// A result: as JSON text for toolgate's answer, and as the server sent it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Answered {
    pub(crate) json: String,
    pub(crate) result: Value,
}
