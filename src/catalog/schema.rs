//! A tool's argument schema: fully checked at load (a schema that cannot
//! be compiled fails the load, as it always did), with the parameter names
//! the hints list, in the schema's own order.
//!
//! What a schema keeps is its compiled validator and its compact JSON text;
//! the parsed tree is not kept (at 10,000 tools it was a third of the
//! catalogue's memory): the provider formats embed the text as it is, and
//! the rare message that needs a sibling keyword parses it again.
//!
//! The validator of a schema whose compilation cannot fail once the load's
//! checks pass is compiled on the tool's first call instead of at load (see
//! [`compiles_surely`]): those checks are the meta-schema, each pattern
//! compiled (and kept for the schemas that use it), and keywords whose
//! compilation checks nothing more. A schema outside that family (a `$ref`,
//! a dialect of its own, a keyword not listed) is compiled at load. A
//! catalogue of 10,000 tools whose agents call a few hundred of them starts
//! without compiling the rest and holds no validator for them; the first call
//! of a tool pays the compilation (about 12 µs for a typical schema).

use std::{
    collections::HashSet,
    fmt,
    sync::{Arc, Mutex, OnceLock},
};

use serde_json::{value::RawValue, Value};

use super::BuiltinTool;

/// A tool's argument schema, checked at load and compiled once: at load,
/// or on the first call that needs it.
pub struct Schema {
    text: Box<RawValue>,
    /// The parsed tree, made the first time a call needs it (a repair that
    /// reads the schema) and kept: most tools never need it.
    parsed: OnceLock<Value>,
    validator: OnceLock<jsonschema::Validator>,
    /// The load's compiled patterns, for a validator compiled later.
    patterns: Option<jsonschema::PatternCache>,
    /// The draft the schema is read by when it names none and is not valid
    /// 2020-12 ([`dialect`]).
    draft: Option<jsonschema::Draft>,
    required: Vec<String>,
    optional: Vec<String>,
    parameters: Vec<String>,
    /// Parameters whose schema admits an array (repeated markup children
    /// of one of them are its items).
    lists: Vec<String>,
    /// A strict tool's schema ([`Schema::strict`]).
    strict: bool,
}

