//! The catalogue: YAML files, tool packs and built-ins merged into one
//! immutable [`Catalog`] snapshot (docs/architecture.md, "The catalogue").
//!
//! Owns loading, every catalogue rule and the name tables that resolution
//! reads (exact names, aliases, toolsets, normalised keys, the suggestion
//! index), all built once at load. Knows nothing of tonic, the network or
//! processes: backends are described here, run elsewhere.

mod build;
mod builtin;
mod declared;
mod error;
mod expand;
mod format;
mod load;
mod mcp;
mod merge;
mod pieces;
mod pins;
mod poison;
mod raw;
mod schema;
mod view;
mod yaml;

use std::{collections::HashMap, fmt, path::PathBuf, sync::Arc, time::Duration};

pub use builtin::BuiltinTool;
pub(crate) use declared::{DeclaredTool, DeclaredTools};
pub(crate) use error::log_problems;
pub use error::{LoadError, Problem, Severity};
pub(crate) use format::{render, ToolFormat};
pub use load::{assemble, read, read_bounded, Files};
pub(crate) use load::{assemble_after, is_catalogue_file, read_again};
pub use load::{load, LoadOptions, Loaded, MAX_FILE_BYTES};
pub(crate) use mcp::{McpListing, McpToolInfo};
pub(crate) use merge::GrantDecl;
pub(crate) use pins::PinMode;
pub use pins::{PinState, Pins};
pub use poison::hidden_instructions;
pub(crate) use schema::{admitted_types, allows_null, or_null, Schema};
pub(crate) use view::{ToolView, Tools};

use crate::{
    search::{Document, SearchIndex},
    similar::SuggestIndex,
};

/// Default per-call timeout of a tool.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default number of calls of one tool in flight.
pub(crate) const DEFAULT_MAX_CONCURRENCY: u32 = 32;

/// Where a tool comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    Builtin,
    Registry,
    Pack(String),
    Mcp(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Builtin => f.write_str("builtin"),
            Source::Registry => f.write_str("registry"),
            Source::Pack(name) => write!(f, "pack:{name}"),
            Source::Mcp(server) => write!(f, "mcp:{server}"),
        }
    }
}

/// Where something is declared: a file (or `<builtin>`) and a YAML path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub(crate) origin: Arc<str>,
    pub(crate) path: String,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, self.path)
    }
}

