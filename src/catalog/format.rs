//! Tool lists as JSON: toolgate's own shape, and the formats model providers
//! document, for agents that pass them straight to a model API.

use serde_json::{json, Value};

use super::Tool;

/// A provider's tool format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolFormat {
    /// toolgate's own shape, pretty-printed (`toolgate tools list --format json`):
    /// `[{name, description, parameters, aliases, source, idempotent}]`.
    Native,
    /// The Chat Completions `tools` array: `[{"type": "function", "function": {name, description, parameters}}]`.
    OpenAi,
    /// The Messages API `tools` array: `[{name, description, input_schema}]`.
    Anthropic,
    /// The MCP `tools/list` result: `{"tools": [{name, description, inputSchema}]}`.
    Mcp,
}

/// Renders `tools` as JSON text in `format`, key order kept.
pub fn render<'a>(tools: impl IntoIterator<Item = &'a Tool>, format: ToolFormat) -> String {
    let tools = tools.into_iter();
    let value = match format {
        ToolFormat::Native => {
            let list: Vec<Value> = tools
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters.json(),
                        "aliases": t.aliases,
                        "source": t.source.to_string(),
                        "idempotent": t.idempotent,
                    })
                })
                .collect();
            return serde_json::to_string_pretty(&list).expect("JSON values serialise");
        }
        ToolFormat::OpenAi => Value::Array(
            tools
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters.json()
                    }})
                })
                .collect(),
        ),
        ToolFormat::Anthropic => Value::Array(
            tools
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters.json()}))
                .collect(),
        ),
        ToolFormat::Mcp => json!({"tools": tools
            .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": t.parameters.json()}))
            .collect::<Vec<_>>()}),
    };
    value.to_string()
}
