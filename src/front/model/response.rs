//! A completion's calls repaired, each choice on its own: every
//! `tool_calls[i]` through the stages against the request's tools, and a
//! `content` that holds calls by the words rule (nothing but calls and
//! residue, or calls in explicit markup after a preamble, which stays the
//! message's text: [`crate::exec::declared::words`]) lifted into that
//! many `tool_calls`, in order. A call that cannot be repaired stays as it
//! was; a content holding anything else (words after a call, a call inside
//! prose) stays text. No call is ever invented, merged or dropped.

use serde::{Deserialize, Serialize};
use serde_json::{json, value::RawValue, Map, Value};

use crate::exec::{
    declared::{Declared, Prepared},
    RepairKind,
};

/// What a lift may do: lift at all (tools declared, `tool_choice` not
/// `none`, no structured output asked for), and lift more than one call
/// (`parallel_tool_calls` not `false`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Lifting {
    pub(super) on: bool,
    pub(super) several: bool,
}

/// What the door made of a call: a repair of the stages, or the call
/// lifted out of the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Repair(RepairKind),
    ContentLifted,
}

impl Kind {
    /// As `x-toolgate-repairs` names it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Repair(kind) => kind.name(),
            Kind::ContentLifted => "CONTENT_LIFTED",
        }
    }

    /// `toolgate.repair.kind`.
    pub(super) fn label(self) -> &'static str {
        match self {
            Kind::Repair(kind) => kind.label(),
            Kind::ContentLifted => "content_lifted",
        }
    }
}

