//! Stage "markup in values": a value never carries call markup. A string
//! value holding a closing tag or a special token of the call markup the
//! reader knows (`</parameter>`, `</｜DSML｜parameter>`, `</arg_value>`,
//! `<|…|>`, `<｜…｜>`), whatever syntax the call came in (markup, JSON text,
//! a structured call's arguments), was cut in the wrong place: the reader
//! (the model's server's, or this one) took the markup for text.
//!
//! - A value that is text X, then such markup, then only whitespace, is
//!   read as X (its trailing whitespace set aside, as markup's layout):
//!   `npm test</｜DSML｜parameter>\n ` is `npm test` (kind `ARGUMENT_VALUE`).
//! - Any other value holding it (markup inside the text, or text after it)
//!   is refused, naming the parameter; nothing runs. A value that really
//!   holds a template's closer is refused too: it cannot be told from a
//!   cut. Strict, nothing is repaired and every such value is refused.
//!
//! Also here, [`exact`]: a value written as markup keeps its exact
//! meaning. Where it reads two ways the call is held naming both, never run
//! either way: character entities (`2&gt;/dev/null`, as written or
//! decoded), a CDATA section, whitespace around the value beyond one
//! newline on each side (layout or text), a JSON string's quotes around a
//! string parameter's value, a JSON literal for a parameter whose schema
//! admits any type; and a key that is no parameter of the tool (the call
//! with it, or without it).

use serde_json::{Map, Value};

use super::{Repair, RepairKind, ToolError};
use crate::similar::residue;

/// How deep into objects and arrays values are looked at.
const MAX_DEPTH: usize = 32;

/// Names of call markup's elements: a closing tag whose name (a namespace
/// in bars or before a colon set aside) is one, or one joined to another
/// word by `_` (`parameter_function`, `function_calls`), is call markup.
const MARKUP_NAMES: &[&str] =
    &["parameter", "param", "arg", "argument", "arg_key", "arg_value", "invoke", "tool_call", "tool_calls", "function"];

/// Checks every string value of `object` (at any depth); the repairs made,
/// or the error of a value that holds markup elsewhere than at its end.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
pub(super) fn clean(object: &mut Map<String, Value>, strict: bool) -> Result<Vec<Repair>, ToolError> {
    let mut repairs = Vec::new();
    for (key, value) in object.iter_mut() {
        in_value(value, key, 0, strict, &mut repairs)?;
    }
    Ok(repairs)
}

