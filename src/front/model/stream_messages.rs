//! A streamed Messages answer (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop`), under the rules of a Chat Completions
//! stream (docs/model-door.md, "Messages"):
//!
//! - The text of the answer's first text block streams as it comes while
//!   it cannot begin a call (the core's judgment, asked again as text
//!   arrives); after words, it is watched for explicit call markup.
//! - From what can still be a call (text that may begin one, markup after
//!   words, a `tool_use` block) every event is held until `message_delta`.
//!   `ping` always passes.
//! - At `message_delta` the message the events built is repaired as a whole
//!   one is ([`repair_message`]). When nothing was repaired, the held events
//!   go unchanged. Otherwise the events from the held point on are written
//!   again from the repaired message: the text block that was streaming
//!   ends with its preamble, each block after it starts, sends its text or
//!   input (`input_json_delta`) in one delta, and stops, block indexes
//!   consecutive; `message_delta` then carries `stop_reason` `tool_use`.
//! - A stream cut mid-way ends with an `error` event.

use std::{collections::HashMap, sync::Arc};

use bytes::Bytes;
use serde_json::{json, Value};

use super::first_text::{frame, parsed, FirstText, Held, State};
use super::retry;
use super::{
    response::{repair_message, Lifting, Made},
    sse::data,
    stream::{Generation, Rules},
};
use crate::{config::Api, exec::declared::Declared};

/// The rules over one Messages stream.
pub(super) struct MessageEvents {
    declared: Option<Arc<Declared>>,
    lifting: Lifting,
    first: FirstText,
    held: Held,
    /// The blocks the events built, by index; a `tool_use` block's input
    /// as the text of its deltas.
    blocks: Vec<Value>,
    inputs: HashMap<usize, String>,
    /// Blocks the client has seen started.
    started: usize,
    /// The text block the client has seen started and not stopped: its
    /// index and the text sent of it.
    open: Option<(usize, String)>,
    made: Vec<Made>,
    generation: Generation,
    /// The second chance may be taken ([`super::retry`]).
    retrying: bool,
    /// Text or a call reached the client (a thought apart).
    spoken: bool,
    /// The message the stream began with (`message_start`), for its usage.
    started_with: Option<Value>,
    /// The message kept back for the second chance, and its
    /// `message_delta` event.
    kept: Option<(Value, Value)>,
}

impl MessageEvents {
    /// The second chance may be taken: a message that holds a call that
    /// cannot be made ready, while nothing but a thought was sent, is kept
    /// back at `message_delta`, and the stream's end with it.
    pub(super) fn retrying(mut self, on: bool) -> Self {
        self.retrying = on;
        self
    }

    pub(super) fn new(declared: Option<Arc<Declared>>, lifting: Lifting) -> Self {
        let first = FirstText::new(declared.is_some());
        Self {
            declared,
            lifting,
            first,
            held: Held::default(),
            blocks: Vec::new(),
            inputs: HashMap::new(),
            started: 0,
            open: None,
            made: Vec::new(),
            generation: Generation::default(),
            retrying: false,
            spoken: false,
            started_with: None,
            kept: None,
        }
    }

    fn hold(&mut self, raw: Bytes) -> Vec<Bytes> {
        if self.held.push(raw) {
            // Too much to hold: what is held goes, and nothing more is changed.
            self.first.state = State::Off;
            return self.release();
        }
        Vec::new()
    }

    fn release(&mut self) -> Vec<Bytes> {
        let held = self.held.take();
        for raw in &held {
            if let Some(event) = parsed(raw) {
                self.sent(&event);
            }
        }
        held
    }

