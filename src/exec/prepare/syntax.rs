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
pub(crate) fn parse(text: &str, strict: bool, limits: ArgumentLimits, all_optional: bool) -> Result<Parsed, ToolError> {
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
    let (mut value, mut repaired) = match parse_json(text, limits) {
        Ok(value) => (value, None),
        Err(JsonError::Syntax(err)) => {
            let fixed = match strict {
                true => None,
                false => lenient(text, limits)?,
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
    let mut repairs = Vec::new();
    if !strict {
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
    }
    let Value::Object(object) = value else {
        return Err(ToolError::invalid_arguments(format!(
            "arguments must be a JSON object, got {}",
            type_with_article(json_type(&value))
        )));
    };
    Ok(Parsed { object, repairs })
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

/// The JSON value `text` holds, or the Python literal (single quotes,
/// `True` / `False` / `None`), under the same limits as arguments; for
/// values sent as the text of an array or object.
pub(crate) fn literal(text: &str, limits: ArgumentLimits) -> Option<Value> {
    parse_json(text, limits).ok().or_else(|| parse_json(&fix_tokens(text), limits).ok())
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

/// The repairs of the module comment: the value and the text it was read
/// from, or `None` when no repair makes one JSON value of the text; an
/// error when text after the first object holds more calls (never cut off).
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
fn lenient(text: &str, limits: ArgumentLimits) -> Result<Option<(Value, String)>, ToolError> {
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
        let more = calls::count(rest, limits);
        if more > 0 {
            return Err(calls::many(1 + more));
        }
    }
    if rest.trim_start().starts_with(['{', '[']) {
        return Ok(None);
    }
    let head = &fixed[..end];
    let Some(value) = parse_json(head, limits).ok().filter(Value::is_object) else { return Ok(None) };
    Ok(Some((value, head.to_owned())))
}

/// `text` read once as the inside of a JSON string, when it is an object
/// or array all of whose quotes are escaped (`{\"a\": 1}`): quotes
/// escaped once too often.
fn unescape_once(text: &str) -> Option<String> {
    if !text.starts_with(['{', '[']) || !text.contains("\\\"") {
        return None;
    }
    let unescaped: String = serde_json::from_str(&format!("\"{text}\"")).ok()?;
    Some(unescaped)
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

/// Where the first complete JSON value of `text` ends, if it has one.
fn first_value_end(text: &str) -> Option<usize> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<serde::de::IgnoredAny>();
    match values.next() {
        Some(Ok(_)) => Some(values.byte_offset()),
        _ => None,
    }
}

/// `text` with its braces halved, when every brace outside strings comes
/// doubled (`{{"a": {{"b": 1}}}}`): what a format-string template leaves
/// when it escapes a JSON example. One single brace means no repair.
fn halve_braces(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let (mut quote, mut escaped, mut any) = (None::<char>, false, false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '{' | '}' => {
                chars.next_if_eq(&c)?;
                any = true;
            }
            _ => {}
        }
        out.push(c);
    }
    any.then_some(out)
}

/// Quotes that open a string in [`fix_tokens`], and what closes each.
fn closers(open: char) -> Option<&'static [char]> {
    match open {
        '\'' => Some(&['\'']),
        '\u{201c}' | '\u{201d}' => Some(&['\u{201d}', '\u{201c}']),
        '\u{2018}' | '\u{2019}' => Some(&['\u{2019}', '\u{2018}']),
        _ => None,
    }
}

/// The token-level repairs: single and typographic quotes, trailing
/// commas, Python literals, unquoted keys. JSON strings are copied as they
/// are.
fn fix_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // Comments outside strings.
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            if let Some(end) = find(&chars, i + 2, &['*', '/']) {
                i = end + 2;
                continue;
            }
        }
        if c == '\\' {
            match chars.get(i + 1) {
                // A literal `\n` or `\t` between tokens: whitespace.
                Some('n' | 't' | 'r') => {
                    out.push(' ');
                    i += 2;
                    continue;
                }
                // A string whose quotes are escaped once too often.
                Some('"') => {
                    if let Some(end) = find(&chars, i + 2, &['\\', '"']) {
                        push_json_string(&chars[i + 2..end], &mut out);
                        i = end + 2;
                        continue;
                    }
                }
                _ => {}
            }
        }
        // A template's quote token used as a string's quotes.
        if let Some(token) = QUOTE_TOKENS.iter().find(|t| starts_with(&chars, i, t)) {
            let token: Vec<char> = token.chars().collect();
            if let Some(end) = find(&chars, i + token.len(), &token) {
                push_json_string(&chars[i + token.len()..end], &mut out);
                i = end + token.len();
                continue;
            }
        }
        if let Some(close) = closers(c) {
            // A string in other quotes becomes a double-quoted one.
            out.push('"');
            i += 1;
            while i < chars.len() && !close.contains(&chars[i]) {
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
            continue;
        }
        match c {
            '"' => i = copy_string(&chars, i, &mut out),
            ',' => {
                let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
                if !matches!(next, Some('}') | Some(']')) {
                    out.push(',');
                }
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == '$' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | '-' | '$')) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let key_place = matches!(out.trim_end().chars().last(), Some('{' | ','));
                let colon_next = chars[i..].iter().find(|c| !c.is_whitespace()) == Some(&':');
                if key_place && colon_next {
                    // An unquoted key.
                    out.push('"');
                    out.push_str(&word);
                    out.push('"');
                    continue;
                }
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
    out
}

/// Template tokens some models write for a string's quotes.
const QUOTE_TOKENS: &[&str] = &["<|\"|>", "<escape>"];

fn starts_with(chars: &[char], at: usize, token: &str) -> bool {
    let mut rest = chars.get(at..).unwrap_or_default().iter();
    token.chars().all(|t| rest.next() == Some(&t))
}

/// Where `needle` next occurs in `chars` from `from`.
fn find(chars: &[char], from: usize, needle: &[char]) -> Option<usize> {
    (from..chars.len().saturating_sub(needle.len() - 1)).find(|&i| chars[i..].starts_with(needle))
}

/// `text` as a JSON string, every character as itself.
fn push_json_string(text: &[char], out: &mut String) {
    let text: String = text.iter().collect();
    out.push_str(&serde_json::to_string(&text).expect("strings serialise"));
}

/// Whether the escape at `chars[at]` (a backslash) is one JSON has.
fn valid_escape(chars: &[char], at: usize) -> bool {
    match chars.get(at + 1) {
        Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => true,
        Some('u') => chars.get(at + 2..at + 6).is_some_and(|hex| hex.iter().all(char::is_ascii_hexdigit)),
        _ => false,
    }
}

/// Copies the double-quoted string starting at `start`; returns the index
/// after it. Raw control characters inside are escaped; an invalid escape
/// (`C:\Users`) keeps its backslash as a character, but only when no
/// escape in the same string could itself have been meant literally
/// (`\n`, `\t`, `\\`, `\u…`, …; `\"` cannot): then the string has two
/// readings and stays as it is.
fn copy_string(chars: &[char], start: usize, out: &mut String) -> usize {
    let (mut invalid, mut ambiguous) = (false, false);
    let mut i = start + 1;
    while i < chars.len() && chars[i] != '"' {
        if chars[i] == '\\' {
            match valid_escape(chars, i) {
                true => ambiguous |= chars.get(i + 1) != Some(&'"'),
                false => invalid = true,
            }
            i += 2;
            continue;
        }
        i += 1;
    }
    let literal_backslashes = invalid && !ambiguous;
    out.push('"');
    let mut i = start + 1;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if literal_backslashes && !valid_escape(chars, i) => out.push_str("\\\\"),
            '\\' => {
                out.push('\\');
                if let Some(&next) = chars.get(i + 1) {
                    out.push(next);
                    i += 1;
                }
            }
            '"' => {
                out.push('"');
                return i + 1;
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
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

/// serde_json's message in the gateway's words: `expected ',' or '}' at line 1 column 19`.
fn describe(err: &serde_json::Error) -> String {
    err.to_string().replace('`', "'")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str, strict: bool) -> Parsed {
        parse(text, strict, ArgumentLimits::default(), false).unwrap_or_else(|e| panic!("{text}: {}", e.message))
    }

    fn err(text: &str, strict: bool) -> String {
        parse(text, strict, ArgumentLimits::default(), false).unwrap_err().message
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
            let parsed = parse(text, false, ArgumentLimits::default(), true).unwrap();
            assert!(parsed.object.is_empty(), "{text}");
            assert_eq!(parsed.repairs.last().map(|r| r.repaired.as_str()), Some("{}"), "{text}");
            // A tool with a required parameter gets the error.
            assert!(parse(text, false, ArgumentLimits::default(), false).is_err(), "{text}");
            assert!(parse(text, true, ArgumentLimits::default(), true).is_err(), "{text}");
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
            parse(&big, false, limits, false).unwrap_err().message,
            "arguments are 3145737 bytes long; the limit is 1 MiB"
        );
        let deep = "[".repeat(200_000);
        assert_eq!(
            parse(&deep, false, limits, false).unwrap_err().message,
            "arguments are nested deeper than 64 levels"
        );
        let nested_ok = format!("{}{}", "{\"a\":".repeat(63), "1".to_owned() + &"}".repeat(63));
        assert!(parse(&nested_ok, false, limits, false).is_ok());
        let brackets_in_strings = format!("{{\"a\": \"{}\"}}", "[".repeat(1000));
        assert!(parse(&brackets_in_strings, false, limits, false).is_ok());
    }
}
