//! The tools an MCP server listed, as catalogue declarations: the name
//! (with the server's prefix) checked against the provider rule, the
//! `inputSchema` compiled, `include` / `exclude` applied. A problem with one
//! tool leaves that tool out with a warning naming the server (an error under
//! strict validation); the server's other tools and the rest of the
//! catalogue are not affected. Connecting to servers is not done here.

use std::{collections::HashMap, sync::Arc};

use serde_json::Value;

use crate::similar;

use super::{
    build::{is_valid_name, NAME_RULE},
    error::CatalogProblems,
    merge::{Declarations, Layer, PendingServer, ToolDecl},
    pins::{self, PinMode},
    Backend, McpBackend, McpServer, PinState, Place, Schema, Source, Tool, DEFAULT_MAX_CONCURRENCY,
};

/// The longest description of the 1,142 real tools of
/// `tests/data/tool_search` (firecrawl's `firecrawl_monitor_create`): a
/// federated tool's description longer than this is a note, length alone
/// being no finding.
const LONGEST_REAL_DESCRIPTION: usize = 6_993;
const REAL_TOOLS: usize = 1_142;

/// What connecting to one server gave: its tools, or why there are none.
#[derive(Clone, Debug)]
pub struct McpListing {
    pub(crate) server: String,
    pub(crate) tools: Result<Vec<McpToolInfo>, String>,
    /// Each tool's digest when it was first seen (the state store's
    /// first-sight record), by its name on the server: its pin when the
    /// pins file has none.
    pub(crate) first_seen: HashMap<String, String>,
    /// Each pin a tool differs from, as the tool was listed when pinned (the
    /// state store's record of it), by digest: what the warning's diff is
    /// taken against.
    pub(crate) pinned_as: HashMap<String, Value>,
}

impl McpListing {
    pub(crate) fn new(server: String, tools: Result<Vec<McpToolInfo>, String>) -> Self {
        Self { server, tools, first_seen: Default::default(), pinned_as: Default::default() }
    }
}

/// One tool as a server's `tools/list` described it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct McpToolInfo {
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) input_schema: Value,
    /// `idempotentHint` or `readOnlyHint`.
    pub(crate) idempotent: bool,
    /// `title`, `annotations`, `outputSchema` and `icons` as listed, passed
    /// on to MCP clients unchanged.
    pub(crate) presentation: Arc<super::Presentation>,
    /// Its digest, what its pin is compared with ([`pins::digest`]).
    pub(crate) digest: String,
    /// Why it holds hidden instructions, if it does ([`super::poison`]).
    pub(crate) hidden: Option<&'static str>,
}

impl McpToolInfo {
    /// A listed tool, its digest and its scan made once, at the listing
    /// (every assembly after reads them).
    pub(crate) fn new(
        name: String,
        title: Option<String>,
        description: Option<String>,
        input_schema: Value,
        idempotent: bool,
        presentation: Arc<super::Presentation>,
    ) -> Self {
        let listed = listed(&name, title.as_ref(), description.as_ref(), &input_schema, &presentation);
        let (digest, hidden) = (pins::digest(&listed), super::poison::hidden_instructions(&listed));
        Self { name, title, description, input_schema, idempotent, presentation, digest, hidden }
    }

    /// The tool as listed, what is pinned and scanned (built again: only a
    /// first sight and a changed tool need it after the listing).
    pub(crate) fn listed(&self) -> Value {
        listed(&self.name, self.title.as_ref(), self.description.as_ref(), &self.input_schema, &self.presentation)
    }
}

/// `{name, title, description, inputSchema, outputSchema, annotations}` as
/// listed, those absent left out.
fn listed(
    name: &str,
    title: Option<&String>,
    description: Option<&String>,
    input_schema: &Value,
    presentation: &super::Presentation,
) -> Value {
    let mut listed = serde_json::Map::new();
    listed.insert("name".into(), Value::String(name.to_owned()));
    let optional = [
        ("title", title.cloned().map(Value::String)),
        ("description", description.cloned().map(Value::String)),
        ("inputSchema", Some(input_schema.clone())),
        ("outputSchema", presentation.output_schema.clone().map(Value::Object)),
        ("annotations", presentation.annotations.clone().map(Value::Object)),
    ];
    listed.extend(optional.into_iter().filter_map(|(key, value)| Some((key.to_owned(), value?))));
    Value::Object(listed)
}

/// Adds the tools of `server` (the `index`th named in its layer) to `decls`.
pub(crate) fn declare(
    server: &McpServer,
    index: usize,
    base: Layer,
    listing: Option<&McpListing>,
    decls: &mut Declarations,
    problems: &mut CatalogProblems,
) {
    let at: &str = &server.declared_at.origin;
    let message = match listing.map(|l| (&l.tools, (&l.first_seen, &l.pinned_as))) {
        Some((Ok(tools), seen)) => return declare_tools(server, index, base, tools, seen, decls, problems),
        Some((Err(why), _)) => format!("MCP server '{}' is unavailable: {why}; its tools are left out", server.name),
        None => format!("MCP server '{}' was not connected; its tools are left out", server.name),
    };
    problems.warning(at, server.declared_at.path.clone(), message);
    decls.pending.push(PendingServer {
        name: server.name.clone(),
        prefix: server.prefix.clone(),
        include: server.include.clone(),
        exclude: server.exclude.clone(),
    });
}

