//! Raw shapes of a catalogue file: the only place that sees YAML.
//!
//! A file is read through the YAML crate entry by entry (see [`parse`]),
//! and each entry and each field is read on its own with its path, so that
//! one bad field never hides the next problem: every problem of every file
//! is reported in one run. An unknown key gets a did-you-mean. A broken
//! entry keeps its name, so duplicates are still found. What this module
//! returns is unchecked beyond its YAML shape; the rules of the catalogue
//! are applied in `build` and `merge`.

use std::time::Duration;

use serde::de::{
    self,
    value::{EnumAccessDeserializer, MapAccessDeserializer, SeqAccessDeserializer},
    Deserialize, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor,
};
use serde_yaml::{Mapping, Value};

use super::error::CatalogProblems;
use crate::similar;

pub(crate) const TOP_LEVEL_KEYS: &[&str] = &["tools", "toolsets", "aliases", "mcp_servers"];
pub(crate) const TOOL_KEYS: &[&str] = &[
    "name",
    "title",
    "description",
    "aliases",
    "parameters",
    "idempotent",
    "timeout",
    "max_concurrency",
    "backend",
    "bind",
    "annotations",
];
/// Keys every tool entry must have, and why, for the message.
const REQUIRED_TOOL_KEYS: &[(&str, &str)] =
    &[("name", ""), ("description", " (it is what the model reads)"), ("backend", " (one of: http, command, builtin)")];
pub(crate) const BACKEND_KEYS: &[&str] = &["http", "command", "builtin"];
pub(crate) const HTTP_KEYS: &[&str] = &["url", "headers", "follow_redirects", "use_env_proxy", "forward_user_token"];
pub(crate) const COMMAND_KEYS: &[&str] = &["argv", "cwd", "env"];
pub(crate) const MCP_SERVER_KEYS: &[&str] =
    &["command", "url", "env", "cwd", "headers", "prefix", "include", "exclude", "timeout", "startup_timeout"];

/// One catalogue file, as written.
#[derive(Debug, Default)]
pub(crate) struct RawFile {
    pub(crate) toolsets: Vec<RawToolset>,
    pub(crate) aliases: Vec<RawAlias>,
    pub(crate) mcp_servers: Vec<RawMcpServer>,
    /// Not valid YAML (reported): none of its tools is kept.
    pub(crate) unreadable: bool,
}

/// A `tools[i]` entry. `None` fields were absent or broken (the problem is
/// already reported); `broken` says whether anything was.
#[derive(Debug, Default)]
pub(crate) struct RawTool {
    /// `tools[3] (reschedule_delivery)`
    pub(crate) path: String,
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) aliases: Vec<String>,
    pub(crate) parameters: Option<serde_json::Value>,
    pub(crate) idempotent: Option<bool>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_concurrency: Option<u32>,
    pub(crate) backend: Option<RawBackend>,
    /// `bind: {parameter: user | principal}`.
    pub(crate) bind: Vec<(String, String)>,
    /// `title`, shown to MCP clients.
    pub(crate) title: Option<String>,
    /// `annotations`: the four MCP hints.
    pub(crate) annotations: Option<RawAnnotations>,
    pub(crate) broken: bool,
}

/// A tool's `annotations`: hints passed to MCP clients, independent of the
/// tool's own `idempotent` setting.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawAnnotations {
    pub(crate) read_only_hint: Option<bool>,
    pub(crate) destructive_hint: Option<bool>,
    pub(crate) idempotent_hint: Option<bool>,
    pub(crate) open_world_hint: Option<bool>,
}

#[derive(Debug)]
pub(crate) enum RawBackend {
    Http {
        url: String,
        headers: Vec<(String, String)>,
        follow_redirects: bool,
        use_env_proxy: bool,
        forward_user_token: bool,
    },
    Command {
        argv: Vec<String>,
        cwd: Option<String>,
        env: Vec<(String, String)>,
    },
    Builtin(String),
}

#[derive(Debug)]
pub(crate) struct RawToolset {
    pub(crate) path: String,
    pub(crate) name: String,
    pub(crate) members: Vec<String>,
}

#[derive(Debug)]
pub(crate) struct RawAlias {
    pub(crate) path: String,
    pub(crate) alias: String,
    pub(crate) target: String,
}

/// An `mcp_servers.<name>` entry; `None` when broken (already reported).
#[derive(Debug)]
pub(crate) struct RawMcpServer {
    pub(crate) path: String,
    pub(crate) name: String,
    pub(crate) settings: Option<RawMcpSettings>,
}

#[derive(Debug)]
pub(crate) struct RawMcpSettings {
    pub(crate) transport: RawMcpTransport,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) cwd: Option<String>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) prefix: Option<String>,
    pub(crate) include: Option<Vec<String>>,
    pub(crate) exclude: Vec<String>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) startup_timeout: Option<Duration>,
}

