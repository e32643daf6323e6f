//! Finds and reads the catalogue files (registry, enabled packs), adds the
//! built-ins, and merges them. One code path for `validate` and `serve`.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::Arc,
};

use super::{
    build::{self, FileContext},
    builtin::{BuiltinTool, BUILTIN_ALIASES},
    error::{CatalogProblems, LoadError, Problem, Severity},
    mcp::{self, McpListing},
    merge::{merge, AliasDecl, Declarations, GrantDecl, Layer, ToolDecl, ToolsetDecl},
    schema::SchemaCache,
    yaml, Backend, Catalog, McpServer, Place, Source, Tool,
};
use crate::{env::Env, similar};

const BUILTIN_ORIGIN: &str = "<builtin>";

/// What to load.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Registry files or folders (a folder means every `*.yaml` / `*.yml`
    /// directly in it).
    pub registry: Vec<PathBuf>,
    /// The folder of tool packs (`<name>.yaml`).
    pub packs_dir: PathBuf,
    /// Packs to merge, by name.
    pub packs: Vec<String>,
    /// Treat every warning as an error.
    pub strict: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            registry: vec![PathBuf::from("catalog")],
            packs_dir: PathBuf::from("catalog/packs"),
            packs: Vec::new(),
            strict: false,
        }
    }
}

/// A loaded catalogue and the warnings met on the way.
#[derive(Debug)]
pub struct Loaded {
    pub catalog: Catalog,
    pub warnings: Vec<Problem>,
}

/// The catalogue files, read and checked, and the MCP servers they name:
/// everything but the servers' tools. Assembled into a [`Catalog`] with
/// [`assemble`], again whenever the servers' tools change.
#[derive(Clone)]
pub struct Files {
    decls: Declarations,
    servers: Vec<McpServer>,
    problems: Vec<Problem>,
    strict: bool,
}

impl Files {
    /// The MCP servers named in any layer.
    pub(crate) fn servers(&self) -> &[McpServer] {
        &self.servers
    }

    /// Adds lists of names kept outside the catalogue (principals' grants),
    /// checked at every assembly like toolset members.
    pub(crate) fn add_grants(&mut self, grants: impl IntoIterator<Item = GrantDecl>) {
        self.decls.grants.extend(grants);
    }
}

/// Reads every file (registry, enabled packs) and adds the built-ins. The
/// problems found are kept for [`assemble`], which reports them all together.
pub fn read(options: &LoadOptions, env: &Env) -> Files {
    read_with(options, env, SchemaCache::default())
}

/// [`read`] for a reload: tools whose schema is unchanged share it with
/// `previous`, the catalogue being replaced (no second copy while both are
/// held, and validators that calls compiled stay compiled).
pub(crate) fn read_again(options: &LoadOptions, env: &Env, previous: &Catalog) -> Files {
    read_with(options, env, SchemaCache::seeded(previous.tools().iter().map(|tool| &tool.parameters)))
}

fn read_with(options: &LoadOptions, env: &Env, schemas: SchemaCache) -> Files {
    let mut reading = Reading {
        env,
        schemas,
        decls: Declarations::default(),
        servers: Vec::new(),
        problems: CatalogProblems::default(),
    };
    for file in registry_files(&options.registry, &mut reading.problems) {
        read_file(&file, &Source::Registry, &mut reading);
    }
    for (name, file) in pack_files(options, &mut reading.problems) {
        read_file(&file, &Source::Pack(name), &mut reading);
    }
    let Reading { mut decls, servers, mut problems, .. } = reading;
    for (i, server) in servers.iter().enumerate() {
        if let Some(other) = servers[..i].iter().find(|s| s.name == server.name) {
            let message = format!("duplicate MCP server '{}': also named at {}", server.name, other.declared_at);
            problems.error(&server.declared_at.origin, server.declared_at.path.clone(), message);
        }
    }
    builtins(&mut decls);
    // Kept for every later assembly: no room to spare (a 10,000-tool
    // registry left ~40 % of the list's capacity unused).
    decls.tools.shrink_to_fit();
    Files { decls, servers, problems: problems.into_vec(), strict: options.strict }
}

