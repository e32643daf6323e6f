//! Whole calls written in other syntaxes (docs/repairs.md, "What is
//! repaired"): a model, a
//! chat template or an output parser left one call where only a name or
//! only arguments belong, in the syntax it was trained on. The reader turns
//! such text into a candidate call, a name as written and the arguments,
//! which then goes through the same lookup, value rules and validation as
//! any emitted call. It reads families, not strings:
//!
//! - **JSON call objects**: a name under one of the name keys
//!   ([`NAME_KEYS`]: `name`, `tool`, `tool_name`, `function`,
//!   `function_name`, `action`, `recipient_name`), or a `function` object
//!   holding one, beside the arguments under one other key (an
//!   object, or the JSON text of one), flattened beside an empty wrapper,
//!   or none; call metadata (`type`, `id`, `index`, `call_id`) ignored. An
//!   array of them (`[TOOL_CALLS][{…}]`, `functools[{…}]`) and a provider's
//!   parallel wrapper (`{"tool_uses": [{"recipient_name": …}]}`) hold as
//!   many calls as elements.
//! - **Tags** ([`tags`]): `<function=NAME>` / `<invoke name="NAME">` with
//!   `<parameter=KEY>` / `<parameter name="KEY">` / `<arg_key>`…`<arg_value>`
//!   children or a JSON body; a wrapper element (`<tool_call>`,
//!   `<function_calls>`, `<minimax:tool_call>`, …) read again inside; a
//!   `<function>NAME</function>` element beside a JSON object.
//! - **Python-style calls** ([`python`]): `name(key=value, …)` with Python
//!   literals, also inside `[…]` or `print(…)`, after a namespace
//!   (`default_api.name`) or with `.call`.
//! - **A name, then its arguments**: `call:NAME{…}`, `NAME\n```json\n{…}```,
//!   `[TOOL_CALLS]NAME[ARGS]{…}`, `functions.NAME:0<|tool_call_argument_begin|>{…}`,
//!   `NAME <arg_key>…`; and the agent frameworks' `Action: NAME` /
//!   `Action Input: {…}`.
//!
//! Around any of them, template residue is set aside: special tokens in
//! any alphabet, `<|tool_call>`-style half tokens, `[MARKER]`s, Markdown
//! fences and a language tag line. Text that is neither residue nor the
//! call (prose) means no reading. Values written as text in tags stay
//! strings here; the value rules of the schema read them later.
//!
//! Never a guess: more than one call is [`Reading::Many`], which the caller
//! answers with [`many`] (nothing runs); a name the reader finds is a
//! candidate that must mean the same tool as the emitted name, if that
//! names one.

mod general;
pub(crate) use general::read_each;
mod python;
mod tags;
pub(crate) mod words;

pub(crate) use general::{Anchor, Tool};

use serde_json::{Map, Value};

use super::{json::literal, work};
use crate::{
    catalog::admitted_types,
    exec::{limits::ArgumentLimits, outcome::ToolError},
    similar::residue,
};

/// How many wrappers deep the reader looks (`<tool_call>` around
/// `<function=…>` is two).
const MAX_NESTING: usize = 4;

/// Keys that name the tool in a JSON call object (and, as a label, in
/// text: `Action: NAME`), a closed list extended only with the form that
/// needs it: `name` and `function` (OpenAI, and the `function` of text
/// formats), `tool` / `tool_name` (agent frameworks), `function_name`,
/// `action` (ReAct, LangChain's JSON agent), `recipient_name` (the
/// parallel wrapper's).
const NAME_KEYS: &[&str] = &["name", "tool", "tool_name", "function", "function_name", "action", "recipient_name"];

/// Keys that hold the arguments in a JSON call object; a value under one
/// of them must be an object or the JSON text of one.
const ARGUMENT_KEYS: &[&str] =
    &["arguments", "parameters", "args", "input", "action_input", "tool_input", "kwargs", "params", "argument"];

/// One call the reader found.
#[derive(Debug, PartialEq)]
pub(crate) struct Found {
    /// The name as written (`default_api.get_weather`), for the name stage;
    /// none when only arguments were written (`<parameter=city>…`).
    pub(crate) name: Option<String>,
    pub(crate) arguments: Arguments,
}