#[derive(Debug)]
pub(crate) enum RawMcpTransport {
    /// `command: [argv…]`: a child process speaking MCP on stdio.
    Stdio(Vec<String>),
    /// `url: …`: streamable HTTP.
    Http(String),
}

/// What one file's text was read into: the file, and its tool entries as
/// `build` made them, in the file's order, with the problems `build` found.
pub(crate) struct Read<T> {
    pub(crate) file: RawFile,
    pub(crate) tools: Vec<T>,
    /// Reported after the file's YAML problems, as if every entry had been
    /// read before the first was built.
    pub(crate) built: CatalogProblems,
}

/// Parses one file's text. Problems go to `problems` under `origin`; each
/// tool entry is handed to `build` as soon as it is read.
///
/// The file is read as it streams out of the YAML parser: each tool entry
/// is made a YAML value of its own, built and freed, so the whole file is
/// never one value tree (at 10,000 tools that tree was the largest thing a
/// load held). Everything else is read whole through the same parser, so a
/// file is accepted or refused exactly as it was when read as one tree:
/// duplicate keys, tags, anchors and scalars mean what they meant.
///
/// Where the file's layout allows (see [`super::pieces`]), each entry of
/// `tools` is parsed on its own, without the events of the whole document,
/// and the entries are read and built by two threads, each half of the list
/// (on two cores, reading and building 10,000 entries takes about half as
/// long). When a piece does not parse as it must, the file is parsed as one
/// document on one thread, as always.
///
/// A file that is not valid YAML adds one problem and nothing else: no tool
/// of it is kept, and `unreadable` says so.
pub(crate) fn parse<T: Send>(
    origin: &str,
    text: &str,
    problems: &mut CatalogProblems,
    build: impl Fn(RawTool, &mut CatalogProblems) -> T + Sync,
) -> Read<T> {
    parse_with(origin, text, problems, build, Cut::WherePossible)
}

/// Whether [`parse`] may cut a file into pieces (the tests compare both).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cut {
    WherePossible,
    #[cfg(test)]
    Never,
}

fn parse_with<T: Send>(
    origin: &str,
    text: &str,
    problems: &mut CatalogProblems,
    build: impl Fn(RawTool, &mut CatalogProblems) -> T + Sync,
    cut: Cut,
) -> Read<T> {
    let mut reader = Reader { origin, problems };
    let nothing = |file| Read { file, tools: Vec::new(), built: CatalogProblems::default() };
    if let Some(line) = deeper_than(text, MAX_NESTING) {
        let message = format!("nested deeper than {MAX_NESTING} levels of brackets; a catalogue nests far less");
        reader.problems.error(origin, format!("line {line}"), message);
        return nothing(RawFile::default());
    }
    let before = reader.problems.len();
    let mut top = Mapping::new();
    let pieces = super::pieces::pieces(text).filter(|_| cut == Cut::WherePossible);
    let in_pieces = pieces.map(|pieces| read_in_pieces(&pieces, &mut reader, &build, &mut top));
    let (read, tools, built) = match in_pieces {
        Some(Some((tools, built))) => (Ok(Shape::Wanted(())), tools, built),
        tried => {
            if tried.is_some() {
                // Read again, whole: what the pieces added is withdrawn.
                reader.problems.truncate(before);
                top.clear();
            }
            let (mut tools, mut built) = (Vec::new(), CatalogProblems::default());
            let mut each = |entry| tools.push(build(entry, &mut built));
            let document = TopLevel { reader: &mut reader, each: &mut each, top: &mut top, in_pieces: false };
            let read = serde_yaml::Deserializer::from_str(text).deserialize_any(Stream(document));
            (read, tools, built)
        }
    };
    let shape = match read {
        Ok(shape) => shape,
        Err(err) => {
            reader.problems.truncate(before);
            let path = err.location().map(|l| format!("line {} column {}", l.line(), l.column())).unwrap_or_default();
            reader.problems.error(origin, path, format!("invalid YAML: {}", strip_location(&err.to_string())));
            return nothing(RawFile { unreadable: true, ..RawFile::default() });
        }
    };
    match shape {
        Shape::Wanted(()) => {}
        Shape::Other(Value::Null) => {
            reader.problems.error(
                origin,
                "",
                "the file is empty; a catalogue file holds tools, toolsets, aliases or mcp_servers",
            );
            return nothing(RawFile::default());
        }
        Shape::Other(other) => {
            reader.problems.error(origin, "", format!("expected a mapping at the top level, found {}", kind(&other)));
            return nothing(RawFile::default());
        }
    }
    let file = RawFile {
        toolsets: reader.toolsets(top.get("toolsets")),
        aliases: reader.aliases(top.get("aliases")),
        mcp_servers: reader.mcp_servers(top.get("mcp_servers")),
        unreadable: false,
    };
    Read { file, tools, built }
}