/// A value read from `${VAR}` that must never be logged or traced.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub(crate) fn new(value: String) -> Self {
        Self(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How a tool is run.
/// The names through which the gateway tells a tool who calls. They are
/// the gateway's alone: a catalogue that sets one is refused at load, so a
/// tool never hears of a caller who did not call.
pub(crate) mod identity_names {
    /// The HTTP headers (and the prefix every such header has).
    pub(crate) const PRINCIPAL_HEADER: &str = "x-toolgate-principal";
    pub(crate) const USER_HEADER: &str = "x-toolgate-user";
    pub(crate) const USER_ISSUER_HEADER: &str = "x-toolgate-user-issuer";
    pub(crate) const HEADER_PREFIX: &str = "x-toolgate-";
    /// The environment variables of command tools.
    pub(crate) const PRINCIPAL_ENV: &str = "TOOLGATE_PRINCIPAL";
    pub(crate) const USER_ENV: &str = "TOOLGATE_USER";
    pub(crate) const USER_ISSUER_ENV: &str = "TOOLGATE_USER_ISSUER";
}

#[derive(Clone, Debug)]
pub enum Backend {
    Builtin(BuiltinTool),
    Http(HttpBackend),
    Command(CommandBackend),
    Mcp(McpBackend),
}

/// A tool of an MCP server.
#[derive(Clone, Debug)]
pub struct McpBackend {
    pub(crate) server: String,
    /// The tool's name on its server (without any prefix).
    pub(crate) tool: String,
}

/// Default time to connect to an MCP server and list its tools.
pub(crate) const DEFAULT_MCP_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// An MCP server named in the catalogue (`mcp_servers.<name>`).
#[derive(Clone, Debug)]
pub(crate) struct McpServer {
    pub(crate) name: String,
    pub(crate) transport: McpTransport,
    /// Prepended to each of its tool names.
    pub(crate) prefix: String,
    /// Only these of its tools (by their names on the server), when given.
    pub(crate) include: Option<Vec<String>>,
    /// None of these.
    pub(crate) exclude: Vec<String>,
    /// Per call.
    pub(crate) timeout: Duration,
    /// To connect and list the tools.
    pub(crate) startup_timeout: Duration,
    /// The layer its tools join: the registry, or the pack that names it.
    pub(crate) declared_in: Source,
    pub(crate) declared_at: Place,
    /// What a tool differing from its pin does.
    pub(crate) pin: pins::PinMode,
    /// The pins file of its catalogue file (`mcp_pins`).
    pub(crate) pins: Option<Arc<pins::Pins>>,
}

impl McpServer {
    /// The pins file's digest of `tool` (its name on this server), if the
    /// file pins it.
    pub(crate) fn pinned(&self, tool: &str) -> Option<&String> {
        self.pins.as_ref()?.tools.get(&format!("{}/{tool}", self.name))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum McpTransport {
    /// A child process speaking MCP on stdin and stdout.
    Stdio { program: PathBuf, args: Vec<String>, cwd: PathBuf, env: Vec<(String, Secret)> },
    /// Streamable HTTP.
    Http { url: url::Url, headers: Vec<(String, Secret)> },
}

#[derive(Clone, Debug)]
pub struct HttpBackend {
    pub url: url::Url,
    pub headers: Vec<(String, Secret)>,
    pub(crate) follow_redirects: bool,
    pub(crate) use_env_proxy: bool,
    /// Sends the end user's token as `Authorization: Bearer …`.
    pub(crate) forward_user_token: bool,
}

#[derive(Clone, Debug)]
pub struct CommandBackend {
    /// `argv[0]`; a relative path with a `/` is resolved against the folder of
    /// the declaring file.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The declared `cwd` (resolved against the declaring file's folder), or
    /// that folder.
    pub cwd: PathBuf,
    pub(crate) env: Vec<(String, Secret)>,
}

/// What MCP clients are shown of a tool beside its name, description and
/// schema: for a registry tool its catalogue `title` and `annotations`; for
/// a tool federated from an MCP server what that server listed, unchanged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Presentation {
    pub title: Option<String>,
    /// MCP's tool annotations (`readOnlyHint`, `destructiveHint`,
    /// `idempotentHint`, `openWorldHint`, …), as JSON.
    pub annotations: Option<serde_json::Map<String, serde_json::Value>>,
    pub output_schema: Option<serde_json::Map<String, serde_json::Value>>,
    pub icons: Option<serde_json::Value>,
}

/// One tool of the catalogue.
#[derive(Clone, Debug)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// The schema the model sees (bound parameters left out).
    pub parameters: Arc<Schema>,
    /// Parameters the gateway fills from the caller's identity, if any.
    pub(crate) binding: Option<Arc<Binding>>,
    pub aliases: Vec<String>,
    pub source: Source,
    pub(crate) idempotent: bool,
    pub(crate) timeout: Duration,
    pub(crate) max_concurrency: u32,
    pub backend: Backend,
    pub(crate) declared_at: Place,
    /// Shown to MCP clients only; never read by the gateway itself.
    pub presentation: Arc<Presentation>,
}

/// Where a bound parameter's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindSource {
    /// The verified end user's id (a token's `sub`).
    User,
    /// The authenticated principal's name.
    Principal,
}

impl BindSource {
    pub(crate) fn word(self) -> &'static str {
        match self {
            BindSource::User => "user",
            BindSource::Principal => "principal",
        }
    }
}

/// A tool's `bind:`: parameters filled by the gateway from who calls, never
/// by the model, and the whole schema the filled arguments must satisfy.
#[derive(Debug)]
pub struct Binding {
    pub(crate) parameters: Vec<(String, BindSource)>,
    pub(crate) full: Arc<Schema>,
}

impl Binding {
    pub(crate) fn binds_user(&self) -> bool {
        self.parameters.iter().any(|(_, source)| *source == BindSource::User)
    }
}

/// Index of a tool in [`Catalog::tools`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolId(pub u32);

/// Index of a toolset in [`Catalog::toolsets`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ToolsetId(pub u32);

