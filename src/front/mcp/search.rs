//! `/mcp/search` and `/mcp/toolsets/NAME/search`: tool search for MCP
//! clients, over the caller's tools or one toolset of them. Instead of the caller's
//! tools the endpoint offers two: `find_tools {query, limit}`, the caller's
//! tools that fit a task (as `SearchTools` ranks them, within its grants),
//! and `call_tool {name, arguments}`, a call of any tool the caller may use,
//! through the same stages as a call on `/mcp` (repaired, validated, run
//! once, counted). A client that cannot hold ten thousand schemas holds
//! these two. A search that cannot run as asked (an empty query, a limit
//! above 50) is the tool's error (`isError`), which the model can read and
//! correct.

use rmcp::model::{CallToolResult, ContentBlock, ErrorCode, Tool};
use serde::Deserialize;
use serde_json::{json, value::RawValue, Value};

use super::Asked;
use crate::exec::RequestError;

/// The tool that searches.
pub(super) const FIND_TOOLS: &str = "find_tools";
/// The tool that calls what was found.
pub(super) const CALL_TOOL: &str = "call_tool";

/// The endpoint's two tools.
pub(super) fn tools() -> Vec<Tool> {
    let find = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "The task in words, e.g. \"open a pull request for my branch\"."},
            "limit": {"type": "integer", "minimum": 0, "maximum": 50, "description": "How many tools at most (default 8)."},
        },
        "required": ["query"],
    });
    let call = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The tool's name, as find_tools gave it."},
            "arguments": {"type": "object", "description": "The tool's arguments, as its inputSchema says."},
        },
        "required": ["name"],
    });
    let schema = |value: Value| match value {
        Value::Object(map) => std::sync::Arc::new(map),
        _ => unreachable!("a schema is an object"),
    };
    vec![
        Tool::new(
            FIND_TOOLS,
            "Find the tools that fit a task: their names, descriptions and input schemas, best first. \
             Call one of them with call_tool.",
            schema(find),
        ),
        Tool::new(CALL_TOOL, "Call a tool that find_tools found, with its arguments.", schema(call)),
    ]
}

/// `find_tools`' arguments, read from their text: only `query` and
/// `limit`, borrowed; any other member is skipped without a tree.
#[derive(Deserialize, Default)]
struct Find<'a> {
    #[serde(borrow)]
    query: Option<&'a RawValue>,
    #[serde(borrow)]
    limit: Option<&'a RawValue>,
}

/// `call_tool`'s arguments: the tool's name, and its arguments as their
/// text (never a tree: the core holds them to the argument limits first).
#[derive(Deserialize, Default)]
struct CallOf<'a> {
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

/// The arguments a call of one of the two tools was sent with (empty
/// text: none), within the argument size limit, read without a tree.
fn read<'a, T: Deserialize<'a> + Default>(text: &'a str, max_bytes: usize) -> Result<T, String> {
    if text.len() > max_bytes {
        return Err(format!(
            "arguments are {} bytes long; the limit is {}",
            text.len(),
            crate::exec::byte_size(max_bytes)
        ));
    }
    if text.trim().is_empty() {
        return Ok(T::default());
    }
    serde_json::from_str(text).map_err(|_| "the arguments must be a JSON object".to_owned())
}

/// `find_tools`: the caller's tools that fit the query, as text and as
/// `structuredContent` (`{"tools": [{name, description, inputSchema, score}]}`).
pub(super) async fn find(asked: &Asked, arguments: &str) -> CallToolResult {
    let executor = asked.snapshot.executor();
    let arguments: Find<'_> = match read(arguments, executor.limits().arguments.max_bytes) {
        Ok(arguments) => arguments,
        Err(message) => return refused(message),
    };
    let query: String = arguments.query.and_then(|q| serde_json::from_str(q.get()).ok()).unwrap_or_default();
    let limit = match arguments.limit.map(RawValue::get) {
        None => 0,
        Some(limit) => match limit.parse::<u32>() {
            Ok(limit) => limit,
            Err(_) => return refused(format!("limit must be a whole number from 0 to 50, not {limit}")),
        },
    };
    let found = match executor.search(&asked.caller, &query, limit, asked.toolset.clone()).await {
        Ok(found) => found,
        Err(err) => return refused(err.to_string()),
    };
    let catalog = executor.catalog();
    let mut text = String::new();
    let mut tools = Vec::new();
    for (id, score) in &found {
        let tool = catalog.tool(*id);
        let summary = tool.description.lines().find(|line| !line.trim().is_empty()).unwrap_or("").trim();
        text.push_str(&format!("{} ({score:.2}): {summary}\n", tool.name));
        let schema: Value = serde_json::from_str(tool.parameters.text()).unwrap_or_else(|_| json!({}));
        tools.push(json!({"name": tool.name, "description": tool.description, "inputSchema": schema, "score": score}));
    }
    if found.is_empty() {
        text.push_str("No tool of yours fits that task: say it in other words.");
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(text.trim_end().to_owned())]);
    result.structured_content = Some(json!({"tools": tools}));
    result
}

/// `call_tool`'s tool name and arguments (as emitted: an object's text, or
/// a string's content, which the core parses and repairs).
pub(super) fn call(arguments: &str) -> Result<(String, String), RequestError> {
    // Read without a tree at any size: the core holds the tool's
    // arguments to the limit before it reads them.
    let arguments: CallOf<'_> = read(arguments, usize::MAX).map_err(RequestError::BadSearch)?;
    let name = match arguments.name.and_then(|name| serde_json::from_str::<String>(name.get()).ok()) {
        Some(name) if !name.is_empty() => name,
        _ => return Err(RequestError::BadSearch("call_tool needs the tool's name (a string)".into())),
    };
    let inner = match arguments.arguments.map(RawValue::get) {
        None => String::new(),
        Some(text) if text.starts_with('"') => serde_json::from_str(text).expect("a JSON string"),
        Some(text) => text.to_owned(),
    };
    Ok((name, inner))
}

/// A search that cannot run as asked: the tool's error.
fn refused(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// A name that is neither of the two tools.
pub(super) fn unknown(name: &str) -> rmcp::ErrorData {
    let suggestion = crate::similar::nearest(name, [FIND_TOOLS, CALL_TOOL])
        .map(|near| format!(" Did you mean '{near}'?"))
        .unwrap_or_default();
    let message = format!("unknown tool '{name}': this endpoint offers find_tools and call_tool.{suggestion}");
    rmcp::ErrorData::new(ErrorCode::INVALID_PARAMS, message, None)
}