/// Reads the file from its pieces: the head, the entries (the second half
/// on the helper thread, [`helper`]), the tail. `None` when a piece does not parse as
/// what it must be; the caller then parses the whole file (and withdraws
/// what this read).
fn read_in_pieces<T: Send>(
    pieces: &super::pieces::Pieces<'_>,
    reader: &mut Reader<'_>,
    build: &(impl Fn(RawTool, &mut CatalogProblems) -> T + Sync),
    top: &mut Mapping,
) -> Option<(Vec<T>, CatalogProblems)> {
    let mut unused = |_| unreachable!("in pieces, the head and tail hold no entries");
    let head = TopLevel { reader: &mut *reader, each: &mut unused, top: &mut *top, in_pieces: true };
    let Shape::Wanted(()) = serde_yaml::Deserializer::from_str(pieces.head).deserialize_any(Stream(head)).ok()? else {
        return None;
    };
    // `tools:` was the head's last key, and empty: the entries are its value.
    let ends_in_tools = top.iter().last().is_some_and(|(key, value)| is_tools(key) && value.is_null());
    if !ends_in_tools {
        return None;
    }
    let origin = reader.origin;
    let half = pieces.entries.len().div_ceil(2);
    let (first, second) = pieces.entries.split_at(half);
    let helper = if second.is_empty() { None } else { helper() };
    let (first, second) = match helper {
        Some(helper) => {
            let mut second_read = None;
            let first = helper.in_place_scope(|scope| {
                scope.spawn(|_| second_read = Some(read_entries(origin, half, second, build)));
                read_entries(origin, 0, first, build)
            });
            (first, second_read.expect("the helper read the second half"))
        }
        // One entry, or no thread to be had (a process or container limit):
        // this thread reads both halves.
        None => (read_entries(origin, 0, first, build), read_entries(origin, half, second, build)),
    };
    let (mut tools, mut built) = (Vec::new(), CatalogProblems::default());
    for (problems, part, part_built) in [first?, second?] {
        reader.problems.append(problems);
        tools.extend(part);
        built.append(part_built);
    }
    if !pieces.tail.is_empty() {
        // Keys after the list.
        let tail = TopLevel { reader, each: &mut unused, top, in_pieces: true };
        let Shape::Wanted(()) = serde_yaml::Deserializer::from_str(pieces.tail).deserialize_any(Stream(tail)).ok()?
        else {
            return None;
        };
    }
    Some((tools, built))
}

/// The thread that reads the second half of a file's entries: one for the
/// process, like the thread of catalogue loads (`live::on_loader`), so that
/// each load reuses the allocator arena the last one freed (a new thread a
/// load left about 7 MB more resident at every reload of 10,000 tools).
/// `None` when no thread can be had.
fn helper() -> Option<&'static rayon::ThreadPool> {
    static HELPER: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    HELPER
        .get_or_init(|| {
            let named = |_| "toolgate-catalogue-2".to_owned();
            rayon::ThreadPoolBuilder::new().num_threads(1).thread_name(named).build().ok()
        })
        .as_ref()
}

/// Reads and builds `entries`, the first of which is entry `first` of the
/// file: the entries' YAML problems, what `build` made of them and its
/// problems; `None` when an entry is not a one-item list on its own.
fn read_entries<T>(
    origin: &str,
    first: usize,
    entries: &[&str],
    build: &impl Fn(RawTool, &mut CatalogProblems) -> T,
) -> Option<(CatalogProblems, Vec<T>, CatalogProblems)> {
    let (mut problems, mut tools, mut built) = (CatalogProblems::default(), Vec::new(), CatalogProblems::default());
    let mut reader = Reader { origin, problems: &mut problems };
    let mut each = |entry| tools.push(build(entry, &mut built));
    for (at, entry) in entries.iter().enumerate() {
        let list = ToolList { reader: &mut reader, each: &mut each, first: first + at };
        let Shape::Wanted(1) = serde_yaml::Deserializer::from_str(entry).deserialize_any(Stream(list)).ok()? else {
            return None;
        };
    }
    Some((problems, tools, built))
}

/// A YAML value read through serde's visitor: the one shape `W` wants is
/// handed to it as the parser streams it; any other shape is read whole into
/// a value, as a value tree would hold it.
struct Stream<W>(W);

enum Shape<T> {
    Wanted(T),
    Other(Value),
}

/// What a [`Stream`] does with a mapping or a list; by default, reads it whole.
trait Wants<'de>: Sized {
    type Output;

    fn map<A: MapAccess<'de>>(self, map: A) -> Result<Shape<Self::Output>, A::Error> {
        Ok(Shape::Other(Value::Mapping(Mapping::deserialize(MapAccessDeserializer::new(map))?)))
    }

    fn seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Shape<Self::Output>, A::Error> {
        Ok(Shape::Other(Value::Sequence(Deserialize::deserialize(SeqAccessDeserializer::new(seq))?)))
    }
}

