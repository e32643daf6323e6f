//! Domain values to protobuf messages and back.

use crate::{
    catalog::{Catalog, Tool, ToolFormat},
    proto::v1 as pb,
    resolve::{Resolution, Unknown},
};

pub fn tool(tool: &Tool) -> pb::Tool {
    pb::Tool {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters_json: tool.parameters.text().to_owned(),
        aliases: tool.aliases.clone(),
        source: tool.source.to_string(),
        idempotent: tool.idempotent,
    }
}

pub fn unknown(unknown: &Unknown) -> pb::UnknownName {
    pb::UnknownName { name: unknown.name.clone(), suggestions: unknown.suggestions.clone() }
}

pub fn resolve_response(catalog: &Catalog, resolution: &Resolution, message: String) -> pb::ResolveResponse {
    pb::ResolveResponse {
        tools: resolution.tools.iter().map(|&id| tool(catalog.tool(id))).collect(),
        unknown: resolution.unknown.iter().map(unknown).collect(),
        message,
        catalog_version: catalog.version().to_owned(),
    }
}

/// `None` for the native format (no rendering).
pub fn tool_format(format: pb::ToolFormat) -> Option<ToolFormat> {
    match format {
        pb::ToolFormat::Unspecified => None,
        pb::ToolFormat::Openai => Some(ToolFormat::OpenAi),
        pb::ToolFormat::Anthropic => Some(ToolFormat::Anthropic),
        pb::ToolFormat::Mcp => Some(ToolFormat::Mcp),
    }
}