    /// `event` reached the client: the blocks it has seen.
    fn sent(&mut self, event: &Value) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        let block_type = event.pointer("/content_block/type").and_then(Value::as_str);
        let delta_type = event.pointer("/delta/type").and_then(Value::as_str);
        if block_type.is_some_and(|t| t != "thinking" && t != "redacted_thinking" && t != "text")
            || matches!(delta_type, Some("text_delta" | "input_json_delta"))
        {
            self.spoken = true;
        }
        match event.get("type").and_then(Value::as_str).unwrap_or_default() {
            "content_block_start" => {
                self.started = self.started.max(index + 1);
                if event.pointer("/content_block/type").and_then(Value::as_str) == Some("text") {
                    self.open = Some((index, String::new()));
                }
            }
            "content_block_delta" => {
                if let Some((_, text)) = self.open.as_mut().filter(|(open, _)| *open == index) {
                    text.push_str(event.pointer("/delta/text").and_then(Value::as_str).unwrap_or_default());
                }
            }
            "content_block_stop" if self.open.as_ref().is_some_and(|(open, _)| *open == index) => self.open = None,
            _ => {}
        }
    }

    /// What `event` adds to the blocks the events build.
    fn build(&mut self, event: &Value) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        match event.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message_start" => {
                self.started_with = event.get("message").cloned();
                let message = event.get("message");
                self.generation.model = message.and_then(|m| m.get("model")).and_then(Value::as_str).map(str::to_owned);
            }
            "content_block_start" => {
                if self.blocks.len() <= index {
                    self.blocks.resize(index + 1, Value::Null);
                }
                self.blocks[index] = event.get("content_block").cloned().unwrap_or(Value::Null);
            }
            "content_block_delta" => {
                let Some(block) = self.blocks.get_mut(index).and_then(Value::as_object_mut) else { return };
                let delta = event.get("delta");
                let field = |name: &str| delta.and_then(|d| d.get(name)).and_then(Value::as_str).unwrap_or_default();
                match delta.and_then(|d| d.get("type")).and_then(Value::as_str).unwrap_or_default() {
                    "text_delta" => append(block, "text", field("text")),
                    "thinking_delta" => append(block, "thinking", field("thinking")),
                    "signature_delta" => append(block, "signature", field("signature")),
                    "input_json_delta" => self.inputs.entry(index).or_default().push_str(field("partial_json")),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// The message the events built, ending with `stop_reason`.
    fn message(&self, stop_reason: &Value) -> Value {
        let content: Vec<Value> = self
            .blocks
            .iter()
            .enumerate()
            .map(|(index, block)| {
                let mut block = block.clone();
                if let Some(input) = self.inputs.get(&index) {
                    block["input"] = serde_json::from_str(input).unwrap_or_else(|_| Value::String(input.clone()));
                }
                block
            })
            .collect();
        json!({"content": content, "stop_reason": stop_reason})
    }

    fn judge(&mut self, raw: Bytes, event: Value) -> Vec<Bytes> {
        self.build(&event);
        let kind = event.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
        if kind == "ping" {
            return vec![raw];
        }
        if kind == "message_delta" {
            return self.ended(raw, event);
        }
        if matches!(self.first.state, State::Off) {
            self.sent(&event);
            return vec![raw];
        }
        if self.first.state == State::Holding {
            return self.hold(raw);
        }
        let block_type = event.pointer("/content_block/type").and_then(Value::as_str);
        if kind == "content_block_start" && matches!(block_type, Some("tool_use" | "server_tool_use")) {
            self.first.state = State::Holding;
            return self.hold(raw);
        }
        let first_text = block_type == Some("text") && self.first.state == State::Undecided;
        if kind == "content_block_start" && first_text && self.lifting.on {
            return self.hold(raw);
        }
        let text_delta = event.pointer("/delta/type").and_then(Value::as_str) == Some("text_delta");
        if kind != "content_block_delta" || !text_delta || !self.lifting.on {
            return match self.held.is_empty() {
                true => {
                    self.sent(&event);
                    vec![raw]
                }
                false => self.hold(raw),
            };
        }
        let delta = event.pointer("/delta/text").and_then(Value::as_str).unwrap_or_default();
        let mut out = self.hold(raw);
        if self.first.state == State::Off {
            return out;
        }
        let judged = self.declared.as_ref().is_some_and(|declared| self.first.delta(declared, delta));
        if judged {
            out.extend(self.release());
        }
        out
    }

    /// `message_delta`: the message repaired whole; what is held goes
    /// unchanged or written again, then this event (its `stop_reason`
    /// `tool_use` after a lift).
    fn ended(&mut self, raw: Bytes, mut event: Value) -> Vec<Bytes> {
        let stop_reason = event.pointer("/delta/stop_reason").cloned().unwrap_or(Value::Null);
        if let Some(reason) = stop_reason.as_str() {
            self.generation.reasons.push(reason.to_owned());
        }
        self.generation.usage = event.get("usage").filter(|u| u.is_object()).cloned();
        let declared = self.declared.clone();
        let (Some(declared), false) = (declared, self.held.is_empty() || self.first.state == State::Off) else {
            self.first.state = State::Off;
            let mut out = self.release();
            out.push(raw);
            return out;
        };
        self.first.state = State::Off;
        let silent = self.retrying && !self.spoken && self.open.is_none();
        if silent {
            let mut message = self.message(&stop_reason);
            if retry::corrective(&message, &declared, self.lifting.on, Api::Messages).is_some() {
                // Kept back: the model is asked again; the usage is the
                // stream's (message_start's and message_delta's).
                let mut usage = self.started_with.as_ref().and_then(|m| m.get("usage")).cloned();
                if let (Some(Value::Object(usage)), Some(Value::Object(more))) = (usage.as_mut(), event.get("usage")) {
                    usage.extend(more.clone());
                }
                message["usage"] = usage.unwrap_or(Value::Null);
                self.held.take();
                self.kept = Some((message, event));
                return Vec::new();
            }
        }
        let mut repaired = self.message(&stop_reason);
        let made = repair_message(&mut repaired, &declared, self.lifting);
        let written = (!made.is_empty()).then(|| self.written(&repaired)).flatten();
        let Some(mut out) = written else {
            let mut out = self.release();
            out.push(raw);
            return out;
        };
        self.made = made;
        self.held.take();
        event["delta"]["stop_reason"] = repaired["stop_reason"].clone();
        out.push(frame(&event));
        out
    }

    /// The events from the held point on, written from the repaired
    /// message; `None` when it does not continue what was sent.
    fn written(&self, repaired: &Value) -> Option<Vec<Bytes>> {
        let content = repaired.get("content").and_then(Value::as_array)?;
        if content.len() < self.started {
            return None;
        }
        let mut events = Vec::new();
        if let Some((index, sent)) = &self.open {
            let block = content.get(*index).filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))?;
            let rest = block.get("text").and_then(Value::as_str)?.strip_prefix(sent.as_str())?;
            if !rest.is_empty() {
                events.push(json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": rest}}));
            }
            events.push(json!({"type": "content_block_stop", "index": index}));
        }
        for (index, block) in content.iter().enumerate().skip(self.started) {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => {
                    let mut start = block.clone();
                    start["input"] = json!({});
                    events.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
                    let input = block.get("input").map(Value::to_string).unwrap_or_else(|| "{}".to_owned());
                    events.push(json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": input}}));
                }
                Some("text") => {
                    events.push(json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "text", "text": ""}}));
                    events.push(json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": block.get("text")}}));
                }
                _ => events.push(json!({"type": "content_block_start", "index": index, "content_block": block})),
            }
            events.push(json!({"type": "content_block_stop", "index": index}));
        }
        Some(events.iter().map(frame).collect())
    }
}

