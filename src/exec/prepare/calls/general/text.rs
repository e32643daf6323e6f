//! Calls written in text, outside markup (docs/repairs.md, "What is
//! repaired": a name, then its body):
//! a tool's name, any separator, then its body.
//!
//! - **The name** is one of the caller's tools, as a word (after markup
//!   words: `call:NAME`, `functions.NAME`), or after a label that is a
//!   name key (`Action: NAME`, `Tool: NAME`, `tool_name: NAME`).
//! - **The separator** is anything that is not a word, a quote or a
//!   bracket: whitespace (one blank line at most), punctuation and
//!   symbols (`:`, `/`, `|`, `-`, `=>`, `→`), special tokens, and a label
//!   that is an argument key (`Action Input:`, `Arguments:`); at most
//!   [`MAX_SEPARATOR`] bytes.
//! - **The body** is a JSON object or a literal dict (`{…}`, also inside
//!   `(…)` or `[…]`), `key: value` / `key=value` pairs in braces or
//!   parentheses, Python keyword arguments directly after the name, or,
//!   after a separator, `key=value` pairs to the end of the line whose keys
//!   are the tool's parameters.
//! - **A JSON object standing where a call may** names a tool by a name
//!   key ([`super::super::from_json`]) or, anchored, as its only key:
//!   `{"get_weather": {"city": "Paris"}}`.
//!
//! What follows the body is the reader's (residue, more calls, or words
//! that make the text prose). Every byte visited is charged to the meter.

use serde_json::{Map, Value};

use super::super::{balanced_end, from_json, python, Arguments, Found, Reading, ARGUMENT_KEYS, NAME_KEYS};
use super::anchor::{text_of, Frame, Tool};
use crate::exec::{
    limits::ArgumentLimits,
    prepare::{json::literal, work},
};

/// The longest separator between a name and its body, in bytes.
const MAX_SEPARATOR: usize = 64;

/// The longest label (`Action Input`), in bytes.
const MAX_LABEL: usize = 24;

