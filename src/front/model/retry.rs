//! The door's second chance (docs/model-door.md, "Second chance"): when an
//! answer holds a call that cannot be made ready (a call in explicit
//! markup, a structured call, or text that begins as a call, with no ready
//! reading), the door asks the model again before the framework sees the
//! answer: the request's messages, the answer as it came, and a turn that
//! answers every call of it with what `Execute` would say. Prose is never
//! retried. Every API, whole answers of one choice; Chat Completions
//! streams too, while nothing but a thought was sent.

use bytes::Bytes;
use serde_json::{json, Value};

use crate::{config::Api, exec::declared::Declared};

/// The request header asking for extra requests.
pub(super) const RETRY_HEADER: &str = "x-toolgate-retry";

/// The response header saying how many were made.
pub(super) const RETRIES_HEADER: &str = "x-toolgate-retries";

/// What a ready call of an answer that is asked again is told.
const NOT_RUN: &str = "not run: another call of this answer could not be made; send all the calls again";

/// The turn that answers `answer` (a whole answer of `api`, as it came)
/// when it holds a call that cannot be made ready: every call of it
/// answered (Chat: `role: tool` messages; Responses:
/// `function_call_output` items; Messages: one `user` message of
/// `tool_result` blocks, `is_error: true`), or a `user` message for a call
/// written as text. `None`: nothing to ask again (every call ready, prose,
/// several choices, an answer that did not end naturally).
pub(super) fn corrective(answer: &Value, declared: &Declared, lifting_on: bool, api: Api) -> Option<Vec<Value>> {
    let said = said(answer, api)?;
    if !said.calls.is_empty() {
        let mut failed = false;
        let answers: Vec<(Value, String)> = said
            .calls
            .iter()
            .map(|(id, name, arguments)| match declared.explain(name, arguments) {
                Ok(_) => (id.clone(), NOT_RUN.to_owned()),
                Err(words) => {
                    failed = true;
                    (id.clone(), words)
                }
            })
            .collect();
        if !failed {
            return None;
        }
        return Some(match api {
            Api::Chat => answers
                .into_iter()
                .map(|(id, content)| json!({"role": "tool", "tool_call_id": id, "content": content}))
                .collect(),
            Api::Responses => answers
                .into_iter()
                .map(|(id, output)| json!({"type": "function_call_output", "call_id": id, "output": output}))
                .collect(),
            Api::Messages => {
                let results: Vec<Value> = answers
                    .into_iter()
                    .map(|(id, content)| {
                        json!({"type": "tool_result", "tool_use_id": id, "content": content, "is_error": true})
                    })
                    .collect();
                vec![json!({"role": "user", "content": results})]
            }
        });
    }
    if !lifting_on || !said.natural {
        return None;
    }
    let text = said.text.filter(|t| !t.trim().is_empty())?;
    // Text that begins as a call (or holds explicit markup) and could not
    // be lifted; prose is never asked again.
    if declared.lift(&text).is_some() || declared.is_prose(&text) {
        return None;
    }
    let words = declared.explain("", &text).err()?;
    Some(vec![json!({"role": "user", "content": words})])
}

/// What an answer said: its calls (id, name, arguments as text), its text,
/// and whether it ended naturally.
struct Said {
    calls: Vec<(Value, String, String)>,
    text: Option<String>,
    natural: bool,
}

/// What `answer` (a whole answer of `api`) said; `None` for an answer of
/// several choices or of no shape the door reads.
fn said(answer: &Value, api: Api) -> Option<Said> {
    let text_of = |value: Option<&Value>| match value {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    match api {
        Api::Chat => {
            let choices = answer.get("choices").and_then(Value::as_array)?;
            let [choice] = choices.as_slice() else { return None };
            let message = choice.get("message")?;
            let calls = message.get("tool_calls").and_then(Value::as_array).into_iter().flatten();
            let calls = calls
                .map(|call| {
                    let function = call.get("function");
                    let name = function.and_then(|f| f.get("name")).and_then(Value::as_str).unwrap_or_default();
                    let id = call.get("id").cloned().unwrap_or(Value::Null);
                    (id, name.to_owned(), text_of(function.and_then(|f| f.get("arguments"))))
                })
                .collect();
            let text = message.get("content").and_then(Value::as_str).map(str::to_owned);
            let natural = choice.get("finish_reason").and_then(Value::as_str) == Some("stop");
            Some(Said { calls, text, natural })
        }
        Api::Responses => {
            let output = answer.get("output").and_then(Value::as_array)?;
            let mut said = Said { calls: Vec::new(), text: None, natural: true };
            for item in output {
                match item.get("type").and_then(Value::as_str) {
                    Some("function_call") => {
                        let name = item.get("name").and_then(Value::as_str).unwrap_or_default();
                        let id = item.get("call_id").cloned().unwrap_or(Value::Null);
                        said.calls.push((id, name.to_owned(), text_of(item.get("arguments"))));
                    }
                    Some("message") => {
                        let parts = item.get("content").and_then(Value::as_array).into_iter().flatten();
                        for part in parts.filter(|p| p.get("type").and_then(Value::as_str) == Some("output_text")) {
                            let piece = part.get("text").and_then(Value::as_str).unwrap_or_default();
                            said.text.get_or_insert_with(String::new).push_str(piece);
                        }
                    }
                    _ => {}
                }
            }
            said.natural = answer.get("status").and_then(Value::as_str).is_none_or(|s| s == "completed");
            Some(said)
        }
        Api::Messages => {
            let content = answer.get("content").and_then(Value::as_array)?;
            let mut said = Said { calls: Vec::new(), text: None, natural: false };
            for block in content {
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        let name = block.get("name").and_then(Value::as_str).unwrap_or_default();
                        let id = block.get("id").cloned().unwrap_or(Value::Null);
                        let input = block.get("input").map(Value::to_string).unwrap_or_default();
                        said.calls.push((id, name.to_owned(), input));
                    }
                    Some("text") => {
                        let piece = block.get("text").and_then(Value::as_str).unwrap_or_default();
                        said.text.get_or_insert_with(String::new).push_str(piece);
                    }
                    _ => {}
                }
            }
            said.natural = answer.get("stop_reason").and_then(Value::as_str) == Some("end_turn");
            Some(said)
        }
    }
}

