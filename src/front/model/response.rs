//! A completion's calls repaired, each choice on its own: every
//! `tool_calls[i]` through the stages against the request's tools, and a
//! `content` that is nothing but calls (apart from residue: template
//! tokens, whitespace, fences, a thinking part) lifted into that many
//! `tool_calls`, in order. A call that cannot be repaired stays as it was;
//! a content holding anything else (a call inside prose) stays text. No
//! call is ever invented, merged or dropped.

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::exec::{
    declared::{Declared, Prepared},
    RepairKind,
};

/// One repair: the choice's index, the call's place among its
/// `tool_calls`, the kind, the tool, and the text before and after (for
/// the span's event).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Made {
    pub(super) choice: u64,
    pub(super) call: usize,
    pub(super) kind: RepairKind,
    pub(super) tool: String,
    pub(super) original: String,
    pub(super) repaired: String,
}

/// What `x-toolgate-repairs` says of one repair.
#[derive(Serialize)]
struct Said {
    choice: u64,
    call: usize,
    kind: &'static str,
}

/// A new call id: `call_` and 24 random letters and digits.
pub(super) fn call_id() -> String {
    use ring::rand::SecureRandom;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new().fill(&mut bytes).expect("the system's random source");
    let id: String = bytes.iter().map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char).collect();
    format!("call_{id}")
}

/// The repairs of the call `call` of the choice `choice`, one a kind (the
/// first of each), in the order made. A call `lifted` out of `content`
/// was read whole: its name and arguments, from that text.
pub(super) fn made(choice: u64, call: usize, prepared: &Prepared, lifted: Option<&str>) -> Vec<Made> {
    let mut made: Vec<Made> = Vec::new();
    let read = lifted.into_iter().flat_map(|content| {
        [
            (RepairKind::ToolName, content, prepared.name.as_str()),
            (RepairKind::ArgumentsJson, content, prepared.arguments_json.as_str()),
        ]
    });
    let repairs = prepared.repairs.iter().map(|r| (r.kind, r.original.as_str(), r.repaired.as_str()));
    for (kind, original, repaired) in read.chain(repairs) {
        if !made.iter().any(|m| m.kind == kind) {
            let (tool, original, repaired) = (prepared.name.clone(), original.to_owned(), repaired.to_owned());
            made.push(Made { choice, call, kind, tool, original, repaired });
        }
    }
    made
}

/// One emitted call (`{"function": {"name", "arguments"}}`) through the
/// stages: the repaired name and arguments when something was repaired,
/// `None` when nothing was, or it cannot be made ready (left as it was).
pub(super) fn repair_call(name: &str, arguments: &str, declared: &Declared) -> Option<Prepared> {
    declared.prepare(name, arguments).filter(|prepared| !prepared.repairs.is_empty())
}

/// Whether text could begin a call the reader accepts: `Some(true)` yes,
/// `Some(false)` no (words), `None` not known yet (a word still arriving).
pub(super) fn could_begin(text: &str, declared: &Declared) -> Option<bool> {
    let text = text.trim_start();
    let first = text.chars().next()?;
    if matches!(first, '<' | '{' | '[' | '`' | '\u{FF1C}') {
        return Some(true);
    }
    if !(first.is_alphanumeric() || first == '_') {
        return Some(false);
    }
    let end = text.find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')));
    let Some(end) = end else {
        // A word still arriving, unless it is already longer than a name.
        return (text.len() > 128).then_some(false);
    };
    let word = &text[..end];
    let next = text[end..].chars().next().expect("a character ends the word");
    let name = word.rsplit([':', '.']).find(|w| !w.is_empty()).unwrap_or(word);
    Some(matches!(next, '(' | '{' | '<' | '[') || declared.names(name) || word.eq_ignore_ascii_case("action:"))
}

/// The text after a thought that opens `content` (`<think>…</think>`), or
/// all of it.
fn after_thought(content: &str) -> &str {
    let start = content.trim_start();
    match start.strip_prefix("<think>").and_then(|rest| rest.find("</think>").map(|end| &rest[end + 8..])) {
        Some(after) => after,
        None => content,
    }
}

