//! A streamed completion (server-sent events), held only where a call may
//! begin. The rules (DESIGN-wave4 section 21):
//!
//! - `content` passes as it comes until the choice's text could begin a
//!   form the reader accepts (markup, JSON, a fence, a name followed by its
//!   arguments, a declared tool's name); from there the choice is held
//!   until it ends, then sent with its calls lifted, or unchanged.
//!   Text that began as words streams through: a call after it is a call
//!   inside prose, never lifted.
//! - A thought (`<think>…</think>` at the start, `reasoning_content`)
//!   streams through; the text after it is judged afresh.
//! - Tool-call deltas are held per index and sent complete (repaired where
//!   one meaning is possible) when the choice ends.
//! - At most [`MAX_HELD`] bytes are held; past it, what is held is sent
//!   unchanged and the rest passes.
//! - Usage chunks, comments and `[DONE]` pass, in order.
//! - A stream of several choices (`n` > 1) passes unchanged.
//!
//! Events are split on blank lines, each kept as its bytes: what passes is
//! sent byte for byte. [`Holder`] is the rules, without IO; [`relay`] runs
//! them over the upstream's stream.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::response::{could_begin, lift, made, repair_call, Made};
use crate::exec::declared::Declared;

/// The most a choice holds before it is sent unchanged.
pub(super) const MAX_HELD: usize = 1024 * 1024;

/// How often a holding stream tells the client it is alive.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Server-sent events as they arrive: the bytes of each whole event (one
/// ending with a blank line), and what is left of one still arriving.
/// Each byte is looked at once (an event that arrives in many pieces is
/// not rescanned from its start).
#[derive(Default)]
pub(super) struct Events {
    buffer: Vec<u8>,
    /// Where in `buffer` the search for the blank line goes on.
    scanned: usize,
}

impl Events {
    /// The whole events `bytes` completes.
    pub(super) fn push(&mut self, bytes: &[u8]) -> Vec<Bytes> {
        self.buffer.extend_from_slice(bytes);
        let buffer = &self.buffer;
        let mut events = Vec::new();
        let mut start = 0;
        let mut at = self.scanned;
        while at + 1 < buffer.len() {
            let end = match (buffer[at], buffer[at + 1]) {
                (b'\n', b'\n') => Some(at + 2),
                (b'\n', b'\r') if buffer.get(at + 2) == Some(&b'\n') => Some(at + 3),
                _ => None,
            };
            match end {
                Some(end) => {
                    events.push(Bytes::copy_from_slice(&buffer[start..end]));
                    start = end;
                    at = end;
                }
                None => at += 1,
            }
        }
        // A `\n\r` waiting for its `\n` is looked at again.
        self.scanned = at.saturating_sub(1).max(start) - start;
        self.buffer.drain(..start);
        events
    }

    /// How many bytes of an unfinished event are waiting.
    pub(super) fn waiting(&self) -> usize {
        self.buffer.len()
    }

    /// The bytes of an unfinished event, taken.
    pub(super) fn rest(&mut self) -> Bytes {
        self.scanned = 0;
        Bytes::from(std::mem::take(&mut self.buffer))
    }
}

/// The `data` of an event: its `data:` lines joined by newlines; `None`
/// for an event without one (a comment).
fn data(event: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(event).ok()?;
    let mut data: Option<String> = None;
    for line in text.lines() {
        if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_owned()),
            }
        }
    }
    data
}

/// Where the choice is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// No text yet that says whether a call begins (whitespace, a word
    /// arriving): held.
    Undecided,
    /// Inside a thought at the start: passing.
    Thinking,
    /// A call may have begun: held to the end.
    Holding,
    /// Words: passing.
    Passing,
    /// Nothing more is changed (the choice ended, several choices, held
    /// too much, something unreadable).
    Off,
}