fn declare_tools(
    server: &McpServer,
    index: usize,
    base: Layer,
    tools: &[McpToolInfo],
    (first_seen, pinned_as): (&HashMap<String, String>, &HashMap<String, Value>),
    decls: &mut Declarations,
    problems: &mut CatalogProblems,
) {
    let at: &str = &server.declared_at.origin;
    let origin: Arc<str> = format!("mcp:{}", server.name).into();
    let listed: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for name in server.include.iter().flatten().chain(&server.exclude) {
        if !listed.contains(&name.as_str()) {
            let statement = format!("MCP server '{}' lists no tool '{name}'", server.name);
            let message = similar::did_you_mean(&statement, name, listed.iter().copied(), String::new);
            problems.warning(at, server.declared_at.path.clone(), message);
        }
    }
    let layer = Layer::mcp(base, index);
    let state = |tool: &str, listed: Option<String>, change: Option<pins::PinChange>| PinState {
        server: server.name.clone(),
        tool: tool.to_owned(),
        listed,
        pinned: server.pinned(tool).cloned(),
        file: server.pins.clone(),
        change,
    };
    let mut seen: Vec<&str> = Vec::new();
    for (i, info) in tools.iter().enumerate() {
        let path = format!("tools[{i}] ({})", info.name);
        let chosen = server.include.as_ref().is_none_or(|names| names.contains(&info.name));
        if !chosen || server.exclude.contains(&info.name) {
            continue;
        }
        if seen.contains(&info.name.as_str()) {
            problems.warning(&origin, path, format!("the server lists '{}' twice; the first is kept", info.name));
            continue;
        }
        seen.push(&info.name);
        let digest = &info.digest;
        // The pins file's entry, else the first-sight record.
        let (pin, since) = match (server.pinned(&info.name), first_seen.get(&info.name)) {
            (Some(pin), _) => {
                let file = server.pins.as_ref().map(|p| p.path.display().to_string()).unwrap_or_default();
                (Some(pin), format!("it was pinned in {file}"))
            }
            (None, Some(first)) => (Some(first), "it was first seen".to_owned()),
            (None, None) => (None, String::new()),
        };
        let strict = server.pin == PinMode::Strict;
        if let Some(pin) = pin.filter(|pin| *pin != digest && server.pin != PinMode::Off) {
            // What changed, when the store kept the tool as it was pinned.
            let (fields, how) = match pinned_as.get(pin) {
                Some(was) => {
                    let diff = pins::diff(was, &info.listed());
                    (diff.fields.join(","), diff.text)
                }
                None => ("unknown".to_owned(), "what it was is not recorded in the state store".to_owned()),
            };
            let what = format!(
                "MCP tool {}/{} changed since {since}: listed {digest}, pinned {pin}; {how}",
                server.name, info.name
            );
            let action = if strict { "quarantined" } else { "served" };
            decls.pins.push(state(&info.name, Some(digest.clone()), Some(pins::PinChange { action, fields })));
            if strict {
                let message = format!("{what}; quarantined (pin: strict) until approved (toolgate mcp approve)");
                problems.caution(&origin, path, message);
                continue;
            }
            problems.caution(&origin, path.clone(), format!("{what}; served (pin: warn)"));
        } else {
            decls.pins.push(state(&info.name, Some(digest.clone()), None));
        }
        if let Some(reason) = info.hidden {
            let what = format!("hidden instructions in {}/{}: {reason}", server.name, info.name);
            // Under `pin: strict` only a reviewer's pin of exactly this
            // listing serves it (a first sight is no review).
            if strict && server.pinned(&info.name) != Some(digest) {
                let message = format!("{what}; quarantined (pin: strict) until approved into the pins file");
                problems.caution(&origin, path, message);
                continue;
            }
            problems.caution(&origin, path.clone(), what);
        }
        let length = info.description.as_deref().map_or(0, |text| text.chars().count());
        if length > LONGEST_REAL_DESCRIPTION {
            problems.note(
                &origin,
                path.clone(),
                format!(
                    "MCP tool {}/{}: its description is {length} characters, longer than that of any of \
                     {REAL_TOOLS} real tools (at most {LONGEST_REAL_DESCRIPTION}); worth reading whole",
                    server.name, info.name
                ),
            );
        }
        let name = format!("{}{}", server.prefix, info.name);
        if !is_valid_name(&name) {
            problems.warning(&origin, path, format!("tool name '{name}' is left out: {NAME_RULE}"));
            continue;
        }
        let parameters = match Schema::compile(info.input_schema.clone()) {
            Ok(schema) => Arc::new(schema),
            Err(why) => {
                problems.warning(&origin, format!("{path}.inputSchema"), format!("{why}; the tool is left out"));
                continue;
            }
        };
        let description = match info.description.as_deref().or(info.title.as_deref()).map(str::trim) {
            Some(text) if !text.is_empty() => text.to_owned(),
            _ => {
                problems.warning(&origin, path.clone(), "the tool has no description for the model to read");
                format!("Tool '{}' of the MCP server '{}'.", info.name, server.name)
            }
        };
        let place = Place { origin: origin.clone(), path };
        let tool = Tool {
            name: name.clone(),
            description,
            parameters,
            binding: None,
            aliases: Vec::new(),
            source: Source::Mcp(server.name.clone()),
            idempotent: info.idempotent,
            timeout: server.timeout,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            backend: Backend::Mcp(McpBackend { server: server.name.clone(), tool: info.name.clone() }),
            declared_at: place.clone(),
            presentation: Arc::clone(&info.presentation),
        };
        decls.tools.push(ToolDecl { name: Some(name), layer, place, tool: Some(Arc::new(tool)), aliases: Vec::new() });
    }
    // Pinned, and listed no more.
    if let Some(pins) = &server.pins {
        let prefix = format!("{}/", server.name);
        for key in pins.tools.keys() {
            let Some(tool) = key.strip_prefix(&prefix) else { continue };
            if !listed.contains(&tool) {
                decls.pins.push(state(tool, None, None));
            }
        }
    }
}