impl Schema {
    /// The schema as written, parsed again (key order kept); for what is
    /// not on the path of every call.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(self.text.get()).expect("the text of a valid schema")
    }

    /// The schema as written, parsed once on first use and kept.
    pub(crate) fn parsed(&self) -> &Value {
        self.parsed.get_or_init(|| self.json())
    }

    /// The schema as compact JSON text, key order kept.
    pub fn text(&self) -> &str {
        self.text.get()
    }

    /// The schema's text as a JSON value to embed in another document unchanged.
    pub(crate) fn raw(&self) -> &RawValue {
        &self.text
    }

    /// The compiled validator, compiled now if this is its first use.
    pub(crate) fn validator(&self) -> &jsonschema::Validator {
        self.validator.get_or_init(|| {
            // The load checked everything compiling this schema can refuse.
            build(&self.json(), self.patterns.as_ref(), self.draft).expect("a schema checked at load compiles")
        })
    }

    /// Whether `arguments` satisfy the schema (compiled first if this is its
    /// first use).
    pub fn is_valid(&self, arguments: &Value) -> bool {
        self.validator().is_valid(arguments)
    }

    /// Whether the validator has been compiled (at load, or by a call).
    pub fn is_compiled(&self) -> bool {
        self.validator.get().is_some()
    }

    /// Each top-level parameter's name and what the search reads of it:
    /// its description (empty when it has none) and the words it takes, the
    /// string values of its `enum` (or its items' `enum`) when it lists at
    /// most [`SAID_VALUES`] of them ("Psychologist", "Family Counselor":
    /// words a task says and no description may), read from the schema's
    /// text.
    pub(crate) fn described(&self) -> Vec<(String, String)> {
        #[derive(serde::Deserialize)]
        struct Described {
            #[serde(default)]
            properties: serde_json::Map<String, Value>,
        }
        let Ok(described) = serde_json::from_str::<Described>(self.text.get()) else { return Vec::new() };
        let read = |property: &Value| {
            let mut text = property.get("description").and_then(Value::as_str).unwrap_or("").to_owned();
            let values = property.get("enum").or_else(|| property.pointer("/items/enum")).and_then(Value::as_array);
            if let Some(values) = values.filter(|values| values.len() <= SAID_VALUES) {
                for value in values.iter().filter_map(Value::as_str) {
                    text.push_str(". ");
                    text.push_str(value);
                }
            }
            text
        };
        described.properties.iter().map(|(name, property)| (name.clone(), read(property))).collect()
    }

    /// Required parameters, in the order of the schema's `required`.
    pub(crate) fn required(&self) -> &[String] {
        &self.required
    }

    /// Optional parameters, in the order of the schema's `properties`.
    pub(crate) fn optional(&self) -> &[String] {
        &self.optional
    }

    /// Every declared parameter: the `properties`, then any `required` name
    /// they do not list.
    pub(crate) fn parameters(&self) -> &[String] {
        &self.parameters
    }

    /// The parameters whose schema admits an array.
    pub(crate) fn lists(&self) -> &[String] {
        &self.lists
    }

    /// The schema of a strict tool (OpenAI's `strict: true`, a Responses
    /// function tool without `strict`): every parameter is listed in
    /// `required`, and an optional one is written as one that allows
    /// `null`. A required parameter whose schema allows `null` is read as
    /// optional (listed so to the model, and by the reader), and a call
    /// that leaves it out has it filled with `null` (the values stage).
    pub(crate) fn strict(mut self) -> Self {
        let properties = self.parsed().get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        let nullable = |name: &String| properties.get(name).is_some_and(allows_null);
        let (mut optional, required): (Vec<String>, Vec<String>) = self.required.drain(..).partition(nullable);
        optional.append(&mut self.optional);
        // In the order of `properties`, as `optional` is.
        optional.sort_by_key(|name| properties.keys().position(|key| key == name).unwrap_or(usize::MAX));
        Self { required, optional, strict: true, ..self }
    }

    /// Whether this is a strict tool's schema ([`Schema::strict`]).
    pub(crate) fn is_strict(&self) -> bool {
        self.strict
    }
}

/// Whether `schema` allows `null`: `type` `null` or a list holding it,
/// `null` in its `enum`, `const: null`, or an `anyOf` / `oneOf` branch that
/// allows it.
pub(crate) fn allows_null(schema: &Value) -> bool {
    let typed = match schema.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(list)) => list.iter().any(|t| t == "null"),
        _ => false,
    };
    let listed = schema.get("enum").and_then(Value::as_array).is_some_and(|e| e.contains(&Value::Null));
    let branch = ["anyOf", "oneOf"]
        .iter()
        .any(|key| schema.get(*key).and_then(Value::as_array).is_some_and(|b| b.iter().any(allows_null)));
    typed || listed || schema.get("const").is_some_and(Value::is_null) || branch
}

/// The schema of T when `schema` is T or `null` (`type: [T, "null"]`, or
/// an `anyOf` / `oneOf` of two branches, one of them `{type: null}`): the
/// value rules read it as T (a `null` value is allowed as it is). `None`
/// for any other schema.
pub(crate) fn or_null(schema: &Value) -> Option<std::borrow::Cow<'_, Value>> {
    use std::borrow::Cow;
    if let Some(Value::Array(types)) = schema.get("type") {
        let other: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
        if let ([one], 2) = (other.as_slice(), types.len()) {
            let mut single = schema.clone();
            single["type"] = (*one).clone();
            if let Some(allowed) = single.get_mut("enum").and_then(Value::as_array_mut) {
                allowed.retain(|v| !v.is_null());
            }
            return Some(Cow::Owned(single));
        }
        return None;
    }
    for key in ["anyOf", "oneOf"] {
        let Some([a, b]) = schema.get(key).and_then(Value::as_array).map(Vec::as_slice) else { continue };
        let is_null = |branch: &Value| branch.get("type").and_then(Value::as_str) == Some("null");
        return match (is_null(a), is_null(b)) {
            (true, false) => Some(Cow::Borrowed(b)),
            (false, true) => Some(Cow::Borrowed(a)),
            _ => None,
        };
    }
    None
}

