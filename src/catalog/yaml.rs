//! A catalogue file's text, streamed out of the YAML parser (the only
//! place that parses YAML), or the JSON parser for a file written as JSON:
//! every problem of every file reported in one run, each tool entry read
//! and built as it streams (see [`parse`]), in pieces on two threads where
//! the layout allows ([`super::pieces`]), and nesting bounded before the
//! parser sees it.

use serde::de::{
    self,
    value::{EnumAccessDeserializer, MapAccessDeserializer, SeqAccessDeserializer},
    Deserialize, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor,
};
use serde_yaml::{Mapping, Value};

use super::error::CatalogProblems;
use super::raw::{kind, strip_location, RawFile, RawTool, Reader, TOP_LEVEL_KEYS};

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
/// A file written as JSON is read by the JSON parser, which streams (see
/// [`read_as_json`]). Where a YAML file's layout allows (see
/// [`super::pieces`]), each entry of
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

/// Whether [`parse`] may read a file the quick ways, in pieces or as JSON
/// (the tests compare them with the whole read).
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
    let quick = match cut {
        Cut::WherePossible if is_json_object(text) => Some(read_as_json(text, &mut reader, &build, &mut top)),
        Cut::WherePossible => {
            super::pieces::pieces(text).map(|pieces| read_in_pieces(&pieces, &mut reader, &build, &mut top))
        }
        #[cfg(test)]
        Cut::Never => None,
    };
    let (read, tools, built) = match quick {
        Some(Some((tools, built))) => (Ok(Shape::Wanted(())), tools, built),
        tried => {
            if tried.is_some() {
                // Read again, whole: what the quick read added is withdrawn.
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
        mcp_pins: reader.mcp_pins(&top),
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

/// Whether `text` looks like a JSON object (its first character, after
/// white space, opens one): worth reading as JSON first.
fn is_json_object(text: &str) -> bool {
    text.trim_start_matches([' ', '\t', '\n', '\r']).starts_with('{')
}

/// Reads a file written as JSON (one object, as tools that write
/// catalogues often do) with the JSON parser, which streams: each entry of
/// `tools` is read into a value of its own, built and freed, as a file in
/// pieces is. The YAML crate would build the events of the whole document
/// first (a document in one flow mapping cannot be cut into pieces): at
/// 10,000 tools more than twice the memory of the same tools as block YAML.
/// JSON is YAML, and the values are the ones the YAML crate makes of it;
/// `None` when the text is not JSON (YAML's own flow style, a comment, a
/// key met twice): the caller then reads it as YAML, whole, so every
/// problem reads as it always did.
fn read_as_json<T>(
    text: &str,
    reader: &mut Reader<'_>,
    build: &impl Fn(RawTool, &mut CatalogProblems) -> T,
    top: &mut Mapping,
) -> Option<(Vec<T>, CatalogProblems)> {
    let (mut tools, mut built) = (Vec::new(), CatalogProblems::default());
    let mut each = |entry| tools.push(build(entry, &mut built));
    let document = TopLevel { reader, each: &mut each, top, in_pieces: false };
    let mut json = serde_json::Deserializer::from_str(text);
    let Shape::Wanted(()) = (&mut json).deserialize_any(Stream(document)).ok()? else {
        return None;
    };
    json.end().ok()?;
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
        let json_entry = r#"{"name": "a", "description": "x\u00e9\n", "backend": {"builtin": "echo"},
            "parameters": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 1e3, "minimum": -0.5}}}}"#;
        let json = [
            format!("{{\"tools\": [{json_entry}, {{\"name\": \"b\"}}], \"toolsets\": [{{\"name\": \"s\", \"tools\": [\"a\"]}}]}}"),
            format!("\n  {{\"aliases\": {{\"x\": \"a\"}}, \"tools\": [{json_entry}, 12, null, [1]]}}\n"),
            format!("{{\"tools\": [{json_entry}], \"tools\": []}}"),
            format!("{{\"tools\": [{json_entry}], \"toolsets\": [], \"toolsets\": []}}"),
            format!("{{\"tools\": [{{\"name\": \"a\", \"name\": \"b\"}}, {json_entry}]}}"),
            format!("{{\"tools\": [{json_entry}]}} # a comment"),
            format!("{{tools: [{json_entry}]}}"),
            format!("{{\"tools\": [{json_entry},]}}"),
            format!("{{\"tools\": [{json_entry}], \"kend\": 1}}"),
            "{\"tools\": {}}".to_owned(),
            "{}".to_owned(),
        ];
        let shipped = [include_str!("../../catalog/registry.yaml"), include_str!("../../docs/examples/broken.yaml")];
        for text in texts.iter().chain(&json).map(String::as_str).chain(shipped) {
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
        // Where YAML refuses what JSON allows, the file is read as the JSON
        // it is: an escaped surrogate pair (Python's `json.dumps` writes one
        // for every emoji) is the character.
        let emoji = r#"{"tools": [{"name": "a", "description": "\ud83d\ude00", "backend": {"builtin": "echo"}}]}"#;
        assert!(read(emoji, Cut::Never).contains("invalid YAML"));
        let read_as_json = read(emoji, Cut::WherePossible);
        assert!(read_as_json.contains("description: Some(\n            \"\u{1f600}\""), "{read_as_json}");
        assert!(!read_as_json.contains("Error"), "{read_as_json}");
        // JSON is read once, streaming; YAML's own flow style is read again.
        assert_eq!(threads_and_builds(&json[0]), (1, 2));
        assert_eq!(threads_and_builds(&json[5]).1, 1 + 1);
        assert_eq!(threads_and_builds(&json[6]).1, 1);
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
}
