//! The tools of a request (`tools[].function`: name, description,
//! parameters), compiled once per distinct list and kept for the next
//! request that declares the same list, in a cache bounded in bytes
//! (`model_door.tools_cache_bytes`; the least useful list goes first).
//!
//! What a request may make the door compile is bounded before anything is
//! built: at most `model_door.max_tools` tools, at most
//! `model_door.max_pattern_bytes` of `pattern`s (and `patternProperties`
//! names), and no list heavier than the whole cache. Past any of them the
//! list is not read against and the answer passes unchanged, saying so
//! ([`Unrepaired`]).
//!
//! A list's weight is an estimate of what it holds compiled: a flat count
//! of its JSON values and bytes (measured: about 1.4 bytes a byte of text,
//! 300 a value and 640 a tool; the estimate rounds each up), plus what each
//! distinct pattern's compiled expression holds, measured by compiling it
//! on its own (`regex-automata`'s `memory_usage`, the engine the schemas
//! use; a pattern's expression can hold megabytes: `^(a|y{1,200}){1,200}$`
//! holds 3.9 MB). The lazy DFA a pattern fills as calls are validated is not
//! counted.
//!
//! A small list without patterns compiles on the request's task; any other
//! on the blocking pool, at most one a core at a time, so no request of
//! another caller waits behind a compilation.

use std::{collections::HashSet, sync::Arc};

use serde::{
    de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor},
    Deserialize,
};
use serde_json::{value::RawValue, Value};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::{
    config::{Api, ToolLimits},
    exec::{
        declared::{declared, Declared},
        ExecLimits,
    },
};

/// A tool list's digest (SHA-256 of its JSON text as sent).
type Digest32 = [u8; 32];

/// Lists compiled without patterns and at most this long compile on the
/// request's task (a few hundred microseconds).
const INLINE_BYTES: usize = 16 * 1024;

/// Why a request's tools are not read against: the answer passes
/// unchanged with `x-toolgate-unrepaired` saying this.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Unrepaired {
    /// More tools than `max_tools`, or a list heavier than the cache.
    TooManyTools(String),
    /// More pattern bytes than `max_pattern_bytes`, or patterns whose
    /// compiled expressions do not fit the cache.
    TooManyPatterns(String),
}

impl Unrepaired {
    /// The header's value.
    pub(super) fn said(&self) -> &'static str {
        match self {
            Unrepaired::TooManyTools(_) => "too many tools",
            Unrepaired::TooManyPatterns(_) => "too many patterns",
        }
    }

    /// Why, for the log.
    pub(super) fn why(&self) -> &str {
        match self {
            Unrepaired::TooManyTools(why) | Unrepaired::TooManyPatterns(why) => why,
        }
    }
}

/// A compiled list and its weight.
#[derive(Clone)]
struct Kept {
    declared: Arc<Declared>,
    weight: u64,
}

#[derive(Clone)]
struct ByWeight;

impl quick_cache::Weighter<Digest32, Kept> for ByWeight {
    fn weight(&self, _digest: &Digest32, kept: &Kept) -> u64 {
        kept.weight
    }
}

/// Tool lists compiled so far.
pub(super) struct ToolCache {
    kept: quick_cache::sync::Cache<Digest32, Kept, ByWeight>,
    limits: ToolLimits,
    /// Compilations on the blocking pool at once.
    compiling: Arc<Semaphore>,
}

impl ToolCache {
    pub(super) fn new(limits: ToolLimits) -> Self {
        let options = quick_cache::OptionsBuilder::new()
            .estimated_items_capacity(256)
            .weight_capacity(limits.cache_bytes)
            // One shard: a list may weigh up to the whole capacity.
            .shards(1)
            .build()
            .expect("valid cache options");
        let kept = quick_cache::sync::Cache::with_options(options, ByWeight, Default::default(), Default::default());
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self { kept, limits, compiling: Arc::new(Semaphore::new(cores)) }
    }