/// A tool call arriving in deltas.
#[derive(Default)]
struct Partial {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// The rules over one stream's events.
pub(super) struct Holder {
    declared: Arc<Declared>,
    /// Lift calls out of `content` (tools declared, `tool_choice` not
    /// `none`).
    lifting: bool,
    /// Note what the stream says of its generation.
    watching: bool,
    state: State,
    /// Events held, as they came.
    held: Vec<Bytes>,
    held_bytes: usize,
    /// The content held (since the thought, if any).
    content: String,
    /// How much of `content` is known to be leading whitespace.
    lead: usize,
    /// The content of a thought at the start, while it streams.
    thought: String,
    /// Text that came with call deltas or the finish: said again as a
    /// chunk of its own before the calls.
    tail: String,
    calls: BTreeMap<u64, Partial>,
    /// The last chunk read, for the chunks the door writes.
    template: Option<Map<String, Value>>,
    pub(super) made: Vec<Made>,
    /// What the stream said of the generation (for its span).
    pub(super) generation: Generation,
}

/// What a stream says of its generation: the model, the finish reasons,
/// the usage chunk.
#[derive(Debug, Default)]
pub(super) struct Generation {
    pub(super) model: Option<String>,
    pub(super) reasons: Vec<String>,
    pub(super) usage: Option<Value>,
}

impl Holder {
    /// The rules over a stream whose request declared `declared` (none:
    /// nothing is changed, and with `watching` the generation is noted).
    pub(super) fn new(declared: Option<Arc<Declared>>, lifting: bool, watching: bool) -> Self {
        let state = if declared.is_some() { State::Undecided } else { State::Off };
        Self {
            declared: declared.unwrap_or_else(|| Arc::new(Declared::none())),
            lifting,
            watching,
            state,
            held: Vec::new(),
            held_bytes: 0,
            content: String::new(),
            lead: 0,
            thought: String::new(),
            tail: String::new(),
            calls: BTreeMap::new(),
            template: None,
            made: Vec::new(),
            generation: Generation::default(),
        }
    }

    /// What a chunk says of the generation, noted.
    fn watch(&mut self, chunk: &Map<String, Value>) {
        if !self.watching {
            return;
        }
        let generation = &mut self.generation;
        if generation.model.is_none() {
            generation.model = chunk.get("model").and_then(Value::as_str).map(str::to_owned);
        }
        for choice in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                generation.reasons.push(reason.to_owned());
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            generation.usage = Some(usage.clone());
        }
    }

    /// Whether events are being held (keep-alives are then sent).
    pub(super) fn holding(&self) -> bool {
        !self.held.is_empty() || !self.calls.is_empty()
    }

