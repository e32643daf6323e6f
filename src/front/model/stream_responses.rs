//! A streamed Responses answer (`event: response.…` server-sent events),
//! under the rules of a Chat Completions stream (docs/model-door.md,
//! "Responses"):
//!
//! - The text of the answer's first message streams as it comes while it
//!   cannot begin a call (the core's judgment, asked again as text
//!   arrives); after words, it is watched for explicit call markup.
//! - From what can still be a call (text that may begin one, markup after
//!   words, a `function_call` item) every event is held until the answer
//!   ends.
//! - At `response.completed` the answer (`response.output`) is repaired as
//!   a whole one is ([`repair_response`]). When nothing was repaired, the
//!   held events go unchanged. Otherwise the events from the held point on
//!   are written again from the repaired answer: the message that was
//!   streaming ends with its preamble, then each item after it is added,
//!   its arguments or text sent in one delta, and done; then
//!   `response.completed` carries the repaired answer. `output_index` is
//!   each item's place in it and `sequence_number` stays consecutive.
//! - A stream cut mid-way ends with `response.failed`.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};

use super::first_text::{frame, parsed, FirstText, Held, State};
use super::retry;
use super::{
    response::{repair_response, Lifting, Made},
    sse::data,
    stream::{Generation, Rules},
};
use crate::{config::Api, exec::declared::Declared};

/// The rules over one Responses stream.
pub(super) struct ResponseEvents {
    declared: Option<Arc<Declared>>,
    lifting: Lifting,
    first: FirstText,
    held: Held,
    /// Items the client has seen added.
    added: usize,
    /// The message the client has seen added and not done: its place, id
    /// and the text sent of it.
    open: Option<(usize, Value, String)>,
    /// The last `sequence_number` sent.
    sequence: Option<u64>,
    made: Vec<Made>,
    generation: Generation,
    /// The second chance may be taken ([`super::retry`]).
    retrying: bool,
    /// Text or a call reached the client (a thought apart).
    spoken: bool,
    /// The answer kept back for the second chance, and its
    /// `response.completed` event.
    kept: Option<(Value, Value)>,
}

impl ResponseEvents {
    /// The second chance may be taken: an answer that holds a call that
    /// cannot be made ready, while nothing but a thought was sent, is kept
    /// back at `response.completed`.
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
            added: 0,
            open: None,
            sequence: None,
            made: Vec::new(),
            generation: Generation::default(),
            retrying: false,
            spoken: false,
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

    /// What is held, sent unchanged (each noted as sent).
    fn release(&mut self) -> Vec<Bytes> {
        let held = self.held.take();
        for raw in &held {
            if let Some(event) = parsed(raw) {
                self.sent(&event);
            }
        }
        held
    }

    /// `event` reached the client: what it has seen of the items.
    fn sent(&mut self, event: &Value) {
        if let Some(sequence) = event.get("sequence_number").and_then(Value::as_u64) {
            self.sequence = Some(sequence);
        }
        let at = event.get("output_index").and_then(Value::as_u64).unwrap_or(0) as usize;
        let kind = event.get("type").and_then(Value::as_str).unwrap_or_default();
        let item_type = event.pointer("/item/type").and_then(Value::as_str);
        if kind.starts_with("response.output_text.") || kind.starts_with("response.function_call_arguments.") {
            self.spoken = true;
        }
        if kind == "response.output_item.added" && item_type.is_some_and(|t| t != "reasoning" && t != "message") {
            self.spoken = true;
        }
        match kind {
            "response.output_item.added" => {
                self.added = self.added.max(at + 1);
                let item = &event["item"];
                if item.get("type").and_then(Value::as_str) == Some("message") {
                    self.open = Some((at, item["id"].clone(), String::new()));
                }
            }
            "response.output_text.delta" => {
                if let Some((_, _, text)) = self.open.as_mut().filter(|(open, _, _)| *open == at) {
                    text.push_str(event.get("delta").and_then(Value::as_str).unwrap_or_default());
                }
            }
            "response.output_item.done" if self.open.as_ref().is_some_and(|(open, _, _)| *open == at) => {
                self.open = None;
            }
            _ => {}
        }
    }