/// A tool's name and its body at the start of `text`: the call and its
/// length. `tool`: the tool a name means, if any.
pub(super) fn name_then_body<'t, 'a>(
    text: &'t str,
    tool: &mut dyn FnMut(&'t str) -> Option<Tool<'a>>,
    limits: ArgumentLimits,
) -> Option<(Found, usize)> {
    if text.starts_with('{') {
        return json_call(text, tool, limits);
    }
    let from = label_len(text, NAME_KEYS).unwrap_or(0);
    let after_label = &text[from..];
    let name_len = after_label
        .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
        .unwrap_or(after_label.len());
    work::charge(name_len);
    // `get_weather:` before a separator: the colon is the separator's.
    let head = after_label[..name_len].trim_end_matches(':');
    if head.is_empty() {
        return None;
    }
    // `call:get_weather`, `functions.get_weather`: the last word.
    let name = head.rsplit([':', '.']).find(|w| !w.is_empty())?;
    let tool = tool(name).or_else(|| tool(head))?;
    let at = from + head.len();
    let separator = separator_len(&text[at..]);
    let body_at = at + separator;
    let body = &text[body_at..];
    let mut frame = Frame::new(tool, head, "");
    // Python keyword arguments directly after the name: where that one call ends.
    let python = match (body.starts_with('('), separator) {
        (true, 0) => python::calls_at(&text[from..]).ok().filter(|(calls, _)| *calls == 1).map(|(_, end)| end),
        _ => None,
    };
    let len = match (body.chars().next(), python) {
        (Some('{'), _) => braces(body, &mut frame, limits)?,
        (Some('['), _) => {
            let close = balanced_end(body)?;
            let inner = body[1..close - 1].trim();
            one_object(inner).then_some(())?;
            braces(inner, &mut frame, limits)?;
            close
        }
        (Some('('), Some(end)) => {
            let Reading::One(found) = python::read(&text[from..from + end])? else { return None };
            match found.arguments {
                Arguments::Values(values) | Arguments::Markup(values) => set_all(&mut frame, values)?,
                Arguments::Absent => {}
                Arguments::Unwritten | Arguments::Text(_) => return None,
            }
            from + end - body_at
        }
        (Some('('), None) => {
            let close = paren_end(body)?;
            let inner = body[1..close - 1].trim();
            match one_object(inner) {
                true => braces(inner, &mut frame, limits).map(|_| ())?,
                false => set_all(&mut frame, pairs(inner, None, limits)?.0)?,
            }
            close
        }
        // Pairs on the name's line, after a separator: `NAME key="v"`.
        (Some(c), _) if separator > 0 && (c.is_alphabetic() || c == '_') => {
            let (values, len) = pairs(body, Some(&frame), limits)?;
            set_all(&mut frame, values)?;
            len
        }
        // A labelled name alone (`Action: NAME`, no `Action Input:`) reads
        // as a call without arguments or one whose arguments were left
        // out: no reading, as for a call object naming only its tool.
        _ => return None,
    };
    Some((frame.found(limits)?, body_at + len))
}

/// A JSON object at the start of `text` that is a call: a call object
/// whose name key names a tool, or an object whose only key is a tool.
fn json_call<'t, 'a>(
    text: &'t str,
    tool: &mut dyn FnMut(&'t str) -> Option<Tool<'a>>,
    limits: ArgumentLimits,
) -> Option<(Found, usize)> {
    let end = balanced_end(text)?;
    let value = literal(&text[..end], limits)?;
    let (name, arguments) = match from_json(&value) {
        Reading::One(found) => (found.name?, found.arguments),
        Reading::Nothing => only_key(&value)?,
        _ => return None,
    };
    let mut frame = Frame::new(tool(text_of(text, &name)?)?, &name, "");
    match arguments {
        Arguments::Values(values) | Arguments::Markup(values) => set_all(&mut frame, values)?,
        Arguments::Text(body) => frame.body = Some(body),
        Arguments::Absent => {}
        Arguments::Unwritten => return None,
    }
    Some((frame.found(limits)?, end))
}

/// `{"NAME": {…}}`: the only key and the object (or its JSON text) it
/// holds; the caller asks whether the key is a tool.
fn only_key(value: &Value) -> Option<(String, Arguments)> {
    let object = value.as_object()?;
    let mut keys = object.iter();
    let (Some((name, inner)), None) = (keys.next(), keys.next()) else { return None };
    let arguments = match inner {
        Value::Object(values) => Arguments::Values(values.clone()),
        Value::String(text) if text.trim_start().starts_with('{') => Arguments::Text(text.clone()),
        _ => return None,
    };
    Some((name.clone(), arguments))
}

/// A body in braces at the start of `body` read into `frame`: `K: v`
/// pairs, or a JSON object (a literal dict); its length.
fn braces(body: &str, frame: &mut Frame<'_, '_>, limits: ArgumentLimits) -> Option<usize> {
    let close = balanced_end(body)?;
    match key_values(&body[1..close - 1], limits) {
        Some(values) => set_all(frame, values)?,
        None => {
            literal(&body[..close], limits).filter(Value::is_object)?;
            frame.body = Some(body[..close].to_owned());
        }
    }
    Some(close)
}

/// Whether `text` is one object in braces, nothing around it.
fn one_object(text: &str) -> bool {
    text.starts_with('{') && balanced_end(text) == Some(text.len())
}

/// Each value set on its parameter; `None` when a key names none.
fn set_all(frame: &mut Frame<'_, '_>, values: impl IntoIterator<Item = (String, Value)>) -> Option<()> {
    for (key, value) in values {
        let parameter = frame.parameter(&key)?;
        frame.set(parameter, value);
    }
    Some(())
}

/// The length of the separator at the start of `text`: whitespace (one
/// blank line at most), symbols and punctuation that are no quote,
/// bracket or call separator, special tokens, and argument labels.
fn separator_len(text: &str) -> usize {
    let mut at = 0;
    let mut newlines = 0;
    while at < text.len().min(MAX_SEPARATOR) {
        let rest = &text[at..];
        if let Some(len) = crate::similar::residue::special_token_len(rest) {
            at += len;
            continue;
        }
        let starts_line = at == 0 || text[..at].ends_with(char::is_whitespace);
        if let Some(len) = label_len(rest, ARGUMENT_KEYS).filter(|_| starts_line) {
            at += len;
            continue;
        }
        let c = rest.chars().next().expect("not at the end");
        if c == '\n' {
            newlines += 1;
            if newlines > 2 {
                break;
            }
        }
        let symbol = !c.is_alphanumeric() && !matches!(c, '_' | '"' | '\'' | '`' | ',' | ';' | '.');
        if !symbol || matches!(c, '{' | '}' | '[' | ']' | '(' | ')' | '<') {
            break;
        }
        at += c.len_utf8();
    }
    work::charge(at);
    at
}

/// The length of a label at the start of `text` that is one of `keys`,
/// written with spaces, hyphens or any case (`Action Input:` is
/// `action_input`), its colon and the spaces after it.
fn label_len(text: &str, keys: &[&str]) -> Option<usize> {
    let colon = text.get(..text.len().min(MAX_LABEL + 1))?.find(':')?;
    let label = &text[..colon];
    if label.is_empty() || !label.chars().all(|c| c.is_ascii_alphabetic() || matches!(c, ' ' | '_' | '-')) {
        return None;
    }
    let folded: String =
        label.trim().chars().map(|c| if matches!(c, ' ' | '-') { '_' } else { c.to_ascii_lowercase() }).collect();
    if !keys.contains(&folded.as_str()) {
        return None;
    }
    let after = &text[colon + 1..];
    Some(colon + 1 + after.len() - after.trim_start_matches([' ', '\t']).len())
}

/// Where the parenthesis `text` starts with closes (quotes and nested
/// brackets skipped).
fn paren_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let (mut depth, mut at, mut quote) = (0usize, 0, None);
    while at < bytes.len() {
        let b = bytes[at];
        match quote {
            Some(_) if b == b'\\' => at += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None => match b {
                b'"' | b'\'' => quote = Some(b),
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        work::charge(at + 1);
                        return (b == b')').then_some(at + 1);
                    }
                }
                _ => {}
            },
        }
        at += 1;
    }
    work::charge(at);
    None
}

