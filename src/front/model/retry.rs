//! The door's second chance (docs/model-door.md, "Second chance"): when an
//! answer holds a call that cannot be made ready (a call in explicit
//! markup, a structured call, or text that begins as a call, with no ready
//! reading), the door asks the model again before the framework sees the
//! answer: the request's messages, the answer as it came, and a turn that
//! answers every call of it with what `Execute` would say. Prose is never
//! retried. Chat Completions, whole answers of one choice.

use bytes::Bytes;
use serde_json::{json, Value};

use crate::exec::declared::Declared;

/// The request header asking for extra requests.
pub(super) const RETRY_HEADER: &str = "x-toolgate-retry";

/// The response header saying how many were made.
pub(super) const RETRIES_HEADER: &str = "x-toolgate-retries";

/// What a ready call of an answer that is asked again is told.
const NOT_RUN: &str = "not run: another call of this answer could not be made; send all the calls again";

/// The turn that answers `answer` (a whole chat completion, as it came),
/// when it holds a call that cannot be made ready: `role: tool` messages
/// for its calls, or a `user` message for a call written as text. `None`:
/// nothing to ask again (every call ready, prose, several choices, an
/// answer that did not end naturally).
pub(super) fn corrective(answer: &Value, declared: &Declared, lifting_on: bool) -> Option<Vec<Value>> {
    let choices = answer.get("choices").and_then(Value::as_array)?;
    let [choice] = choices.as_slice() else { return None };
    let message = choice.get("message")?;
    let calls = message.get("tool_calls").and_then(Value::as_array).filter(|c| !c.is_empty());
    if let Some(calls) = calls {
        let mut said = Vec::with_capacity(calls.len());
        let mut failed = false;
        for call in calls {
            let function = call.get("function")?;
            let name = function.get("name").and_then(Value::as_str).unwrap_or_default();
            let arguments = match function.get("arguments") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            let content = match declared.explain(name, &arguments) {
                Ok(_) => NOT_RUN.to_owned(),
                Err(words) => {
                    failed = true;
                    words
                }
            };
            said.push(json!({"role": "tool", "tool_call_id": call.get("id").cloned().unwrap_or(Value::Null), "content": content}));
        }
        return failed.then_some(said);
    }
    if !lifting_on || choice.get("finish_reason").and_then(Value::as_str) != Some("stop") {
        return None;
    }
    let text = message.get("content").and_then(Value::as_str).filter(|t| !t.trim().is_empty())?;
    // Text that begins as a call (or holds explicit markup) and could not
    // be lifted; prose is never asked again.
    if declared.lift(text).is_some() || declared.is_prose(text) {
        return None;
    }
    let words = declared.explain("", text).err()?;
    Some(vec![json!({"role": "user", "content": words})])
}

/// The request asked again: `request` (its JSON body) with the answer's
/// message and the corrective turn appended to `messages`, whole (not
/// streamed).
pub(super) fn asked_again(request: &[u8], answer: &Value, corrective: Vec<Value>) -> Option<Bytes> {
    let mut body: Value = serde_json::from_slice(request).ok()?;
    let message = answer.pointer("/choices/0/message")?.clone();
    let messages = body.get_mut("messages")?.as_array_mut()?;
    messages.push(message);
    messages.extend(corrective);
    body["stream"] = false.into();
    Some(Bytes::from(body.to_string()))
}

/// `usage` added to `total` (each token count summed).
pub(super) fn add_usage(total: &mut Option<Value>, usage: Option<&Value>) {
    let Some(usage) = usage.and_then(Value::as_object) else { return };
    let total = total.get_or_insert_with(|| json!({}));
    for (key, value) in usage {
        if let Some(n) = value.as_u64() {
            let sum = total.get(key).and_then(Value::as_u64).unwrap_or(0) + n;
            total[key] = sum.into();
        }
    }
}

/// How many extra requests this request may make: `model_door.retry`, or
/// the header's N taken as `retry_max` when larger (`retry_max` 0: the
/// header is not read); `Err` for a header that is no integer.
pub(super) fn tries(header: Option<&str>, retry: u32, retry_max: u32) -> Result<u32, String> {
    match header {
        Some(text) if retry_max > 0 => match text.trim().parse::<u32>() {
            Ok(n) => Ok(n.min(retry_max)),
            Err(_) => Err(format!("{RETRY_HEADER} must be a whole number of extra requests, not '{text}'")),
        },
        _ => Ok(retry),
    }
}
