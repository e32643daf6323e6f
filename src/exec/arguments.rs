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
    if exceeds_depth(text.as_bytes(), limits.max_depth) {
        return Err(ToolError::invalid_arguments(format!(
            "arguments are nested deeper than {} levels",
            limits.max_depth
        )));
    }
    if text.trim().is_empty() {
        return Ok(Parsed { object: Map::new(), repair: None });
    }
    let (value, repaired) = match serde_json::from_str::<Value>(text) {
        Ok(value) => (value, None),
        Err(err) => {
            let fixed = (!strict).then(|| lenient(text)).flatten();
            match fixed.and_then(|f| serde_json::from_str::<Value>(&f).ok().map(|v| (v, f))) {
                Some((value, fixed)) => (value, Some(fixed)),
                None => {
                    return Err(ToolError::invalid_arguments(format!(
                        "arguments are not valid JSON: {}",
                        describe(&err)
                    )))
                }
            }
        }
    };
    // A JSON object sent inside a JSON string.
    let (value, repaired) = match value {
        Value::String(inner) if !strict => match serde_json::from_str::<Value>(&inner) {
            Ok(object @ Value::Object(_)) => (object, Some(inner)),
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