fn append(block: &mut serde_json::Map<String, Value>, field: &str, text: &str) {
    let mut value = block.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
    value.push_str(text);
    block.insert(field.to_owned(), value.into());
}

impl Rules for MessageEvents {
    fn event(&mut self, raw: Bytes) -> Vec<Bytes> {
        if self.kept.is_some() {
            // Kept back: nothing more of this stream is sent.
            return Vec::new();
        }
        let Some(text) = data(&raw) else {
            return match self.held.is_empty() {
                true => vec![raw],
                false => self.hold(raw),
            };
        };
        let Ok(event) = serde_json::from_str::<Value>(&text) else { return self.give_up(raw) };
        self.judge(raw, event)
    }

    fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    fn give_up(&mut self, raw: Bytes) -> Vec<Bytes> {
        self.first.state = State::Off;
        let mut out = self.release();
        out.push(raw);
        out
    }

    fn end(&mut self) -> Vec<Bytes> {
        self.first.state = State::Off;
        self.release()
    }

    fn made(&self) -> Vec<Made> {
        self.made.clone()
    }

    fn generation(&self) -> Generation {
        self.generation.clone()
    }

    fn kept_back(&self) -> Option<Value> {
        self.kept.as_ref().map(|(message, _)| message.clone())
    }

    /// The blocks the client saw (a thought) as they were, the last try's
    /// blocks after them (its own thought left out), each started and
    /// stopped, then `message_delta` with its stop reason and the tries'
    /// usage, and `message_stop`.
    fn rest(&mut self, mut last: Value) -> (Vec<Bytes>, Vec<Made>) {
        let (Some((first, mut event)), Some(declared)) = (self.kept.take(), self.declared.clone()) else {
            return (Vec::new(), Vec::new());
        };
        let made = repair_message(&mut last, &declared, self.lifting);
        let seen = first.get("content").and_then(Value::as_array).map(|c| c[..self.started.min(c.len())].to_vec());
        let thought =
            |b: &&Value| matches!(b.get("type").and_then(Value::as_str), Some("thinking" | "redacted_thinking"));
        let new = last.get("content").and_then(Value::as_array).into_iter().flatten();
        let content: Vec<Value> =
            seen.unwrap_or_default().into_iter().chain(new.filter(|b| !thought(b)).cloned()).collect();
        let stop_reason = last.get("stop_reason").cloned().unwrap_or(Value::Null);
        let mut out = self.written(&json!({"content": content})).unwrap_or_default();
        event["delta"]["stop_reason"] = stop_reason;
        if let Some(usage) = last.get("usage") {
            event["usage"] = usage.clone();
        }
        out.push(frame(&event));
        out.push(frame(&json!({"type": "message_stop"})));
        (out, made)
    }