/// A named group of tools, members expanded (nested toolsets included), in
/// declared order, each tool once.
#[derive(Debug)]
pub struct Toolset {
    pub(crate) name: String,
    pub(crate) tools: Vec<ToolId>,
}

/// What an exact name refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name {
    Tool(ToolId),
    Alias(ToolId),
    Toolset(ToolsetId),
}

/// What a suggestion points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Tool(ToolId),
    Toolset(ToolsetId),
}

/// An immutable catalogue snapshot.
pub struct Catalog {
    /// Shared with the declarations the catalogue was assembled from.
    tools: Vec<Arc<Tool>>,
    toolsets: Vec<Toolset>,
    names: HashMap<String, Name>,
    keys: HashMap<String, Vec<ToolId>>,
    /// Shared with the catalogue this one replaced when the names are the same.
    index: Arc<SuggestIndex<Target>>,
    version: String,
    /// The tool search's index, made in the background when the snapshot
    /// is swapped in ([`Catalog::index_in_background`]).
    search: Arc<std::sync::OnceLock<Arc<SearchIndex>>>,
    /// The index of the snapshot this one replaced, searched for the tools
    /// still present until this one's is made.
    pub(crate) before: Arc<std::sync::Mutex<Option<Arc<SearchIndex>>>>,
    /// Each federated tool as listed and as pinned (quarantined ones too).
    pins: Vec<PinState>,
}

/// The search index of `tools`.
fn index_of(tools: &[Arc<Tool>]) -> Arc<SearchIndex> {
    let parameters: Vec<Vec<(String, String)>> = tools.iter().map(|tool| tool.parameters.described()).collect();
    Arc::new(SearchIndex::build(tools.iter().zip(&parameters).map(|(tool, parameters)| document(tool, parameters))))
}

/// What the search reads of `tool`; its group is its MCP server or tool
/// pack (the operator's registry and the built-in tools are no one group).
fn document<'t>(tool: &'t Tool, parameters: &'t [(String, String)]) -> Document<'t> {
    let group = match &tool.source {
        Source::Mcp(group) | Source::Pack(group) => Some(group.as_str()),
        Source::Builtin | Source::Registry => None,
    };
    Document { name: &tool.name, aliases: &tool.aliases, description: &tool.description, parameters, group }
}

impl Catalog {
    /// Every tool, sorted by name (code point order).
    pub fn tools(&self) -> &[Arc<Tool>] {
        &self.tools
    }

    pub fn tool(&self, id: ToolId) -> &Tool {
        &self.tools[id.0 as usize]
    }

    /// Whether [`Catalog::search_index`] was made.
    pub fn search_index_made(&self) -> bool {
        self.search.get().is_some()
    }

    /// The index tool search ranks this snapshot's tools with (by
    /// [`ToolId`]): made now if it was not yet, and kept with the snapshot.
    pub fn search_index(&self) -> &Arc<SearchIndex> {
        self.search.get_or_init(|| index_of(&self.tools))
    }

    /// The index this snapshot's searches use now: its own, or the one of
    /// the snapshot it replaced, until its own is made.
    pub(crate) fn search_index_or_before(&self) -> Option<Arc<SearchIndex>> {
        self.search.get().cloned().or_else(|| crate::lock::lock(&self.before).clone())
    }

    /// Makes the search index on a thread of its own (a swapped-in snapshot
    /// never makes a search wait for it), then lets the one before go. The
    /// thread holds the tools and the index's slot, never the catalogue: a
    /// snapshot replaced meanwhile is freed at once.
    pub fn index_in_background(&self) {
        if self.search_index_made() {
            return;
        }
        let (tools, slot, before) = (self.tools.clone(), Arc::clone(&self.search), Arc::clone(&self.before));
        let made = std::thread::Builder::new().name("search-index".into()).spawn(move || {
            // The catalogue is gone: no one would search the index.
            if Arc::strong_count(&slot) > 1 {
                slot.get_or_init(|| index_of(&tools));
                crate::lock::lock(&before).take();
            }
        });
        if let Err(err) = made {
            tracing::warn!("the search index will be made by the first search: no thread for it ({err})");
        }
    }