    /// The request's `tools` compiled: `Ok(None)` when it declares none,
    /// or declares them in a way no call can be read against (a tool that
    /// is not a function, a bad name, a schema that does not compile): its
    /// answers then pass unchanged; `Err` past the limits.
    pub(super) async fn of(
        &self,
        tools: &RawValue,
        limits: ExecLimits,
        api: Api,
    ) -> Result<Option<Arc<Declared>>, Unrepaired> {
        let digest: Digest32 =
            Sha256::new().chain_update(api.name()).chain_update(tools.get().as_bytes()).finalize().into();
        let guard = match self.kept.get_value_or_guard_async(&digest).await {
            Ok(kept) => return Ok(Some(kept.declared)),
            Err(guard) => guard,
        };
        let Some(read) = self.read(tools, api)? else { return Ok(None) };
        let compiled = match read.patterns.is_empty() && tools.get().len() <= INLINE_BYTES {
            true => read.compile(limits, self.limits.cache_bytes),
            false => {
                let permit = Arc::clone(&self.compiling).acquire_owned().await.expect("never closed");
                let cap = self.limits.cache_bytes;
                let compiled = tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    read.compile(limits, cap)
                });
                compiled.await.expect("a compilation does not panic")
            }
        };
        match compiled? {
            Some(kept) => {
                let declared = Arc::clone(&kept.declared);
                let _ = guard.insert(kept);
                Ok(Some(declared))
            }
            None => Ok(None),
        }
    }

    /// The list's tools and patterns, read within the limits; `None` when
    /// it is no list of functions (Chat Completions: every tool a function;
    /// Responses: its function tools, Messages: its tools with an
    /// `input_schema`, the others set aside).
    fn read(&self, tools: &RawValue, api: Api) -> Result<Option<Read>, Unrepaired> {
        let Ok(list) = serde_json::from_str::<Vec<&RawValue>>(tools.get()) else { return Ok(None) };
        if list.is_empty() {
            return Ok(None);
        }
        let limits = &self.limits;
        if list.len() > limits.max_tools {
            let why = format!("{} tools; model_door.max_tools is {}", list.len(), limits.max_tools);
            return Err(Unrepaired::TooManyTools(why));
        }
        let mut values = 0;
        if Count(&mut values).deserialize(&mut serde_json::Deserializer::from_str(tools.get())).is_err() {
            return Ok(None);
        }
        let weight = text_weight(tools.get().len(), values, list.len());
        if weight > limits.cache_bytes {
            let why = format!(
                "{} tools of {} values would hold about {} compiled; model_door.tools_cache_bytes is {}",
                list.len(),
                values,
                weight,
                limits.cache_bytes
            );
            return Err(Unrepaired::TooManyTools(why));
        }
        let mut declared_tools = Vec::with_capacity(list.len());
        for tool in list {
            match api {
                Api::Responses => {
                    // A function tool without `strict` is strict; tools of
                    // other types (custom, namespace, hosted) and their
                    // calls pass untouched.
                    let Ok(tool) = serde_json::from_str::<FlatTool>(tool.get()) else { return Ok(None) };
                    if tool.kind.as_deref() != Some("function") {
                        continue;
                    }
                    let Some(name) = tool.name else { return Ok(None) };
                    declared_tools.push(declared(&name, tool.parameters.as_ref(), tool.strict != Some(false)));
                }
                Api::Messages => {
                    // A tool of the caller's own has `input_schema` (and no
                    // type, or `custom`); Anthropic-defined and server tools
                    // and their calls pass untouched.
                    let Ok(tool) = serde_json::from_str::<MessagesTool>(tool.get()) else { return Ok(None) };
                    if tool.kind.as_deref().is_some_and(|kind| kind != "custom") || tool.input_schema.is_none() {
                        continue;
                    }
                    let Some(name) = tool.name else { return Ok(None) };
                    declared_tools.push(declared(&name, tool.input_schema.as_ref(), tool.strict == Some(true)));
                }
                Api::Chat => {
                    let Ok(Tool { kind, function: Some(function) }) = serde_json::from_str::<Tool>(tool.get()) else {
                        return Ok(None);
                    };
                    if kind.is_some_and(|kind| kind != "function") {
                        return Ok(None);
                    }
                    let strict = function.strict == Some(true);
                    declared_tools.push(declared(&function.name, function.parameters.as_ref(), strict));
                }
            }
        }
        if declared_tools.is_empty() {
            return Ok(None);
        }
        let mut patterns = HashSet::new();
        for tool in &declared_tools {
            if let Some(parameters) = &tool.parameters {
                patterns_in(parameters, &mut patterns);
            }
        }
        let pattern_bytes: usize = patterns.iter().map(String::len).sum();
        if pattern_bytes > limits.max_pattern_bytes {
            let why = format!(
                "{} patterns of {pattern_bytes} bytes; model_door.max_pattern_bytes is {}",
                patterns.len(),
                limits.max_pattern_bytes
            );
            return Err(Unrepaired::TooManyPatterns(why));
        }
        Ok(Some(Read { tools: declared_tools, patterns, weight }))
    }
}