    /// One event under the rules.
    fn judge(&mut self, raw: Bytes, event: Value) -> Vec<Bytes> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
        if matches!(kind.as_str(), "response.completed" | "response.incomplete") {
            return self.completed(raw, event);
        }
        if self.first.state == State::Off {
            self.sent(&event);
            return vec![raw];
        }
        if self.first.state == State::Holding {
            return self.hold(raw);
        }
        let item_type = event.pointer("/item/type").and_then(Value::as_str);
        if kind == "response.output_item.added" && item_type == Some("function_call") {
            self.first.state = State::Holding;
            return self.hold(raw);
        }
        // The answer's first message is held from its start until its text
        // says whether it can be a call (then it was never begun, should
        // it become calls).
        let first_message = item_type == Some("message") && self.first.state == State::Undecided;
        if kind == "response.output_item.added" && first_message && self.lifting.on {
            return self.hold(raw);
        }
        if kind != "response.output_text.delta" || !self.lifting.on {
            return match self.held.is_empty() {
                true => {
                    self.sent(&event);
                    vec![raw]
                }
                false => self.hold(raw),
            };
        }
        let delta = event.get("delta").and_then(Value::as_str).unwrap_or_default();
        let mut out = self.hold(raw);
        let judged = match &self.declared {
            Some(declared) => self.first.state != State::Off && self.first.delta(declared, delta),
            None => false,
        };
        if judged {
            out.extend(self.release());
        }
        out
    }

    /// The answer ended (`response.completed` or `.incomplete`): repaired
    /// as a whole answer; what is held goes unchanged or written again.
    fn completed(&mut self, raw: Bytes, mut event: Value) -> Vec<Bytes> {
        let response = event.get_mut("response").filter(|r| r.is_object());
        if let Some(response) = response.as_deref() {
            self.generation.model = response.get("model").and_then(Value::as_str).map(str::to_owned);
            self.generation.usage = response.get("usage").filter(|u| u.is_object()).cloned();
            if let Some(status) = response.get("status").and_then(Value::as_str) {
                self.generation.reasons.push(status.to_owned());
            }
        }
        let (Some(response), Some(declared)) = (response, self.declared.clone()) else {
            let mut out = self.release();
            out.push(raw);
            return out;
        };
        if self.held.is_empty() || self.first.state == State::Off {
            let mut out = self.release();
            out.push(raw);
            return out;
        }
        let silent = self.retrying && !self.spoken && self.open.is_none();
        if silent && retry::corrective(response, &declared, self.lifting.on, Api::Responses).is_some() {
            // Kept back: the model is asked again.
            self.first.state = State::Off;
            self.held.take();
            let response = response.clone();
            self.kept = Some((response, event));
            return Vec::new();
        }
        let mut repaired = response.clone();
        let made = repair_response(&mut repaired, &declared, self.lifting);
        let written = (!made.is_empty()).then(|| self.written(&repaired)).flatten();
        self.first.state = State::Off;
        let Some(mut out) = written else {
            let mut out = self.release();
            out.push(raw);
            return out;
        };
        self.made = made;
        self.held.take();
        *response = repaired;
        let sequence = self.next_sequence();
        event["sequence_number"] = sequence.into();
        out.push(frame(&event));
        out
    }

    fn next_sequence(&mut self) -> u64 {
        let next = self.sequence.map_or(0, |s| s + 1);
        self.sequence = Some(next);
        next
    }

    /// The events from the held point on, written from the repaired
    /// answer; `None` when it does not continue what was sent (what is
    /// held then goes unchanged).
    fn written(&mut self, repaired: &Value) -> Option<Vec<Bytes>> {
        let output = repaired.get("output").and_then(Value::as_array)?;
        if output.len() < self.added {
            return None;
        }
        let mut events: Vec<Value> = Vec::new();
        if let Some((at, id, sent)) = self.open.clone() {
            // The message that was streaming ends with its preamble.
            let item = output.get(at).filter(|i| i.get("type").and_then(Value::as_str) == Some("message"))?;
            let text = item.pointer("/content/0/text").and_then(Value::as_str)?;
            let rest = text.strip_prefix(sent.as_str())?;
            if !rest.is_empty() {
                events.push(json!({"type": "response.output_text.delta", "item_id": id, "output_index": at,
                    "content_index": 0, "delta": rest}));
            }
            events.push(json!({"type": "response.output_text.done", "item_id": id, "output_index": at,
                "content_index": 0, "text": text}));
            events.push(json!({"type": "response.content_part.done", "item_id": id, "output_index": at,
                "content_index": 0, "part": item["content"][0]}));
            events.push(json!({"type": "response.output_item.done", "output_index": at, "item": item}));
        }
        for (at, item) in output.iter().enumerate().skip(self.added) {
            events.extend(item_events(at, item));
        }
        let mut out = Vec::with_capacity(events.len());
        for mut event in events {
            event["sequence_number"] = self.next_sequence().into();
            out.push(frame(&event));
        }
        Some(out)
    }
}

/// The events of one whole item at `at`: added, its text or arguments in
/// one delta, done.
fn item_events(at: usize, item: &Value) -> Vec<Value> {
    let id = item.get("id").cloned().unwrap_or(Value::Null);
    let mut added = item.clone();
    let mut events = Vec::new();
    match item.get("type").and_then(Value::as_str) {
        Some("function_call") => {
            added["arguments"] = "".into();
            added["status"] = "in_progress".into();
            events.push(json!({"type": "response.output_item.added", "output_index": at, "item": added}));
            let arguments = item.get("arguments").cloned().unwrap_or_else(|| "".into());
            events.push(json!({"type": "response.function_call_arguments.delta", "item_id": id,
                "output_index": at, "delta": arguments}));
            events.push(json!({"type": "response.function_call_arguments.done", "item_id": id,
                "output_index": at, "arguments": arguments, "name": item.get("name")}));
        }
        Some("message") => {
            added["content"] = json!([]);
            added["status"] = "in_progress".into();
            events.push(json!({"type": "response.output_item.added", "output_index": at, "item": added}));
            for (index, part) in item.get("content").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let mut empty = part.clone();
                empty["text"] = "".into();
                events.push(json!({"type": "response.content_part.added", "item_id": id, "output_index": at,
                    "content_index": index, "part": empty}));
                let text = part.get("text").cloned().unwrap_or_else(|| "".into());
                events.push(json!({"type": "response.output_text.delta", "item_id": id, "output_index": at,
                    "content_index": index, "delta": text}));
                events.push(json!({"type": "response.output_text.done", "item_id": id, "output_index": at,
                    "content_index": index, "text": text}));
                events.push(json!({"type": "response.content_part.done", "item_id": id, "output_index": at,
                    "content_index": index, "part": part}));
            }
        }
        _ => events.push(json!({"type": "response.output_item.added", "output_index": at, "item": added})),
    }
    events.push(json!({"type": "response.output_item.done", "output_index": at, "item": item}));
    events
}