/// Merges the files with the tools the MCP servers listed (a server missing
/// from `listings`, or whose listing failed, adds a warning and no tools).
/// Every problem of every file is in the error; under strict validation,
/// warnings fail too.
pub fn assemble(files: &Files, listings: &[McpListing]) -> Result<Loaded, LoadError> {
    assemble_after(files, listings, None)
}

/// [`assemble`] in place of `previous` (a reload, or an MCP server's tools
/// changed): the suggestion index is shared with `previous` when the names
/// it holds are the same (an edit that renames nothing), instead of a
/// second one built beside it.
pub(crate) fn assemble_after(
    files: &Files,
    listings: &[McpListing],
    previous: Option<&Catalog>,
) -> Result<Loaded, LoadError> {
    let mut problems = CatalogProblems::from(files.problems.clone());
    let mut decls = files.decls.clone();
    // Each server's tools get a layer of their own below the files that name
    // it, in the order the servers are named.
    for (index, server) in files.servers.iter().enumerate() {
        let listing = listings.iter().find(|l| l.server == server.name);
        mcp::declare(server, index, Layer::of(&server.declared_in), listing, &mut decls, &mut problems);
    }
    let catalog = merge(decls, &mut problems, previous);
    let failed = problems.has_errors() || (files.strict && problems.has_warnings());
    let problems = problems.into_vec();
    if failed {
        return Err(LoadError { problems });
    }
    debug_assert!(problems.iter().all(|p| p.severity != Severity::Error));
    Ok(Loaded { catalog, warnings: problems })
}

/// Reads and assembles a catalogue without connecting to any MCP server: a
/// server it names adds a warning and no tools. The gateway itself connects
/// them first (see the `live` module).
pub fn load(options: &LoadOptions, env: &Env) -> Result<Loaded, LoadError> {
    assemble(&read(options, env), &[])
}

fn registry_files(paths: &[PathBuf], problems: &mut CatalogProblems) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for path in paths {
        let origin = path.display().to_string();
        match fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                let found = yaml_files_in(path, problems);
                if found.is_empty() {
                    problems.warning(&origin, "", "the folder holds no *.yaml files");
                }
                files.extend(found);
            }
            Ok(_) => files.push(path.clone()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                problems.error(&origin, "", "no such file or folder");
            }
            Err(err) => problems.error(&origin, "", format!("cannot read: {err}")),
        }
    }
    files
}

/// Whether a folder's entry `path` is one the catalogue reads: `*.yaml` or
/// `*.yml` (the reload watcher asks too).
pub(crate) fn is_catalogue_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "yaml" || e == "yml")
}

/// `*.yaml` and `*.yml` files directly in `dir`, sorted by name.
fn yaml_files_in(dir: &Path, problems: &mut CatalogProblems) -> Vec<PathBuf> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) => {
            problems.error(&dir.display().to_string(), "", format!("cannot read the folder: {err}"));
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> =
        entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file() && is_catalogue_file(p)).collect();
    files.sort();
    files
}

fn pack_files(options: &LoadOptions, problems: &mut CatalogProblems) -> Vec<(String, PathBuf)> {
    if options.packs.is_empty() {
        return Vec::new();
    }
    let dir = &options.packs_dir;
    let origin = dir.display().to_string();
    if !dir.is_dir() {
        problems.error(&origin, "", "the packs folder does not exist, so no pack can be enabled");
        return Vec::new();
    }
    let available: Vec<(String, PathBuf)> = yaml_files_in(dir, problems)
        .into_iter()
        .filter_map(|p| Some((p.file_stem()?.to_str()?.to_owned(), p)))
        .collect();
    let mut chosen: Vec<(String, PathBuf)> = Vec::new();
    for name in &options.packs {
        if chosen.iter().any(|(n, _)| n == name) {
            continue;
        }
        match available.iter().find(|(n, _)| n == name) {
            Some(found) => chosen.push(found.clone()),
            None => {
                let names: Vec<&str> = available.iter().map(|(n, _)| n.as_str()).collect();
                let message = similar::did_you_mean(
                    &format!("unknown pack '{name}'"),
                    name,
                    names.iter().copied(),
                    || match names.is_empty() {
                        true => ": the folder holds no packs".to_owned(),
                        false => format!("; packs here: {}", names.join(", ")),
                    },
                );
                problems.error(&origin, "", message);
            }
        }
    }
    chosen
}