    /// What to send for one event, in order.
    pub(super) fn event(&mut self, raw: Bytes) -> Vec<Bytes> {
        if self.state == State::Off && !self.watching {
            return vec![raw];
        }
        let Some(data) = data(&raw) else { return self.pass_or_hold(raw) };
        if self.state == State::Off && !data.trim_start().starts_with('{') {
            return vec![raw];
        }
        if data.trim() == "[DONE]" {
            let mut out = self.end(None, None);
            out.push(raw);
            return out;
        }
        let Ok(Value::Object(chunk)) = serde_json::from_str::<Value>(&data) else { return self.give_up(raw) };
        self.watch(&chunk);
        if self.state == State::Off {
            return vec![raw];
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else { return self.give_up(raw) };
        if choices.is_empty() {
            // Usage, or a chunk of no choice.
            return self.pass_or_hold(raw);
        }
        let choice = &choices[0];
        if choices.len() > 1 || choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
            return self.give_up(raw);
        }
        let delta = choice.get("delta").and_then(Value::as_object);
        let content = delta.and_then(|d| d.get("content")).and_then(Value::as_str).filter(|c| !c.is_empty());
        let deltas = delta.and_then(|d| d.get("tool_calls")).and_then(Value::as_array).filter(|c| !c.is_empty());
        let finish = choice.get("finish_reason").filter(|f| !f.is_null()).cloned();
        if let Some(deltas) = deltas {
            for (at, call) in deltas.iter().enumerate() {
                let index = call.get("index").and_then(Value::as_u64).unwrap_or(at as u64);
                let partial = self.calls.entry(index).or_default();
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    partial.id.get_or_insert_with(|| id.to_owned());
                }
                let function = call.get("function");
                if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) {
                    partial.name.push_str(name);
                }
                if let Some(arguments) = function.and_then(|f| f.get("arguments")).and_then(Value::as_str) {
                    partial.arguments.push_str(arguments);
                }
            }
        }
        let (has_deltas, content) = (deltas.is_some(), content.map(str::to_owned));
        let mut template = chunk;
        template.remove("choices");
        template.remove("usage");
        self.template = Some(template);
        let mut out = match (finish, has_deltas) {
            (None, true) => {
                // Text beside call deltas is said again with the calls.
                if let Some(content) = content {
                    self.tail.push_str(&content);
                }
                Vec::new()
            }
            (None, false) => match content {
                Some(content) => self.content(raw, &content),
                None => self.pass_or_hold(raw),
            },
            (Some(reason), _) => {
                let words = matches!(self.state, State::Passing | State::Thinking);
                if self.calls.is_empty() && words {
                    let mut out = self.release();
                    out.push(raw);
                    self.state = State::Off;
                    return out;
                }
                if let Some(content) = content {
                    self.content.push_str(&content);
                    self.tail.push_str(&content);
                }
                return self.end(Some(reason), (!has_deltas).then_some(raw));
            }
        };
        if self.held_bytes > MAX_HELD {
            out.extend(self.release());
            self.state = State::Passing;
        }
        out
    }

    /// A `content` delta under the rules.
    fn content(&mut self, raw: Bytes, content: &str) -> Vec<Bytes> {
        match self.state {
            State::Passing | State::Off => vec![raw],
            State::Thinking => {
                self.thought.push_str(content);
                self.after_thought();
                vec![raw]
            }
            State::Holding => {
                self.hold(raw);
                self.content.push_str(content);
                Vec::new()
            }
            State::Undecided => {
                self.hold(raw);
                self.content.push_str(content);
                // Whitespace first is looked at once, not again with
                // every delta.
                let start = self.content[self.lead..].trim_start();
                self.lead = self.content.len() - start.len();
                if start.starts_with("<think>") {
                    // A thought first: it streams, and the text after it
                    // is judged afresh.
                    let thought = std::mem::take(&mut self.content);
                    let out = self.release();
                    self.state = State::Thinking;
                    self.thought = thought;
                    self.after_thought();
                    return out;
                }
                if !start.is_empty() && "<think>".starts_with(start) {
                    return Vec::new();
                }
                match self.lifting.then(|| could_begin(&self.content[self.lead..], &self.declared)).flatten() {
                    Some(true) => {
                        self.state = State::Holding;
                        Vec::new()
                    }
                    Some(false) => {
                        self.state = State::Passing;
                        self.release()
                    }
                    None if !self.lifting => {
                        self.state = State::Passing;
                        self.release()
                    }
                    None => Vec::new(),
                }
            }
        }
    }

    /// Once the thought has ended: undecided again, or passing when text
    /// came after it in the same delta (already sent with it). Only the
    /// thought's last bytes are kept between deltas (where a `</think>`
    /// split across two may begin), so a long thought is read once.
    fn after_thought(&mut self) {
        const CLOSER: &str = "</think>";
        match self.thought.find(CLOSER) {
            Some(end) => {
                let after = self.thought[end + CLOSER.len()..].trim().is_empty();
                self.thought.clear();
                self.state = if after { State::Undecided } else { State::Passing };
            }
            None => {
                let mut keep = self.thought.len().saturating_sub(CLOSER.len() - 1);
                while !self.thought.is_char_boundary(keep) {
                    keep -= 1;
                }
                self.thought.drain(..keep);
            }
        }
    }

    fn hold(&mut self, raw: Bytes) {
        self.held_bytes += raw.len();
        self.held.push(raw);
    }

    /// An event that says nothing of the choice's text: held behind what
    /// is held, else sent.
    fn pass_or_hold(&mut self, raw: Bytes) -> Vec<Bytes> {
        match self.held.is_empty() {
            true => vec![raw],
            false => {
                self.hold(raw);
                Vec::new()
            }
        }
    }

    /// What is held, sent unchanged; the content held is forgotten.
    fn release(&mut self) -> Vec<Bytes> {
        self.content.clear();
        self.lead = 0;
        self.held_bytes = 0;
        std::mem::take(&mut self.held)
    }

    /// Something the rules cannot follow: everything held goes as it came
    /// (tool calls complete), then this, and nothing more is changed.
    fn give_up(&mut self, raw: Bytes) -> Vec<Bytes> {
        let mut out = self.release();
        out.extend(self.complete_calls(None));
        out.push(raw);
        self.state = State::Off;
        out
    }

    /// The choice ended (`reason`, and the upstream's finish event
    /// `raw_finish` unless it carried call deltas), or the stream did: the
    /// held calls complete; else the held text's calls lifted; else the
    /// held text unchanged.
    fn end(&mut self, reason: Option<Value>, raw_finish: Option<Bytes>) -> Vec<Bytes> {
        let state = std::mem::replace(&mut self.state, State::Off);
        if state == State::Off {
            return raw_finish.into_iter().collect();
        }
        let mut out = Vec::new();
        if !self.calls.is_empty() {
            out.extend(self.release());
            let tail = std::mem::take(&mut self.tail);
            if !tail.is_empty() {
                out.push(self.chunk(json!({"content": tail}), None));
            }
            out.extend(self.complete_calls(reason));
            return out;
        }
        if state == State::Holding && self.lifting {
            if let Some(lifted) = lift(&self.content, &self.declared, 0, true) {
                // What was held without text (the role's first delta,
                // usage) goes; the text becomes the calls.
                let held = std::mem::take(&mut self.held);
                out.extend(held.into_iter().filter(|event| !carries_text(event)));
                self.content.clear();
                let mut calls = Vec::with_capacity(lifted.len());
                for (call, repairs) in lifted {
                    self.made.extend(repairs);
                    calls.push(call);
                }
                out.push(self.chunk(json!({"tool_calls": calls}), None));
                if reason.is_some() {
                    out.push(self.chunk(json!({}), Some("tool_calls".into())));
                }
                return out;
            }
        }
        out.extend(self.release());
        out.extend(raw_finish);
        out
    }

    /// The held tool calls, each complete (repaired where one meaning is
    /// possible) in one chunk, then the finish chunk when `reason` is given.
    fn complete_calls(&mut self, reason: Option<Value>) -> Vec<Bytes> {
        if self.calls.is_empty() {
            return Vec::new();
        }
        let calls = std::mem::take(&mut self.calls);
        let mut written = Vec::with_capacity(calls.len());
        for (i, (index, partial)) in calls.into_iter().enumerate() {
            let (name, arguments) = match repair_call(&partial.name, &partial.arguments, &self.declared) {
                Some(prepared) => {
                    self.made.extend(made(0, i, &prepared, None));
                    (prepared.name, prepared.arguments_json)
                }
                None => (partial.name, partial.arguments),
            };
            let id = partial.id.unwrap_or_else(super::response::call_id);
            written.push(json!({
                "index": index,
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }));
        }
        let mut out = vec![self.chunk(json!({"tool_calls": written}), None)];
        if let Some(reason) = reason {
            out.push(self.chunk(json!({}), Some(reason)));
        }
        out
    }

    /// A chunk of the door's, shaped as the upstream's last one.
    fn chunk(&self, delta: Value, finish: Option<Value>) -> Bytes {
        let mut chunk = self.template.clone().unwrap_or_default();
        chunk.insert(
            "choices".to_owned(),
            json!([{"index": 0, "delta": delta, "finish_reason": finish.unwrap_or(Value::Null)}]),
        );
        Bytes::from(format!("data: {}\n\n", Value::Object(chunk)))
    }
}