/// The schemas compiled during one load, by their compact text: tools whose
/// schemas are the same (every tool without `parameters`, the many MCP-style
/// tools taking `{"type": "object"}`, a family of tools sharing one shape)
/// share one compiled validator, compiled once. Their `pattern` keywords
/// share one compiled expression too (jsonschema's pattern cache): ids,
/// dates and codes repeat across schemas that differ elsewhere.
#[derive(Default)]
pub(crate) struct SchemaCache {
    by_text: Mutex<HashSet<ByText>>,
    patterns: jsonschema::PatternCache,
    /// Patterns (and `patternProperties` keys) already compiled in this load.
    compiled: Mutex<HashSet<String>>,
}

/// The types a schema admits: its `type` (one or a list) and those of
/// its `anyOf` / `oneOf` branches.
pub(crate) fn admitted_types(schema: &Value) -> Vec<&str> {
    let mut types = Vec::new();
    match schema.get("type") {
        Some(Value::String(t)) => types.push(t.as_str()),
        Some(Value::Array(list)) => types.extend(list.iter().filter_map(Value::as_str)),
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        for branch in schema.get(key).and_then(Value::as_array).into_iter().flatten() {
            types.extend(admitted_types(branch));
        }
    }
    types.sort_unstable();
    types.dedup();
    types
}

impl SchemaCache {
    /// A cache holding `schemas` already: the schemas of the catalogue a
    /// reload replaces. A tool whose schema text is unchanged gets the same
    /// schema again (checked, and its validator compiled if a call compiled
    /// it), instead of a second copy of it checked and compiled anew; a
    /// schema is what its text says under this module's fixed options.
    #[expect(clippy::mutable_key_type, reason = "a ByText hashes and compares the schema's text, which never changes")]
    pub(crate) fn seeded<'s>(schemas: impl IntoIterator<Item = &'s Arc<Schema>>) -> Self {
        let by_text = schemas.into_iter().map(|schema| ByText(Arc::clone(schema))).collect();
        Self { by_text: Mutex::new(by_text), ..Self::default() }
    }

    /// The compiled schema of `json`, compiled now or shared with an
    /// earlier tool of the same schema. Errors are not kept.
    pub(crate) fn compile(&self, json: Value) -> Result<Arc<Schema>, String> {
        let text = compact(&json);
        if let Some(known) = crate::lock::lock(&self.by_text).get(text.get()) {
            return Ok(Arc::clone(&known.0));
        }
        let schema = Arc::new(Schema::compile_with_text(json, text, Some(self))?);
        // Another thread of the same load may have compiled it meanwhile: one is kept.
        let mut by_text = crate::lock::lock(&self.by_text);
        match by_text.get(schema.text()) {
            Some(known) => Ok(Arc::clone(&known.0)),
            None => {
                by_text.insert(ByText(Arc::clone(&schema)));
                Ok(schema)
            }
        }
    }
}

/// A schema as a key of [`SchemaCache`]: its compact text, which the
/// schema holds already (the cache keeps no copy of it).
struct ByText(Arc<Schema>);

impl std::borrow::Borrow<str> for ByText {
    fn borrow(&self) -> &str {
        self.0.text()
    }
}

impl PartialEq for ByText {
    fn eq(&self, other: &Self) -> bool {
        self.0.text() == other.0.text()
    }
}

impl Eq for ByText {}

impl std::hash::Hash for ByText {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.text().hash(state);
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text.get())
    }
}

impl Schema {
    /// Checks `json` against the meta-schema and compiles it. The error says
    /// what is wrong and where.
    pub(crate) fn compile(json: Value) -> Result<Schema, String> {
        let text = compact(&json);
        Self::compile_with_text(json, text, None)
    }