/// What reading the files gathers.
struct Reading<'a> {
    env: &'a Env,
    /// Shared by every file: the same schema is compiled once.
    schemas: SchemaCache,
    decls: Declarations,
    servers: Vec<McpServer>,
    problems: CatalogProblems,
}

fn read_file(path: &Path, source: &Source, reading: &mut Reading<'_>) {
    let Reading { env, schemas, decls, servers, problems } = reading;
    let layer = Layer::of(source);
    let origin: Arc<str> = path.display().to_string().into();
    let bytes = match read_bounded(path) {
        Ok(bytes) => bytes,
        Err(message) => {
            problems.error(&origin, "", message);
            return;
        }
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => {
            let at = err.utf8_error().valid_up_to();
            problems.error(&origin, "", format!("not valid UTF-8 (at byte {at}); catalogue files are UTF-8 text"));
            return;
        }
    };
    // Relative paths in the file resolve against its folder, made absolute
    // here once: a child runs in that folder, and a path resolved again
    // against its own working folder would point elsewhere.
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    let file = FileContext { origin: &origin, dir: &dir, source, env, schemas };
    let place = |path: String| Place { origin: origin.clone(), path };

    // Each tool is built as soon as it is read (so the file is never held
    // whole twice over); its problems are reported after the file's YAML
    // problems, as if every entry had been read first.
    let read = yaml::parse(&origin, &text, problems, |entry, built| {
        let aliases =
            entry.aliases.iter().enumerate().map(|(i, a)| (a.clone(), place(format!("{}.aliases[{i}]", entry.path))));
        let aliases: Vec<_> = aliases.collect();
        let (name, at) = (entry.name.clone(), place(entry.path.clone()));
        let tool = build::tool(entry, &file, built).map(Arc::new);
        ToolDecl { name, layer, place: at, tool, aliases }
    });
    if read.file.unreadable {
        // The YAML fault is the file's one problem.
        return;
    }
    decls.tools.extend(read.tools);
    problems.append(read.built);
    let raw = read.file;
    for set in raw.toolsets {
        if !build::is_valid_name(&set.name) {
            let message = format!("invalid toolset name '{}': {}", set.name, build::NAME_RULE);
            problems.error(&origin, set.path.clone(), message);
        }
        decls.toolsets.push(ToolsetDecl { name: set.name, members: set.members, layer, place: place(set.path) });
    }
    for alias in raw.aliases {
        if !build::is_valid_name(&alias.alias) {
            let message = format!("invalid alias '{}': {}", alias.alias, build::NAME_RULE);
            problems.error(&origin, alias.path.clone(), message);
        }
        decls.aliases.push(AliasDecl { alias: alias.alias, target: alias.target, layer, place: place(alias.path) });
    }
    let pins = raw.mcp_pins.as_deref().and_then(|written| match super::Pins::read(&file.dir.join(written)) {
        Ok(pins) => Some(Arc::new(pins)),
        Err(why) => {
            problems.error(&origin, "mcp_pins", why);
            None
        }
    });
    let built =
        raw.mcp_servers.into_iter().filter_map(|server| build::mcp_server(server, &file, pins.as_ref(), problems));
    servers.extend(built);
}

