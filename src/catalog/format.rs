//! Tool lists as JSON: toolgate's own shape, and the formats model providers
//! document, for agents that pass them straight to a model API.

use serde::Serialize;
use serde_json::value::RawValue;

use super::Tool;

/// A provider's tool format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToolFormat {
    /// toolgate's own shape, pretty-printed for a person (`toolgate tools list --format json`):
    /// `[{name, description, parameters, aliases, source, idempotent}]`.
    Native,
    /// The Chat Completions `tools` array: `[{"type": "function", "function": {name, description, parameters}}]`.
    OpenAi,
    /// The Messages API `tools` array: `[{name, description, input_schema}]`.
    Anthropic,
    /// The MCP `tools/list` result: `{"tools": [{name, description, inputSchema}]}`.
    Mcp,
}

/// Renders `tools` as JSON text in `format`; each schema is embedded as its
/// text, key order kept.
pub(crate) fn render<'a>(tools: impl IntoIterator<Item = &'a Tool>, format: ToolFormat) -> String {
    let tools = tools.into_iter();
    let text = match format {
        ToolFormat::Native => serde_json::to_string_pretty(&tools.map(Native::of).collect::<Vec<_>>()),
        ToolFormat::OpenAi => serde_json::to_string(
            &tools
                .map(|t| OpenAi { kind: "function", function: Function::of(t, FunctionFields::Parameters) })
                .collect::<Vec<_>>(),
        ),
        ToolFormat::Anthropic => {
            serde_json::to_string(&tools.map(|t| Function::of(t, FunctionFields::InputSchema)).collect::<Vec<_>>())
        }
        ToolFormat::Mcp => serde_json::to_string(&McpList {
            tools: tools.map(|t| Function::of(t, FunctionFields::InputSchemaCamel)).collect(),
        }),
    };
    text.expect("tool lists serialise")
}

/// `{"name", "description", <schema key>}` in that order.
#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    #[serde(flatten)]
    schema: FunctionFields<'a>,
}

/// The key each provider gives the schema.
#[derive(Serialize)]
enum FunctionFields<'a> {
    #[serde(rename = "parameters")]
    Parameters(&'a RawValue),
    #[serde(rename = "input_schema")]
    InputSchema(&'a RawValue),
    #[serde(rename = "inputSchema")]
    InputSchemaCamel(&'a RawValue),
}

impl<'a> Function<'a> {
    fn of(tool: &'a Tool, key: impl Fn(&'a RawValue) -> FunctionFields<'a>) -> Self {
        Self { name: &tool.name, description: &tool.description, schema: key(tool.parameters.raw()) }
    }
}

#[derive(Serialize)]
struct OpenAi<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct McpList<'a> {
    tools: Vec<Function<'a>>,
}

#[derive(Serialize)]
struct Native<'a> {
    name: &'a str,
    description: &'a str,
    /// Parsed again, so that the pretty-printing reaches into the schema too.
    parameters: serde_json::Value,
    aliases: &'a [String],
    source: String,
    idempotent: bool,
}

impl<'a> Native<'a> {
    fn of(tool: &'a Tool) -> Self {
        Self {
            name: &tool.name,
            description: &tool.description,
            parameters: tool.parameters.json(),
            aliases: &tool.aliases,
            source: tool.source.to_string(),
            idempotent: tool.idempotent,
        }
    }
}