    /// An `error` event in the Messages API's shape: the SDKs raise on it.
    fn cut(&self, message: &str) -> Bytes {
        frame(&json!({"type": "error", "error": {"type": "api_error", "message": message}}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Arc<Declared> {
        let parameters = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let tools = vec![crate::exec::declared::declared("get_weather", Some(&parameters), false)];
        Arc::new(Declared::new(tools, crate::exec::ExecLimits::default()).unwrap())
    }

    /// A thought with its signature, then a text block in `pieces`.
    fn answer(pieces: &[&str]) -> Vec<Bytes> {
        let mut events = vec![
            json!({"type": "message_start", "message": {"id": "msg_1", "content": [], "model": "m"}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "The user wants the weather."}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2lnbmVk"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "ping"}),
        ];
        for piece in pieces {
            events.push(
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": piece}}),
            );
        }
        events.push(json!({"type": "content_block_stop", "index": 1}));
        events.push(
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}),
        );
        events.push(json!({"type": "message_stop"}));
        events.iter().map(frame).collect()
    }

    #[test]
    fn a_thought_passes_byte_for_byte_and_a_call_as_text_becomes_a_tool_use_block() {
        let events =
            answer(&["<tool_call>{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Oslo\"}}</tool_call>"]);
        let mut rules = MessageEvents::new(Some(tools()), Lifting { on: true, several: true });
        let mut out = Vec::new();
        for (i, event) in events.iter().enumerate() {
            let sent = rules.event(event.clone());
            if i <= 4 {
                assert_eq!(sent, std::slice::from_ref(event), "the thought's events pass as they came");
            }
            out.extend(sent);
        }
        let out: Vec<Value> = out.iter().map(|raw| serde_json::from_str(&data(raw).unwrap()).unwrap()).collect();
        let kinds: Vec<&str> = out.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(out[6]["index"], 1, "the call takes the text's place");
        assert_eq!(out[6]["content_block"]["name"], "get_weather");
        assert!(out[6]["content_block"]["id"].as_str().unwrap().starts_with("toolu_"));
        assert_eq!(out[7]["delta"]["partial_json"], "{\"city\":\"Oslo\"}");
        assert_eq!(out[9]["delta"]["stop_reason"], "tool_use");
        assert_eq!(rules.made()[0].kind.name(), "CONTENT_LIFTED");

        // Prose: every event as it came (a ping never waits behind what is
        // held).
        let events = answer(&["Sure", ", it is sunny."]);
        let mut rules = MessageEvents::new(Some(tools()), Lifting { on: true, several: true });
        let out: Vec<Bytes> = events.iter().flat_map(|e| rules.event(e.clone())).collect();
        let no_ping = |events: &[Bytes]| -> Vec<Bytes> {
            events.iter().filter(|e| !e.starts_with(b"event: ping")).cloned().collect()
        };
        assert_eq!(no_ping(&out), no_ping(&events));
        assert_eq!(out.len(), events.len());
    }
}
