//! Domain values to protobuf messages and back.

use std::time::Duration;

use crate::{
    catalog::{Catalog, Tool, ToolFormat},
    exec::{Call, ErrorKind, Outcome, RepairKind, ToolError},
    proto::v1 as pb,
    resolve::{Resolution, Unknown},
};

pub(crate) fn tool(tool: &Tool) -> pb::Tool {
    pb::Tool {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters_json: tool.parameters.text().to_owned(),
        aliases: tool.aliases.clone(),
        source: tool.source.to_string(),
        idempotent: tool.idempotent,
    }
}

pub(crate) fn unknown(unknown: &Unknown) -> pb::UnknownName {
    pb::UnknownName { name: unknown.name.clone(), suggestions: unknown.suggestions.clone() }
}

pub(crate) fn resolve_response(catalog: &Catalog, resolution: &Resolution) -> pb::ResolveResponse {
    pb::ResolveResponse {
        tools: resolution.tools.iter().map(|&id| tool(catalog.tool(id))).collect(),
        unknown: resolution.unknown.iter().map(unknown).collect(),
        message: resolution.message(),
        catalog_version: catalog.version().to_owned(),
    }
}

/// `None` for the native format (no rendering).
pub(crate) fn tool_format(format: pb::ToolFormat) -> Option<ToolFormat> {
    match format {
        pb::ToolFormat::Unspecified => None,
        pb::ToolFormat::Openai => Some(ToolFormat::OpenAi),
        pb::ToolFormat::Anthropic => Some(ToolFormat::Anthropic),
        pb::ToolFormat::Mcp => Some(ToolFormat::Mcp),
    }
}

/// The call an Execute request asks for, from no one yet.
pub(crate) fn call(request: pb::ExecuteRequest, deadline: Option<Duration>, traceparent: Option<String>) -> Call {
    Call {
        tool: request.tool,
        call_id: request.call_id,
        arguments_json: request.arguments_json,
        tools: request.tools,
        strict: request.strict,
        dry_run: request.dry_run,
        deadline,
        traceparent,
        idempotency_key: request.idempotency_key,
        session_id: request.session_id,
        front_door: super::NAME,
        ..Call::default()
    }
}

pub(crate) fn execute_response(outcome: Outcome, call_id: String) -> pb::ExecuteResponse {
    let repairs = outcome
        .repairs
        .into_iter()
        .map(|r| pb::Repair { kind: repair_kind(r.kind) as i32, original: r.original, repaired: r.repaired })
        .collect();
    let (ok, result_json, error) = match outcome.result {
        Ok(result) => (true, result.unwrap_or_default(), None),
        Err(error) => (false, String::new(), Some(tool_error(error))),
    };
    pb::ExecuteResponse {
        ok,
        tool: outcome.tool.unwrap_or_default(),
        repairs,
        arguments_json: outcome.arguments_json,
        result_json,
        error,
        replayed: outcome.replayed,
        call_id,
    }
}

fn repair_kind(kind: RepairKind) -> pb::RepairKind {
    match kind {
        RepairKind::ToolName => pb::RepairKind::ToolName,
        RepairKind::ArgumentName => pb::RepairKind::ArgumentName,
        RepairKind::ArgumentsJson => pb::RepairKind::ArgumentsJson,
        RepairKind::ArgumentValue => pb::RepairKind::ArgumentValue,
        RepairKind::ArgumentsEnvelope => pb::RepairKind::ArgumentsEnvelope,
        RepairKind::WordsDropped => pb::RepairKind::WordsDropped,
    }
}

fn error_kind(kind: ErrorKind) -> pb::ErrorKind {
    match kind {
        ErrorKind::UnknownTool => pb::ErrorKind::UnknownTool,
        ErrorKind::InvalidArguments => pb::ErrorKind::InvalidArguments,
        ErrorKind::NotFound => pb::ErrorKind::NotFound,
        ErrorKind::Refused => pb::ErrorKind::Refused,
        ErrorKind::ToolCrashed => pb::ErrorKind::ToolCrashed,
        ErrorKind::Timeout => pb::ErrorKind::Timeout,
        ErrorKind::Unavailable => pb::ErrorKind::Unavailable,
        ErrorKind::RetryBudgetExhausted => pb::ErrorKind::RetryBudgetExhausted,
        ErrorKind::RateLimited => pb::ErrorKind::RateLimited,
        ErrorKind::PermissionDenied => pb::ErrorKind::PermissionDenied,
    }
}

fn tool_error(error: ToolError) -> pb::ToolError {
    pb::ToolError {
        kind: error_kind(error.kind) as i32,
        message: error.message,
        retryable: error.retryable,
        suggestions: error.suggestions,
        available_tools: error.available_tools,
        available_tools_total: error.available_tools_total,
        expected_parameters: error
            .expected_parameters
            .map(|p| pb::ExpectedParameters { required: p.required, optional: p.optional }),
        violations: error
            .violations
            .into_iter()
            .map(|v| pb::Violation { field: v.field, description: v.description })
            .collect(),
        retry_after: error.retry_after.map(duration),
    }
}

/// A duration as `google.protobuf.Duration`.
pub(super) fn duration(d: std::time::Duration) -> prost_types::Duration {
    prost_types::Duration { seconds: d.as_secs() as i64, nanos: d.subsec_nanos() as i32 }
}