/// The arguments of a found call.
#[derive(Debug, PartialEq)]
pub(crate) enum Arguments {
    /// JSON (or JSON with the slips the syntax stage repairs) text.
    Text(String),
    /// Values read from another syntax (Python literals, a body's key/value
    /// pairs).
    Values(Map<String, Value>),
    /// Values written as markup: each the text of its element, read later
    /// by the parameter's schema ([`Arguments::typed`]).
    Markup(Map<String, Value>),
    /// None written: `get_weather()`.
    Absent,
    /// A call object naming a tool and nothing else (`{"name": "x"}`): a
    /// call without arguments, or one whose arguments were left out; held.
    Unwritten,
}

impl Arguments {
    /// The same, each value written as markup read by its parameter's
    /// schema (`properties` of the tool's schema): where the schema admits
    /// more than one type (`anyOf`, `oneOf`, a list of types) and the text
    /// is a JSON value of another type than string it admits (`null` for a
    /// nullable string, an object), that value; where it admits only
    /// strings, the text as written (a value the markup said was JSON
    /// included). Any other schema of one type is the value rules' to read.
    pub(crate) fn typed(self, properties: Option<&Map<String, Value>>, limits: ArgumentLimits) -> Self {
        let (mut values, properties) = match (self, properties) {
            (Arguments::Markup(values), Some(properties)) => (values, properties),
            (other, _) => return other,
        };
        for (key, value) in values.iter_mut() {
            let Some(schema) = properties.get(key) else { continue };
            let admitted = admitted_types(schema);
            match &*value {
                // `42.0` written as markup for an integer: 42 (a JSON number
                // `42.0` is valid as it is).
                Value::String(text) if admitted == ["integer"] => {
                    if let Some(whole) = integral(text.trim()) {
                        *value = whole;
                    }
                }
                // A string parameter keeps its text as written, even where
                // the markup said it was JSON (`string="false"`).
                parsed if admitted == ["string"] && !parsed.is_string() => *value = Value::String(parsed.to_string()),
                Value::String(text) if admitted.len() >= 2 => {
                    if let Some(parsed) = literal(text.trim(), limits).filter(|v| !v.is_string()) {
                        if admitted.iter().any(|t| super::values::is_of(t, &parsed)) {
                            *value = parsed;
                        }
                    }
                }
                _ => {}
            }
        }
        Arguments::Markup(values)
    }

    /// The arguments as JSON text for the syntax stage; `None` when absent.
    pub(crate) fn into_text(self) -> Option<String> {
        match self {
            Arguments::Text(text) => Some(text),
            Arguments::Values(values) | Arguments::Markup(values) => {
                Some(serde_json::to_string(&values).expect("JSON values serialise"))
            }
            Arguments::Absent | Arguments::Unwritten => None,
        }
    }
}

/// `42.0` (digits, a point, only zeros) as the integer 42.
fn integral(text: &str) -> Option<Value> {
    let (whole, zeros) = text.split_once('.')?;
    let digits = whole.strip_prefix('-').unwrap_or(whole);
    let plain = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && !zeros.is_empty();
    if !plain || !zeros.bytes().all(|b| b == b'0') || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    whole.parse::<i64>().ok().map(Value::from)
}

/// What a text holds.
#[derive(Debug, PartialEq)]
pub(crate) enum Reading {
    Nothing,
    One(Found),
    /// More than one call: never cut to one.
    Many(usize),
    /// Text, then one complete call (the general reading): two readings,
    /// the text as it is or the call; never run ([`after_prose`]).
    AfterProse(Found),
    /// A call (the last one read), then words: prose by the words rule
    /// ([`words`]); never run ([`then_words`]).
    Words(Found),
}

/// The answer to text holding `count` calls where one belongs.
pub(crate) fn many(count: usize) -> ToolError {
    named_many(count, &[])
}

/// [`many`], naming the calls it can: `first`, the name a call was sent
/// under (its arguments begin the text), then each name of the caller's
/// tools the text writes as a word, in order.
pub(crate) fn many_named(count: usize, first: Option<&str>, text: &str, anchor: &dyn Anchor) -> ToolError {
    let mut names: Vec<String> = first.filter(|f| !f.trim().is_empty()).map(str::to_owned).into_iter().collect();
    let word = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-');
    let mut rest = text;
    while let Some(start) = rest.find(word) {
        if !work::charge(start + 1) {
            break;
        }
        let len = rest[start..].find(|c: char| !word(c)).unwrap_or(rest.len() - start);
        let candidate = &rest[start..start + len];
        if anchor.tool(candidate).is_some() {
            names.push(candidate.to_owned());
        }
        rest = &rest[start + len..];
    }
    named_many(count, &names)
}