impl Rules for ResponseEvents {
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
        self.kept.as_ref().map(|(response, _)| response.clone())
    }

    /// The items the client saw (a thought) as they were, the last try's
    /// items after them (its own thought left out: it is not streamed
    /// again), each added and done, then `response.completed` with that
    /// answer and the tries' usage.
    fn rest(&mut self, mut last: Value) -> (Vec<Bytes>, Vec<Made>) {
        let (Some((first, mut event)), Some(declared)) = (self.kept.take(), self.declared.clone()) else {
            return (Vec::new(), Vec::new());
        };
        let made = repair_response(&mut last, &declared, self.lifting);
        let seen = first.get("output").and_then(Value::as_array).map(|o| o[..self.added.min(o.len())].to_vec());
        let new = last.get("output").and_then(Value::as_array).into_iter().flatten();
        let new = new.filter(|item| item.get("type").and_then(Value::as_str) != Some("reasoning"));
        let output: Vec<Value> = seen.unwrap_or_default().into_iter().chain(new.cloned()).collect();
        last["output"] = output.into();
        let mut out = self.written(&last).unwrap_or_default();
        event["response"] = last;
        event["sequence_number"] = self.next_sequence().into();
        out.push(frame(&event));
        (out, made)
    }

    /// `response.failed`, numbered after what was sent: the SDKs raise on it.
    fn cut(&self, message: &str) -> Bytes {
        let sequence = self.sequence.map_or(0, |s| s + 1);
        let response = json!({"status": "failed", "error": {"code": "server_error", "message": message}});
        frame(&json!({"type": "response.failed", "sequence_number": sequence, "response": response}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Arc<Declared> {
        let parameters = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let tools = vec![crate::exec::declared::declared("get_weather", Some(&parameters), true)];
        Arc::new(Declared::new(tools, crate::exec::ExecLimits::default()).unwrap())
    }

    /// The events of a message whose text comes in `pieces`, then
    /// `response.completed`.
    fn message(pieces: &[&str]) -> Vec<Bytes> {
        let text: String = pieces.concat();
        let item = json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]});
        let mut events = vec![
            json!({"type": "response.created", "response": {"output": []}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_1", "content": []}}),
        ];
        for piece in pieces {
            events.push(json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": piece}));
        }
        events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
        events.push(json!({"type": "response.completed", "response": {"status": "completed", "output": [item]}}));
        events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let mut e = e.clone();
                e["sequence_number"] = i.into();
                frame(&e)
            })
            .collect()
    }

    fn parsed(out: &[Bytes]) -> Vec<Value> {
        out.iter().map(|raw| serde_json::from_str(&data(raw).unwrap()).unwrap()).collect()
    }

    #[test]
    fn prose_passes_as_it_comes_and_a_call_as_text_is_lifted_in_numbered_events() {
        let mut rules = ResponseEvents::new(Some(tools()), Lifting { on: true, several: true });
        let events = message(&["Sure", ", it is sunny."]);
        let mut sent = 0;
        for (i, event) in events.iter().enumerate() {
            sent += rules.event(event.clone()).len();
            if i == 2 {
                assert_eq!(sent, 3, "the first delta of prose goes as it comes");
            }
        }
        assert_eq!(sent, events.len());

        let mut rules = ResponseEvents::new(Some(tools()), Lifting { on: true, several: true });
        let mut out = Vec::new();
        for event in
            message(&["<tool_call>{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Oslo\"}}</tool_call>"])
        {
            out.extend(rules.event(event));
        }
        let out = parsed(&out);
        let kinds: Vec<&str> = out.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed"
            ]
        );
        let numbers: Vec<u64> = out.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
        assert_eq!(numbers, [0, 1, 2, 3, 4, 5]);
        let call = &out[5]["response"]["output"][0];
        assert_eq!((call["type"].as_str(), call["name"].as_str()), (Some("function_call"), Some("get_weather")));
        assert_eq!(&out[4]["item"], call, "the item done is the completed answer's");
        assert!(
            call["id"].as_str().unwrap().starts_with("fc_") && call["call_id"].as_str().unwrap().starts_with("call_")
        );
    }
}