/// A list read, to compile.
struct Read {
    tools: Vec<crate::catalog::DeclaredTool>,
    /// Its distinct patterns.
    patterns: HashSet<String>,
    /// Its weight without the patterns.
    weight: u64,
}

impl Read {
    /// The list compiled and weighed, unless its patterns' expressions
    /// would not fit `cap`; `None` when no call can be read against it.
    fn compile(self, limits: ExecLimits, cap: u64) -> Result<Option<Kept>, Unrepaired> {
        let mut weight = self.weight;
        for pattern in &self.patterns {
            weight += pattern_weight(pattern);
            if weight > cap {
                let why = format!(
                    "{} patterns whose expressions hold more than model_door.tools_cache_bytes ({cap})",
                    self.patterns.len()
                );
                return Err(Unrepaired::TooManyPatterns(why));
            }
        }
        match Declared::new(self.tools, limits) {
            Ok(declared) => Ok(Some(Kept { declared: Arc::new(declared), weight })),
            Err(why) => {
                tracing::debug!(door = super::NAME, "the request's tools are not read against: {why}");
                Ok(None)
            }
        }
    }
}

/// What a list holds compiled, estimated from its text: its bytes, its
/// values and its tools (see the module's comment).
fn text_weight(bytes: usize, values: usize, tools: usize) -> u64 {
    (2 * bytes + 320 * values + 1024 * tools) as u64
}

/// What `pattern`'s compiled expression holds (0 when it does not compile:
/// the schema's compilation then refuses the list).
fn pattern_weight(pattern: &str) -> u64 {
    let Ok(translated) = jsonschema_regex::to_rust_regex(pattern) else { return 0 };
    let config = regex_automata::meta::Regex::config().nfa_size_limit(Some(10 * 1024 * 1024));
    match regex_automata::meta::Regex::builder().configure(config).build(&translated) {
        Ok(regex) => (regex.memory_usage() + regex.create_cache().memory_usage()) as u64,
        Err(_) => 0,
    }
}

/// The patterns a schema holds: every `pattern` that is a string and
/// every key of a `patternProperties`, anywhere in it.
fn patterns_in(schema: &Value, into: &mut HashSet<String>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("pattern", Value::String(pattern)) => {
                        into.insert(pattern.clone());
                    }
                    ("patternProperties", Value::Object(properties)) => {
                        into.extend(properties.keys().cloned());
                        properties.values().for_each(|value| patterns_in(value, into));
                    }
                    _ => patterns_in(value, into),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| patterns_in(item, into)),
        _ => {}
    }
}

/// One of a request's `tools`, as the door reads it.
#[derive(Deserialize)]
struct Tool {
    #[serde(rename = "type")]
    kind: Option<String>,
    function: Option<Function>,
}

#[derive(Deserialize)]
struct Function {
    name: String,
    parameters: Option<Value>,
    /// `strict: true`: the parameters are written strict
    /// ([`crate::catalog::Schema::strict`]).
    strict: Option<bool>,
}

/// A Responses tool: its type, and a function tool's name, parameters and
/// `strict`, at the top.
#[derive(Deserialize)]
struct FlatTool {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: Option<String>,
    parameters: Option<Value>,
    strict: Option<bool>,
}