/// The calls a choice's `content` holds, lifted, when it holds nothing
/// else: each as a `tool_calls` entry (with `index` when `indexed`, as a
/// stream's deltas carry), and its repairs.
///
/// The text must begin as a call may (after a thought): text that begins
/// as words is prose, whatever follows, as a stream judges it before it
/// has seen the rest ([`could_begin`]).
pub(super) fn lift(content: &str, declared: &Declared, choice: u64, indexed: bool) -> Option<Vec<(Value, Vec<Made>)>> {
    if could_begin(after_thought(content), declared) != Some(true) {
        return None;
    }
    let calls = declared.calls_in(content)?;
    let lifted = calls.into_iter().enumerate().map(|(i, prepared)| {
        let repairs = made(choice, i, &prepared, Some(content));
        let mut call = json!({
            "id": call_id(),
            "type": "function",
            "function": {"name": prepared.name, "arguments": prepared.arguments_json},
        });
        if indexed {
            call.as_object_mut().expect("an object").insert("index".to_owned(), i.into());
        }
        (call, repairs)
    });
    Some(lifted.collect())
}

/// Repairs a whole (non-streamed) chat completion in place; what was made.
/// `lifting`: the request declared tools and its `tool_choice` is not
/// `none`.
pub(super) fn repair_completion(body: &mut Value, declared: &Declared, lifting: bool) -> Vec<Made> {
    let mut made = Vec::new();
    let Some(choices) = body.get_mut("choices").and_then(Value::as_array_mut) else { return made };
    for (at, choice) in choices.iter_mut().enumerate() {
        let index = choice.get("index").and_then(Value::as_u64).unwrap_or(at as u64);
        let Some(choice) = choice.as_object_mut() else { continue };
        let Some(message) = choice.get_mut("message").and_then(Value::as_object_mut) else { continue };
        let calls = message.get_mut("tool_calls").and_then(Value::as_array_mut).filter(|c| !c.is_empty());
        if let Some(calls) = calls {
            for (i, call) in calls.iter_mut().enumerate() {
                let Some(function) = call.get_mut("function").and_then(Value::as_object_mut) else { continue };
                if let Some(prepared) = repaired_function(function, declared) {
                    made.extend(self::made(index, i, &prepared, None));
                    function.insert("name".to_owned(), prepared.name.into());
                    function.insert("arguments".to_owned(), prepared.arguments_json.into());
                }
            }
            continue;
        }
        let content = message.get("content").and_then(Value::as_str).filter(|c| !c.trim().is_empty());
        let Some(lifted) = content.filter(|_| lifting).and_then(|c| lift(c, declared, index, false)) else { continue };
        let mut calls = Vec::with_capacity(lifted.len());
        for (call, repairs) in lifted {
            made.extend(repairs);
            calls.push(call);
        }
        message.insert("content".to_owned(), Value::Null);
        message.insert("tool_calls".to_owned(), Value::Array(calls));
        choice.insert("finish_reason".to_owned(), "tool_calls".into());
    }
    made
}

/// A `function` object's call repaired, if it was.
fn repaired_function(function: &Map<String, Value>, declared: &Declared) -> Option<Prepared> {
    let name = function.get("name")?.as_str()?;
    let arguments = match function.get("arguments") {
        Some(Value::String(text)) => text.clone(),
        // An object where the API has its JSON text.
        Some(other @ Value::Object(_)) => other.to_string(),
        _ => String::new(),
    };
    repair_call(name, &arguments, declared)
}

/// `made` as the `x-toolgate-repairs` header's JSON, at most `cap` bytes
/// (the repairs that fit, in order).
pub(super) fn header(made: &[Made], cap: usize) -> String {
    let mut text = String::from("[");
    for one in made {
        let said = Said { choice: one.choice, call: one.call, kind: one.kind.name() };
        let item = serde_json::to_string(&said).expect("serialisable");
        if text.len() + item.len() + 2 > cap {
            break;
        }
        if text.len() > 1 {
            text.push(',');
        }
        text.push_str(&item);
    }
    text.push(']');
    text
}