/// One repair: the choice's index, the call's place among its
/// `tool_calls`, the kind, the tool, and the text before and after (for
/// the span's event).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Made {
    pub(super) choice: u64,
    pub(super) call: usize,
    pub(super) kind: Kind,
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
/// first of each), in the order made. A call `lifted` out of `content` is
/// listed as lifted first, with the text it was read from.
pub(super) fn made(choice: u64, call: usize, prepared: &Prepared, lifted: Option<&str>) -> Vec<Made> {
    let mut made: Vec<Made> = Vec::new();
    let read = lifted.map(|content| (Kind::ContentLifted, content, prepared.arguments_json.as_str()));
    let repairs = prepared.repairs.iter().map(|r| (Kind::Repair(r.kind), r.original.as_str(), r.repaired.as_str()));
    for (kind, original, repaired) in read.into_iter().chain(repairs) {
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

/// A call lifted out of a text: its `tool_calls` entry and its repairs.
pub(super) type LiftedCall = (Value, Vec<Made>);

/// The calls a choice's `content` holds by the words rule, lifted: where
/// its preamble ends (the text before stays the message's), and each call
/// as a `tool_calls` entry (with `index` when `indexed`, as a stream's
/// deltas carry) with its repairs. `marked`: the text begins at the
/// explicit markup a stream found after words it has sent already.
pub(super) fn lift(
    content: &str,
    declared: &Declared,
    lifting: Lifting,
    choice: u64,
    indexed: bool,
    marked: bool,
) -> Option<(Option<usize>, Vec<LiftedCall>)> {
    if !lifting.on {
        return None;
    }
    let (preamble, calls) = match marked {
        true => (None, declared.calls_in(content)?),
        false => {
            let lifted = declared.lift(content)?;
            (lifted.preamble, lifted.calls)
        }
    };
    if calls.len() > 1 && !lifting.several {
        return None;
    }
    let from = preamble.map_or(content, |end| &content[end..]);
    let lifted = calls.into_iter().enumerate().map(|(i, prepared)| {
        let repairs = made(choice, i, &prepared, Some(from));
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
    Some((preamble, lifted.collect()))
}

/// Repairs a whole (non-streamed) chat completion in place; what was made.
/// Text is lifted only from a choice that ended naturally
/// (`finish_reason` `stop`).
pub(super) fn repair_completion(body: &mut Value, declared: &Declared, lifting: Lifting) -> Vec<Made> {
    let mut made = Vec::new();
    let Some(choices) = body.get_mut("choices").and_then(Value::as_array_mut) else { return made };
    for (at, choice) in choices.iter_mut().enumerate() {
        let index = choice.get("index").and_then(Value::as_u64).unwrap_or(at as u64);
        let Some(choice) = choice.as_object_mut() else { continue };
        let natural = choice.get("finish_reason").and_then(Value::as_str) == Some("stop");
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
        if !natural {
            continue;
        }
        let content = message.get("content").and_then(Value::as_str).filter(|c| !c.trim().is_empty());
        let Some((preamble, lifted)) = content.and_then(|c| lift(c, declared, lifting, index, false, false)) else {
            continue;
        };
        let kept = match (preamble, content) {
            (Some(end), Some(content)) => Value::String(content[..end].to_owned()),
            _ => Value::Null,
        };
        let mut calls = Vec::with_capacity(lifted.len());
        for (call, repairs) in lifted {
            made.extend(repairs);
            calls.push(call);
        }
        message.insert("content".to_owned(), kept);
        message.insert("tool_calls".to_owned(), Value::Array(calls));
        choice.insert("finish_reason".to_owned(), "tool_calls".into());
    }
    made
}

/// A whole chat completion as [`repair_completion`] repairs it, read
/// where its calls lie in its text instead of as a tree: each call's `name`
/// and `arguments` found in place, every other member skipped by the
/// parser. When nothing is repaired the answer is its bytes as they came;
/// when calls are, the repaired `name` and `arguments` are written over
/// theirs and every other byte stays as the model server wrote it.
/// `None` (the caller then repairs the tree) for whatever this reading
/// does not take whole: a completion of another shape, a member named
/// twice, an `arguments` that is an object or missing from a repaired
/// call, and a choice whose text holds calls to lift.
/// What it says of the generation is read when `reading` (a span or a
/// metric takes it).
pub(super) fn repair_completion_text(
    body: &[u8],
    declared: &Declared,
    lifting: Lifting,
    reading: bool,
) -> Option<InPlace> {
    let completion: CompletionText = serde_json::from_slice(body).ok()?;
    let (mut made, mut written) = (Vec::new(), Vec::new());
    let said = match reading {
        true => Generation {
            model: completion.model.and_then(string),
            reasons: completion.choices.iter().filter_map(|c| c.finish_reason.and_then(string)).collect(),
            usage: completion.usage.and_then(|raw| serde_json::from_str(raw.get()).ok()),
        },
        false => Generation::default(),
    };
    for (at, choice) in completion.choices.iter().enumerate() {
        let index = choice.index.unwrap_or(at as u64);
        let Some(message) = &choice.message else { continue };
        let calls = message.tool_calls.as_ref().filter(|c| !c.is_empty());
        if let Some(calls) = calls {
            for (i, call) in calls.iter().enumerate() {
                let Some(function) = &call.function else { continue };
                let Some(name) = function.name.and_then(string) else { continue };
                let arguments = match function.arguments {
                    Some(raw) if raw.get().starts_with('"') => string(raw)?,
                    Some(raw) if raw.get().starts_with('{') => return None,
                    _ => String::new(),
                };
                let Some(prepared) = repair_call(&name, &arguments, declared) else { continue };
                made.extend(self::made(index, i, &prepared, None));
                let (name_at, arguments_at) = (function.name?, function.arguments?);
                written.push((span(body, name_at), serde_json::to_string(&prepared.name).ok()?));
                written.push((span(body, arguments_at), serde_json::to_string(&prepared.arguments_json).ok()?));
            }
            continue;
        }
        let natural = choice.finish_reason.and_then(string).as_deref() == Some("stop");
        let content = message.content.and_then(string).filter(|c| !c.trim().is_empty());
        if natural && content.is_some_and(|content| lift(&content, declared, lifting, index, false, false).is_some()) {
            return None;
        }
    }
    if written.is_empty() {
        return Some(InPlace { written: None, made, said });
    }
    written.sort_by_key(|(at, _)| at.start);
    let mut out = Vec::with_capacity(body.len() + 64);
    let mut from = 0;
    for (at, text) in written {
        out.extend_from_slice(&body[from..at.start]);
        out.extend_from_slice(text.as_bytes());
        from = at.end;
    }
    out.extend_from_slice(&body[from..]);
    Some(InPlace { written: Some(out), made, said })
}

/// A completion repaired in place: its bytes when any were written over,
/// what was made, and what it says of the generation.
pub(super) struct InPlace {
    pub(super) written: Option<Vec<u8>>,
    pub(super) made: Vec<Made>,
    pub(super) said: Generation,
}

/// What a whole answer says of the generation: its model, the choices'
/// finish reasons, its usage.
#[derive(Default)]
pub(super) struct Generation {
    pub(super) model: Option<String>,
    pub(super) reasons: Vec<String>,
    pub(super) usage: Option<Value>,
}

/// Where `raw` (read from `body`, borrowed) lies in it.
fn span(body: &[u8], raw: &RawValue) -> std::ops::Range<usize> {
    let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
    start..start + raw.get().len()
}

/// `raw` as a string, when it is one.
fn string(raw: &RawValue) -> Option<String> {
    serde_json::from_str(raw.get()).ok()
}

/// A chat completion's choices, as [`repair_completion_text`] reads them.
#[derive(Deserialize)]
struct CompletionText<'a> {
    #[serde(borrow)]
    choices: Vec<ChoiceText<'a>>,
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    #[serde(borrow)]
    usage: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ChoiceText<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    finish_reason: Option<&'a RawValue>,
    #[serde(borrow)]
    message: Option<MessageText<'a>>,
}

#[derive(Deserialize)]
struct MessageText<'a> {
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_calls: Option<Vec<CallText<'a>>>,
}

#[derive(Deserialize)]
struct CallText<'a> {
    #[serde(borrow)]
    function: Option<FunctionText<'a>>,
}

#[derive(Deserialize)]
struct FunctionText<'a> {
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
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

/// A new output item id: `prefix` and 24 random letters and digits.
fn item_id(prefix: &str) -> String {
    format!("{prefix}{}", &call_id()["call_".len()..])
}

/// Whether a Responses output item is a call of any type (a function's, a
/// custom tool's, a hosted tool's): an answer holding one has no text to
/// lift.
fn is_call_item(item: &Value) -> bool {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
    kind.ends_with("_call") || kind == "tool_use" || kind == "server_tool_use"
}

/// Repairs a whole Responses answer (`output[]`) in place; what was made.
/// Each `function_call` item goes through the stages (its `id` and
/// `call_id` kept). When the answer holds no call of any type and it
/// completed (`status` `completed`), the text of its `message` items
/// (their `output_text` parts, joined in order) is lifted by the words
/// rule: each call becomes a `function_call` item (`fc_` and `call_` ids),
/// after the other items; the preamble, if any, stays as one message.
pub(super) fn repair_response(body: &mut Value, declared: &Declared, lifting: Lifting) -> Vec<Made> {
    let mut made = Vec::new();
    let completed = body.get("status").and_then(Value::as_str) == Some("completed");
    let Some(output) = body.get_mut("output").and_then(Value::as_array_mut) else { return made };
    let mut calls = 0;
    for item in output.iter_mut() {
        let Some(item) = item.as_object_mut() else { continue };
        if item.get("type").and_then(Value::as_str) != Some("function_call") {
            continue;
        }
        if let Some(prepared) = repaired_function(item, declared) {
            made.extend(self::made(0, calls, &prepared, None));
            item.insert("name".to_owned(), prepared.name.into());
            item.insert("arguments".to_owned(), prepared.arguments_json.into());
        }
        calls += 1;
    }
    if output.iter().any(is_call_item) || !completed {
        return made;
    }
    let text: String = output
        .iter()
        .filter(|item| item.get("type").and_then(Value::as_str) == Some("message"))
        .flat_map(|item| item.get("content").and_then(Value::as_array).into_iter().flatten())
        .filter(|part| part.get("type").and_then(Value::as_str) == Some("output_text"))
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect();
    if text.trim().is_empty() {
        return made;
    }
    let Some((preamble, lifted)) = lift(&text, declared, lifting, 0, false, false) else { return made };
    // The messages give way to the preamble (one message, the first's
    // id), or to nothing.
    let first = output.iter().position(|item| item.get("type").and_then(Value::as_str) == Some("message"));
    let mut kept = first.map(|at| output[at].clone());
    output.retain(|item| item.get("type").and_then(Value::as_str) != Some("message"));
    if let (Some(end), Some(message)) = (preamble, kept.as_mut().and_then(Value::as_object_mut)) {
        let part = json!({"type": "output_text", "text": &text[..end], "annotations": []});
        message.insert("content".to_owned(), Value::Array(vec![part]));
        output.insert(first.unwrap_or(0).min(output.len()), Value::Object(message.clone()));
    }
    for (call, repairs) in lifted {
        made.extend(repairs);
        let function = &call["function"];
        output.push(json!({
            "type": "function_call",
            "id": item_id("fc_"),
            "call_id": call["id"],
            "name": function["name"],
            "arguments": function["arguments"],
            "status": "completed",
        }));
    }
    made
}

/// A Messages `tool_use` block's call repaired, if it was: its `input`
/// object as the arguments' text.
fn repaired_tool_use(block: &Map<String, Value>, declared: &Declared) -> Option<Prepared> {
    let name = block.get("name")?.as_str()?;
    let arguments = match block.get("input") {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    repair_call(name, &arguments, declared)
}

/// Repairs a whole Messages answer (`content[]`) in place; what was made.
/// Each `tool_use` block goes through the stages (its `id` kept, its
/// `input` the repaired object). When the answer holds no call (`tool_use`,
/// `server_tool_use`) and ended naturally (`stop_reason` `end_turn` or
/// `stop_sequence`), its `text` blocks (joined in order) are lifted by the
/// words rule: each call becomes a `tool_use` block (`toolu_` id) after the
/// other blocks, the preamble, if any, stays as one text block, and
/// `stop_reason` becomes `tool_use`. `thinking` blocks stay as they are.
pub(super) fn repair_message(body: &mut Value, declared: &Declared, lifting: Lifting) -> Vec<Made> {
    let mut made = Vec::new();
    let natural = matches!(body.get("stop_reason").and_then(Value::as_str), Some("end_turn" | "stop_sequence"));
    let Some(content) = body.get_mut("content").and_then(Value::as_array_mut) else { return made };
    let mut calls = 0;
    for block in content.iter_mut() {
        let Some(block) = block.as_object_mut() else { continue };
        if block.get("type").and_then(Value::as_str) != Some("tool_use") {
            continue;
        }
        if let Some(prepared) = repaired_tool_use(block, declared) {
            let Ok(input) = serde_json::from_str::<Value>(&prepared.arguments_json) else { continue };
            made.extend(self::made(0, calls, &prepared, None));
            block.insert("name".to_owned(), prepared.name.into());
            block.insert("input".to_owned(), input);
        }
        calls += 1;
    }
    let is_call =
        |block: &Value| matches!(block.get("type").and_then(Value::as_str), Some("tool_use" | "server_tool_use"));
    if content.iter().any(is_call) || !natural {
        return made;
    }
    let is_text = |block: &Value| block.get("type").and_then(Value::as_str) == Some("text");
    let text: String =
        content.iter().filter(|b| is_text(b)).filter_map(|b| b.get("text").and_then(Value::as_str)).collect();
    if text.trim().is_empty() {
        return made;
    }
    let Some((preamble, lifted)) = lift(&text, declared, lifting, 0, false, false) else { return made };
    let mut blocks = Vec::with_capacity(lifted.len());
    let mut lifted_made = Vec::new();
    for (call, repairs) in lifted {
        let function = &call["function"];
        let input = function["arguments"].as_str().and_then(|a| serde_json::from_str::<Value>(a).ok());
        let Some(input) = input else { return made };
        lifted_made.extend(repairs);
        blocks.push(json!({"type": "tool_use", "id": item_id("toolu_"), "name": function["name"], "input": input}));
    }
    made.extend(lifted_made);
    let first = content.iter().position(is_text).unwrap_or(0);
    content.retain(|block| !is_text(block));
    if let Some(end) = preamble {
        content.insert(first.min(content.len()), json!({"type": "text", "text": &text[..end]}));
    }
    content.extend(blocks);
    body["stop_reason"] = "tool_use".into();
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Declared {
        let weather = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let grep = json!({"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]});
        let tools = vec![
            crate::exec::declared::declared("get_weather", Some(&weather), false),
            crate::exec::declared::declared("grep", Some(&grep), false),
        ];
        Declared::new(tools, crate::exec::ExecLimits::default()).unwrap()
    }

    fn completion(choices: Value) -> String {
        json!({"id": "c", "object": "chat.completion", "model": "m", "choices": choices,
            "usage": {"total_tokens": 15}})
        .to_string()
    }

    fn called(name: &str, arguments: &str) -> Value {
        json!({"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}]}})
    }

    /// Read in place, the answer means what the tree's repair makes of it,
    /// with the same repairs; the bytes stay as they came when nothing is
    /// repaired.
    #[test]
    fn calls_read_in_place_are_repaired_as_the_tree_repairs_them() {
        let lifting = Lifting { on: true, several: true };
        let declared = tools();
        let two = json!([called("GetWeather", "{'city': 'Paris',}"),
            {"index": 1, "finish_reason": "tool_calls", "message": {"content": "", "tool_calls": [
                {"function": {"name": "grep", "arguments": "{\"pattern\": \"TODO\"}"}},
                {"function": {"name": "grep\u{e9}", "arguments": "{pattern: \"caf\\u00e9\"}"}}]}}]);
        let prose = json!([{"index": 0, "finish_reason": "stop", "message": {"content": "It is sunny in Paris."}}]);
        let cases = [
            completion(json!([called("GetWeather", "{'city': 'Paris',}")])),
            completion(json!([called("get_weather", "{\"city\": \"Paris\"}")])),
            completion(two),
            completion(prose),
            // No arguments: nothing can be made ready.
            completion(json!([{"message": {"tool_calls": [{"function": {"name": "GetWeather"}}]}}])),
            // The upstream's own spacing and escapes are kept around a repair.
            "{ \"choices\" : [ {\"message\": {\"tool_calls\": [ {\"function\": {\"arguments\": \"{city: 'Oslo'}\", \
             \"name\": \"get-weather\"}} ], \"content\": \"\\u00e9\"}} ] , \"x\": 1.0e2 }"
                .to_owned(),
        ];
        for body in cases {
            let InPlace { written, made, said } =
                repair_completion_text(body.as_bytes(), &declared, lifting, true).expect("read in place");
            let read: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(said.model.as_deref(), read["model"].as_str(), "{body}");
            assert_eq!(said.usage.as_ref(), read.get("usage"), "{body}");
            let reasons = read["choices"].as_array().unwrap().iter().filter_map(|c| c["finish_reason"].as_str());
            assert_eq!(said.reasons, reasons.collect::<Vec<_>>(), "{body}");
            let mut tree: Value = serde_json::from_str(&body).unwrap();
            let made_in_tree = repair_completion(&mut tree, &declared, lifting);
            assert_eq!(made, made_in_tree, "{body}");
            match written {
                None => assert!(made.is_empty(), "{body}"),
                Some(written) => {
                    assert_eq!(serde_json::from_slice::<Value>(&written).unwrap(), tree, "{body}");
                    let text = String::from_utf8(written).unwrap();
                    assert!(text.contains("\\u00e9") || !body.contains("\\u00e9"), "{text}");
                }
            }
        }
    }

    /// What the reading in place does not take whole is left to the tree.
    #[test]
    fn what_is_not_read_whole_in_place_is_left_to_the_tree() {
        let lifting = Lifting { on: true, several: true };
        let declared = tools();
        let lifted = json!([{"index": 0, "finish_reason": "stop",
            "message": {"content": "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"}}]);
        let object_arguments = json!([{"message": {"tool_calls": [
            {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}}]);
        let cases = [
            completion(lifted),
            completion(object_arguments),
            // A member named twice: the tree reads the last.
            "{\"choices\": [{\"message\": {\"tool_calls\": [{\"function\": {\"name\": \"grep\", \"name\": \"GetWeather\", \
             \"arguments\": \"{}\"}}]}}]}"
                .to_owned(),
            "{\"choices\": {}}".to_owned(),
            "[1, 2]".to_owned(),
        ];
        for body in cases {
            assert!(repair_completion_text(body.as_bytes(), &declared, lifting, false).is_none(), "{body}");
        }
    }
}