    /// [`Schema::compile`], given `json`'s compact text.
    fn compile_with_text(json: Value, text: Box<RawValue>, cache: Option<&SchemaCache>) -> Result<Schema, String> {
        match json.get("type") {
            Some(Value::String(t)) if t == "object" => {}
            _ if !json.is_object() => return Err("must be a JSON Schema object with type: object".to_owned()),
            _ => return Err("must be an object schema (type: object): a tool takes an object of arguments".to_owned()),
        }
        let draft = dialect(&json)?;
        let patterns = cache.map(|c| c.patterns.clone());
        let validator = match cache {
            Some(cache) if cache.compiles_surely(&json) => OnceLock::new(),
            _ => OnceLock::from(build(&json, patterns.as_ref(), draft).map_err(|err| cannot_compile(&err))?),
        };
        let names = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default()
        };
        let required = names(json.get("required"));
        let optional = json
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().filter(|k| !required.contains(k)).cloned().collect())
            .unwrap_or_default();
        let mut parameters: Vec<String> =
            json.get("properties").and_then(Value::as_object).map(|p| p.keys().cloned().collect()).unwrap_or_default();
        parameters.extend(required.iter().filter(|r| !parameters.contains(r)).cloned().collect::<Vec<_>>());
        let lists = json
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                p.iter()
                    .filter(|(_, schema)| admitted_types(schema).contains(&"array"))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Schema {
            text,
            parsed: OnceLock::new(),
            validator,
            patterns,
            draft,
            required,
            optional,
            parameters,
            lists,
            strict: false,
        })
    }
}

impl SchemaCache {
    /// Whether `pattern` compiles as `keyword` (`pattern`, or a key of
    /// `patternProperties`) does in a schema: checked by compiling it so, on
    /// its own, through the same compiler; the compiled expression is kept in
    /// the load's pattern cache for the schemas that use it.
    fn pattern_compiles(&self, pattern: &str, keyword: &str) -> bool {
        if crate::lock::lock(&self.compiled).contains(pattern) {
            return true;
        }
        let probe = match keyword {
            "pattern" => serde_json::json!({ "pattern": pattern }),
            _ => serde_json::json!({ "patternProperties": { pattern: true } }),
        };
        let compiles = build(&probe, Some(&self.patterns), None).is_ok();
        if compiles {
            crate::lock::lock(&self.compiled).insert(pattern.to_owned());
        }
        compiles
    }
}

/// The draft `json` is read by: the one its `$schema` names, else 2020-12
/// (`None` for both). A schema that names none and is not valid 2020-12 but
/// is valid draft-07 (or else draft-04) is read by that draft: servers
/// publish schemas written for the older drafts without saying so (tuple
/// `items: [...]`, `definitions`, `dependencies`, a boolean
/// `exclusiveMaximum`), and each means there what its draft says.
fn dialect(json: &Value) -> Result<Option<jsonschema::Draft>, String> {
    let err = match jsonschema::meta::validate(json) {
        Ok(()) => return Ok(None),
        Err(err) => format!("not a valid JSON Schema: {}", describe(&err)),
    };
    if json.get("$schema").is_none() {
        if jsonschema::draft7::meta::is_valid(json) {
            return Ok(Some(jsonschema::Draft::Draft7));
        }
        if jsonschema::draft4::meta::is_valid(json) {
            return Ok(Some(jsonschema::Draft::Draft4));
        }
    }
    Err(err)
}

/// The most steps the backtracking engine takes matching one value
/// against one pattern; past it, the value is refused as not matching
/// (jsonschema's "backtrack limit" error, said to the model like any
/// other value that does not match).
const BACKTRACK_LIMIT: usize = 100_000;

/// The most values of an `enum` the search reads as words a parameter
/// takes: a longer list (time zones, country codes) says no more of what the
/// tool does and would outweigh its description.
const SAID_VALUES: usize = 24;