impl<'de, W: Wants<'de>> Visitor<'de> for Stream<W> {
    type Value = Shape<W::Output>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(Shape::Other(Value::Bool(b)))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Self::Value, E> {
        Ok(Shape::Other(Value::Number(i.into())))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Self::Value, E> {
        Ok(Shape::Other(Value::Number(u.into())))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Self::Value, E> {
        Ok(Shape::Other(Value::Number(f.into())))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Shape::Other(Value::String(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(Shape::Other(Value::String(s)))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Shape::Other(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Shape::Other(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.map(map)
    }

    /// A tagged value (`!tag value`).
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        Ok(Shape::Other(Value::deserialize(EnumAccessDeserializer::new(data))?))
    }
}

/// The top-level mapping: `tools` streamed entry by entry, every other key
/// kept (with `tools` as a placeholder, so that a second `tools` is the
/// duplicate key it always was). Keys are checked as they are read.
struct TopLevel<'r, 'a, F> {
    reader: &'r mut Reader<'a>,
    each: &'r mut F,
    top: &'r mut Mapping,
    /// Reading the head or tail of a file cut into pieces: `tools` must be
    /// empty here (its entries are pieces of their own).
    in_pieces: bool,
}

impl<'de, F: FnMut(RawTool)> Wants<'de> for TopLevel<'_, '_, F> {
    type Output = ();

    fn map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape<()>, A::Error> {
        while let Some(key) = map.next_key::<Value>()? {
            if self.top.contains_key(&key) {
                return Err(de::Error::custom(duplicate_key(&key)));
            }
            self.reader.check_key(&key, "", TOP_LEVEL_KEYS);
            let value = match is_tools(&key) {
                // Its entries are pieces of their own.
                true if self.in_pieces => match map.next_value::<Value>()? {
                    Value::Null => Value::Null,
                    _ => return Err(de::Error::custom("not a file in pieces")),
                },
                true => {
                    let tools = ToolList { reader: &mut *self.reader, each: &mut *self.each, first: 0 };
                    if let Shape::Other(other) = map.next_value_seed(tools)? {
                        // Absent, null, or not a list (reported).
                        self.reader.sequence(Some(&other), "tools");
                    }
                    Value::Null
                }
                false => map.next_value()?,
            };
            self.top.insert(key, value);
        }
        Ok(Shape::Wanted(()))
    }
}

/// The top-level key `tools`, written plainly (a tagged one is a key of its
/// own).
fn is_tools(key: &Value) -> bool {
    matches!(key, Value::String(k) if k == "tools")
}

/// `tools`: each entry read, handed on and dropped before the next.
struct ToolList<'r, 'a, F> {
    reader: &'r mut Reader<'a>,
    each: &'r mut F,
    /// The index of the first entry read here (a file in pieces reads one
    /// entry at a time).
    first: usize,
}

impl<'de, F: FnMut(RawTool)> DeserializeSeed<'de> for ToolList<'_, '_, F> {
    type Value = Shape<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Shape<usize>, D::Error> {
        deserializer.deserialize_any(Stream(self))
    }
}

impl<'de, F: FnMut(RawTool)> Wants<'de> for ToolList<'_, '_, F> {
    /// How many entries were read.
    type Output = usize;

    fn seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape<usize>, A::Error> {
        let mut read = 0;
        while let Some(item) = seq.next_element::<Value>()? {
            (self.each)(self.reader.tool(self.first + read, &item));
            read += 1;
        }
        Ok(Shape::Wanted(read))
    }
}

/// The YAML crate's own words for a key met twice in one mapping.
fn duplicate_key(key: &Value) -> String {
    match key {
        Value::Null => "duplicate entry with null key".to_owned(),
        Value::Bool(b) => format!("duplicate entry with key `{b}`"),
        Value::Number(n) => format!("duplicate entry with key {n}"),
        Value::String(s) => format!("duplicate entry with key {s:?}"),
        _ => "duplicate entry in YAML map".to_owned(),
    }
}

/// The deepest nesting of flow collections (`[`, `{`) a file may have: what
/// the YAML crate accepts anyway (it refuses deeper values), checked before
/// it reads the file, since its scanner takes time quadratic in the depth of
/// flow collections (100,000 brackets took 36 s of CPU).
pub(crate) const MAX_NESTING: usize = 128;

/// The line at which flow collections nest deeper than `max`, by a flat scan:
/// quoted scalars and comments are skipped, and a bracket opens a level only
/// where a flow collection can start (after `:`, `-`, `?`, `,`, another
/// bracket, or at the start of a line), so brackets inside plain text do not
/// count. A closing bracket always closes one.
fn deeper_than(text: &str, max: usize) -> Option<usize> {
    let (mut depth, mut line) = (0usize, 1usize);
    let mut quote: Option<u8> = None;
    // The last byte that was not a space, on this line (None: none yet).
    let mut last: Option<u8> = None;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' {
            line += 1;
            last = None;
            i += 1;
            continue;
        }
        match quote {
            Some(b'"') if b == b'\\' => i += 1,
            Some(b'\'') if b == b'\'' && bytes.get(i + 1) == Some(&b'\'') => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None => match b {
                b'#' if last.is_none() || matches!(bytes.get(i.wrapping_sub(1)), Some(b' ' | b'\t')) => {
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                b'"' | b'\'' if matches!(last, None | Some(b':' | b'-' | b'?' | b',' | b'[' | b'{')) => quote = Some(b),
                b'[' | b'{' if matches!(last, None | Some(b':' | b'-' | b'?' | b',' | b'[' | b'{')) => {
                    depth += 1;
                    if depth > max {
                        return Some(line);
                    }
                }
                // Text: the brackets that follow it are text too.
                b'[' | b'{' => {
                    last = Some(b'a');
                    i += 1;
                    continue;
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        if b != b' ' && b != b'\t' {
            last = Some(b);
        }
        i += 1;
    }
    None
}

struct Reader<'a> {
    origin: &'a str,
    problems: &'a mut CatalogProblems,
}

impl Reader<'_> {
    fn error(&mut self, path: &str, message: impl Into<String>) {
        self.problems.error(self.origin, path, message);
    }

    fn tool(&mut self, index: usize, item: &Value) -> RawTool {
        let Value::Mapping(map) = item else {
            let path = format!("tools[{index}]");
            self.error(&path, format!("expected a tool (a mapping), found {}", kind(item)));
            return RawTool { path, broken: true, ..RawTool::default() };
        };
        let bare = format!("tools[{index}]");
        let before = self.problems.len();
        let name = self.field::<String>(map, &bare, "name").unwrap_or(None);
        let path = match &name {
            Some(name) => format!("{bare} ({name})"),
            None => bare,
        };
        let mut tool = RawTool { path, name, ..RawTool::default() };
        self.check_keys(map, &tool.path, TOOL_KEYS);
        for (key, why) in REQUIRED_TOOL_KEYS {
            if !map.contains_key(*key) {
                self.error(&tool.path, format!("missing field '{key}'{why}"));
            }
        }
        tool.description = self.field(map, &tool.path, "description").unwrap_or(None);
        tool.aliases = self.field(map, &tool.path, "aliases").unwrap_or(None).unwrap_or_default();
        tool.idempotent = self.field(map, &tool.path, "idempotent").unwrap_or(None);
        tool.max_concurrency = self.field(map, &tool.path, "max_concurrency").unwrap_or(None);
        tool.timeout = self.duration(map, &tool.path, "timeout");
        tool.parameters = self.json(map, &tool.path, "parameters");
        tool.backend = self.backend(map.get("backend"), &join(&tool.path, "backend"));
        tool.bind = self.string_map(map, &tool.path, "bind").unwrap_or_default();
        tool.title = self.field(map, &tool.path, "title").unwrap_or(None);
        tool.annotations = self.field(map, &tool.path, "annotations").unwrap_or(None);
        tool.broken = self.problems.len() != before;
        tool
    }

    fn backend(&mut self, value: Option<&Value>, path: &str) -> Option<RawBackend> {
        let value = value?;
        let Value::Mapping(map) = value else {
            self.error(path, format!("expected a mapping with one of: http, command, builtin; found {}", kind(value)));
            return None;
        };
        self.check_keys(map, path, BACKEND_KEYS);
        let present: Vec<&str> = BACKEND_KEYS.iter().copied().filter(|k| map.contains_key(*k)).collect();
        match present.as_slice() {
            [] => {
                self.error(path, "a backend needs one of: http, command, builtin");
                None
            }
            ["http"] => self.http(&map["http"], &join(path, "http")),
            ["command"] => self.command(&map["command"], &join(path, "command")),
            ["builtin"] => self.field::<String>(map, path, "builtin").ok().flatten().map(RawBackend::Builtin),
            several => {
                self.error(path, format!("a backend has exactly one kind; this one has {}", several.join(" and ")));
                None
            }
        }
    }

    fn http(&mut self, value: &Value, path: &str) -> Option<RawBackend> {
        let map = self.mapping(value, path)?;
        self.check_keys(map, path, HTTP_KEYS);
        let url = self.required::<String>(map, path, "url");
        let headers = self.string_map(map, path, "headers");
        let follow_redirects = self.field(map, path, "follow_redirects").unwrap_or(None).unwrap_or(false);
        let use_env_proxy = self.field(map, path, "use_env_proxy").unwrap_or(None).unwrap_or(false);
        let forward_user_token = self.field(map, path, "forward_user_token").unwrap_or(None).unwrap_or(false);
        Some(RawBackend::Http { url: url?, headers: headers?, follow_redirects, use_env_proxy, forward_user_token })
    }

    fn command(&mut self, value: &Value, path: &str) -> Option<RawBackend> {
        let map = self.mapping(value, path)?;
        self.check_keys(map, path, COMMAND_KEYS);
        let argv = self.required::<Vec<String>>(map, path, "argv");
        let cwd = self.field::<String>(map, path, "cwd");
        let env = self.string_map(map, path, "env");
        Some(RawBackend::Command { argv: argv?, cwd: cwd.ok()?, env: env? })
    }

    fn toolsets(&mut self, value: Option<&Value>) -> Vec<RawToolset> {
        let Some(map) = value.and_then(|v| self.mapping(v, "toolsets")) else { return Vec::new() };
        let mut toolsets = Vec::new();
        for (key, members) in map {
            let Some(name) = self.key(key, "toolsets") else { continue };
            let path = format!("toolsets.{name}");
            if let Ok(members) = serde_yaml::from_value::<Vec<String>>(members.clone()) {
                toolsets.push(RawToolset { path, name, members });
            } else {
                self.error(&path, format!("expected a list of tool names, found {}", kind(members)));
            }
        }
        toolsets
    }

    fn aliases(&mut self, value: Option<&Value>) -> Vec<RawAlias> {
        let Some(map) = value.and_then(|v| self.mapping(v, "aliases")) else { return Vec::new() };
        let mut aliases = Vec::new();
        for (key, target) in map {
            let Some(alias) = self.key(key, "aliases") else { continue };
            let path = format!("aliases.{alias}");
            match target {
                Value::String(target) => aliases.push(RawAlias { path, alias, target: target.clone() }),
                other => self.error(&path, format!("expected the name of a tool, found {}", kind(other))),
            }
        }
        aliases
    }

    fn mcp_servers(&mut self, value: Option<&Value>) -> Vec<RawMcpServer> {
        let Some(map) = value.and_then(|v| self.mapping(v, "mcp_servers")) else { return Vec::new() };
        let mut servers = Vec::new();
        for (key, server) in map {
            let Some(name) = self.key(key, "mcp_servers") else { continue };
            let path = format!("mcp_servers.{name}");
            let settings = self.mcp_settings(server, &path);
            servers.push(RawMcpServer { path, name, settings });
        }
        servers
    }

    fn mcp_settings(&mut self, value: &Value, path: &str) -> Option<RawMcpSettings> {
        let Some(map) = self.mapping(value, path) else {
            self.error(path, "an MCP server needs either command (stdio) or url (streamable HTTP)");
            return None;
        };
        let before = self.problems.len();
        self.check_keys(map, path, MCP_SERVER_KEYS);
        let transport = match (map.contains_key("command"), map.contains_key("url")) {
            (true, false) => match self.required::<Vec<String>>(map, path, "command") {
                Some(argv) if !argv.is_empty() => Some(RawMcpTransport::Stdio(argv)),
                Some(_) => {
                    self.error(&join(path, "command"), "must name a program to run");
                    None
                }
                None => None,
            },
            (false, true) => self.required::<String>(map, path, "url").map(RawMcpTransport::Http),
            (true, true) => {
                self.error(path, "an MCP server has either command (stdio) or url (streamable HTTP), not both");
                None
            }
            (false, false) => {
                self.error(path, "an MCP server needs either command (stdio) or url (streamable HTTP)");
                None
            }
        };
        let settings = RawMcpSettings {
            transport: transport?,
            env: self.string_map(map, path, "env").unwrap_or_default(),
            cwd: self.field(map, path, "cwd").unwrap_or(None),
            headers: self.string_map(map, path, "headers").unwrap_or_default(),
            prefix: self.field(map, path, "prefix").unwrap_or(None),
            include: self.field(map, path, "include").unwrap_or(None),
            exclude: self.field(map, path, "exclude").unwrap_or(None).unwrap_or_default(),
            timeout: self.duration(map, path, "timeout"),
            startup_timeout: self.duration(map, path, "startup_timeout"),
        };
        (self.problems.len() == before).then_some(settings)
    }

    // --- field helpers -------------------------------------------------

    /// Reads `key` as `T`; `Ok(None)` when absent, `Err` (reported) when malformed.
    fn field<T: DeserializeOwned>(&mut self, map: &Mapping, path: &str, key: &str) -> Result<Option<T>, ()> {
        let Some(value) = map.get(key) else { return Ok(None) };
        // Read in place: no copy of the value first.
        match T::deserialize(value) {
            Ok(v) => Ok(Some(v)),
            Err(err) => {
                self.error(&join(path, key), strip_location(&err.to_string()));
                Err(())
            }
        }
    }

    fn required<T: DeserializeOwned>(&mut self, map: &Mapping, path: &str, key: &str) -> Option<T> {
        match self.field::<T>(map, path, key) {
            Ok(Some(v)) => Some(v),
            Ok(None) => {
                self.error(path, format!("missing field '{key}'"));
                None
            }
            Err(()) => None,
        }
    }

    /// A mapping of strings to strings, in written order; `Some(empty)` when absent.
    fn string_map(&mut self, map: &Mapping, path: &str, key: &str) -> Option<Vec<(String, String)>> {
        let Some(value) = map.get(key) else { return Some(Vec::new()) };
        let path = join(path, key);
        let inner = self.mapping(value, &path)?;
        let mut pairs = Vec::new();
        let mut ok = true;
        for (k, v) in inner {
            let Some(k) = self.key(k, &path) else {
                ok = false;
                continue;
            };
            match v {
                Value::String(s) => pairs.push((k, s.clone())),
                other => {
                    ok = false;
                    self.error(&join(&path, &k), format!("expected a string, found {}", kind(other)));
                }
            }
        }
        ok.then_some(pairs)
    }

    fn duration(&mut self, map: &Mapping, path: &str, key: &str) -> Option<Duration> {
        let text: String = self.field(map, path, key).ok()??;
        match humantime::parse_duration(text.trim()) {
            Ok(d) if d.is_zero() => {
                self.error(&join(path, key), "must be longer than zero");
                None
            }
            Ok(d) => Some(d),
            Err(err) => {
                self.error(&join(path, key), format!("invalid duration '{text}' ({err}); write e.g. 500ms, 5s or 1m"));
                None
            }
        }
    }

    /// A YAML value as JSON (key order kept).
    fn json(&mut self, map: &Mapping, path: &str, key: &str) -> Option<serde_json::Value> {
        let value = map.get(key)?;
        match serde_json::to_value(value) {
            Ok(json) => Some(json),
            Err(err) => {
                self.error(&join(path, key), format!("cannot be expressed as JSON: {err}"));
                None
            }
        }
    }

    fn sequence<'v>(&mut self, value: Option<&'v Value>, path: &str) -> Option<&'v Vec<Value>> {
        match value? {
            Value::Sequence(items) => Some(items),
            Value::Null => None,
            other => {
                self.error(path, format!("expected a list, found {}", kind(other)));
                None
            }
        }
    }

    fn mapping<'v>(&mut self, value: &'v Value, path: &str) -> Option<&'v Mapping> {
        match value {
            Value::Mapping(map) => Some(map),
            Value::Null => None,
            other => {
                self.error(path, format!("expected a mapping, found {}", kind(other)));
                None
            }
        }
    }

    fn key(&mut self, key: &Value, path: &str) -> Option<String> {
        match key {
            Value::String(s) => Some(s.clone()),
            other => {
                self.error(path, format!("keys must be strings, found {}", kind(other)));
                None
            }
        }
    }

    /// Reports every key of `map` that is not in `allowed`, with a did-you-mean.
    fn check_keys(&mut self, map: &Mapping, path: &str, allowed: &[&str]) {
        for key in map.keys() {
            self.check_key(key, path, allowed);
        }
    }

    /// Reports `key` if it is not in `allowed`, with a did-you-mean.
    fn check_key(&mut self, key: &Value, path: &str, allowed: &[&str]) {
        let Some(key) = self.key(key, path) else { return };
        if !allowed.contains(&key.as_str()) {
            let message =
                similar::did_you_mean(&format!("unknown field '{key}'"), &key, allowed.iter().copied(), || {
                    format!("; expected one of: {}", allowed.join(", "))
                });
            self.error(path, message);
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// serde_yaml appends "at line L column C"; the location is reported apart.
fn strip_location(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(at) => &message[..at],
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{deeper_than, parse_with, CatalogProblems, Cut};

    /// What a file reads as: its entries, the rest of the file, its
    /// problems (the entries' own after the file's).
    fn read(text: &str, cut: Cut) -> String {
        let mut problems = CatalogProblems::default();
        let read = parse_with(
            "t.yaml",
            text,
            &mut problems,
            |entry, built| {
                built.warning("t.yaml", format!("built {}", entry.path), "");
                entry
            },
            cut,
        );
        format!("{:#?}\n{:#?}\n{problems:#?}\n{:#?}", read.tools, read.file, read.built)
    }

    /// A file cut into its entries reads exactly as the same file read
    /// whole: cut where the layout allows, read whole again where a piece
    /// does not parse as it must (quoted text or a flow collection going on
    /// across an entry's `- `, an alias of an anchor in another entry, a key
    /// met twice, a file that stops being YAML).
    #[test]
    fn a_file_read_in_pieces_reads_as_it_does_whole() {
        let entry = "  - name: a\n    description: x\n    backend: {builtin: echo}\n";
        let texts = [
            format!("tools:\n{entry}  - name: b\n    description: |+\n      kept\n\n# a comment\n  -\n    name: c\ntoolsets:\n  - name: s\n    tools: [a, b]\n"),
            "aliases: {x: a}\ntools:\n- name: a\n- plain scalar\n  continued\n- - nested\n  - list\ntoolsets: []\n".to_owned(),
            format!("tools:\n  - name: a\n    description: \"first line\n  - name: not_an_entry\n    still text\"\n{entry}"),
            format!("tools:\n  - name: a\n    parameters: {{type: object,\n  - name: b}}\n{entry}"),
            "tools:\n  - name: a\n    description: &d shared\n  - name: b\n    description: *d\n".to_owned(),
            format!("toolsets: &t []\ntools:\n{entry}aliases: *t\n"),
            format!("toolsets: []\ntools:\n{entry}toolsets: []\n"),
            format!("tools:\n{entry}aliases: {{}}\ntools:\n{entry}"),
            "toolsets: \"abc\ntools:\n  - name: x\n\"\n".to_owned(),
            format!("tools:\n{entry}  - name: [unclosed\n{entry}"),
            format!("tools:\n{entry}  - name: b\n   wrong: indentation\n"),
            format!("tools:\n  - !!map\n    name: a\n    description: !!str 12\n{entry}"),
            format!("tools:\n{entry}# nothing after\n"),
            "tools:\n    - name: a\n  - name: b\n".to_owned(),
            format!("tools:\n{entry}  kend: {{builtin: echo}}\n"),
            format!("tools:\n{entry}    - name: b\n"),
            format!("tools:\n{entry}null\n"),
            format!("tools:\n{entry}[a, b]\n"),
        ];
        let shipped = [include_str!("../../catalog/registry.yaml"), include_str!("../../docs/examples/broken.yaml")];
        for text in texts.iter().map(String::as_str).chain(shipped) {
            assert_eq!(read(text, Cut::WherePossible), read(text, Cut::Never), "{text}");
        }
        // The first is read in pieces, on two threads; the third is cut,
        // then read whole (its first entry is built twice).
        let threads_and_builds = |text: &str| {
            let (threads, builds) = (std::sync::Mutex::new(std::collections::HashSet::new()), AtomicUsize::new(0));
            let mut problems = CatalogProblems::default();
            let build = |_, _: &mut CatalogProblems| {
                threads.lock().unwrap().insert(std::thread::current().id());
                builds.fetch_add(1, Ordering::Relaxed);
            };
            parse_with("t.yaml", text, &mut problems, build, Cut::WherePossible);
            (threads.into_inner().unwrap().len(), builds.into_inner())
        };
        assert_eq!(threads_and_builds(&texts[0]), (2, 3));
        assert!(super::super::pieces::pieces(&texts[2]).is_some());
        assert_eq!(threads_and_builds(&texts[2]).1, 2 + 1);
    }

    #[test]
    fn nesting_counts_flow_collections_only() {
        assert_eq!(deeper_than("a: {b: [1, {c: [2]}]}\n", 3), Some(1));
        assert_eq!(deeper_than("a: {b: [1, {c: [2]}]}\n", 4), None);
        assert_eq!(deeper_than("a:\n  - [[[x]]]\n", 2), Some(2));
        // Text, quotes and comments: no level.
        assert_eq!(deeper_than("a: x[[[[\nb: \"[[[[\"\nc: '[[''[['\n# [[[[\n", 1), None);
        // Closing brackets in text never go below zero.
        assert_eq!(deeper_than("a: ]]]]\nb: [[x]]\n", 1), Some(2));
    }

    /// Every key the catalogue reader accepts is in the configuration
    /// reference, under the path a user writes.
    #[test]
    fn the_configuration_reference_lists_every_catalogue_key() {
        let doc = include_str!("../../docs/configuration.md");
        let annotations = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];
        let keys = super::TOP_LEVEL_KEYS
            .iter()
            .map(|k| k.to_string())
            .chain(super::TOOL_KEYS.iter().map(|k| format!("tools[].{k}")))
            .chain(super::BACKEND_KEYS.iter().map(|k| format!("tools[].backend.{k}")))
            .chain(super::HTTP_KEYS.iter().map(|k| format!("tools[].backend.http.{k}")))
            .chain(super::COMMAND_KEYS.iter().map(|k| format!("tools[].backend.command.{k}")))
            .chain(super::MCP_SERVER_KEYS.iter().map(|k| format!("mcp_servers.*.{k}")))
            .chain(annotations.iter().map(|k| format!("tools[].annotations.{k}")));
        let missing: Vec<String> = keys.filter(|key| !doc.contains(&format!("`{key}`"))).collect();
        assert!(missing.is_empty(), "docs/configuration.md does not list {missing:?}");
        // The annotations listed are the ones the reader knows.
        for hint in annotations {
            let yaml = format!("{hint}: true");
            assert!(serde_yaml::from_str::<super::RawAnnotations>(&yaml).is_ok(), "{hint}");
        }
    }
}
