//! Arguments as a model emitted them: limits checked before any parsing,
//! strict JSON first, then (non-strict) the repair of common slips, and the
//! renaming of drifted argument names.
//!
//! What is repaired is deliberately narrow: Markdown code fences, trailing
//! commas, single-quoted strings, Python's `True` / `False` / `None`, and a
//! JSON object sent as a JSON string. Each is a slip with one possible
//! meaning. General "JSON repair" libraries also close truncated input and
//! invent missing values; a gateway that did so would run calls the model
//! never made, so what is not in this list answers INVALID_ARGUMENTS.

use serde_json::{Map, Value};

use super::{
    limits::{byte_size, ArgumentLimits},
    outcome::{Repair, RepairKind, ToolError},
    validate::{json_type, type_with_article},
};
use crate::{catalog::Schema, similar::normalised_key};

/// Parsed arguments and the JSON repair that made them parse, if any.
#[derive(Debug)]
pub struct Parsed {
    pub object: Map<String, Value>,
    pub repair: Option<Repair>,
}

/// Parses `text` (empty means `{}`) into an object. Non-strict, common slips
/// are repaired and the repair is recorded.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
pub fn parse(text: &str, strict: bool, limits: ArgumentLimits) -> Result<Parsed, ToolError> {
    if text.len() > limits.max_bytes {
        return Err(ToolError::invalid_arguments(format!(
            "arguments are {} bytes long; the limit is {}",
            text.len(),
            byte_size(limits.max_bytes)
        )));
    }
    if text.trim().is_empty() {
        return Ok(Parsed { object: Map::new(), repair: None });
    }
    let (value, repaired) = match parse_json(text, limits) {
        Ok(value) => (value, None),
        Err(JsonError::Syntax(err)) => {
            let fixed = (!strict).then(|| lenient(text)).flatten();
            match fixed.and_then(|f| parse_json(&f, limits).ok().map(|v| (v, f))) {
                Some((value, fixed)) => (value, Some(fixed)),
                None => {
                    return Err(ToolError::invalid_arguments(format!(
                        "arguments are not valid JSON: {}",
                        describe(&err)
                    )))
                }
            }
        }
        Err(other) => return Err(other.into_error(limits)),
    };
    // A JSON object sent inside a JSON string: parsed under the same limits.
    let (value, repaired) = match value {
        Value::String(inner) if !strict => match parse_json(&inner, limits) {
            Ok(object @ Value::Object(_)) => (object, Some(inner)),
            Err(err @ (JsonError::Duplicate(_) | JsonError::TooDeep)) if inner.trim_start().starts_with('{') => {
                return Err(err.into_error(limits))
            }
            _ => (Value::String(inner), repaired),
        },
        value => (value, repaired),
    };
    let Value::Object(object) = value else {
        return Err(ToolError::invalid_arguments(format!(
            "arguments must be a JSON object, got {}",
            type_with_article(json_type(&value))
        )));
    };
    let repair =
        repaired.map(|fixed| Repair { kind: RepairKind::ArgumentsJson, original: text.to_owned(), repaired: fixed });
    Ok(Parsed { object, repair })
}

/// Why a text did not parse to a JSON value.
enum JsonError {
    Syntax(serde_json::Error),
    /// The path of a key given twice in one object (`code`, `items/0/name`).
    Duplicate(String),
    TooDeep,
}

impl JsonError {
    fn into_error(self, limits: ArgumentLimits) -> ToolError {
        ToolError::invalid_arguments(match self {
            JsonError::Syntax(err) => format!("arguments are not valid JSON: {}", describe(&err)),
            JsonError::Duplicate(path) => format!("duplicate argument '{path}'"),
            JsonError::TooDeep => format!("arguments are nested deeper than {} levels", limits.max_depth),
        })
    }
}