/// `K=v` / `K: v` pairs: within `text` whole (the inside of parentheses,
/// `line: None`, pairs separated by commas), or on the first line of
/// `text`, separated by commas or spaces, each key a parameter of `line`'s
/// call. Values: JSON literals, quoted text, or the bare text up to the
/// next separator. The pairs and where they end.
fn pairs(text: &str, line: Option<&Frame<'_, '_>>, limits: ArgumentLimits) -> Option<(Map<String, Value>, usize)> {
    let mut values = Map::new();
    let mut at = 0;
    let blank = |c: char| c == ' ' || c == '\t' || (line.is_none() && c.is_whitespace());
    loop {
        let rest = &text[at..];
        let start = rest.trim_start_matches(blank);
        at += rest.len() - start.len();
        let Some(first) = start.chars().next() else { break };
        let (key, after) = match first {
            q @ ('"' | '\'') if line.is_none() => {
                let end = start[1..].find(q)?;
                (&start[1..1 + end], &start[2 + end..])
            }
            c if c.is_alphabetic() || c == '_' => {
                let end = start.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-')).unwrap_or(start.len());
                (&start[..end], &start[end..])
            }
            _ if line.is_some() && !values.is_empty() => break,
            _ => return None,
        };
        if let Some(frame) = line {
            if frame.exact(key).is_none() {
                // After the first pair, what is not a pair is the reader's.
                if values.is_empty() {
                    return None;
                }
                break;
            }
        }
        let value_text = after.trim_start_matches(blank).strip_prefix(['=', ':'])?.trim_start_matches(blank);
        let (value, next) = value_in(value_text, line.is_some(), limits)?;
        if key.is_empty() || values.insert(key.to_owned(), value).is_some() {
            return None;
        }
        at = text.len() - next.len();
        let rest = next.trim_start_matches(blank);
        match rest.strip_prefix(',') {
            Some(more) => at = text.len() - more.len(),
            None if line.is_none() && !rest.is_empty() => return None,
            None if line.is_some() && rest.len() == next.len() => break,
            None => {}
        }
    }
    work::charge(at);
    (!values.is_empty()).then_some((values, at))
}