/// The request asked again: `request` (its JSON body) with the answer as
/// it came and the corrective turn added to its conversation (Chat and
/// Messages: `messages`; Responses: `input`, a string first made its one
/// `user` message), whole (not streamed).
pub(super) fn asked_again(request: &[u8], answer: &Value, corrective: Vec<Value>, api: Api) -> Option<Bytes> {
    let mut body: Value = serde_json::from_slice(request).ok()?;
    let object = body.as_object_mut()?;
    match api {
        Api::Chat => {
            let message = answer.pointer("/choices/0/message")?.clone();
            let messages = object.get_mut("messages")?.as_array_mut()?;
            messages.push(message);
            messages.extend(corrective);
            // Only a stream may ask for its usage chunk.
            object.remove("stream_options");
        }
        Api::Responses => {
            let output = answer.get("output").and_then(Value::as_array)?.clone();
            let input = object.get_mut("input")?;
            if let Value::String(text) = input {
                *input = json!([{"role": "user", "content": text.clone()}]);
            }
            let items = input.as_array_mut()?;
            items.extend(output);
            items.extend(corrective);
        }
        Api::Messages => {
            let content = answer.get("content")?.clone();
            let messages = object.get_mut("messages")?.as_array_mut()?;
            messages.push(json!({"role": "assistant", "content": content}));
            messages.extend(corrective);
        }
    }
    object.insert("stream".to_owned(), false.into());
    Some(super::http::json_bytes(&body))
}

/// `usage` added to `total`: each token count summed, at every depth
/// (`input_tokens_details.cached_tokens` too); what is no count is the
/// last try's.
pub(super) fn add_usage(total: &mut Option<Value>, usage: Option<&Value>) {
    let Some(usage) = usage.filter(|u| u.is_object()) else { return };
    add_counts(total.get_or_insert_with(|| json!({})), usage);
}

fn add_counts(total: &mut Value, usage: &Value) {
    let (Some(total), Some(usage)) = (total.as_object_mut(), usage.as_object()) else { return };
    for (key, value) in usage {
        match (total.get_mut(key), value) {
            (Some(sum), Value::Number(n)) if n.is_u64() => {
                *sum = (sum.as_u64().unwrap_or(0) + n.as_u64().unwrap_or(0)).into();
            }
            (Some(sum), Value::Object(_)) if sum.is_object() => add_counts(sum, value),
            _ => {
                total.insert(key.clone(), value.clone());
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_summed_at_every_depth_and_what_is_no_count_is_the_last_tries() {
        let mut total = None;
        add_usage(&mut total, Some(&json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}})));
        add_usage(
            &mut total,
            Some(&json!({"input_tokens": 12, "input_tokens_details": {"cached_tokens": 1},
            "service_tier": "default"})),
        );
        add_usage(&mut total, None);
        assert_eq!(
            total,
            Some(json!({"input_tokens": 22, "input_tokens_details": {"cached_tokens": 5}, "service_tier": "default"}))
        );
    }

    #[test]
    fn a_responses_request_whose_input_is_a_string_is_asked_again_with_it_as_a_user_message() {
        let answer = json!({"output": [{"type": "function_call", "call_id": "c1", "name": "x", "arguments": "{}"}]});
        let corrective = vec![json!({"type": "function_call_output", "call_id": "c1", "output": "no such tool"})];
        let request = br#"{"model": "m", "input": "Weather?", "stream": true}"#;
        let again: Value =
            serde_json::from_slice(&asked_again(request, &answer, corrective, Api::Responses).unwrap()).unwrap();
        let kinds: Vec<&Value> = again["input"].as_array().unwrap().iter().map(|i| &i["type"]).collect();
        assert_eq!(again["input"][0], json!({"role": "user", "content": "Weather?"}));
        assert_eq!(kinds[1..], [&json!("function_call"), &json!("function_call_output")]);
        assert_eq!(again["stream"], false);
    }

    #[test]
    fn a_header_that_is_no_number_is_refused_and_a_large_one_capped() {
        assert_eq!(tries(Some("5"), 0, 2), Ok(2));
        assert_eq!(tries(None, 1, 2), Ok(1));
        assert_eq!(tries(Some("x"), 0, 0), Ok(0), "retry_max 0: the header is not read");
        assert!(tries(Some("many"), 0, 2).is_err());
    }
}