#[allow(clippy::result_large_err)] // the error is the call's answer, built once
fn in_value(
    value: &mut Value,
    path: &str,
    depth: usize,
    strict: bool,
    repairs: &mut Vec<Repair>,
) -> Result<(), ToolError> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    match value {
        Value::String(text) => {
            let Some(at) = first_markup(text) else { return Ok(()) };
            let kept = text[..at].trim_end();
            if strict || !only_markup(&text[at..]) {
                return Err(holds_markup(path, &text[at..]));
            }
            let kept = kept.to_owned();
            repairs.push(Repair {
                kind: RepairKind::ArgumentValue,
                original: format!("{path}: {}", Value::String(text.clone())),
                repaired: format!("{path}: {}", Value::String(kept.clone())),
            });
            *text = kept;
            Ok(())
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                in_value(item, &format!("{path}/{i}"), depth + 1, strict, repairs)?;
            }
            Ok(())
        }
        Value::Object(members) => {
            for (key, member) in members.iter_mut() {
                in_value(member, &format!("{path}/{key}"), depth + 1, strict, repairs)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The error of the value at `path` holding markup (from `markup` on).
fn holds_markup(path: &str, markup: &str) -> ToolError {
    let shown: String = markup.chars().take(40).collect();
    ToolError::invalid_arguments(format!(
        "the value of '{path}' holds call markup ('{shown}'): it was cut in the wrong place, and nothing was run: \
         send the value alone, without the markup around it"
    ))
}

/// Where the first call markup (a special token, or a closing tag of a
/// call's element) in `text` starts.
fn first_markup(text: &str) -> Option<usize> {
    text.char_indices()
        .find(|(at, c)| residue::is_open_angle(*c) && markup_len(&text[*at..]).is_some())
        .map(|(at, _)| at)
}

/// The length of the call markup `text` starts with.
fn markup_len(text: &str) -> Option<usize> {
    if let Some(len) = residue::special_token_len(text) {
        return Some(len);
    }
    let rest = text.strip_prefix('<')?.strip_prefix('/')?;
    // A closer whose `>` the model left out (`</parameter` at a line's
    // end, or the text's) is one too.
    // A closer's name is short: no `>` is looked for past 64 bytes.
    let window = &rest.as_bytes()[..rest.len().min(64)];
    let (end, drifted) = match window.iter().position(|b| matches!(b, b'>' | b'\n')) {
        Some(end) if window[end] == b'>' => (end, false),
        Some(end) => (end, true),
        None if rest.len() <= 64 => (rest.len(), true),
        None => return None,
    };
    let name = &rest[..end];
    // A namespace in bars (`｜DSML｜parameter`) or before a colon.
    let name = name.rsplit(residue::is_bar).next().unwrap_or(name);
    let name = name.rsplit(':').next().unwrap_or(name).to_ascii_lowercase();
    let plain = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let known = MARKUP_NAMES.iter().any(|word| {
        name == *word
            || name
                .strip_prefix(word)
                .is_some_and(|rest| rest.starts_with('_') || rest.bytes().all(|b| b.is_ascii_digit()))
            || name.strip_suffix(word).is_some_and(|rest| rest.ends_with('_'))
    });
    (plain && !name.is_empty() && known).then_some(2 + end + usize::from(!drifted))
}

/// Whether `text` is markup and whitespace only.
fn only_markup(text: &str) -> bool {
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        match markup_len(rest) {
            Some(len) => rest = rest[len..].trim_start(),
            None => return false,
        }
    }
    true
}

/// The values of a call written as markup, each with its one reading,
/// for the tool `tool` whose schema's `properties` are given: its layout
/// (one newline on each side) set aside; or the error of the first key or
/// value that reads two ways (see the module's comment).
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
pub(crate) fn exact(
    values: Map<String, Value>,
    tool: &str,
    properties: Option<&Map<String, Value>>,
) -> Result<Map<String, Value>, ToolError> {
    let mut read = Map::new();
    for (key, value) in values {
        let Some(schema) = properties.and_then(|p| p.get(&key)) else {
            let known: Vec<&str> = properties.into_iter().flat_map(|p| p.keys().map(String::as_str)).collect();
            return Err(ToolError::invalid_arguments(format!(
                "'{key}' is no parameter of '{tool}' (its parameters: {}): the call reads with it or without it, \
                 and nothing was run: send the arguments as JSON",
                match known.is_empty() {
                    true => "none".to_owned(),
                    false => known.join(", "),
                }
            )));
        };
        let value = match value {
            Value::String(text) => Value::String(text_value(&key, &text, schema)?),
            // Children repeated for an array: each item read as a value of
            // the array's items.
            Value::Array(items) if items.iter().all(Value::is_string) => {
                let each = schema.get("items").filter(|items| items.is_object()).unwrap_or(&Value::Null);
                let items = items.iter().filter_map(Value::as_str).map(|item| text_value(&key, item, each));
                Value::Array(items.map(|item| item.map(Value::String)).collect::<Result<_, _>>()?)
            }
            value => value,
        };
        read.insert(key, value);
    }
    Ok(read)
}

/// A value written as markup text, for the parameter `key` of `schema`:
/// the text without its layout, when that is its one reading.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
fn text_value(key: &str, text: &str, schema: &Value) -> Result<String, ToolError> {
    let laid = match laid_out(text) {
        Some(laid) => laid.to_owned(),
        None => return Err(two_readings(key, text, "without the whitespace around it", text.trim())),
    };
    if let Some(decoded) = decode(&laid) {
        return Err(two_readings(key, &laid, "with its character entities decoded", &decoded));
    }
    if let Some(inner) = laid.strip_prefix("<![CDATA[").and_then(|rest| rest.strip_suffix("]]>")) {
        return Err(two_readings(key, &laid, "with its CDATA section unwrapped", inner));
    }
    let types = crate::catalog::admitted_types(schema);
    let untyped = types.is_empty() && schema.get("enum").is_none() && schema.get("const").is_none();
    if types.contains(&"string") || untyped {
        if let Ok(inner) = serde_json::from_str::<String>(&laid) {
            return Err(two_readings(key, &laid, "as the JSON string it spells", &inner));
        }
    }
    if untyped {
        if let Some(parsed) = serde_json::from_str::<Value>(&laid).ok().filter(|v| !v.is_string()) {
            return Err(two_readings(key, &laid, "as the JSON value it spells", &parsed.to_string()));
        }
    }
    // JSON for another type than text, not JSON as written, with
    // escapes: read as written or with its escapes read once more.
    let text_allowed = types.contains(&"string") || untyped;
    if !text_allowed && laid.contains('\\') && serde_json::from_str::<Value>(&laid).is_err() {
        let unescaped = laid.replace("\\\"", "\"");
        return Err(two_readings(key, &laid, "with its escapes read once more", &unescaped));
    }
    Ok(laid)
}

/// A value's text without its layout: one newline on each side, when both
/// sides have one (`<parameter=city>\nParis\n</parameter>`). `None` when
/// other whitespace stands around it: layout or text, two readings.
fn laid_out(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("\r\n").or_else(|| text.strip_prefix('\n'));
    let inner = inner.and_then(|rest| rest.strip_suffix("\r\n").or_else(|| rest.strip_suffix('\n')));
    let value = inner.unwrap_or(text);
    let padded = value.starts_with(char::is_whitespace) || value.ends_with(char::is_whitespace);
    (!padded).then_some(value)
}

/// The error of a markup value that reads two ways: as written, or `how`.
fn two_readings(key: &str, written: &str, how: &str, other: &str) -> ToolError {
    ToolError::invalid_arguments(format!(
        "the value of '{key}' reads two ways: as written ({}) or {how} ({}), and nothing was run: send the \
         arguments as JSON",
        Value::String(written.to_owned()),
        Value::String(other.to_owned())
    ))
}

/// `text` with XML's character references decoded (the five named ones and
/// numeric ones), when it holds any.
fn decode(text: &str) -> Option<String> {
    if !text.contains('&') {
        return None;
    }
    let (mut out, mut rest, mut any) = (String::with_capacity(text.len()), text, false);
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let reference = after.find(';').filter(|end| *end <= 10).map(|end| &after[..end]);
        let decoded = reference.and_then(|name| match name {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => {
                let number = name.strip_prefix('#')?;
                let code = match number.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                    None => number.parse().ok()?,
                };
                char::from_u32(code)
            }
        });
        match (decoded, reference) {
            (Some(c), Some(name)) => {
                out.push(c);
                rest = &after[name.len() + 1..];
                any = true;
            }
            _ => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    any.then_some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cleaned(value: Value) -> Result<Value, String> {
        let mut object = json!({"v": value}).as_object().unwrap().clone();
        clean(&mut object, false).map(|_| object["v"].clone()).map_err(|e| e.message)
    }

    #[test]
    fn markup_ending_a_value_is_set_aside_and_anywhere_else_refused() {
        assert_eq!(cleaned(json!("npm test</\u{FF5C}DSML\u{FF5C}parameter>\n ")), Ok(json!("npm test")));
        assert_eq!(cleaned(json!("\u{4E0A}\u{6D77}\n</parameter_function>")), Ok(json!("\u{4E0A}\u{6D77}")));
        assert_eq!(cleaned(json!(["a</arg_value>"])), Ok(json!(["a"])));
        assert_eq!(cleaned(json!("ls<|im_end|>")), Ok(json!("ls")));
        for value in ["a</parameter>b", "a<|tool_call_end|>\nrm -rf /", "</invoke> x"] {
            let refused = cleaned(json!(value)).unwrap_err();
            assert!(refused.starts_with("the value of 'v' holds call markup"), "{value}: {refused}");
        }
        assert_eq!(cleaned(json!("Shanghai\n</parameter\n")), Ok(json!("Shanghai")));
        assert_eq!(cleaned(json!("Shanghai\n</parameter1>")), Ok(json!("Shanghai")));
        // Markup of no call, and text that only looks like it: kept.
        for value in [
            "<b>bold</b>",
            "a < b > c",
            "</div>",
            "x </ parameter>",
            "<|not a token",
            "x </parameterList>",
            "a</parameters>",
        ] {
            assert_eq!(cleaned(json!(value)), Ok(json!(value)), "{value}");
        }
    }

    #[test]
    fn a_markup_value_with_two_readings_is_held() {
        let properties = json!({"command": {"type": "string"}, "value": {}, "n": {"type": "integer"}});
        let properties = properties.as_object();
        let read = |value: &str| {
            let values = json!({"command": value}).as_object().unwrap().clone();
            exact(values, "bash", properties).map(|v| v["command"].clone()).map_err(|e| e.message)
        };
        assert_eq!(read("\nls -la\n"), Ok(json!("ls -la")));
        assert_eq!(read("a\n  b"), Ok(json!("a\n  b")));
        for (value, how) in [
            (
                "cat ci.yml 2&gt;/dev/null || true",
                "with its character entities decoded (\"cat ci.yml 2>/dev/null || true\")",
            ),
            ("  ls\n", "without the whitespace around it (\"ls\")"),
            ("\n    ls\n  ", "without the whitespace around it (\"ls\")"),
            ("<![CDATA[a\nb]]>", "with its CDATA section unwrapped (\"a\\nb\")"),
            ("\"Seoul\"", "as the JSON string it spells (\"Seoul\")"),
        ] {
            let refused = read(value).unwrap_err();
            assert!(refused.starts_with("the value of 'command' reads two ways: as written"), "{refused}");
            assert!(refused.contains(how), "{value:?}: {refused}");
        }
        let untyped = exact(json!({"value": "123"}).as_object().unwrap().clone(), "f", properties).unwrap_err();
        assert!(untyped.message.contains("as the JSON value it spells (\"123\")"), "{}", untyped.message);
        let unknown = exact(json!({"City": "x"}).as_object().unwrap().clone(), "f", properties).unwrap_err();
        assert!(unknown.message.starts_with("'City' is no parameter of 'f' (its parameters: command, value, n)"));
    }

    #[test]
    fn entities_are_decoded_as_xml_writes_them() {
        assert_eq!(decode("&#39;x&#x41;&amp;"), Some("'xA&".to_owned()));
        assert_eq!(decode("R&D; a & b"), None);
    }
}