/// A value at the start of `text` (`spaced`: bare text ends at a space
/// too), and what follows it. Quoted text with a backslash reads two ways
/// (its escapes read or not), and bare text is one plain token (`Oslo`,
/// `/tmp/a.txt`, `42`), never an expression (`2+2`): no reading.
fn value_in(text: &str, spaced: bool, limits: ArgumentLimits) -> Option<(Value, &str)> {
    if text.starts_with(['{', '[', '"', '\'']) || text.starts_with("<|\"|>") || text.starts_with("<escape>") {
        let (value, rest) = value_at(text, limits)?;
        return (!text[..text.len() - rest.len()].contains('\\')).then_some((value, rest));
    }
    let stop = |c: char| c == ',' || c == ')' || c == '\n' || (spaced && c.is_whitespace());
    let end = text.find(stop).unwrap_or(text.len());
    let bare = text[..end].trim();
    let plain = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '@' | ':');
    if bare.is_empty() || !bare.chars().all(plain) {
        return None;
    }
    let value = literal(bare, limits).filter(|v| !v.is_object()).unwrap_or_else(|| Value::String(bare.to_owned()));
    Some((value, &text[end..]))
}

/// `K: v, "K": v, K=v` pairs of a body between braces; values read as
/// JSON literals where they are one, quoted text (Gemma's `<|"|>` quotes
/// included), else the bare text.
pub(super) fn key_values(body: &str, limits: ArgumentLimits) -> Option<Map<String, Value>> {
    let mut values = Map::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let (key, after) = match rest.chars().next()? {
            q @ ('"' | '\'') => {
                let end = rest[1..].find(q)?;
                (&rest[1..1 + end], &rest[2 + end..])
            }
            _ => {
                let end = rest.find([':', '='])?;
                (rest[..end].trim(), &rest[end..])
            }
        };
        let after = after.trim_start().strip_prefix([':', '='])?.trim_start();
        if key.is_empty() || values.contains_key(key) {
            return None;
        }
        let (value, next) = value_at(after, limits)?;
        values.insert(key.to_owned(), value);
        rest = next.trim_start();
        match rest.strip_prefix(',') {
            Some(more) => rest = more.trim_start(),
            None if rest.is_empty() => {}
            None => return None,
        }
    }
    Some(values)
}

/// A value at the start of `text`, and what follows it.
pub(super) fn value_at(text: &str, limits: ArgumentLimits) -> Option<(Value, &str)> {
    for quote in ["<|\"|>", "<escape>"] {
        if let Some(inner) = text.strip_prefix(quote) {
            let end = inner.find(quote)?;
            return Some((Value::String(inner[..end].to_owned()), &inner[end + quote.len()..]));
        }
    }
    if text.starts_with(['{', '[', '"']) {
        let end = match text.starts_with('"') {
            true => string_end(text)?,
            false => balanced_end(text)?,
        };
        let value = literal(&text[..end], limits)?;
        return Some((value, &text[end..]));
    }
    if let Some(inner) = text.strip_prefix('\'') {
        let end = inner.find('\'')?;
        return Some((Value::String(inner[..end].to_owned()), &inner[end + 1..]));
    }
    let end = text.find([',', '}']).unwrap_or(text.len());
    let bare = text[..end].trim();
    if bare.is_empty() {
        return None;
    }
    let value = literal(bare, limits).unwrap_or_else(|| Value::String(bare.to_owned()));
    Some((value, &text[end..]))
}

/// Where the JSON string `text` starts with ends.
pub(super) fn string_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}