fn named_many(count: usize, names: &[String]) -> ToolError {
    let named = match names {
        [] => String::new(),
        names => {
            let quoted: Vec<String> = names.iter().take(8).map(|n| format!("'{n}'")).collect();
            format!(" ({})", quoted.join(", then "))
        }
    };
    ToolError::invalid_arguments(format!(
        "{count} tool calls arrived in one{named}, and none was run: send each as a tool call of its own, one call \
         per tool call"
    ))
}

/// The answer to text, then one call of `name`, where one call belongs.
pub(crate) fn after_prose(name: Option<&str>) -> ToolError {
    let call = name.map_or_else(|| "a call".to_owned(), |name| format!("a call of '{name}'"));
    ToolError::invalid_arguments(format!(
        "the text holds words, then {call}: it reads as the words or as the call, and nothing was run: \
         send the call alone as the tool call"
    ))
}

/// The answer to a call of `name`, then words, where one call belongs.
pub(crate) fn then_words(name: Option<&str>) -> ToolError {
    let call = name.map_or_else(|| "a call".to_owned(), |name| format!("a call of '{name}'"));
    ToolError::invalid_arguments(format!(
        "the text holds {call}, then words: it reads as the call or as the words, and nothing was run: \
         send the call alone as the tool call"
    ))
}

/// The call `text` holds written whole, in any of the module's syntaxes.
pub(crate) fn read(text: &str, limits: ArgumentLimits) -> Reading {
    let folded = residue::fold_tokens(text);
    read_in(&folded, limits, 0)
}

/// The same, and when no family reads it, the general reading by
/// structure, anchored by the caller's tools ([`general`]).
pub(crate) fn read_anchored(text: &str, anchor: &dyn Anchor, limits: ArgumentLimits) -> Reading {
    if words::code_not_call(text) {
        return Reading::Nothing;
    }
    // Plain JSON (one value, nothing around it) holds no call the general
    // reading could find that the families did not, but an object whose
    // only key may be a tool (`{"get_weather": {…}}`).
    let markup = text.contains('<')
        || !text.trim_start().starts_with(['{', '['])
        || serde_json::from_str::<serde::de::IgnoredAny>(text).is_err();
    let one_key = || {
        serde_json::from_str::<std::collections::BTreeMap<String, serde::de::IgnoredAny>>(text)
            .is_ok_and(|object| object.len() == 1)
    };
    match read(text, limits) {
        Reading::Nothing if markup || one_key() => general::read(text, anchor, limits),
        // A family's reading naming none of the caller's tools (markup taken
        // for a name: `<tool_call>` before an object it never closed): the
        // general reading, if it reads a call.
        // So is a name the family read with words around it (`Tool: NAME`).
        Reading::One(Found { name: Some(name), arguments })
            if markup && (anchor.tool(&name).is_none() || !is_plain_name(&name)) =>
        {
            match general::read(text, anchor, limits) {
                Reading::Nothing => Reading::One(Found { name: Some(name), arguments }),
                general => general,
            }
        }
        reading => reading,
    }
}

/// A name as one word: letters, digits, `_`, `-`, `.`, `:`, `/`.
fn is_plain_name(name: &str) -> bool {
    name.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/'))
}

fn read_in(text: &str, limits: ArgumentLimits, depth: usize) -> Reading {
    let text = strip_residue(text);
    if depth > MAX_NESTING || text.is_empty() || !work::charge(text.len()) {
        return Reading::Nothing;
    }
    if text.starts_with(['{', '[']) {
        if let Some(value) = literal(text, limits) {
            return from_json(&value);
        }
        // A call object, then more: the calls after it are counted (never
        // dropped); anything else after it is no reading.
        if let Some(end) = balanced_end(text) {
            let first = match literal(&text[..end], limits).map(|v| from_json(&v)) {
                Some(Reading::One(_)) => 1,
                Some(Reading::Many(n)) => n,
                _ => 0,
            };
            if first > 0 {
                let tail = strip_residue(&text[end..]);
                return match count(tail, limits) {
                    // Closers a template left (`</tool_call>`): the call alone.
                    0 if only_closers(tail) => {
                        literal(&text[..end], limits).map_or(Reading::Nothing, |v| from_json(&v))
                    }
                    0 => Reading::Nothing,
                    more => Reading::Many(first + more),
                };
            }
        }
    }
    if text.starts_with('<') {
        let reading = tags::read(text, limits, depth);
        if reading != Reading::Nothing {
            return reading;
        }
    }
    if let Some(reading) = python::read(text) {
        return reading;
    }
    name_then_arguments(text, limits)
}

