//! Arguments as a model emitted them: limits checked before any parsing,
//! strict JSON first, then (non-strict) the repair of common slips, and the
//! renaming of drifted argument names.
//!
//! What is repaired is deliberately narrow, each a slip with one possible
//! meaning:
//! - Markdown code fences, trailing commas, single-quoted strings, Python's
//!   `True` / `False` / `None`;
//! - typographic quotes (`“…”`, `‘…’`) used as JSON quotes (inside a JSON
//!   string they are text and stay);
//! - unquoted keys (`{query: "x"}`) and braces doubled by a format-string
//!   template (`{{"a": 1}}`, only when every brace is doubled);
//! - characters after one complete JSON object (extra closing braces,
//!   prose), unless they start another object or array: two values are two
//!   readings;
//! - a JSON object sent as a JSON string, once or several times;
//! - a one-element array holding the object (an array is never arguments,
//!   so the object is the only reading);
//! - `null`, `""` or `[]` for a tool whose parameters are all optional.
//!
//! General "JSON repair" libraries also close truncated input and invent
//! missing values; a gateway that did so would run calls the model never
//! made, so what is not in this list answers INVALID_ARGUMENTS.

use serde_json::{Map, Value};

use super::{
    calls,
    json::{describe, first_value_end, fix_tokens, halve_braces, parse_json, strip_fence, unescape_once, JsonError},
    validate::{json_type, type_with_article},
};
use crate::exec::{
    limits::{byte_size, ArgumentLimits},
    outcome::{Repair, RepairKind, ToolError},
};

/// At most this many layers of a JSON object encoded as a JSON string are
/// peeled (each layer at least doubles the escapes, so real ones are few).
const MAX_STRING_LAYERS: usize = 8;

/// Parsed arguments and the repairs that made them an object, if any.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) object: Map<String, Value>,
    pub(crate) repairs: Vec<Repair>,
}