/// Compiles `json` with the options every schema is compiled with, read by
/// `draft` when it is given.
///
/// Patterns are ECMA-262 (jsonschema translates them). They run on the
/// linear-time `regex` engine, where no input can make one backtrack; a
/// schema with a pattern that engine cannot run (lookahead, lookbehind, a
/// backreference) runs on the backtracking `fancy-regex` engine instead,
/// with each match bounded by [`BACKTRACK_LIMIT`] steps.
fn build(
    json: &Value,
    patterns: Option<&jsonschema::PatternCache>,
    draft: Option<jsonschema::Draft>,
) -> Result<jsonschema::Validator, jsonschema::ValidationError<'static>> {
    let options = || {
        let options = jsonschema::options().should_validate_formats(true);
        match draft {
            Some(draft) => options.with_draft(draft),
            None => options,
        }
    };
    let mut linear = options().with_pattern_options(jsonschema::PatternOptions::regex());
    if let Some(patterns) = patterns {
        linear = linear.with_pattern_cache(patterns.clone());
    }
    let err = match linear.build(json) {
        Ok(validator) => return Ok(validator),
        Err(err) => err,
    };
    let backtracking = jsonschema::PatternOptions::fancy_regex().backtrack_limit(BACKTRACK_LIMIT);
    options().with_pattern_options(backtracking).build(json).map_err(|_| err)
}

/// Keywords whose compilation refuses nothing the meta-schema accepts: their
/// values are numbers, names, lists of names or any JSON (`enum`, `const`,
/// `default`, `examples`), or annotations. `format` is one: an unknown
/// format is ignored, as every compiled schema ignores it.
const PLAIN_KEYWORDS: &[&str] = &[
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "format",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "contentEncoding",
    "contentMediaType",
];

/// Keywords whose value is one schema.
const SCHEMA_KEYWORDS: &[&str] = &[
    "additionalProperties",
    "additionalItems",
    "items",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentSchema",
];

/// Keywords whose value is a list of schemas.
const SCHEMA_LIST_KEYWORDS: &[&str] = &["prefixItems", "allOf", "anyOf", "oneOf"];

/// Keywords whose value maps names to schemas.
const SCHEMA_MAP_KEYWORDS: &[&str] = &["properties", "dependentSchemas", "$defs", "definitions"];

/// The dialects a schema may name in `$schema` and still be compiled lazily.
const KNOWN_DIALECTS: &[&str] = &[
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-04/schema",
];

impl SchemaCache {
    /// Whether compiling `schema`, which the meta-schema accepted, can refuse
    /// nothing more than the patterns [`SchemaCache::pattern_compiles`]
    /// checks: every keyword, at every depth, is in the lists above (`items`
    /// also as a list of schemas, `dependencies` as names or a schema),
    /// `$schema` names a known dialect, and nothing refers elsewhere (`$ref`,
    /// `$id`, anchors and vocabularies are outside the family, so such a
    /// schema is compiled at load). A schema this answers `false` for is
    /// compiled at load, which reports its problem.
    fn compiles_surely(&self, schema: &Value) -> bool {
        let map = match schema {
            Value::Bool(_) => return true,
            Value::Object(map) => map,
            _ => return false,
        };
        map.iter().all(|(keyword, value)| {
            let keyword = keyword.as_str();
            match keyword {
                _ if PLAIN_KEYWORDS.contains(&keyword) => true,
                "pattern" => value.as_str().is_some_and(|p| self.pattern_compiles(p, keyword)),
                "$schema" => value.as_str().is_some_and(|d| KNOWN_DIALECTS.contains(&d.trim_end_matches('#'))),
                "patternProperties" => value.as_object().is_some_and(|m| {
                    m.iter().all(|(p, s)| self.pattern_compiles(p, keyword) && self.compiles_surely(s))
                }),
                "dependencies" => value.as_object().is_some_and(|m| {
                    m.values().all(|v| {
                        v.as_array().is_some_and(|names| names.iter().all(Value::is_string)) || self.compiles_surely(v)
                    })
                }),
                "items" if value.is_array() => value.as_array().is_some_and(|list| self.all_compile(list)),
                _ if SCHEMA_KEYWORDS.contains(&keyword) => self.compiles_surely(value),
                _ if SCHEMA_LIST_KEYWORDS.contains(&keyword) => {
                    value.as_array().is_some_and(|list| self.all_compile(list))
                }
                _ if SCHEMA_MAP_KEYWORDS.contains(&keyword) => {
                    value.as_object().is_some_and(|m| self.all_compile(m.values()))
                }
                _ => false,
            }
        })
    }

