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
//! Also here: character entities in a value written as markup
//! (`2&gt;/dev/null`) read two ways, as written or decoded
//! ([`entities`]): never run either way.

use serde_json::{Map, Value};

use super::{Repair, RepairKind, ToolError};
use crate::similar::residue;

/// How deep into objects and arrays values are looked at.
const MAX_DEPTH: usize = 32;

/// Words that name call markup's elements: a closing tag whose name (a
/// namespace in bars or before a colon set aside) holds one is call markup.
const MARKUP_NAMES: &[&str] = &["parameter", "arg_key", "arg_value", "invoke", "tool_call", "function"];

/// Names of call markup's elements that are whole words.
const MARKUP_WORDS: &[&str] = &["arg", "args", "param", "argument", "arguments"];

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
    let end = rest.find('>')?;
    let name = &rest[..end];
    // A namespace in bars (`｜DSML｜parameter`) or before a colon.
    let name = name.rsplit(residue::is_bar).next().unwrap_or(name);
    let name = name.rsplit(':').next().unwrap_or(name).to_ascii_lowercase();
    let plain = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let known = MARKUP_NAMES.iter().any(|word| name.contains(word)) || MARKUP_WORDS.contains(&name.as_str());
    (plain && known).then_some(2 + end + 1)
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

/// The first value of `values` (written as markup) holding a character
/// entity (`&gt;`, `&amp;`, `&#39;`): its key, the value as written and
/// decoded. Such a value reads two ways.
pub(crate) fn entities(values: &Map<String, Value>) -> Option<(String, String, String)> {
    values.iter().find_map(|(key, value)| {
        let text = value.as_str()?;
        let decoded = decode(text)?;
        Some((key.clone(), text.to_owned(), decoded))
    })
}

/// The error of a markup value that reads two ways.
pub(crate) fn two_readings(key: &str, written: &str, decoded: &str) -> ToolError {
    ToolError::invalid_arguments(format!(
        "the value of '{key}' reads two ways: as written ({}) or with its character entities decoded ({}), \
         and nothing was run: send the arguments as JSON",
        Value::String(written.to_owned()),
        Value::String(decoded.to_owned())
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
        // Markup of no call, and text that only looks like it: kept.
        for value in ["<b>bold</b>", "a < b > c", "</div>", "x </ parameter>", "<|not a token"] {
            assert_eq!(cleaned(json!(value)), Ok(json!(value)), "{value}");
        }
    }

    #[test]
    fn entities_read_two_ways() {
        let values = json!({"command": "cat ci.yml 2&gt;/dev/null || true", "other": "a & b"});
        let (key, written, decoded) = entities(values.as_object().unwrap()).unwrap();
        assert_eq!((key.as_str(), decoded.as_str()), ("command", "cat ci.yml 2>/dev/null || true"));
        assert_eq!(written, "cat ci.yml 2&gt;/dev/null || true");
        assert_eq!(decode("&#39;x&#x41;&amp;"), Some("'xA&".to_owned()));
        assert_eq!(decode("R&D; a & b"), None);
    }
}