/// Whether an event's delta carries text (content).
fn carries_text(event: &Bytes) -> bool {
    let Some(Ok(chunk)) = data(event).map(|d| serde_json::from_str::<Value>(&d)) else { return false };
    chunk.pointer("/choices/0/delta/content").and_then(Value::as_str).is_some_and(|content| !content.is_empty())
}

/// An error event in OpenAI's shape, for a stream cut mid-way (no
/// `[DONE]` follows it: the SDKs raise on it).
pub(super) fn error_event(message: &str) -> Bytes {
    let error = json!({"error": {"message": message, "type": "upstream_error", "param": null, "code": null}});
    Bytes::from(format!("data: {error}\n\n"))
}

/// Sends the upstream's events to `to` under `holder`'s rules, with a
/// keep-alive comment every 15 s while holding; a stream cut mid-way ends
/// with an error event. Once an event passes the most a choice holds,
/// every byte goes as it came. The holder is given back: what was
/// repaired, and what the stream said of its generation.
pub(super) async fn relay(
    mut upstream: impl Stream<Item = Result<Bytes, reqwest::Error>> + Unpin,
    to: mpsc::Sender<Bytes>,
    mut holder: Holder,
) -> Holder {
    let mut events = Events::default();
    let mut raw = false;
    let mut keep_alive = tokio::time::interval(KEEP_ALIVE);
    keep_alive.reset();
    loop {
        let next = tokio::select! {
            next = upstream.next() => next,
            _ = keep_alive.tick(), if holder.holding() => {
                if to.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                    return holder;
                }
                continue;
            }
        };
        let (out, ended) = match next {
            Some(Ok(bytes)) if raw => (vec![bytes], false),
            Some(Ok(bytes)) => {
                let mut out: Vec<Bytes> = events.push(&bytes).into_iter().flat_map(|e| holder.event(e)).collect();
                if events.waiting() > MAX_HELD {
                    out.extend(holder.give_up(events.rest()));
                    raw = true;
                }
                (out, false)
            }
            Some(Err(err)) => {
                let mut out = holder.give_up(Bytes::new());
                out.push(error_event(&format!("the model server's stream broke off: {err}")));
                (out, true)
            }
            None => {
                let mut out = holder.end(None, None);
                out.push(events.rest());
                (out, true)
            }
        };
        for bytes in out.into_iter().filter(|b| !b.is_empty()) {
            if to.send(bytes).await.is_err() {
                return holder;
            }
        }
        if ended {
            return holder;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_on_blank_lines_and_the_rest_waits() {
        let mut events = Events::default();
        let whole = events.push(b"data: a\n\ndata: b\r\n\r\n: keep\n\ndata: c");
        assert_eq!(whole, [&b"data: a\n\n"[..], &b"data: b\r\n\r\n"[..], &b": keep\n\n"[..]]);
        assert_eq!(events.waiting(), 7);
        // An event in pieces, its blank line split too.
        assert!(events.push(b"\r").is_empty());
        assert!(events.push(b"\n\r").is_empty());
        assert_eq!(events.push(b"\n"), [&b"data: c\r\n\r\n"[..]]);
        assert_eq!(events.waiting(), 0);
        assert_eq!(data(b"data: {\"a\": 1}\n\n").as_deref(), Some("{\"a\": 1}"));
        assert_eq!(data(b": keep-alive\n\n"), None);
    }

    #[test]
    fn what_could_begin_a_call() {
        let tools = vec![crate::exec::declared::declared("get_weather", "", None)];
        let declared = Declared::new(tools, crate::exec::ExecLimits::default()).unwrap();
        for text in [
            "<tool_call>",
            "  {\"name\"",
            "```json",
            "get_weather(",
            "call:get_weather{",
            "GetWeather ",
            "[TOOL_CALLS]",
        ] {
            assert_eq!(could_begin(text, &declared), Some(true), "{text}");
        }
        for text in ["Sure, ", "The weather ", "I'll "] {
            assert_eq!(could_begin(text, &declared), Some(false), "{text}");
        }
        assert_eq!(could_begin("get_wea", &declared), None);
        assert_eq!(could_begin("   ", &declared), None);
    }

    fn weather() -> Arc<Declared> {
        let parameters =
            serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let tools = vec![crate::exec::declared::declared("get_weather", "", Some(&parameters))];
        Arc::new(Declared::new(tools, crate::exec::ExecLimits::default()).unwrap())
    }

    fn content_event(text: &str) -> Bytes {
        let chunk = json!({"id": "c", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
        Bytes::from(format!("data: {chunk}\n\n"))
    }

    /// Every event through a holder; the text sent and the calls sent.
    fn run(events: Vec<Bytes>) -> (String, Vec<Value>) {
        let mut holder = Holder::new(Some(weather()), true, false);
        let mut out = Vec::new();
        for event in events {
            out.extend(holder.event(event));
        }
        let finish = json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
        out.extend(holder.event(Bytes::from(format!("data: {finish}\n\n"))));
        let (mut text, mut calls) = (String::new(), Vec::new());
        for event in out {
            let chunk: Value = serde_json::from_str(&data(&event).unwrap()).unwrap();
            let delta = &chunk["choices"][0]["delta"];
            text.push_str(delta["content"].as_str().unwrap_or_default());
            calls.extend(delta["tool_calls"].as_array().cloned().unwrap_or_default());
        }
        (text, calls)
    }

    #[test]
    fn a_long_thought_streams_and_the_call_after_it_is_lifted() {
        let mut events = vec![content_event("<think>")];
        // A thought of 200,000 one-byte deltas, its closer split in two.
        events.extend((0..200_000).map(|_| content_event("x")));
        events.extend(["</thi", "nk>", "\n", "  ", "call:get_weather", "{city: \"Oslo\"}"].map(content_event));
        let (text, calls) = run(events);
        assert!(text.starts_with("<think>x") && text.ends_with("x</think>"), "the thought streams through");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["function"]["name"], "get_weather");
        assert_eq!(calls[0]["function"]["arguments"], "{\"city\":\"Oslo\"}");
    }

    #[test]
    fn words_stream_and_a_call_after_them_stays_text() {
        let written = "Sure: get_weather(city=\"Oslo\")";
        let (text, calls) = run(written.chars().map(|c| content_event(&c.to_string())).collect());
        assert_eq!(text, written);
        assert!(calls.is_empty());
        // Leading whitespace in many deltas, then words.
        let mut events: Vec<Bytes> = (0..100_000).map(|_| content_event(" ")).collect();
        events.push(content_event("Hello."));
        let (text, calls) = run(events);
        assert_eq!(text.trim_start(), "Hello.");
        assert!(calls.is_empty());
    }
}