    fn all_compile<'v>(&self, schemas: impl IntoIterator<Item = &'v Value>) -> bool {
        schemas.into_iter().all(|s| self.compiles_surely(s))
    }
}

/// `json` as compact text, key order kept.
fn compact(json: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(json).expect("a JSON value always serialises")
}

fn cannot_compile(err: &jsonschema::ValidationError<'_>) -> String {
    format!("cannot compile the schema: {}", describe(err))
}

fn describe(err: &jsonschema::ValidationError<'_>) -> String {
    let at = err.instance_path().as_str();
    match at.is_empty() {
        true => err.to_string(),
        false => format!("{err} (at {at})"),
    }
}

impl BuiltinTool {
    /// The compiled schema of a built-in.
    pub(crate) fn schema(self) -> Schema {
        Schema::compile(self.parameters()).expect("built-in schemas are valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_schema_is_compiled_once() {
        let cache = SchemaCache::default();
        let a = cache.compile(serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}})).unwrap();
        let b = cache.compile(serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}})).unwrap();
        let c = cache.compile(serde_json::json!({"type": "object", "properties": {"q": {"type": "integer"}}})).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        // Key order is part of a schema's identity: it orders the parameter hint.
        let d = cache.compile(serde_json::json!({"properties": {"q": {"type": "string"}}, "type": "object"})).unwrap();
        assert!(!Arc::ptr_eq(&a, &d));
        assert!(cache.compile(serde_json::json!({"type": "string"})).is_err());
    }

    /// A reload's cache starts with the replaced catalogue's schemas: an
    /// unchanged schema is the same one, validator and all; a changed one
    /// is compiled (and checked) anew.
    #[test]
    fn a_reload_shares_the_schemas_it_does_not_change() {
        let before = SchemaCache::default();
        let kept =
            before.compile(serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}})).unwrap();
        assert!(kept.is_valid(&serde_json::json!({"q": "x"})));
        let again = SchemaCache::seeded([&kept]);
        let same =
            again.compile(serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}})).unwrap();
        assert!(Arc::ptr_eq(&kept, &same) && same.is_compiled());
        let changed = again.compile(serde_json::json!({"type": "object", "properties": {"q": {"type": "integer"}}}));
        assert!(!Arc::ptr_eq(&kept, &changed.unwrap()));
        let broken = again.compile(serde_json::json!({"type": "object", "properties": {"q": {"pattern": "[z-a]"}}}));
        assert!(broken.is_err());
    }

    #[test]
    fn schema_keeps_parameter_order() {
        let schema = Schema::compile(serde_json::json!({
            "type": "object",
            "properties": {"limit": {"type": "integer"}, "query": {"type": "string"}, "lang": {"type": "string"}},
            "required": ["query"]
        }))
        .unwrap();
        assert_eq!(schema.required(), ["query"]);
        assert_eq!(schema.optional(), ["limit", "lang"]);
    }

    #[test]
    fn the_search_reads_the_values_a_parameter_takes() {
        // A real function list's parameter (tests/data/tool_search_bfcl, s189).
        let zones: Vec<String> = (0..=SAID_VALUES).map(|hour| format!("UTC+{hour}")).collect();
        let schema = Schema::compile(serde_json::json!({
            "type": "object",
            "properties": {
                "type": {"type": "string", "description": "The specialization of the therapist being sought.",
                         "enum": ["Psychologist", "Family Counselor", "Psychiatrist"]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["urgent", "later"]}},
                "size": {"type": "integer", "enum": [1, 2, 3]},
                "zone": {"type": "string", "description": "A time zone.", "enum": zones},
                "city": {"type": "string"}
            }
        }))
        .unwrap();
        assert_eq!(
            schema.described(),
            [
                (
                    "type".to_owned(),
                    "The specialization of the therapist being sought.. Psychologist. Family Counselor. Psychiatrist"
                        .to_owned()
                ),
                ("tags".to_owned(), ". urgent. later".to_owned()),
                ("size".to_owned(), String::new()),
                // A list past SAID_VALUES says no more of what the tool does.
                ("zone".to_owned(), "A time zone.".to_owned()),
                ("city".to_owned(), String::new()),
            ]
        );
    }

    #[test]
    fn a_schema_of_the_plain_family_is_compiled_on_its_first_use() {
        let cache = SchemaCache::default();
        let schema = cache
            .compile(serde_json::json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": "^A-[0-9]{1,4}$"},
                    "when": {"type": "string", "format": "date"},
                    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
                    "where": {"anyOf": [{"type": "string"}, {"type": "object", "patternProperties": {"^x-": true}}]}
                },
                "required": ["id"],
                "additionalProperties": false
            }))
            .unwrap();
        assert!(!schema.is_compiled());
        let validator = schema.validator();
        assert!(schema.is_compiled());
        assert!(validator.is_valid(&serde_json::json!({"id": "A-12", "when": "2026-12-01", "tags": ["a"]})));
        assert!(!validator.is_valid(&serde_json::json!({"id": "B-12"})), "the pattern holds");
        assert!(!validator.is_valid(&serde_json::json!({"id": "A-1", "when": "soon"})), "formats are checked");
        assert!(!validator.is_valid(&serde_json::json!({"id": "A-1", "other": 1})));
        assert!(!validator.is_valid(&serde_json::json!({"id": "A-1", "where": 5})));
        assert!(validator.is_valid(&serde_json::json!({"id": "A-1", "where": {"x-y": 1}})));
    }

    #[test]
    fn a_schema_outside_the_family_is_compiled_at_load() {
        let cache = SchemaCache::default();
        for schema in [
            serde_json::json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}}),
            serde_json::json!({"type": "object", "x-vendor": {"anything": true}}),
            serde_json::json!({"type": "object", "$id": "https://example.com/tool"}),
            serde_json::json!({"type": "object", "$dynamicAnchor": "meta", "properties": {"a": {"$dynamicRef": "#meta"}}}),
        ] {
            let compiled = cache.compile(schema.clone()).unwrap();
            assert!(compiled.is_compiled(), "{schema}");
        }
        // A known dialect keeps a schema in the family.
        let draft7 = cache
            .compile(serde_json::json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                "properties": {"a": {"items": [{"type": "string"}], "additionalItems": false}}}))
            .unwrap();
        assert!(!draft7.is_compiled());
        assert!(!draft7.validator().is_valid(&serde_json::json!({"a": ["x", "y"]})));
    }

    #[test]
    fn schema_errors_say_what_and_where_whichever_way_they_are_compiled() {
        let cache = SchemaCache::default();
        let both = |json: Value| {
            let alone = Schema::compile(json.clone()).map(|_| ()).unwrap_err();
            let shared = cache.compile(json).map(|_| ()).unwrap_err();
            assert_eq!(alone, shared);
            shared
        };
        let err = both(serde_json::json!({"type": "object", "properties": {"a": {"pattern": "[z-a]"}}}));
        assert!(err.contains("/properties/a/pattern"), "{err}");
        let err = both(serde_json::json!({"type": "object", "patternProperties": {"(": {}}}));
        assert!(err.contains("cannot compile the schema"), "{err}");
        let err = both(serde_json::json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}));
        assert!(err.contains("/$defs/nope"), "{err}");
        // A pattern that failed once fails again (it is not remembered as checked).
        let err = both(serde_json::json!({"type": "object", "properties": {"b": {"pattern": "[z-a]"}}}));
        assert!(err.contains("/properties/b/pattern"), "{err}");
    }

    #[test]
    fn schema_errors_say_what_and_where() {
        let err =
            Schema::compile(serde_json::json!({"type": "object", "properties": {"day": {"type": "int"}}})).unwrap_err();
        assert!(err.starts_with("not a valid JSON Schema"), "{err}");
        assert!(err.contains("/properties/day/type"), "{err}");
        let err = Schema::compile(serde_json::json!({"type": "string"})).unwrap_err();
        assert!(err.contains("type: object"), "{err}");
        let err =
            Schema::compile(serde_json::json!({"type": "object", "properties": {"a": {"pattern": "("}}})).unwrap_err();
        assert!(err.contains("/properties/a/pattern") || err.contains("regex"), "{err}");
    }

    /// Patterns as servers publish them (ECMA-262): lookaround and
    /// backreferences load, whichever way the schema is compiled, and mean
    /// what they say; `\d` is ASCII digits, as in ECMA-262.
    #[test]
    fn ecma_patterns_load_and_hold() {
        let cache = SchemaCache::default();
        let cases = [
            (r"^(?=.*[0-9])(?=.*[a-z]).{8,}$", "abcdefg1", "abcdefgh"),
            (r"^(?!-)[a-z0-9-]+$", "my-bucket", "-bucket"),
            (r"(?<!x)y$", "ay", "xy"),
            (r"^(a)\1$", "aa", "ab"),
            (r"^\d{3}$", "123", "١٢٣"),
            (r"^\p{L}+$", "Größe", "G1"),
        ];
        for (pattern, good, bad) in cases {
            let json =
                serde_json::json!({"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}});
            for schema in [Arc::new(Schema::compile(json.clone()).unwrap()), cache.compile(json).unwrap()] {
                assert!(schema.is_valid(&serde_json::json!({"a": good})), "{pattern} on {good}");
                assert!(!schema.is_valid(&serde_json::json!({"a": bad})), "{pattern} on {bad}");
            }
        }
    }

    /// A schema written for an older draft without saying so is read by
    /// it: draft-04's tuple `items`, `definitions`, `dependencies` and
    /// boolean `exclusiveMaximum`; a schema invalid in every draft is still
    /// refused, and one that names its draft is read by it alone.
    #[test]
    fn older_drafts_unnamed_are_read_by_their_draft() {
        let cache = SchemaCache::default();
        let tuple = serde_json::json!({"type": "object", "properties": {
            "point": {"type": "array", "items": [{"type": "number"}, {"type": "number"}], "additionalItems": false},
            "ref": {"$ref": "#/definitions/id"}},
            "definitions": {"id": {"type": "string"}},
            "dependencies": {"card": ["billing"]}});
        let percent = serde_json::json!({"type": "object", "properties": {
            "percent": {"type": "number", "maximum": 100, "exclusiveMaximum": true}}});
        for json in [tuple, percent] {
            for schema in [Arc::new(Schema::compile(json.clone()).unwrap()), cache.compile(json.clone()).unwrap()] {
                assert!(schema.is_valid(&serde_json::json!({})), "{json}");
            }
        }
        let schema = cache
            .compile(serde_json::json!({"type": "object", "properties": {
            "point": {"type": "array", "items": [{"type": "number"}, {"type": "number"}], "additionalItems": false},
            "ref": {"$ref": "#/definitions/id"}},
            "definitions": {"id": {"type": "string"}},
            "dependencies": {"card": ["billing"]}}))
            .unwrap();
        assert!(schema.is_valid(&serde_json::json!({"point": [1, 2], "ref": "x", "card": 1, "billing": 2})));
        assert!(!schema.is_valid(&serde_json::json!({"point": [1, "2"]})), "items by position");
        assert!(!schema.is_valid(&serde_json::json!({"point": [1, 2, 3]})), "additionalItems");
        assert!(!schema.is_valid(&serde_json::json!({"ref": 5})), "definitions");
        assert!(!schema.is_valid(&serde_json::json!({"card": 1})), "dependencies");
        let percent = Schema::compile(serde_json::json!({"type": "object", "properties": {
            "percent": {"type": "number", "maximum": 100, "exclusiveMaximum": true}}}))
        .unwrap();
        assert!(percent.is_valid(&serde_json::json!({"percent": 99.5})));
        assert!(!percent.is_valid(&serde_json::json!({"percent": 100})), "draft-04's exclusive maximum");
        let err = Schema::compile(serde_json::json!({"type": "object", "properties": {"day": {"type": "int"}}}));
        assert!(err.unwrap_err().starts_with("not a valid JSON Schema"));
        let named = serde_json::json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "properties": {"percent": {"type": "number", "exclusiveMaximum": true}}});
        assert!(Schema::compile(named).unwrap_err().starts_with("not a valid JSON Schema"));
    }
}