/// Parses `text` (empty means `{}`) into an object. Non-strict, common slips
/// are repaired and each repair is recorded; `all_optional` (the tool
/// requires no parameter) lets `null`, `""` and `[]` mean `{}`.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
pub(crate) fn parse(
    text: &str,
    strict: bool,
    limits: ArgumentLimits,
    all_optional: bool,
    call: Option<(&str, &dyn calls::Anchor)>,
) -> Result<Parsed, ToolError> {
    if text.len() > limits.max_bytes {
        return Err(ToolError::invalid_arguments(format!(
            "arguments are {} bytes long; the limit is {}",
            text.len(),
            byte_size(limits.max_bytes)
        )));
    }
    if text.trim().is_empty() {
        return Ok(Parsed { object: Map::new(), repairs: Vec::new() });
    }
    let (value, repaired) = match parse_json(text, limits) {
        Ok(value) => (value, None),
        Err(JsonError::Syntax(err)) => {
            let fixed = match strict {
                true => None,
                false => lenient(text, limits, call)?,
            };
            match fixed {
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
    let (value, repairs) = match strict {
        true => (value, Vec::new()),
        false => loosened(text, value, repaired, all_optional, limits)?,
    };
    let Value::Object(object) = value else {
        return Err(ToolError::invalid_arguments(format!(
            "arguments must be a JSON object, got {}",
            type_with_article(json_type(&value))
        )));
    };
    Ok(Parsed { object, repairs })
}

/// The slips non-strict reading repairs once `text` parsed as `value`
/// (`repaired`: the text it was repaired to, if it was): an object inside
/// JSON strings, one object in a list, no arguments said another way.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
fn loosened(
    text: &str,
    mut value: Value,
    mut repaired: Option<String>,
    all_optional: bool,
    limits: ArgumentLimits,
) -> Result<(Value, Vec<Repair>), ToolError> {
    let mut repairs = Vec::new();
    // A JSON object sent inside a JSON string, perhaps several times:
    // parsed under the same limits.
    for _ in 0..MAX_STRING_LAYERS {
        let Value::String(inner) = &value else { break };
        match parse_json(inner, limits) {
            Ok(found @ (Value::Object(_) | Value::String(_))) => {
                repaired = Some(inner.clone());
                value = found;
            }
            Err(err @ (JsonError::Duplicate(_) | JsonError::TooDeep)) if inner.trim_start().starts_with('{') => {
                return Err(err.into_error(limits))
            }
            _ => break,
        }
    }
    if let Some(fixed) = repaired.take() {
        repairs.push(Repair { kind: RepairKind::ArgumentsJson, original: text.to_owned(), repaired: fixed });
    }
    value = match value {
        Value::Array(mut items) if items.len() == 1 && items[0].is_object() => {
            let object = items.pop().expect("one item");
            let repaired = serde_json::to_string(&object).expect("JSON values serialise");
            repairs.push(Repair { kind: RepairKind::ArgumentsEnvelope, original: text.to_owned(), repaired });
            object
        }
        // Several argument objects: as many calls, never one of them.
        Value::Array(items) if items.len() > 1 && items.iter().all(Value::is_object) => {
            return Err(calls::many(items.len()))
        }
        empty if all_optional && is_empty(&empty) => {
            let repaired = "{}".to_owned();
            repairs.push(Repair { kind: RepairKind::ArgumentsJson, original: text.to_owned(), repaired });
            Value::Object(Map::new())
        }
        other => other,
    };
    Ok((value, repairs))
}

/// `null`, `""` (blank) or `[]`: no arguments, said another way.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => text.trim().is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// The repairs of the module comment: the value and the text it was read
/// from, or `None` when no repair makes one JSON value of the text; an
/// error when text after the first object holds more calls (never cut off).
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
fn lenient(
    text: &str,
    limits: ArgumentLimits,
    call: Option<(&str, &dyn calls::Anchor)>,
) -> Result<Option<(Value, String)>, ToolError> {
    let unfenced = strip_language_tag(strip_fence(text.trim()));
    // A whole object whose quotes were escaped once too often.
    if let Some(unescaped) = unescape_once(unfenced) {
        if let Ok(value @ Value::Object(_)) = parse_json(&unescaped, limits) {
            return Ok(Some((value, unescaped)));
        }
    }
    let halved = halve_braces(unfenced);
    let fixed = fix_tokens(halved.as_deref().unwrap_or(unfenced));
    match parse_json(&fixed, limits) {
        Ok(value) => return Ok(Some((value, fixed))),
        Err(JsonError::Syntax(_)) => {}
        Err(_) => return Ok(None),
    }
    // One complete object, then characters that hold no other call and do
    // not start another value.
    let Some(end) = first_value_end(&fixed) else { return Ok(None) };
    let rest = &fixed[end..];
    if fixed.starts_with(['{', '[']) {
        let more = calls::count_anchored(rest, limits, call.map(|(_, anchor)| anchor));
        if more > 0 {
            return Err(match call {
                Some((tool, anchor)) => calls::many_named(1 + more, Some(tool), rest, anchor),
                None => calls::many(1 + more),
            });
        }
    }
    if rest.trim_start().starts_with(['{', '[']) {
        return Ok(None);
    }
    let head = &fixed[..end];
    let Some(value) = parse_json(head, limits).ok().filter(Value::is_object) else { return Ok(None) };
    Ok(Some((value, head.to_owned())))
}

/// `text` without a language tag on a line of its own before the object
/// (`json\n{…}`: a fence's tag whose fence was lost).
fn strip_language_tag(text: &str) -> &str {
    match text.split_once('\n') {
        Some((first, rest)) if rest.trim_start().starts_with(['{', '[']) && calls::is_language_tag(first.trim()) => {
            rest.trim_start()
        }
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str, strict: bool) -> Parsed {
        parse(text, strict, ArgumentLimits::default(), false, None).unwrap_or_else(|e| panic!("{text}: {}", e.message))
    }

    fn err(text: &str, strict: bool) -> String {
        parse(text, strict, ArgumentLimits::default(), false, None).unwrap_err().message
    }

    #[test]
    fn valid_json_is_not_repaired_and_keeps_key_order() {
        let parsed = ok(r#"{"b": 1, "a": [true, null]}"#, false);
        assert!(parsed.repairs.is_empty());
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
            // Typographic quotes as JSON quotes; inside a string they stay.
            ("{\u{201c}city\u{201d}: \u{201c}Oslo\u{201d}}", r#"{"city":"Oslo"}"#),
            ("{\u{2018}city\u{2019}: \"the \u{201c}old\u{201d} town\"}", "{\"city\":\"the \u{201c}old\u{201d} town\"}"),
            // Unquoted keys, with Python literals as values.
            (
                "{city: \"Oslo\", max-results: 5, archived: False}",
                r#"{"city":"Oslo","max-results":5,"archived":false}"#,
            ),
            // Braces doubled by a format-string template.
            ("{{\"a\": {{\"b\": 1}}}}", r#"{"a":{"b":1}}"#),
            // Characters after one complete object.
            ("{\"a\": 1}}", r#"{"a":1}"#),
            ("{\"a\": 1}\n\nLet me know if you need anything else!", r#"{"a":1}"#),
            ("```json\n{\"a\": 1}\n```\nDone.", r#"{"a":1}"#),
            // An object encoded as a JSON string twice.
            (r#""\"{\\\"a\\\": 1}\"""#, r#"{"a":1}"#),
        ];
        for (text, expected) in cases {
            let parsed = ok(text, false);
            assert_eq!(serde_json::to_string(&parsed.object).unwrap(), expected, "{text}");
            let [repair] = parsed.repairs.as_slice() else { panic!("one repair for {text}: {:?}", parsed.repairs) };
            assert_eq!(repair.kind, RepairKind::ArgumentsJson);
            assert_eq!(repair.original, text);
        }
    }

    #[test]
    fn slips_with_two_readings_stay_errors() {
        // Two concatenated objects, an object then an array, a single brace
        // among doubled ones, truncation.
        assert_eq!(err(r#"{"a": 1}{"b": 2}"#, false), calls::many(2).message);
        assert!(err(r#"{"a": 1} [2]"#, false).starts_with("arguments are not valid JSON"));
        assert!(err(r#"{{"a": {"b": 1}}}"#, false).starts_with("arguments are not valid JSON"));
        assert!(err(r#"{"a": {"b": 1}"#, false).starts_with("arguments are not valid JSON: EOF while parsing"));
        // Prose before the object is not trailing.
        assert!(err(r#"Sure: {"a": 1}"#, false).starts_with("arguments are not valid JSON"));
    }

    #[test]
    fn one_object_in_an_array_is_unwrapped() {
        let parsed = ok(r#"[{"a": 1}]"#, false);
        assert_eq!(serde_json::to_string(&parsed.object).unwrap(), r#"{"a":1}"#);
        assert_eq!(parsed.repairs[0].kind, RepairKind::ArgumentsEnvelope);
        assert_eq!(err(r#"[{"a": 1}, {"a": 2}]"#, false), calls::many(2).message);
        assert_eq!(err(r#"[{"a": 1}, {"a": 2}]"#, true), "arguments must be a JSON object, got an array");
        assert_eq!(err(r#"[{"a": 1}]"#, true), "arguments must be a JSON object, got an array");
    }

    #[test]
    fn no_arguments_said_another_way_when_nothing_is_required() {
        for text in ["null", "\"\"", "[]", "None"] {
            let parsed = parse(text, false, ArgumentLimits::default(), true, None).unwrap();
            assert!(parsed.object.is_empty(), "{text}");
            assert_eq!(parsed.repairs.last().map(|r| r.repaired.as_str()), Some("{}"), "{text}");
            // A tool with a required parameter gets the error.
            assert!(parse(text, false, ArgumentLimits::default(), false, None).is_err(), "{text}");
            assert!(parse(text, true, ArgumentLimits::default(), true, None).is_err(), "{text}");
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
            parse(&big, false, limits, false, None).unwrap_err().message,
            "arguments are 3145737 bytes long; the limit is 1 MiB"
        );
        let deep = "[".repeat(200_000);
        assert_eq!(
            parse(&deep, false, limits, false, None).unwrap_err().message,
            "arguments are nested deeper than 64 levels"
        );
        let nested_ok = format!("{}{}", "{\"a\":".repeat(63), "1".to_owned() + &"}".repeat(63));
        assert!(parse(&nested_ok, false, limits, false, None).is_ok());
        let brackets_in_strings = format!("{{\"a\": \"{}\"}}", "[".repeat(1000));
        assert!(parse(&brackets_in_strings, false, limits, false, None).is_ok());
    }

    #[test]
    fn dialect_slips_with_one_reading_are_repaired() {
        let cases = [
            // Comments outside strings; inside a string they are text.
            ("{\"a\": 1 // one\n}", r#"{"a":1}"#),
            ("{/* x */ \"a\": \"http://b\"}", r#"{"a":"http://b"}"#),
            // Raw control characters inside strings.
            ("{\"a\": \"x\ny\tz\"}", r#"{"a":"x\ny\tz"}"#),
            // An invalid escape meant literally.
            (r#"{"path": "C:\Users\me"}"#, r#"{"path":"C:\\Users\\me"}"#),
            (r#"{"re": "\d+ \"q\""}"#, r#"{"re":"\\d+ \"q\""}"#),
            // Quotes escaped once too often: the object's, or a value's.
            (r#"{\"a\": \"b\"}"#, r#"{"a":"b"}"#),
            (r#"{"a": \"b\"}"#, r#"{"a":"b"}"#),
            // Literal \n between tokens.
            (r#"{\n  "a": 1\n}"#, r#"{"a":1}"#),
            // A language tag line.
            ("json\n{\"a\": 1}", r#"{"a":1}"#),
            // Template quote tokens as quotes.
            ("{\"a\": <|\"|>say \"hi\"<|\"|>}", r#"{"a":"say \"hi\""}"#),
            ("{a: <escape>x, y<escape>}", r#"{"a":"x, y"}"#),
        ];
        for (text, expected) in cases {
            let parsed = ok(text, false);
            assert_eq!(serde_json::to_string(&parsed.object).unwrap(), expected, "{text}");
            assert_eq!(parsed.repairs[0].kind, RepairKind::ArgumentsJson, "{text}");
            assert!(parse(text, true, ArgumentLimits::default(), false, None).is_err(), "strict: {text}");
        }
    }

    #[test]
    fn dialect_slips_with_two_readings_stay_errors() {
        // `\n` beside an invalid escape: was the backslash literal everywhere?
        assert!(err(r#"{"path": "C:\Users\new"}"#, false).starts_with("arguments are not valid JSON"));
        // An unclosed comment or quote token, a tag line before prose.
        assert!(err("{\"a\": 1 /* open", false).starts_with("arguments are not valid JSON"));
        assert!(err("{\"a\": <|\"|>x}", false).starts_with("arguments are not valid JSON"));
        assert!(err("json\nplease", false).starts_with("arguments are not valid JSON"));
        // Another call after the arguments, in any syntax: counted, not cut.
        assert_eq!(
            err("{\"a\": 1}<|tool_call_end|><|tool_call_begin|>f:1<|tool_call_argument_begin|>{\"a\": 2}", false),
            calls::many(2).message
        );
        assert_eq!(err("{\"a\": 1}\n<function=f><parameter=a>2</parameter></function>", false), calls::many(2).message);
    }
}