/// Whether `text` is only closing tags (`</tool_call>`, `</TOOLCALL>`),
/// whitespace between.
fn only_closers(text: &str) -> bool {
    let mut rest = text.trim();
    while let Some(after) = rest.strip_prefix("</") {
        let Some(end) = after.find('>') else { return false };
        if end == 0 || !is_word(&after[..end].replace([':', '-', '.'], "_")) {
            return false;
        }
        rest = after[end + 1..].trim_start();
    }
    rest.is_empty()
}

/// How many calls `text` (what followed a call's arguments) holds: JSON
/// objects, call elements in tags (a name alone in one included) and
/// Python-style calls with arguments, and with `anchor` a line that is only
/// a name of the caller's tools; prose and closing residue hold none.
pub(crate) fn count(text: &str, limits: ArgumentLimits) -> usize {
    count_anchored(text, limits, None)
}

/// [`count`], with the caller's tools to know a name alone on its line.
pub(crate) fn count_anchored(text: &str, limits: ArgumentLimits, anchor: Option<&dyn Anchor>) -> usize {
    let text = residue::fold_tokens(text);
    let mut count = 0;
    let mut at = 0;
    let mut unclosed = tags::Unclosed::default();
    // An object closes at a `}` or `]`: none after the last one.
    let last_closer = text.rfind(['}', ']']);
    // A meter spent stops the count: the call is then refused whole.
    while at < text.len() && !work::spent() {
        let rest = &text[at..];
        let c = rest.chars().next().expect("not at the end");
        if c == '{' && last_closer.is_some_and(|last| last > at) {
            if let Some(end) = balanced_end(rest) {
                if literal(&rest[..end], limits).is_some_and(|v| v.is_object()) {
                    count += 1;
                    at += end;
                    continue;
                }
            }
        }
        if c == '<' {
            if let Some((calls, end)) = tags::calls_at(rest, at, limits, &mut unclosed) {
                count += calls;
                at += end;
                continue;
            }
        }
        if let Some(anchor) = anchor.filter(|_| c.is_alphabetic() && (at == 0 || text[..at].ends_with('\n'))) {
            let line = rest.split('\n').next().unwrap_or(rest);
            work::charge(line.len());
            let name = line.trim();
            let plain = name.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
            if plain && anchor.tool(name).is_some() {
                count += 1;
                at += line.len();
                continue;
            }
        }
        if c.is_alphabetic() && !text[..at].ends_with(|p: char| p.is_alphanumeric() || p == '_') {
            if let Some(end) = react_call_end(rest, last_closer.is_some_and(|last| last > at)) {
                count += 1;
                at += end;
                continue;
            }
            match python::calls_at(rest) {
                Ok((calls, end)) => {
                    count += calls;
                    at += end;
                }
                // A name that no `(` follows: no call starts inside it
                // either (each would be a part of the same name).
                Err(name) => at += name.max(c.len_utf8()),
            }
            continue;
        }
        at += c.len_utf8();
    }
    count
}

/// The calls a JSON value holds: a call object, an array of them, or a
/// parallel wrapper (one key, beside metadata, holding an array of them).
/// An array of two or more plain objects is as many calls' arguments.
pub(super) fn from_json(value: &Value) -> Reading {
    match value {
        Value::Object(object) => {
            if let Some(found) = call_object(object) {
                return Reading::One(found);
            }
            let mut lists = object.iter().filter(|(k, v)| !is_metadata(k, v));
            match (lists.next(), lists.next()) {
                (Some((_, Value::Array(items))), None) if !items.is_empty() => calls_in_array(items, false),
                _ => Reading::Nothing,
            }
        }
        Value::Array(items) => calls_in_array(items, true),
        _ => Reading::Nothing,
    }
}

/// Every item a call object: one or many; `plain_objects_count`: two or
/// more objects that are not calls are as many calls' arguments.
fn calls_in_array(items: &[Value], plain_objects_count: bool) -> Reading {
    let calls: Vec<Found> = items.iter().filter_map(|item| item.as_object().and_then(call_object)).collect();
    match (calls.len(), items.len()) {
        (1, 1) => Reading::One(calls.into_iter().next().expect("one")),
        (n, total) if n == total && n > 1 => Reading::Many(n),
        (_, total) if plain_objects_count && total > 1 && items.iter().all(Value::is_object) => Reading::Many(total),
        _ => Reading::Nothing,
    }
}