/// The largest catalogue file read: far beyond any real catalogue (10,000
/// tools take about 3 MB), small enough that a wrong path (a log, a disk
/// image) is refused rather than read.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The bytes of a regular file of at most [`MAX_FILE_BYTES`]. Anything else
/// (a FIFO, which would block the open; a device such as `/dev/zero`, which
/// never ends; a socket) is refused by its type before it is opened, symbolic
/// links followed (Kubernetes mounts ConfigMaps through them). The read is
/// bounded too, in case the file grows meanwhile.
pub fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    use std::{io::Read, os::unix::fs::FileTypeExt};
    let meta = fs::metadata(path).map_err(|err| format!("cannot read: {err}"))?;
    let kind = meta.file_type();
    let what = match () {
        _ if kind.is_file() => None,
        _ if kind.is_fifo() => Some("a named pipe (FIFO)"),
        _ if kind.is_char_device() || kind.is_block_device() => Some("a device"),
        _ if kind.is_socket() => Some("a socket"),
        _ => Some("not a regular file"),
    };
    if let Some(what) = what {
        return Err(format!("is {what}; only regular files are read"));
    }
    let too_large = || format!("is larger than {}, the most a file read here may hold", mib(MAX_FILE_BYTES));
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    let file = fs::File::open(path).map_err(|err| format!("cannot read: {err}"))?;
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|err| format!("cannot read: {err}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes / (1024 * 1024))
}

