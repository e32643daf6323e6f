//! A tool's argument schema: checked against the JSON Schema meta-schema
//! and compiled once at load (nothing is compiled per call), with the
//! parameter names the hints list, in the schema's own order.
//!
//! What a schema keeps is its compiled validator and its compact JSON text;
//! the parsed tree is not kept (at 10,000 tools it was a third of the
//! catalogue's memory): the provider formats embed the text as it is, and
//! the rare message that needs a sibling keyword parses it again.

use std::{cell::RefCell, collections::HashMap, fmt, sync::Arc};

use serde_json::{value::RawValue, Value};

use super::BuiltinTool;

/// A tool's argument schema, checked against the meta-schema and compiled
/// once at load.
pub struct Schema {
    text: Box<RawValue>,
    /// The parsed tree, made the first time a call needs it (a repair that
    /// reads the schema) and kept: most tools never need it.
    parsed: std::sync::OnceLock<Value>,
    validator: jsonschema::Validator,
    required: Vec<String>,
    optional: Vec<String>,
    parameters: Vec<String>,
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

    pub(crate) fn validator(&self) -> &jsonschema::Validator {
        &self.validator
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
}

/// The schemas compiled during one load, by their compact text: tools whose
/// schemas are the same (every tool without `parameters`, the many MCP-style
/// tools taking `{"type": "object"}`, a family of tools sharing one shape)
/// share one compiled validator, compiled once. Their `pattern` keywords
/// share one compiled expression too (jsonschema's pattern cache): ids,
/// dates and codes repeat across schemas that differ elsewhere.
#[derive(Default)]
pub(crate) struct SchemaCache {
    by_text: RefCell<HashMap<String, Arc<Schema>>>,
    patterns: jsonschema::PatternCache,
}

impl SchemaCache {
    /// The compiled schema of `json`, compiled now or shared with an
    /// earlier tool of the same schema. Errors are not kept.
    pub(crate) fn compile(&self, json: Value) -> Result<Arc<Schema>, String> {
        let text = compact(&json);
        if let Some(schema) = self.by_text.borrow().get(text.get()) {
            return Ok(Arc::clone(schema));
        }
        let schema = Arc::new(Schema::compile_with_text(json, text.clone(), Some(&self.patterns))?);
        self.by_text.borrow_mut().insert(text.get().to_owned(), Arc::clone(&schema));
        Ok(schema)
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
    fn compile_with_text(
        json: Value,
        text: Box<RawValue>,
        patterns: Option<&jsonschema::PatternCache>,
    ) -> Result<Schema, String> {
        match json.get("type") {
            Some(Value::String(t)) if t == "object" => {}
            _ if !json.is_object() => return Err("must be a JSON Schema object with type: object".to_owned()),
            _ => return Err("must be an object schema (type: object): a tool takes an object of arguments".to_owned()),
        }
        if let Err(err) = jsonschema::meta::validate(&json) {
            return Err(format!("not a valid JSON Schema: {}", describe(&err)));
        }
        // Patterns run on the linear-time `regex` engine: no input can make
        // one backtrack for long (the backtracking engine's step limit would
        // otherwise reach the model as an error). Lookaround and
        // backreferences, which need backtracking, are refused here.
        let mut options = jsonschema::options()
            .should_validate_formats(true)
            .with_pattern_options(jsonschema::PatternOptions::regex());
        if let Some(patterns) = patterns {
            options = options.with_pattern_cache(patterns.clone());
        }
        let validator = options.build(&json).map_err(|err| cannot_compile(&err))?;
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
        Ok(Schema { text, parsed: std::sync::OnceLock::new(), validator, required, optional, parameters })
    }
}

/// `json` as compact text, key order kept.
fn compact(json: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(json).expect("a JSON value always serialises")
}

fn cannot_compile(err: &jsonschema::ValidationError<'_>) -> String {
    if let Some(pattern) = err.instance().as_str().filter(|p| needs_backtracking(p)) {
        return format!(
            "cannot compile the schema: the pattern {pattern:?} (at {}) uses lookaround or a backreference; \
             patterns run on a linear-time engine, which has neither",
            err.instance_path().as_str()
        );
    }
    format!("cannot compile the schema: {}", describe(err))
}

/// Whether a pattern uses what only a backtracking engine runs: lookahead,
/// lookbehind (`(?=`, `(?!`, `(?<=`, `(?<!`), or a backreference (`\1`,
/// `\k<name>`).
fn needs_backtracking(pattern: &str) -> bool {
    let bytes = pattern.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                if matches!(bytes.get(i + 1), Some(b'1'..=b'9' | b'k')) {
                    return true;
                }
                i += 2;
            }
            b'(' if pattern[i..].starts_with("(?=")
                || pattern[i..].starts_with("(?!")
                || pattern[i..].starts_with("(?<=")
                || pattern[i..].starts_with("(?<!") =>
            {
                return true
            }
            _ => i += 1,
        }
    }
    false
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
        for pattern in ["^(?=.*[0-9]).+$", "(?<!x)y", r"(a)\1"] {
            let err = Schema::compile(serde_json::json!({"type": "object", "properties": {"a": {"pattern": pattern}}}))
                .unwrap_err();
            assert!(err.contains("uses lookaround or a backreference"), "{pattern}: {err}");
        }
    }
}