/// Parses every text the arguments are read from (as sent, repaired, or
/// found inside a string) the same way: the depth limit checked first, and a
/// key given twice in one object, at any depth, refused. A backend decoding
/// the text first-wins would otherwise act on a value the validator, which
/// saw the last one, never checked.
fn parse_json(text: &str, limits: ArgumentLimits) -> Result<Value, JsonError> {
    if exceeds_depth(text.as_bytes(), limits.max_depth) {
        return Err(JsonError::TooDeep);
    }
    let duplicate = std::cell::RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed =
        serde::de::DeserializeSeed::deserialize(Unique { parent: None, duplicate: &duplicate }, &mut deserializer)
            .and_then(|value| deserializer.end().map(|()| value));
    match (parsed, duplicate.into_inner()) {
        (_, Some(path)) => Err(JsonError::Duplicate(path)),
        (Ok(value), None) => Ok(value),
        (Err(err), None) => Err(JsonError::Syntax(err)),
    }
}

/// A JSON value whose objects must not repeat a key; the first repeated
/// key's path goes to `duplicate`. The path is built only then.
#[derive(Clone, Copy)]
struct Unique<'a> {
    /// The value holding this one, and this one's place in it.
    parent: Option<(&'a Unique<'a>, Step<'a>)>,
    duplicate: &'a std::cell::RefCell<Option<String>>,
}

#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