    /// The `limit` tools of `among` (by [`ToolId`]) that fit `query` best,
    /// with their scores: by this snapshot's index once made; until then by
    /// the index of the snapshot before, over the tools it held unchanged;
    /// with neither (the first moments after start), by reading each tool
    /// ([`crate::search::scan`]).
    pub fn search(&self, query: &str, among: &[u32], limit: usize) -> Vec<(u32, f32)> {
        if let Some(index) = self.search.get() {
            return index.search(query, among, limit);
        }
        let tools = || among.iter().filter_map(|&id| self.tools.get(id as usize).map(|tool| (id, tool)));
        let Some(before) = crate::lock::lock(&self.before).clone() else {
            // Names and descriptions: reading each schema would take longer.
            return crate::search::scan(query, tools().map(|(id, tool)| (id, document(tool, &[]))), limit);
        };
        let mut now = HashMap::new();
        for (id, tool) in tools() {
            if let Some(then) = before.position_of(&document(tool, &tool.parameters.described())) {
                now.insert(then, id);
            }
        }
        let mut then: Vec<u32> = now.keys().copied().collect();
        then.sort_unstable();
        let found = before.search(query, &then, limit);
        let mut found: Vec<(u32, f32)> = found.into_iter().map(|(then, score)| (now[&then], score)).collect();
        found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        found
    }

    /// Each federated tool as its server listed it and as its pins file
    /// pins it, and each pinned tool no longer listed; by server and tool.
    pub fn pins(&self) -> &[PinState] {
        &self.pins
    }

    pub fn toolsets(&self) -> &[Toolset] {
        &self.toolsets
    }

    pub(crate) fn toolset(&self, id: ToolsetId) -> &Toolset {
        &self.toolsets[id.0 as usize]
    }

    /// What an exact tool, alias or toolset name refers to.
    pub fn lookup(&self, name: &str) -> Option<Name> {
        self.names.get(name).copied()
    }

    /// The tools whose name or an alias has this normalised key.
    pub fn by_key(&self, key: &str) -> &[ToolId] {
        self.keys.get(key).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The display name of a suggestion target.
    pub(crate) fn target_name(&self, target: Target) -> &str {
        match target {
            Target::Tool(id) => &self.tool(id).name,
            Target::Toolset(id) => &self.toolset(id).name,
        }
    }

    /// Up to `limit` names near `query` (similarity at least `cutoff`), best
    /// first, ties to the name that sorts first. A matching alias suggests its
    /// tool; each target is named once. Only targets that `accept` are considered.
    pub(crate) fn suggest(&self, query: &str, cutoff: f64, limit: usize, accept: impl Fn(Target) -> bool) -> Vec<&str> {
        let mut found: Vec<(f64, &str)> = self
            .index
            .suggest(query, cutoff, limit, |t| accept(*t))
            .into_iter()
            .map(|s| (s.score, self.target_name(*s.target)))
            .collect();
        found.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        found.into_iter().take(limit).map(|(_, name)| name).collect()
    }

    /// Changes whenever the snapshot's tools or toolsets change.
    pub(crate) fn version(&self) -> &str {
        &self.version
    }
}

impl Tool {
    /// What the stages read of this tool.
    pub(crate) fn view(&self) -> ToolView<'_> {
        ToolView {
            name: &self.name,
            parameters: &self.parameters,
            binding: self.binding.as_deref(),
            federated: matches!(self.backend, Backend::Mcp(_)),
        }
    }
}

/// A snapshot's tools, as reading a call asks of them.
impl Tools for Catalog {
    fn count(&self) -> usize {
        self.tools.len()
    }

    fn tool(&self, id: ToolId) -> ToolView<'_> {
        Catalog::tool(self, id).view()
    }

    fn named(&self, name: &str) -> Option<ToolId> {
        match self.lookup(name)? {
            Name::Tool(id) | Name::Alias(id) => Some(id),
            Name::Toolset(_) => None,
        }
    }

    fn by_key(&self, key: &str) -> &[ToolId] {
        Catalog::by_key(self, key)
    }

    fn nearest(&self, query: &str, cutoff: f64, accept: &dyn Fn(ToolId) -> bool) -> Option<&str> {
        let accept = |target: Target| matches!(target, Target::Tool(id) if accept(id));
        self.suggest(query, cutoff, 1, accept).into_iter().next()
    }
}

impl fmt::Debug for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalog").field("tools", &self.tools.len()).field("version", &self.version).finish()
    }
}
