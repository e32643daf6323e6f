//! The JSON the arguments are read from: one parser for every text (as
//! sent, repaired, or found inside a string), with the depth limit checked
//! first and a key given twice refused; and the token-level repairs of the
//! dialects models write (other quotes, Python literals, unquoted keys,
//! trailing commas, comments, raw control characters, literal backslashes,
//! quotes escaped once too often, template quote tokens, doubled braces,
//! fences). A leaf of the preparation: [`super::syntax`] decides when they
//! apply, the whole-call reader and the value rules read literals with it.

use serde_json::{Map, Value};

use super::work;
use crate::exec::{limits::ArgumentLimits, outcome::ToolError};

/// The JSON value `text` holds, or the Python literal (single quotes,
/// `True` / `False` / `None`), under the same limits as arguments; for
/// values sent as the text of an array or object.
pub(crate) fn literal(text: &str, limits: ArgumentLimits) -> Option<Value> {
    if !work::charge(text.len()) {
        return None;
    }
    parse_json(text, limits)
        .ok()
        .or_else(|| work::charge(2 * text.len()).then(|| parse_json(&fix_tokens(text), limits).ok())?)
}

/// Why a text did not parse to a JSON value.
pub(super) enum JsonError {
    Syntax(serde_json::Error),
    /// The path of a key given twice in one object (`code`, `items/0/name`).
    Duplicate(String),
    TooDeep,
}

impl JsonError {
    pub(super) fn into_error(self, limits: ArgumentLimits) -> ToolError {
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
pub(super) fn parse_json(text: &str, limits: ArgumentLimits) -> Result<Value, JsonError> {
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

/// `text` read once as the inside of a JSON string, when it is an object
/// or array all of whose quotes are escaped (`{\"a\": 1}`): quotes
/// escaped once too often.
pub(super) fn unescape_once(text: &str) -> Option<String> {
    if !text.starts_with(['{', '[']) || !text.contains("\\\"") {
        return None;
    }
    let unescaped: String = serde_json::from_str(&format!("\"{text}\"")).ok()?;
    Some(unescaped)
}

/// Where the first complete JSON value of `text` ends, if it has one.
pub(super) fn first_value_end(text: &str) -> Option<usize> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<serde::de::IgnoredAny>();
    match values.next() {
        Some(Ok(_)) => Some(values.byte_offset()),
        _ => None,
    }
}

/// `text` with its braces halved, when every brace outside strings comes
/// doubled (`{{"a": {{"b": 1}}}}`): what a format-string template leaves
/// when it escapes a JSON example. One single brace means no repair.
pub(super) fn halve_braces(text: &str) -> Option<String> {
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
pub(super) fn fix_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let chars: Vec<char> = text.chars().collect();
    let mut searched = Closers::default();
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
            if let Some(end) = searched.find(&chars, i + 2, &['*', '/']) {
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
                    if let Some(end) = searched.find(&chars, i + 2, &['\\', '"']) {
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
            if let Some(end) = searched.find(&chars, i + token.len(), &token) {
                push_json_string(&chars[i + token.len()..end], &mut out);
                i = end + token.len();
                continue;
            }
        }
        if let Some(close) = closers(c) {
            i = requote(&chars, i, close, &mut out);
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
            c if c.is_ascii_alphabetic() || c == '_' || c == '$' => i = bare_word(&chars, i, &mut out),
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    out
}

/// A string in other quotes (opened at `i`, closed by one of `close`) as a
/// double-quoted one; where it ends.
fn requote(chars: &[char], mut i: usize, close: &[char], out: &mut String) -> usize {
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
    i + 1
}

/// A bare word at `i`: an unquoted key (before `:` where a key goes)
/// quoted, a Python literal spelt as JSON's, anything else as it is;
/// where it ends.
fn bare_word(chars: &[char], mut i: usize, out: &mut String) -> usize {
    let start = i;
    while i < chars.len() && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | '-' | '$')) {
        i += 1;
    }
    let word: String = chars[start..i].iter().collect();
    let key_place = matches!(out.trim_end().chars().last(), Some('{' | ','));
    let colon_next = chars[i..].iter().find(|c| !c.is_whitespace()) == Some(&':');
    if key_place && colon_next {
        out.push('"');
        out.push_str(&word);
        out.push('"');
        return i;
    }
    out.push_str(match word.as_str() {
        "True" => "true",
        "False" => "false",
        "None" => "null",
        other => other,
    });
    i
}

/// Template tokens some models write for a string's quotes.
const QUOTE_TOKENS: &[&str] = &["<|\"|>", "<escape>"];

fn starts_with(chars: &[char], at: usize, token: &str) -> bool {
    let mut rest = chars.get(at..).unwrap_or_default().iter();
    token.chars().all(|t| rest.next() == Some(&t))
}

/// The closing tokens [`fix_tokens`] looked for and did not find: a
/// search that found none from one place finds none from any later one, so
/// it is not made again. Without this, text of many openers and no closer
/// (`/* /* /* …`) cost a search to the end for each opener.
#[derive(Default)]
struct Closers {
    absent: Vec<Vec<char>>,
}

impl Closers {
    /// Where `needle` next occurs in `chars` from `from` (searches only
    /// forward: `from` never goes back between calls).
    fn find(&mut self, chars: &[char], from: usize, needle: &[char]) -> Option<usize> {
        if self.absent.iter().any(|absent| absent == needle) {
            return None;
        }
        let found = (from..chars.len().saturating_sub(needle.len() - 1)).find(|&i| chars[i..].starts_with(needle));
        if found.is_none() {
            self.absent.push(needle.to_vec());
        }
        found
    }
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
pub(super) fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let body = match rest.find('\n') {
        Some(newline) => &rest[newline + 1..],
        None => rest,
    };
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

/// serde_json's message in the gateway's words: `expected ',' or '}' at line 1 column 19`.
pub(super) fn describe(err: &serde_json::Error) -> String {
    err.to_string().replace('`', "'")
}