impl<'a> Unique<'a> {
    fn child(&'a self, step: Step<'a>) -> Unique<'a> {
        Unique { parent: Some((self, step)), duplicate: self.duplicate }
    }

    /// The field path of `step` in this value (`items/0/name`).
    fn path(&self, step: Step<'_>) -> String {
        let mut steps = vec![step];
        let mut at = self;
        while let Some((parent, step)) = at.parent {
            steps.push(step);
            at = parent;
        }
        let parts: Vec<String> = steps
            .iter()
            .rev()
            .map(|s| match s {
                Step::Key(key) => (*key).to_owned(),
                Step::Index(i) => i.to_string(),
            })
            .collect();
        parts.join("/")
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Unique<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Unique<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            match seq.next_element_seed(self.child(Step::Index(items.len())))? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self.child(Step::Key(&key)))?;
            if object.contains_key(&key) {
                self.duplicate.borrow_mut().get_or_insert_with(|| self.path(Step::Key(&key)));
                return Err(serde::de::Error::custom("duplicate key"));
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// Renames each unexpected argument whose normalised key matches exactly one
/// declared parameter that was not given (`Query` → `query`, `max-results` →
/// `max_results`). The argument keeps its place.
pub fn repair_names(object: &mut Map<String, Value>, schema: &Schema) -> Vec<Repair> {
    let declared = schema.parameters();
    if object.keys().all(|k| declared.iter().any(|d| d == k)) {
        return Vec::new();
    }
    let mut repairs = Vec::new();
    let mut renamed: Vec<(String, String)> = Vec::new();
    for key in object.keys() {
        if declared.iter().any(|d| d == key) {
            continue;
        }
        let wanted = normalised_key(key);
        let mut matches = declared
            .iter()
            .filter(|d| !object.contains_key(d.as_str()) && !renamed.iter().any(|(_, to)| to == *d))
            .filter(|d| normalised_key(d) == wanted);
        if let (Some(target), None) = (matches.next(), matches.next()) {
            renamed.push((key.clone(), target.clone()));
        }
    }
    if renamed.is_empty() {
        return repairs;
    }
    let old = std::mem::take(object);
    for (key, value) in old {
        match renamed.iter().find(|(from, _)| *from == key) {
            Some((from, to)) => {
                repairs.push(Repair { kind: RepairKind::ArgumentName, original: from.clone(), repaired: to.clone() });
                object.insert(to.clone(), value);
            }
            None => {
                object.insert(key, value);
            }
        }
    }
    repairs
}

/// Whether brackets nest deeper than `max`, by a flat scan that never recurses
/// (200,000 nested `[` must not reach a recursive parser).
fn exceeds_depth(text: &[u8], max: usize) -> bool {
    let (mut depth, mut quote, mut escaped) = (0usize, None::<u8>, false);
    for &b in text {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == q {
                    quote = None;
                }
            }
            None => match b {
                b'"' | b'\'' => quote = Some(b),
                b'[' | b'{' => {
                    depth += 1;
                    if depth > max {
                        return true;
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    false
}

/// The repairs of the module comment, or `None` when none applies.
fn lenient(text: &str) -> Option<String> {
    let unfenced = strip_fence(text.trim());
    let mut out = String::with_capacity(unfenced.len() + 8);
    let chars: Vec<char> = unfenced.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' => i = copy_string(&chars, i, &mut out),
            '\'' => {
                // A single-quoted string becomes a double-quoted one.
                out.push('"');
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    match chars[i] {
                        '\\' if chars.get(i + 1) == Some(&'\'') => {
                            out.push('\'');
                            i += 1;
                        }
                        '\\' => {
                            out.push('\\');
                            if let Some(&next) = chars.get(i + 1) {
                                out.push(next);
                                i += 1;
                            }
                        }
                        '"' => out.push_str("\\\""),
                        other => out.push(other),
                    }
                    i += 1;
                }
                out.push('"');
                i += 1;
            }
            ',' => {
                let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
                if !matches!(next, Some('}') | Some(']')) {
                    out.push(',');
                }
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                out.push_str(match word.as_str() {
                    "True" => "true",
                    "False" => "false",
                    "None" => "null",
                    other => other,
                });
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    (out != text).then_some(out)
}

/// Copies the double-quoted string starting at `start`; returns the index after it.
fn copy_string(chars: &[char], start: usize, out: &mut String) -> usize {
    out.push('"');
    let mut i = start + 1;
    while i < chars.len() {
        let c = chars[i];
        out.push(c);
        if c == '\\' {
            if let Some(&next) = chars.get(i + 1) {
                out.push(next);
                i += 1;
            }
        } else if c == '"' {
            return i + 1;
        }
        i += 1;
    }
    i
}

/// The body of a Markdown code fence (```json … ```), or the text itself.
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let body = match rest.find('\n') {
        Some(newline) => &rest[newline + 1..],
        None => rest,
    };
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

/// serde_json's message in DESIGN's words: `expected ',' or '}' at line 1 column 19`.
fn describe(err: &serde_json::Error) -> String {
    err.to_string().replace('`', "'")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str, strict: bool) -> Parsed {
        parse(text, strict, ArgumentLimits::default()).unwrap_or_else(|e| panic!("{text}: {}", e.message))
    }

    fn err(text: &str, strict: bool) -> String {
        parse(text, strict, ArgumentLimits::default()).unwrap_err().message
    }

    #[test]
    fn valid_json_is_not_repaired_and_keeps_key_order() {
        let parsed = ok(r#"{"b": 1, "a": [true, null]}"#, false);
        assert!(parsed.repair.is_none());
        assert_eq!(parsed.object.keys().collect::<Vec<_>>(), ["b", "a"]);
        assert!(ok("", true).object.is_empty());
        assert!(ok("  \n", true).object.is_empty());
    }

    #[test]
    fn common_slips_are_repaired_when_not_strict() {
        let cases = [
            ("{\"a\": 1,}", r#"{"a":1}"#),
            ("{'a': 'it\\'s \"x\"'}", r#"{"a":"it's \"x\""}"#),
            ("{\"on\": True, \"off\": False, \"none\": None}", r#"{"on":true,"off":false,"none":null}"#),
            ("```json\n{\"a\": [1, 2,],}\n```", r#"{"a":[1,2]}"#),
            ("```\n{\"a\": 1}\n```", r#"{"a":1}"#),
            ("\"{\\\"a\\\": 1}\"", r#"{"a":1}"#),
            ("{\"text\": \"True, None, 'x',}\",}", r#"{"text":"True, None, 'x',}"}"#),
        ];
        for (text, expected) in cases {
            let parsed = ok(text, false);
            assert_eq!(serde_json::to_string(&parsed.object).unwrap(), expected, "{text}");
            let repair = parsed.repair.expect("a repair is recorded");
            assert_eq!(repair.kind, RepairKind::ArgumentsJson);
            assert_eq!(repair.original, text);
        }
    }

    #[test]
    fn strict_repairs_nothing() {
        assert_eq!(err("{\"a\": 1,}", true), "arguments are not valid JSON: trailing comma at line 1 column 9");
        assert!(err("\"{\\\"a\\\": 1}\"", true).contains("must be a JSON object, got a string"));
    }

    #[test]
    fn what_cannot_be_repaired_says_where_it_broke() {
        assert_eq!(
            err(r#"{"query": "x" "limit": 5}"#, false),
            "arguments are not valid JSON: expected ',' or '}' at line 1 column 15"
        );
        assert!(err(r#"{"a": NaN}"#, false).starts_with("arguments are not valid JSON: expected value at line 1"));
        // Truncated input is never completed.
        assert!(err(r#"{"query": "abc"#, false).starts_with("arguments are not valid JSON: EOF while parsing"));
    }

    #[test]
    fn non_objects_are_refused() {
        assert_eq!(err("[1, 2]", false), "arguments must be a JSON object, got an array");
        assert_eq!(err("42", false), "arguments must be a JSON object, got an integer");
        assert_eq!(err("null", false), "arguments must be a JSON object, got null");
        assert_eq!(err("\"text\"", false), "arguments must be a JSON object, got a string");
    }

    #[test]
    fn limits_are_checked_before_parsing() {
        let limits = ArgumentLimits::default();
        let big = format!("{{\"a\": \"{}\"}}", "x".repeat(3 * 1024 * 1024));
        assert_eq!(
            parse(&big, false, limits).unwrap_err().message,
            "arguments are 3145737 bytes long; the limit is 1 MiB"
        );
        let deep = "[".repeat(200_000);
        assert_eq!(parse(&deep, false, limits).unwrap_err().message, "arguments are nested deeper than 64 levels");
        let nested_ok = format!("{}{}", "{\"a\":".repeat(63), "1".to_owned() + &"}".repeat(63));
        assert!(parse(&nested_ok, false, limits).is_ok());
        let brackets_in_strings = format!("{{\"a\": \"{}\"}}", "[".repeat(1000));
        assert!(parse(&brackets_in_strings, false, limits).is_ok());
    }

    fn schema() -> Schema {
        Schema::compile(serde_json::json!({
            "type": "object",
            "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}, "Mode": {"type": "string"}},
            "required": ["query"]
        }))
        .unwrap()
    }

    #[test]
    fn drifted_argument_names_are_renamed_in_place() {
        let mut object = ok(r#"{"Query": "x", "other": 1, "max-results": 5}"#, false).object;
        let repairs = repair_names(&mut object, &schema());
        assert_eq!(object.keys().collect::<Vec<_>>(), ["query", "other", "max_results"]);
        let renamed: Vec<(&str, &str)> = repairs.iter().map(|r| (r.original.as_str(), r.repaired.as_str())).collect();
        assert_eq!(renamed, [("Query", "query"), ("max-results", "max_results")]);
        assert!(repairs.iter().all(|r| r.kind == RepairKind::ArgumentName));
    }

    #[test]
    fn a_given_parameter_is_never_overwritten_and_ambiguity_is_left_alone() {
        let mut object = ok(r#"{"query": "a", "QUERY": "b"}"#, false).object;
        assert!(repair_names(&mut object, &schema()).is_empty());
        assert_eq!(object["query"], "a");
        // Two drifted names for one parameter: only the first is renamed.
        let mut object = ok(r#"{"Query": "a", "q-u-e-r-y": "b"}"#, false).object;
        let repairs = repair_names(&mut object, &schema());
        assert_eq!(repairs.len(), 1);
        assert_eq!(object["query"], "a");
        assert_eq!(object["q-u-e-r-y"], "b");
    }
}