/// A JSON object that is one call: its name, and its arguments.
fn call_object(object: &Map<String, Value>) -> Option<Found> {
    if let Some(Value::Object(function)) = object.get("function") {
        // The OpenAI shape: `{"type": "function", "id": …, "function": {"name", "arguments"}}`.
        if object.iter().all(|(k, v)| k == "function" || is_metadata(k, v)) {
            return call_object(function);
        }
        return None;
    }
    let mut names = NAME_KEYS.iter().filter_map(|k| object.get(*k).map(|v| (*k, v)));
    let (name_key, name) = match (names.next(), names.next()) {
        (Some((key, Value::String(name))), None) => (key, name),
        _ => return None,
    };
    let rest: Map<String, Value> = object
        .iter()
        .filter(|(k, v)| *k != name_key && !is_metadata(k, v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let arguments = call_arguments(rest)?;
    Some(Found { name: Some(name.clone()), arguments })
}

/// Call metadata: `type` of a call kind, a string `id` or `call_id`, a
/// numeric `index`.
fn is_metadata(key: &str, value: &Value) -> bool {
    match key {
        "type" => value.as_str().is_some_and(|t| super::envelope::CALL_TYPES.contains(&t)),
        "id" | "call_id" => value.is_string(),
        "index" => value.is_number(),
        _ => false,
    }
}

/// The arguments beside a call's name: one wrapper holding an object or
/// its JSON text; the other members when the only wrapper is empty
/// (flattened beside it); the members themselves when no wrapper is there;
/// none.
fn call_arguments(mut rest: Map<String, Value>) -> Option<Arguments> {
    let wrappers: Vec<String> = rest.keys().filter(|k| ARGUMENT_KEYS.contains(&k.as_str())).cloned().collect();
    match wrappers.as_slice() {
        [] if rest.is_empty() => Some(Arguments::Unwritten),
        [] => Some(Arguments::Values(rest)),
        [wrapper] => {
            let value = rest.remove(wrapper).expect("present");
            let empty = is_empty_wrapper(&value);
            match (value, rest.is_empty()) {
                (_, false) if empty => Some(Arguments::Values(rest)),
                (Value::Object(inner), true) => Some(Arguments::Values(inner)),
                (Value::String(text), true) if text.trim_start().starts_with('{') => Some(Arguments::Text(text)),
                (Value::String(text), true) if text.trim().is_empty() => Some(Arguments::Absent),
                (Value::Null, true) => Some(Arguments::Absent),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `{}`, `"{}"`, `""` or `null`: a wrapper with nothing inside.
fn is_empty_wrapper(value: &Value) -> bool {
    match value {
        Value::Object(inner) => inner.is_empty(),
        Value::String(text) => matches!(text.trim(), "" | "{}"),
        Value::Null => true,
        _ => false,
    }
}

/// Language tags a model writes on a line of their own before the
/// arguments (a fence's tag without the fence).
const LANGUAGE_TAGS: &[&str] =
    &["json", "json5", "jsonc", "javascript", "js", "python", "py", "tool_code", "tool_call"];

/// `text` without the residue templates leave around a call: special tokens
/// (`<|python_tag|>`, and the half tokens `<|tool_call>` / `<tool_call|>`),
/// bracketed markers (`[TOOL_CALLS]`), `<start_…>` / `<end_…>` tags, a
/// Markdown fence, a language tag line. Bounded.
pub(crate) fn strip_residue(text: &str) -> &str {
    let mut text = text.trim();
    for _ in 0..16 {
        let before = text.len();
        if !work::charge(before) {
            break;
        }
        if let Some(len) = residue::special_token_len(text).or_else(|| half_token_len(text)) {
            text = text[len..].trim_start();
        }
        if let Some(start) = trailing_token_start(text) {
            text = text[..start].trim_end();
        }
        if let Some(rest) = text.strip_prefix('[') {
            if let Some(end) = rest.find(']') {
                let marker = &rest[..end];
                if !marker.is_empty()
                    && marker.chars().all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
                {
                    text = rest[end + 1..].trim_start();
                }
            }
        }
        if text.starts_with("<start_") || text.starts_with("<end_") {
            if let Some(end) = text.find('>').filter(|&end| is_word(&text[1..end])) {
                text = text[end + 1..].trim_start();
            }
        }
        if let Some(start) = text.rfind("<end_") {
            if text[start + 1..].strip_suffix('>').is_some_and(is_word) {
                text = text[..start].trim_end();
            }
        }
        if let Some(rest) = text.strip_prefix("```") {
            let body = rest.split_once('\n').map_or("", |(_, body)| body);
            text = body.trim_end().strip_suffix("```").unwrap_or(body).trim();
        } else if let Some(body) = text.strip_suffix("```") {
            text = body.trim_end();
        }
        if let Some((first, rest)) = text.split_once('\n') {
            if is_language_tag(first.trim()) {
                text = rest.trim_start();
            }
        }
        if text.len() == before {
            break;
        }
    }
    text
}

/// Whether `word` is a language tag ([`LANGUAGE_TAGS`]), in any case.
pub(crate) fn is_language_tag(word: &str) -> bool {
    LANGUAGE_TAGS.iter().any(|tag| tag.eq_ignore_ascii_case(word))
}

/// A half special token at the start: `<|tool_call>` (or `<tool_call|>`).
pub(super) fn half_token_len(text: &str) -> Option<usize> {
    let inner_start = if text.starts_with("<|") {
        2
    } else if text.starts_with('<') {
        1
    } else {
        return None;
    };
    // The token's word (at most 64 bytes), then `>` (or `|>`): nothing
    // past the word is looked at.
    let word = text.as_bytes()[inner_start..].iter().take(64).take_while(|b| b.is_ascii_alphanumeric() || **b == b'_');
    let len = word.count();
    work::charge(inner_start + len + 2);
    let rest = &text[inner_start + len..];
    let closed = match inner_start {
        1 => rest.starts_with("|>").then_some(2),
        _ => rest.starts_with('>').then_some(1),
    };
    (len > 0).then_some(())?;
    closed.map(|closer| inner_start + len + closer)
}

/// Whether `text` is made of ASCII letters, digits and `_` only (the word
/// of a template's tag or token).
fn is_word(text: &str) -> bool {
    text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Where a special or half token that ends `text` starts.
fn trailing_token_start(text: &str) -> Option<usize> {
    if !text.ends_with('>') {
        return None;
    }
    let start = text.rfind('<')?;
    let token = &text[start..];
    let whole = residue::special_token_len(token) == Some(token.len());
    let half = half_token_len(token) == Some(token.len()) && (token.starts_with("<|") || token.ends_with("|>"));
    (whole || half).then_some(start)
}

/// Where the object or array `text` starts with ends (the index after its
/// closing bracket), counting brackets outside strings in `"`, `'` and the
/// quote tokens `<|"|>` and `<escape>`; `None` when it is never closed.
pub(crate) fn balanced_end(text: &str) -> Option<usize> {
    if work::spent() {
        return None;
    }
    let end = balanced_end_unmetered(text);
    work::charge(end.unwrap_or(text.len()));
    end
}

fn balanced_end_unmetered(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<&str> = None;
    let mut at = 0;
    let bytes = text.as_bytes();
    // Byte by byte: every delimiter is ASCII, and no byte of a multi-byte
    // character is one.
    while at < bytes.len() {
        let b = bytes[at];
        if let Some(q) = quote {
            if b == b'\\' && q.len() == 1 {
                at += 2;
                continue;
            }
            if b == q.as_bytes()[0] && text[at..].starts_with(q) {
                quote = None;
                at += q.len();
                continue;
            }
        } else {
            if matches!(b, b'<' | b'"' | b'\'') {
                if let Some(q) = ["<|\"|>", "<escape>", "\"", "'"].into_iter().find(|q| text[at..].starts_with(q)) {
                    quote = Some(q);
                    at += q.len();
                    continue;
                }
            }
            match b {
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        return Some(at + 1);
                    }
                }
                _ => {}
            }
        }
        at += 1;
    }
    None
}

/// A name written before its arguments: `call:NAME{…}`, `NAME\n```json
/// {…}```, `[TOOL_CALLS]NAME[ARGS]{…}`, `NAME(…)` after residue, `NAME
/// <arg_key>…`, `Action: NAME` / `Action Input: {…}`. The name is what
/// comes before the arguments, residue included (the name stage sets it
/// aside); after the arguments only residue may follow.
fn name_then_arguments(text: &str, limits: ArgumentLimits) -> Reading {
    let Some(start) = arguments_start(text) else { return Reading::Nothing };
    let head = react_name(&text[..start]).unwrap_or(&text[..start]).trim();
    let head = head.trim_end_matches(|c: char| c == '`' || c.is_whitespace());
    let head = head.strip_suffix("json").map_or(head, str::trim_end).trim_end_matches('`').trim();
    if head.is_empty() || head.contains(['{', '}', '"']) {
        return Reading::Nothing;
    }
    let body = &text[start..];
    let (arguments, tail) = if body.starts_with('{') {
        let Some(end) = balanced_end(body) else { return Reading::Nothing };
        (Arguments::Text(body[..end].to_owned()), &body[end..])
    } else {
        match tags::parameters(body) {
            Some(values) => (Arguments::Markup(values), ""),
            None => return Reading::Nothing,
        }
    };
    // A tag opened before the name (`<tool_call>NAME…`) must close after
    // the arguments: else the text may have been cut off there.
    if unclosed(&text[..start], &text[start..]) {
        return Reading::Nothing;
    }
    let tail = strip_residue(tail.trim_start_matches('`').trim());
    if !tail.is_empty() {
        return match count(tail, limits) {
            0 => Reading::Nothing,
            more => Reading::Many(1 + more),
        };
    }
    Reading::One(Found { name: Some(head.to_owned()), arguments })
}

/// Whether `head` opens a plain tag (`<tool_call>`, not a special token)
/// whose closer `rest` lacks.
fn unclosed(head: &str, rest: &str) -> bool {
    let mut from = 0;
    while let Some(at) = head[from..].find('<').map(|at| from + at) {
        from = at + 1;
        let inner = &head[at + 1..];
        let len =
            inner.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':'))).unwrap_or(inner.len());
        let name = &inner[..len];
        if name.is_empty() || !inner[len..].starts_with(['>', ' ']) {
            continue;
        }
        if !rest.contains(&format!("</{name}>")) {
            return true;
        }
    }
    false
}

/// Where the arguments start after a name: the first `{`, or the first
/// parameter tag, outside special tokens.
fn arguments_start(text: &str) -> Option<usize> {
    let mut at = 0;
    while at < text.len() && work::charge(1) {
        let rest = &text[at..];
        if let Some(len) = residue::special_token_len(rest) {
            at += len;
            continue;
        }
        if rest.starts_with('{') || tags::starts_parameters(rest) {
            return Some(at);
        }
        at += rest.chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// Where a ReAct-style call at the start of `text` ends: `Action: NAME`
/// (a name on the line), then an `Action Input:` line and its object, if
/// they follow. Arguments are not needed: `Action: NAME` alone is a call.
/// `closes`: a closer follows somewhere (else no object is looked for).
fn react_call_end(text: &str, closes: bool) -> Option<usize> {
    let rest = text.strip_prefix("Action:")?;
    let line = rest.find('\n').unwrap_or(rest.len());
    work::charge(line);
    let name = rest[..line].trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    let mut end = "Action:".len() + line;
    let after = &text[end..];
    let input = after.trim_start();
    if let Some(arguments) = input.strip_prefix("Action Input:") {
        end += after.len() - arguments.len();
        let object = arguments.trim_start();
        if closes && object.starts_with('{') {
            if let Some(close) = balanced_end(object) {
                end += arguments.len() - object.len() + close;
            }
        }
    }
    Some(end)
}

/// The name of a ReAct-style `Action: NAME` / `Action Input:` head.
fn react_name(head: &str) -> Option<&str> {
    let rest = head.trim().strip_prefix("Action:")?;
    let (name, input) = rest.split_once('\n')?;
    let input = input.trim();
    (input.strip_prefix("Action Input:").is_some_and(|r| r.trim().is_empty())).then_some(name.trim())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one(text: &str) -> (Option<String>, Value) {
        match read(text, ArgumentLimits::default()) {
            Reading::One(found) => {
                let arguments = match found.arguments.into_text() {
                    Some(text) => literal(&text, ArgumentLimits::default()).unwrap_or(Value::String(text)),
                    None => json!({}),
                };
                (found.name, arguments)
            }
            other => panic!("{text}: {other:?}"),
        }
    }

    fn weather(text: &str) {
        let (name, arguments) = one(text);
        let name = name.unwrap_or_else(|| panic!("{text}: no name"));
        assert!(name.contains("get_weather"), "{text}: {name}");
        assert_eq!(arguments, json!({"city": "Paris"}), "{text}");
    }

    #[test]
    fn json_call_objects_arrays_and_wrappers() {
        for text in [
            r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#,
            r#"{"name": "get_weather", "parameters": "{\"city\": \"Paris\"}"}"#,
            r#"{"type": "function", "id": "call_1", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}"#,
            r#"{"tool_uses": [{"recipient_name": "functions.get_weather", "parameters": {"city": "Paris"}}]}"#,
            r#"{"tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}"#,
            r#"{"action": "get_weather", "action_input": {"city": "Paris"}}"#,
            r#"{"tool_name": "get_weather", "parameters": {"city": "Paris"}}"#,
            r#"{"name": "get_weather", "arguments": {}, "city": "Paris"}"#,
            r#"{"name": "get_weather", "city": "Paris"}"#,
            r#"[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]"#,
            r#"<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}"#,
            "```json\n[{\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}]\n```",
        ] {
            weather(text);
        }
        assert_eq!(
            read(r#"functools[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]"#, Default::default()),
            Reading::Many(2)
        );
        assert_eq!(read(r#"[{"city": "Paris"}, {"city": "Rome"}]"#, Default::default()), Reading::Many(2));
        // Two wrappers, a name that is not a string, two names: no reading.
        for text in [
            r#"{"name": "get_weather", "arguments": {"city": "Paris"}, "input": {"city": "Rome"}}"#,
            r#"{"name": 5, "arguments": {}}"#,
            r#"{"name": "a", "tool": "b", "arguments": {}}"#,
            r#"{"name": "get_weather", "arguments": "hello"}"#,
            r#"{"city": "Paris"}"#,
        ] {
            assert_eq!(read(text, Default::default()), Reading::Nothing, "{text}");
        }
    }

    #[test]
    fn names_written_before_their_arguments() {
        for text in [
            "call:get_weather{city:<|\"|>Paris<|\"|>}",
            "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>",
            "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>",
            "<\u{FF5C}tool\u{2581}calls\u{2581}begin\u{FF5C}><\u{FF5C}tool\u{2581}call\u{2581}begin\u{FF5C}>function<\u{FF5C}tool\u{2581}sep\u{FF5C}>get_weather\n```json\n{\"city\": \"Paris\"}\n```<\u{FF5C}tool\u{2581}call\u{2581}end\u{FF5C}><\u{FF5C}tool\u{2581}calls\u{2581}end\u{FF5C}>",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
            "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}",
            "Action: get_weather\nAction Input: {\"city\": \"Paris\"}",
            "get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>",
        ] {
            weather(text);
        }
        // A second call after the first one's arguments is never dropped.
        assert_eq!(
            read(
                "functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{\"city\": \"Rome\"}<|tool_call_end|>",
                Default::default()
            ),
            Reading::Many(2)
        );
        // Prose after the arguments is no reading; a brace in the name neither.
        assert_eq!(read("get_weather {\"city\": \"Paris\"} and then more", Default::default()), Reading::Nothing);
    }

    #[test]
    fn residue_around_a_call_is_set_aside() {
        assert_eq!(strip_residue("<|python_tag|>[TOOL_CALLS] ```json\nx\n```"), "x");
        assert_eq!(strip_residue("json\n{\"a\": 1}"), "{\"a\": 1}");
        assert_eq!(strip_residue("<|tool_call>x<tool_call|>"), "x");
        assert_eq!(strip_residue("jsonx\n{}"), "jsonx\n{}");
    }

    #[test]
    fn calls_after_arguments_are_counted() {
        let limits = ArgumentLimits::default();
        assert_eq!(count("\n\nLet me know if you need anything else!", limits), 0);
        assert_eq!(count("<|tool_call_end|>", limits), 0);
        assert_eq!(count("<|tool_call_end|><|tool_call_begin|>x:1<|tool_call_argument_begin|>{\"a\": 1}", limits), 1);
        assert_eq!(count(" {\"b\": 2} {\"c\": 3}", limits), 2);
        assert_eq!(
            count(
                "</tool_call>\n<tool_call>\n<function=x>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
                limits
            ),
            1
        );
        assert_eq!(count(" then get_weather(city='Rome')", limits), 1);
        assert_eq!(count(" (e.g. Paris) {not json}", limits), 0);
    }

    #[test]
    fn a_call_without_arguments_after_arguments_is_a_call() {
        let limits = ArgumentLimits::default();
        for tail in [
            " delete_marker()",
            "\ndefault_api.delete_marker()",
            "\n<tool_call>\n<function=delete_marker>\n</function>\n</tool_call>",
            "\n<tool_call>{\"name\": \"delete_marker\"}</tool_call>",
            "\n<tool_call>{\"name\": \"delete_marker\", \"arguments\": {}}</tool_call>",
            "\n<tool_call>delete_marker()</tool_call>",
            "\n<invoke name=\"delete_marker\"></invoke>",
            "\nAction: delete_marker\nAction Input: ",
            "\nAction: delete_marker\nAction Input: {}",
            "\nAction: delete_marker",
        ] {
            assert_eq!(count(tail, limits), 1, "{tail:?}");
        }
        // Prose, parentheses and closers are no call.
        for tail in [" (e.g. Paris)", "\n</tool_call>", " Done.", "\nAction:", " see (above)"] {
            assert_eq!(count(tail, limits), 0, "{tail:?}");
        }
    }
}