/// A Messages tool: its type (none for a tool of the caller's own), name,
/// `input_schema` and `strict`.
#[derive(Deserialize)]
struct MessagesTool {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: Option<String>,
    input_schema: Option<Value>,
    strict: Option<bool>,
}

/// Counts the JSON values of a text as the parser passes over them,
/// building nothing.
struct Count<'c>(&'c mut usize);

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        *self.0 += 1;
        while seq.next_element_seed(Count(self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        *self.0 += 1;
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Count(self.0))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(cache_bytes: u64, max_tools: usize, max_pattern_bytes: usize) -> ToolLimits {
        ToolLimits { cache_bytes, max_tools, max_pattern_bytes }
    }

    fn list(n: usize, pattern: Option<&str>) -> Box<RawValue> {
        let tools: Vec<Value> = (0..n)
            .map(|i| {
                let mut code = serde_json::json!({"type": "string"});
                if let Some(pattern) = pattern {
                    code["pattern"] = format!("{pattern}{i}").into();
                }
                serde_json::json!({"type": "function", "function": {"name": format!("tool_{i}"),
                    "parameters": {"type": "object", "properties": {"code": code}}}})
            })
            .collect();
        RawValue::from_string(Value::Array(tools).to_string()).unwrap()
    }

    #[test]
    fn values_are_counted_without_a_tree() {
        let mut values = 0;
        let text = r#"[{"a": [1, 2.5, "x", null, true]}, {}]"#;
        Count(&mut values).deserialize(&mut serde_json::Deserializer::from_str(text)).unwrap();
        assert_eq!(values, 9);
    }

    #[tokio::test]
    async fn a_list_is_compiled_once_and_kept() {
        let cache = ToolCache::new(limits(64 << 20, 512, 64 << 10));
        let tools = list(3, None);
        let first = cache.of(&tools, ExecLimits::default(), Api::Chat).await.unwrap().unwrap();
        let again = cache.of(&tools, ExecLimits::default(), Api::Chat).await.unwrap().unwrap();
        assert!(Arc::ptr_eq(&first, &again));
    }

    #[tokio::test]
    async fn past_the_counts_the_list_is_not_read_against() {
        let cache = ToolCache::new(limits(64 << 20, 4, 16));
        let said = cache.of(&list(5, None), ExecLimits::default(), Api::Chat).await.err().unwrap();
        assert_eq!((said.said(), said.why()), ("too many tools", "5 tools; model_door.max_tools is 4"));
        let said = cache.of(&list(3, Some("^abcdef")), ExecLimits::default(), Api::Chat).await.err().unwrap();
        assert_eq!(
            said,
            Unrepaired::TooManyPatterns("3 patterns of 24 bytes; model_door.max_pattern_bytes is 16".into())
        );
    }

    #[tokio::test]
    async fn a_list_heavier_than_the_cache_is_not_compiled() {
        let cache = ToolCache::new(limits(100_000, 512, 64 << 10));
        assert_eq!(
            cache.of(&list(100, None), ExecLimits::default(), Api::Chat).await.err().unwrap().said(),
            "too many tools"
        );
        // Each of these expressions holds megabytes.
        let cache = ToolCache::new(limits(4 << 20, 512, 64 << 10));
        let heavy = cache.of(&list(3, Some("^(a|y{1,200}){1,200}$|")), ExecLimits::default(), Api::Chat).await;
        assert_eq!(heavy.err().unwrap().said(), "too many patterns");
        assert!(cache.of(&list(3, Some("^[a-z]+$|")), ExecLimits::default(), Api::Chat).await.unwrap().is_some());
    }

    #[test]
    fn the_patterns_of_a_schema_are_every_pattern_and_pattern_property() {
        let schema = serde_json::json!({"type": "object", "properties": {"pattern": {"type": "string", "pattern": "^a"},
            "b": {"type": "array", "items": {"patternProperties": {"^x": {"pattern": "y$"}}}}}});
        let mut found = HashSet::new();
        patterns_in(&schema, &mut found);
        let mut found: Vec<_> = found.into_iter().collect();
        found.sort();
        assert_eq!(found, ["^a", "^x", "y$"]);
    }
}