fn builtins(decls: &mut Declarations) {
    let origin: Arc<str> = BUILTIN_ORIGIN.into();
    let place = |path: String| Place { origin: origin.clone(), path };
    for builtin in BuiltinTool::ALL {
        let tool = Tool {
            name: builtin.name().to_owned(),
            description: builtin.description().to_owned(),
            parameters: Arc::new(builtin.schema()),
            binding: None,
            aliases: Vec::new(),
            source: Source::Builtin,
            idempotent: builtin.idempotent(),
            timeout: super::DEFAULT_TIMEOUT,
            max_concurrency: super::DEFAULT_MAX_CONCURRENCY,
            backend: Backend::Builtin(builtin),
            declared_at: place(format!("tools.{}", builtin.name())),
            presentation: Arc::new(builtin.presentation()),
        };
        let at = tool.declared_at.clone();
        decls.tools.push(ToolDecl {
            name: Some(tool.name.clone()),
            layer: Layer::BUILTIN,
            place: at,
            tool: Some(Arc::new(tool)),
            aliases: Vec::new(),
        });
    }
    for (alias, target) in BUILTIN_ALIASES {
        decls.aliases.push(AliasDecl {
            alias: (*alias).to_owned(),
            target: (*target).to_owned(),
            layer: Layer::BUILTIN,
            place: place(format!("aliases.{alias}")),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files of a registry of one file, `text`, written to `registry`.
    fn files(registry: &Path, text: &str) -> Files {
        fs::write(registry, text).unwrap();
        let options = LoadOptions { registry: vec![registry.to_owned()], ..LoadOptions::default() };
        read(&options, &Env::from_pairs([("HOME", "/nonexistent")]))
    }

    /// Assembling again (as when an MCP server's tools change) shares the
    /// declared tools instead of copying them; a tool given an alias from
    /// elsewhere gets a copy of its own, and the declaration stays as read,
    /// so the next assembly gives the same aliases, not twice as many.
    #[test]
    fn assemblies_share_the_declared_tools() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(
            &dir.path().join("tools.yaml"),
            "tools:\n  - name: alpha\n    description: A.\n    backend: {builtin: echo}\n    aliases: [a]\n  \
             - name: beta\n    description: B.\n    backend: {builtin: echo}\naliases:\n  b: beta\n",
        );
        let (first, second) = (assemble(&files, &[]).unwrap().catalog, assemble(&files, &[]).unwrap().catalog);
        let tool = |catalog: &Catalog, name: &str| {
            let Some(crate::catalog::Name::Tool(id)) = catalog.lookup(name) else { panic!("no tool {name}") };
            Arc::clone(&catalog.tools()[id.0 as usize])
        };
        assert!(Arc::ptr_eq(&tool(&first, "alpha"), &tool(&second, "alpha")));
        assert_eq!(tool(&second, "alpha").aliases, ["a"]);
        assert!(!Arc::ptr_eq(&tool(&first, "beta"), &tool(&second, "beta")));
        assert_eq!(tool(&first, "beta").aliases, ["b"]);
        assert_eq!(tool(&second, "beta").aliases, ["b"]);
    }

    /// An assembly in place of a catalogue with the same names (a reload
    /// that edits descriptions) shares its suggestion index; one that
    /// renames a tool builds its own, which suggests the new name.
    #[test]
    fn an_assembly_with_the_same_names_shares_the_suggestion_index() {
        let dir = tempfile::tempdir().unwrap();
        let registry = dir.path().join("tools.yaml");
        let files = |names: [&str; 2], description: &str| {
            let entry = |name: &str| {
                format!("  - name: {name}\n    description: {description}\n    backend: {{builtin: echo}}\n")
            };
            files(&registry, &format!("tools:\n{}{}", entry(names[0]), entry(names[1])))
        };
        let first = assemble(&files(["lookup_order", "refund_order"], "One."), &[]).unwrap().catalog;
        let edited =
            assemble_after(&files(["lookup_order", "refund_order"], "Two."), &[], Some(&first)).unwrap().catalog;
        assert!(Arc::ptr_eq(&first.index, &edited.index));
        let renamed =
            assemble_after(&files(["lookup_order", "cancel_order"], "Two."), &[], Some(&first)).unwrap().catalog;
        assert!(!Arc::ptr_eq(&first.index, &renamed.index));
        assert_eq!(renamed.suggest("cancel_ordr", 0.5, 1, |_| true), ["cancel_order"]);
        assert_eq!(edited.suggest("refund_ordr", 0.5, 1, |_| true), ["refund_order"]);
    }

    /// Until a snapshot's search index is made, its searches use the index
    /// of the snapshot it replaced, for the tools it holds unchanged (with
    /// this snapshot's ids); once made, every tool; a first snapshot reads
    /// its tools instead of waiting.
    #[test]
    fn searches_before_the_index_is_made_use_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let registry = dir.path().join("tools.yaml");
        let files = |tools: &[(&str, &str)]| {
            let entries: String = tools
                .iter()
                .map(|(name, description)| {
                    format!("  - name: {name}\n    description: {description}\n    backend: {{builtin: echo}}\n")
                })
                .collect();
            files(&registry, &format!("tools:\n{entries}"))
        };
        let first = Arc::new(
            assemble(&files(&[("refund_order", "Refund an order."), ("send_email", "Send an email.")]), &[])
                .unwrap()
                .catalog,
        );
        let named = |catalog: &Catalog, found: Vec<(u32, f32)>| -> Vec<String> {
            found.into_iter().map(|(id, _)| catalog.tools()[id as usize].name.clone()).collect()
        };
        assert!(!first.search_index_made());
        let all = |catalog: &Catalog| (0..catalog.tools().len() as u32).collect::<Vec<_>>();
        assert_eq!(named(&first, first.search("refund the order", &all(&first), 8)), ["refund_order"]);
        assert!(!first.search_index_made(), "reading the tools makes no index");
        first.index_in_background();
        while !first.search_index_made() {
            std::thread::yield_now();
        }
        let tools = [
            ("archive_order", "Archive an order."),
            ("refund_order", "Refund an order."),
            ("send_email", "Send an email message."),
        ];
        let second = Arc::new(assemble_after(&files(&tools), &[], Some(&first)).unwrap().catalog);
        let all = all(&second);
        assert_eq!(named(&second, second.search("order", &all, 8)), ["refund_order"], "archive_order is new");
        assert!(second.search("email", &all, 8).is_empty(), "send_email changed");
        second.index_in_background();
        while second.before.lock().unwrap().is_some() {
            std::thread::yield_now();
        }
        assert_eq!(named(&second, second.search("order", &all, 8)), ["archive_order", "refund_order"]);
        assert_eq!(named(&second, second.search("email", &all, 8)), ["send_email"]);
    }
}
