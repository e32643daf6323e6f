//! A streamed completion (server-sent events), held only where a call may
//! begin. The rules (docs/model-door.md, "Streaming"):
//!
//! - `content` is held only while the choice's text can still begin a
//!   form the reader accepts, as the core judges it
//!   ([`crate::exec::declared::Declared::could_begin`], asked again as text
//!   arrives): released the moment it cannot (a word no tool's name can
//!   begin with, a fence whose first line is not a call, a tool's name
//!   followed by words); once a call's form has begun, held until the
//!   choice ends, then sent with its calls lifted, or unchanged.
//! - Text that began as words streams through (a bare call after it is a
//!   call inside prose, never lifted), watched for explicit call markup
//!   where a preamble may come before it (the words rule,
//!   [`crate::exec::declared::words`]): from the markup on (or from what
//!   may still become markup) the choice is held, and at its end the calls
//!   are lifted after the words already sent, or the text sent unchanged.
//! - A thought (`<think>…</think>` at the start, `reasoning_content`)
//!   streams through; the text after it is judged afresh, also when it
//!   came in the thought's last delta.
//! - Calls are lifted only from a choice that ended naturally
//!   (`finish_reason` `stop`).
//! - Tool-call deltas are held per index and sent complete (repaired where
//!   one meaning is possible) when the choice ends; with
//!   `model_door.stream_calls: pass_well_formed`, a call whose name is a
//!   declared tool's exactly and whose first arguments are well-formed JSON
//!   so far streams as it comes, at the index it will have.
//! - At most [`MAX_HELD`] bytes are held; past it, what is held is sent
//!   unchanged and the rest passes.
//! - Usage chunks, comments and `[DONE]` pass, in order.
//! - A stream of several choices (`n` > 1) passes unchanged.
//!
//! Events are split on blank lines ([`super::sse`]), each kept as its
//! bytes: what passes is sent byte for byte. [`Holder`] is the rules, without IO; [`relay`] runs
//! them over the upstream's stream.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tokio_util::codec::Decoder;

use super::{
    response::{lift, made, repair_call, Lifting, Made},
    sse::{data, Frames},
};
use crate::exec::declared::{
    words::{Scan, Scanned},
    Declared,
};

/// The most a choice holds before it is sent unchanged.
pub(super) const MAX_HELD: usize = 1024 * 1024;

/// How often a holding stream tells the client it is alive.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

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
    /// Words: passing, watched for explicit markup.
    Passing,
    /// After words, text that may still become explicit markup: kept (in
    /// `content`, not yet sent) until it is or is not.
    Pending,
    /// Nothing more is changed (the choice ended, several choices, held
    /// too much, something unreadable).
    Off,
}

/// A tool call arriving in deltas.
#[derive(Default)]
struct Partial {
    /// The `index` its deltas carry, if they carry one.
    index: Option<u64>,
    id: Option<String>,
    name: String,
    arguments: String,
    /// Whether it streams as it comes (`stream_calls: pass_well_formed`),
    /// once decided (`None`: not yet).
    passing: Option<bool>,
}

/// The rules over one stream's events.
pub(super) struct Holder {
    /// The choice (`index`) whose events it reads.
    choice: u64,
    declared: Arc<Declared>,
    /// What may be lifted out of `content`.
    lifting: Lifting,
    /// Held from explicit markup after words already sent.
    marked: bool,
    /// The watch for explicit markup over the words sent.
    scan: Scan,
    /// Note what the stream says of its generation.
    watching: bool,
    /// Let well-formed calls of declared tools stream as they come.
    pass_calls: bool,
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
    calls: Vec<Partial>,
    /// The last chunk read, for the chunks the door writes.
    template: Option<Map<String, Value>>,
    /// The usage of the last chunk the door read and did not pass as it
    /// came (a finish chunk whose calls it writes again): carried by the
    /// finish chunk the door writes, so it still reaches the client.
    usage: Option<Value>,
    pub(super) made: Vec<Made>,
    /// What the stream said of the generation (for its span).
    pub(super) generation: Generation,
    /// The second chance may be taken: a choice that ends with a call
    /// that cannot be made ready, while nothing but a thought was sent,
    /// is kept back whole ([`Retry`]) and the rest of the stream dropped.
    retrying: bool,
    pending: Option<Retry>,
}

/// A streamed answer kept back for the second chance: the answer as it
/// came, as a whole chat completion (its usage the stream's), and the
/// last chunk's shape, for the chunks that will carry the new answer.
struct Retry {
    answer: Value,
    template: Map<String, Value>,
    choice: u64,
    /// The stream carried a usage chunk (`stream_options.include_usage`).
    usage: bool,
}

impl Retry {
    /// `answer` (a whole chat completion: the last try's, repaired) as the
    /// rest of the stream: its message in one chunk, its finish, its usage
    /// when the stream carried usage, and `[DONE]`.
    fn chunks(&self, answer: &Value) -> Vec<Bytes> {
        let choice = answer.pointer("/choices/0");
        let message = choice.and_then(|c| c.get("message")).and_then(Value::as_object);
        let mut delta = Map::new();
        delta.insert("role".to_owned(), "assistant".into());
        if let Some(content) = message.and_then(|m| m.get("content")).filter(|c| !c.is_null()) {
            delta.insert("content".to_owned(), content.clone());
        }
        let calls = message.and_then(|m| m.get("tool_calls")).and_then(Value::as_array).into_iter().flatten();
        let calls: Vec<Value> = calls
            .enumerate()
            .map(|(index, call)| {
                let mut call = call.clone();
                call["index"] = index.into();
                call
            })
            .collect();
        if !calls.is_empty() {
            delta.insert("tool_calls".to_owned(), calls.into());
        }
        let finish = choice.and_then(|c| c.get("finish_reason")).cloned().unwrap_or_else(|| "stop".into());
        let chunk = |choices: Value, usage: Option<&Value>| {
            let mut chunk = self.template.clone();
            chunk.insert("choices".to_owned(), choices);
            if let Some(usage) = usage {
                chunk.insert("usage".to_owned(), usage.clone());
            }
            Bytes::from(format!("data: {}\n\n", Value::Object(chunk)))
        };
        let mut out = vec![
            chunk(json!([{"index": self.choice, "delta": delta, "finish_reason": null}]), None),
            chunk(json!([{"index": self.choice, "delta": {}, "finish_reason": finish}]), None),
        ];
        if let Some(usage) = answer.get("usage").filter(|_| self.usage) {
            out.push(chunk(json!([]), Some(usage)));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
        out
    }
}

/// What a stream says of its generation: the model, the finish reasons,
/// the usage chunk.
#[derive(Clone, Debug, Default)]
pub(super) struct Generation {
    pub(super) model: Option<String>,
    pub(super) reasons: Vec<String>,
    pub(super) usage: Option<Value>,
}

impl Holder {
    /// The rules over a stream whose request declared `declared` (none:
    /// nothing is changed, and with `watching` the generation is noted).
    pub(super) fn new(declared: Option<Arc<Declared>>, lifting: Lifting, watching: bool) -> Self {
        let state = if declared.is_some() { State::Undecided } else { State::Off };
        Self {
            choice: 0,
            declared: declared.unwrap_or_else(|| Arc::new(Declared::none())),
            lifting,
            marked: false,
            scan: Scan::at_start(),
            watching,
            pass_calls: false,
            state,
            held: Vec::new(),
            held_bytes: 0,
            content: String::new(),
            lead: 0,
            thought: String::new(),
            tail: String::new(),
            calls: Vec::new(),
            template: None,
            usage: None,
            made: Vec::new(),
            generation: Generation::default(),
            retrying: false,
            pending: None,
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

    /// The same rules for the choice `index`.
    pub(super) fn for_choice(self, index: u64) -> Self {
        Self { choice: index, ..self }
    }

    /// Whether events are being held (keep-alives are then sent).
    pub(super) fn holding(&self) -> bool {
        !self.held.is_empty() || !self.calls.is_empty()
    }

    /// What to send for one event, in order.
    pub(super) fn event(&mut self, raw: Bytes) -> Vec<Bytes> {
        if self.pending.is_some() {
            // Kept back: nothing more of this stream is sent.
            return Vec::new();
        }
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
        self.chunk_event(raw, chunk)
    }

    /// What to send for an event whose data is `chunk` (read).
    pub(super) fn chunk_event(&mut self, raw: Bytes, chunk: Map<String, Value>) -> Vec<Bytes> {
        self.watch(&chunk);
        if let Some(pending) = &mut self.pending {
            if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
                pending.answer["usage"] = usage.clone();
                pending.usage = true;
            }
            return Vec::new();
        }
        if self.state == State::Off {
            return vec![raw];
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else { return self.give_up(raw) };
        if choices.is_empty() {
            // Usage, or a chunk of no choice.
            return self.pass_or_hold(raw);
        }
        let choice = &choices[0];
        if choices.len() > 1 || choice.get("index").and_then(Value::as_u64).unwrap_or(0) != self.choice {
            return self.give_up(raw);
        }
        let delta = choice.get("delta").and_then(Value::as_object);
        let content = delta.and_then(|d| d.get("content")).and_then(Value::as_str).filter(|c| !c.is_empty());
        let deltas = delta.and_then(|d| d.get("tool_calls")).and_then(Value::as_array).filter(|c| !c.is_empty());
        let finish = choice.get("finish_reason").filter(|f| !f.is_null()).cloned();
        let passed = deltas.map(|deltas| self.gather(deltas)).unwrap_or_default();
        let (has_deltas, content) = (deltas.is_some(), content.map(str::to_owned));
        let mut template = chunk;
        template.remove("choices");
        if let Some(usage) = template.remove("usage").filter(|usage| !usage.is_null()) {
            self.usage = Some(usage);
        }
        self.template = Some(template);
        let mut out = passed;
        out.extend(match (finish, has_deltas) {
            (None, true) => {
                // Text beside call deltas is said again with the calls.
                if let Some(content) = content {
                    self.tail.push_str(&content);
                }
                Vec::new()
            }
            (None, false) => match content {
                Some(content) => self.content(Some(raw), &content),
                None => self.pass_or_hold(raw),
            },
            (Some(reason), _) => {
                out.extend(self.finished(raw, reason, content, has_deltas));
                return out;
            }
        });
        if self.held_bytes > MAX_HELD {
            out.extend(self.release());
            self.state = State::Passing;
        }
        out
    }

    /// Call deltas added to the calls they continue: the last call of the
    /// same `index` (without one, the last call), unless the delta brings
    /// an `id` other than that call's, or a name after that call's
    /// arguments began: that starts a call of its own (two calls sent at
    /// one index are never merged into one). What to send now: the deltas
    /// of calls that stream as they come ([`Holder::passed`]).
    fn gather(&mut self, deltas: &[Value]) -> Vec<Bytes> {
        let mut out = Vec::new();
        for call in deltas {
            let index = call.get("index").and_then(Value::as_u64);
            let id = call.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
            let continued = match index {
                Some(index) => self.calls.iter().rposition(|c| c.index == Some(index)),
                None => self.calls.len().checked_sub(1),
            };
            // A new id, or a name after the arguments began: another call.
            let named = call.get("function").and_then(|f| f.get("name")).is_some_and(|n| n.as_str() != Some(""));
            let continued = continued.filter(|&at| {
                let known = &self.calls[at];
                let same_id = match (id, &known.id) {
                    (Some(id), Some(known)) => id == known,
                    _ => true,
                };
                same_id && (!named || known.arguments.is_empty())
            });
            let at = continued.unwrap_or_else(|| {
                self.calls.push(Partial { index, ..Partial::default() });
                self.calls.len() - 1
            });
            let partial = &mut self.calls[at];
            if let Some(id) = id {
                partial.id.get_or_insert_with(|| id.to_owned());
            }
            let function = call.get("function");
            if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) {
                partial.name.push_str(name);
            }
            let arguments = function.and_then(|f| f.get("arguments")).and_then(Value::as_str).unwrap_or_default();
            partial.arguments.push_str(arguments);
            if self.pass_calls && self.state != State::Off {
                out.extend(self.passed(at, arguments));
            }
        }
        out
    }

    /// The call at `at`, which just received `arguments`, if it streams as
    /// it comes: decided at its first arguments (its name declared exactly,
    /// its arguments so far a JSON object's beginning); then sent whole so
    /// far at the index it will have, and each delta after as it comes.
    fn passed(&mut self, at: usize, arguments: &str) -> Option<Bytes> {
        let partial = &mut self.calls[at];
        let delta = match partial.passing {
            Some(false) => return None,
            Some(true) if arguments.is_empty() => return None,
            Some(true) => json!({"index": at, "function": {"arguments": arguments}}),
            None => {
                let so_far = partial.arguments.trim_start();
                if so_far.is_empty() {
                    return None;
                }
                let passing = self.declared.declares(&partial.name) && so_far.starts_with('{') && well_formed(so_far);
                partial.passing = Some(passing);
                if !passing {
                    return None;
                }
                let id = partial.id.get_or_insert_with(super::response::call_id).clone();
                let function = json!({"name": partial.name, "arguments": partial.arguments});
                json!({"index": at, "id": id, "type": "function", "function": function})
            }
        };
        Some(self.chunk(json!({"tool_calls": [delta]}), None))
    }

    /// The event that gives the finish reason (`raw`, with its `content`
    /// and whether it carried call deltas): words held so far pass as they
    /// were, or the answer ends with what was held read.
    fn finished(&mut self, raw: Bytes, reason: Value, content: Option<String>, has_deltas: bool) -> Vec<Bytes> {
        let words = matches!(self.state, State::Passing | State::Thinking | State::Pending);
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
        self.end(Some(reason), (!has_deltas).then_some(raw))
    }

    /// A `content` delta under the rules: `raw` is its event (`None`
    /// for text the door split off an event of the upstream's: a chunk of
    /// the door's carries it).
    fn content(&mut self, raw: Option<Bytes>, content: &str) -> Vec<Bytes> {
        let raw = raw.unwrap_or_else(|| self.chunk(json!({"content": content}), None));
        match self.state {
            State::Off => vec![raw],
            State::Passing => match self.lifting.on {
                true => {
                    let found = self.scan.next(content, false);
                    self.watched(raw, content, found)
                }
                false => vec![raw],
            },
            State::Pending => {
                self.content.push_str(content);
                let pending = std::mem::take(&mut self.content);
                let found = self.scan.next(&pending, false);
                self.watched_pending(pending, found)
            }
            State::Thinking => self.thinking(raw, content),
            State::Holding => {
                self.hold(raw);
                self.content.push_str(content);
                Vec::new()
            }
            State::Undecided => {
                self.hold(raw);
                self.content.push_str(content);
                self.undecided()
            }
        }
    }

    /// The text held since the start (or the thought) judged: a thought
    /// first, a call that may begin, or words.
    fn undecided(&mut self) -> Vec<Bytes> {
        // Whitespace first is looked at once, not again with every delta.
        let start = self.content[self.lead..].trim_start();
        self.lead = self.content.len() - start.len();
        if start.starts_with("<think>") {
            // A thought first: it streams, and the text after it is judged
            // afresh.
            let content = std::mem::take(&mut self.content);
            self.state = State::Thinking;
            self.scan = Scan::default();
            let Some(end) = content.find("</think>").map(|at| at + "</think>".len()) else {
                self.thought = content;
                self.forget_thought();
                return self.release();
            };
            let held = std::mem::take(&mut self.held);
            self.held_bytes = 0;
            let mut out: Vec<Bytes> = held.into_iter().filter(|event| !carries_text(event)).collect();
            out.push(self.chunk(json!({"content": &content[..end]}), None));
            self.state = State::Undecided;
            self.lead = 0;
            if !content[end..].is_empty() {
                out.extend(self.content(None, &content[end..]));
            }
            return out;
        }
        if !start.is_empty() && "<think>".starts_with(start) {
            return Vec::new();
        }
        match self.lifting.on.then(|| self.declared.could_begin(&self.content[self.lead..])).flatten() {
            Some(true) => {
                self.state = State::Holding;
                Vec::new()
            }
            Some(false) => self.words(),
            None if !self.lifting.on => {
                self.state = State::Passing;
                self.release()
            }
            None => Vec::new(),
        }
    }

    /// The text held turned out to begin as words: they pass, watched for
    /// explicit markup from their start.
    fn words(&mut self) -> Vec<Bytes> {
        self.state = State::Passing;
        let text = std::mem::take(&mut self.content);
        match self.scan.next(&text, false) {
            Scanned::Nothing => self.release(),
            found => {
                // The held events carry the text: what was held without
                // text goes first, then the text split where markup begins.
                let held = std::mem::take(&mut self.held);
                self.held_bytes = 0;
                let mut out: Vec<Bytes> = held.into_iter().filter(|event| !carries_text(event)).collect();
                out.extend(self.split(&text, found));
                out
            }
        }
    }

    /// A piece of words after the scan over it: sent, or split where
    /// explicit markup begins (or may).
    fn watched(&mut self, raw: Bytes, content: &str, found: Scanned) -> Vec<Bytes> {
        match found {
            Scanned::Nothing => vec![raw],
            found => self.split(content, found),
        }
    }

    /// Words, then from `found` on what is or may become markup: the words
    /// go (a chunk of the door's), the rest is held or kept pending.
    fn split(&mut self, text: &str, found: Scanned) -> Vec<Bytes> {
        let (at, sure) = match found {
            Scanned::Marker(at) => (at, true),
            Scanned::Incomplete(at) => (at, false),
            Scanned::Nothing => return vec![self.chunk(json!({"content": text}), None)],
            Scanned::ThoughtEnd(end) => {
                // The words were a thought whose opener is missing: the
                // text after it is judged afresh.
                let mut out = vec![self.chunk(json!({"content": &text[..end]}), None)];
                self.scan = Scan::default();
                self.state = State::Undecided;
                self.lead = 0;
                self.content.clear();
                if !text[end..].is_empty() {
                    out.extend(self.content(None, &text[end..]));
                }
                return out;
            }
        };
        let mut out = Vec::new();
        if at > 0 {
            out.push(self.chunk(json!({"content": &text[..at]}), None));
        }
        self.content = text[at..].to_owned();
        match sure {
            true => self.mark(),
            false => self.state = State::Pending,
        }
        out
    }

    /// What is pending scanned again with what came: markup (held), still
    /// undecided (kept), or words after all (sent, and watched on).
    fn watched_pending(&mut self, pending: String, found: Scanned) -> Vec<Bytes> {
        match found {
            Scanned::Marker(0) => {
                self.content = pending;
                self.mark();
                Vec::new()
            }
            Scanned::Incomplete(0) => {
                self.content = pending;
                Vec::new()
            }
            found => {
                self.state = State::Passing;
                // Events that waited behind the pending text (no text of
                // their own) go first.
                let mut out = std::mem::take(&mut self.held);
                self.held_bytes = 0;
                out.extend(self.split(&pending, found));
                out
            }
        }
    }

    /// Explicit markup after words: held to the end (its text as a chunk
    /// of the door's, should it go unchanged).
    fn mark(&mut self) {
        self.state = State::Holding;
        self.marked = true;
        let chunk = self.chunk(json!({"content": &self.content}), None);
        // Events held while it was pending come after its text.
        let waiting = std::mem::take(&mut self.held);
        self.hold(chunk);
        for event in waiting {
            self.hold(event);
        }
    }

    /// A delta inside the thought that opens the choice: it streams; when
    /// it closes the thought, the text after the closer in the same delta
    /// is judged afresh (split off into a chunk of the door's).
    fn thinking(&mut self, raw: Bytes, content: &str) -> Vec<Bytes> {
        const CLOSER: &str = "</think>";
        let kept = self.thought.len();
        self.thought.push_str(content);
        let Some(end) = self.thought.find(CLOSER).map(|at| at + CLOSER.len()) else {
            self.forget_thought();
            return vec![raw];
        };
        self.thought.clear();
        self.state = State::Undecided;
        self.lead = 0;
        let cut = end - kept;
        if content[cut..].is_empty() {
            return vec![raw];
        }
        let mut out = vec![self.chunk(json!({"content": &content[..cut]}), None)];
        out.extend(self.content(None, &content[cut..]));
        out
    }

    /// Only the thought's last bytes are kept between deltas (where a
    /// `</think>` split across two may begin), so a long thought is read
    /// once.
    fn forget_thought(&mut self) {
        let mut keep = self.thought.len().saturating_sub("</think>".len() - 1);
        while !self.thought.is_char_boundary(keep) {
            keep -= 1;
        }
        self.thought.drain(..keep);
    }

    fn hold(&mut self, raw: Bytes) {
        self.held_bytes += raw.len();
        self.held.push(raw);
    }

    /// An event that says nothing of the choice's text: held behind what
    /// is held, else sent.
    fn pass_or_hold(&mut self, raw: Bytes) -> Vec<Bytes> {
        match self.held.is_empty() && self.state != State::Pending {
            true => vec![raw],
            false => {
                self.hold(raw);
                Vec::new()
            }
        }
    }

    /// What is held, sent unchanged (text pending after words first, in a
    /// chunk of the door's); the content held is forgotten.
    fn release(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.state == State::Pending && !self.content.is_empty() {
            out.push(self.chunk(json!({"content": &self.content}), None));
            self.state = State::Passing;
        }
        self.content.clear();
        self.lead = 0;
        self.held_bytes = 0;
        out.extend(std::mem::take(&mut self.held));
        out
    }

    /// Something the rules cannot follow: everything held goes as it came
    /// (tool calls complete), then this, and nothing more is changed.
    pub(super) fn give_up(&mut self, raw: Bytes) -> Vec<Bytes> {
        let mut out = self.release();
        out.extend(self.complete_calls(None));
        out.push(raw);
        self.state = State::Off;
        out
    }

    /// The choice ended (`reason`, and the upstream's finish event
    /// `raw_finish` unless it carried call deltas), or the stream did: the
    /// held calls complete; else, when it ended naturally (`stop`), the
    /// held text's calls lifted; else the held text unchanged.
    pub(super) fn end(&mut self, reason: Option<Value>, raw_finish: Option<Bytes>) -> Vec<Bytes> {
        if self.state == State::Off {
            return raw_finish.into_iter().collect();
        }
        if self.keep_back(reason.as_ref()) {
            return Vec::new();
        }
        let mut out = Vec::new();
        if !self.calls.is_empty() {
            out.extend(self.release());
            self.state = State::Off;
            let tail = std::mem::take(&mut self.tail);
            if !tail.is_empty() {
                out.push(self.chunk(json!({"content": tail}), None));
            }
            out.extend(self.complete_calls(reason));
            return out;
        }
        let natural = reason.as_ref().and_then(Value::as_str) == Some("stop");
        if self.state == State::Holding && natural {
            if let Some((preamble, lifted)) =
                lift(&self.content, &self.declared, self.lifting, self.choice, true, self.marked)
            {
                // What was held without text (the role's first delta,
                // usage) goes; the text becomes the preamble and the calls.
                let held = std::mem::take(&mut self.held);
                out.extend(held.into_iter().filter(|event| !carries_text(event)));
                if let Some(end) = preamble {
                    out.push(self.chunk(json!({"content": &self.content[..end]}), None));
                }
                self.content.clear();
                self.state = State::Off;
                let mut calls = Vec::with_capacity(lifted.len());
                for (call, repairs) in lifted {
                    self.made.extend(repairs);
                    calls.push(call);
                }
                out.push(self.chunk(json!({"tool_calls": calls}), None));
                out.push(self.chunk(json!({}), Some("tool_calls".into())));
                return out;
            }
        }
        out.extend(self.release());
        self.state = State::Off;
        out.extend(raw_finish);
        out
    }

    /// Whether the choice, ending for `reason`, is kept back for the
    /// second chance: it may be taken, nothing but a thought (and text
    /// without words) was sent, no call streamed as it came, and the answer
    /// as it came holds a call that cannot be made ready
    /// ([`super::retry::corrective`]). Kept back, it is forgotten here.
    fn keep_back(&mut self, reason: Option<&Value>) -> bool {
        let silent = matches!(self.state, State::Undecided | State::Holding) && !self.marked;
        if !self.retrying || !silent || self.calls.iter().any(|c| c.passing == Some(true)) {
            return false;
        }
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|call| {
                let id = call.id.clone().unwrap_or_else(super::response::call_id);
                json!({"id": id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}})
            })
            .collect();
        let mut message = json!({"role": "assistant", "content": null});
        if !self.content.is_empty() {
            message["content"] = self.content.clone().into();
        }
        if !calls.is_empty() {
            message["tool_calls"] = calls.into();
        }
        let finish =
            reason.cloned().unwrap_or_else(|| if self.calls.is_empty() { "stop" } else { "tool_calls" }.into());
        let mut answer = json!({"object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]});
        for key in ["id", "created", "model"] {
            if let Some(value) = self.template.as_ref().and_then(|t| t.get(key)) {
                answer[key] = value.clone();
            }
        }
        if super::retry::corrective(&answer, &self.declared, self.lifting.on, crate::config::Api::Chat).is_none() {
            return false;
        }
        let usage = self.usage.clone();
        if let Some(usage) = &usage {
            answer["usage"] = usage.clone();
        }
        self.pending = Some(Retry {
            answer,
            template: self.template.clone().unwrap_or_default(),
            choice: self.choice,
            usage: usage.is_some(),
        });
        self.state = State::Off;
        self.held.clear();
        self.held_bytes = 0;
        self.content.clear();
        self.calls.clear();
        true
    }

    /// The held tool calls, each complete (repaired where one meaning is
    /// possible) in one chunk, then the finish chunk when `reason` is given.
    fn complete_calls(&mut self, reason: Option<Value>) -> Vec<Bytes> {
        if self.calls.is_empty() {
            return Vec::new();
        }
        let calls = std::mem::take(&mut self.calls);
        let mut written = Vec::with_capacity(calls.len());
        // Each call at an index of its own, in the order they began; those
        // that streamed as they came are complete.
        for (index, partial) in calls.into_iter().enumerate().filter(|(_, p)| p.passing != Some(true)) {
            let (name, arguments) = match repair_call(&partial.name, &partial.arguments, &self.declared) {
                Some(prepared) => {
                    self.made.extend(made(self.choice, index, &prepared, None));
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
        let mut out = Vec::new();
        if !written.is_empty() {
            out.push(self.chunk(json!({"tool_calls": written}), None));
        }
        if let Some(reason) = reason {
            out.push(self.chunk(json!({}), Some(reason)));
        }
        out
    }

    /// A chunk of the door's, shaped as the upstream's last one.
    fn chunk(&self, delta: Value, finish: Option<Value>) -> Bytes {
        let mut chunk = self.template.clone().unwrap_or_default();
        if let Some(usage) = self.usage.as_ref().filter(|_| finish.is_some()) {
            chunk.insert("usage".to_owned(), usage.clone());
        }
        chunk.insert(
            "choices".to_owned(),
            json!([{"index": self.choice, "delta": delta, "finish_reason": finish.unwrap_or(Value::Null)}]),
        );
        Bytes::from(format!("data: {}\n\n", Value::Object(chunk)))
    }
}

/// Whether `text` is well-formed JSON so far: a whole value, or the
/// beginning of one.
fn well_formed(text: &str) -> bool {
    match serde_json::from_str::<serde::de::IgnoredAny>(text) {
        Ok(_) => true,
        Err(err) => err.is_eof(),
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

/// The most choices of one stream read apart; a stream with more passes
/// the rest unchanged.
const MAX_CHOICES: usize = 128;

/// The rules over every choice of a stream (`n` > 1 sends each choice's
/// chunks with its `index`): a [`Holder`] a choice, so each is held,
/// repaired and lifted as a stream of one choice is. Events of no choice
/// (comments, usage) follow choice 0's; `[DONE]` ends them all.
pub(super) struct Choices {
    holders: Vec<Holder>,
    /// Calls well-formed so far stream as they come.
    pass_calls: bool,
    /// A new choice's holder: its declared tools, lifting and watching.
    first: (Option<Arc<Declared>>, Lifting, bool),
    /// Nothing to read or note: every event passes as it came.
    active: bool,
}

impl Choices {
    pub(super) fn new(declared: Option<Arc<Declared>>, lifting: Lifting, watching: bool) -> Self {
        let active = declared.is_some() || watching;
        let holders = vec![Holder::new(declared.clone(), lifting, watching)];
        Self { holders, pass_calls: false, first: (declared, lifting, watching), active }
    }

    pub(super) fn holding(&self) -> bool {
        self.holders.iter().any(Holder::holding)
    }

    /// Calls well-formed so far stream as they come
    /// (`model_door.stream_calls: pass_well_formed`).
    pub(super) fn passing_calls(mut self, pass: bool) -> Self {
        self.pass_calls = pass;
        for holder in &mut self.holders {
            holder.pass_calls = pass;
        }
        self
    }

    /// What to send for one event, in order.
    pub(super) fn event(&mut self, raw: Bytes) -> Vec<Bytes> {
        if !self.active {
            return vec![raw];
        }
        let Some(text) = data(&raw) else { return self.holders[0].event(raw) };
        if text.trim() == "[DONE]" {
            let mut out = self.end();
            if self.retry_pending().is_none() {
                out.push(raw);
            }
            return out;
        }
        let Ok(Value::Object(chunk)) = serde_json::from_str::<Value>(&text) else { return self.holders[0].event(raw) };
        let index = match chunk.get("choices").and_then(Value::as_array).map(Vec::as_slice) {
            Some([one]) => one.get("index").and_then(Value::as_u64).unwrap_or(0),
            _ => 0,
        };
        match self.holder(index) {
            Some(holder) => holder.chunk_event(raw, chunk),
            None => vec![raw],
        }
    }

    /// The holder of choice `index`, made on its first event (none past
    /// [`MAX_CHOICES`]).
    fn holder(&mut self, index: u64) -> Option<&mut Holder> {
        match self.holders.iter().position(|h| h.choice == index) {
            Some(at) => Some(&mut self.holders[at]),
            None if self.holders.len() < MAX_CHOICES => {
                // Several choices: no second chance.
                self.holders[0].retrying = false;
                let (declared, lifting, watching) = &self.first;
                let holder = Holder::new(declared.clone(), *lifting, *watching).for_choice(index);
                self.holders.push(Holder { pass_calls: self.pass_calls, ..holder });
                self.holders.last_mut()
            }
            None => None,
        }
    }

    /// Something the rules cannot follow (`raw` after what is held).
    pub(super) fn give_up(&mut self, raw: Bytes) -> Vec<Bytes> {
        let mut out: Vec<Bytes> = self.holders.iter_mut().flat_map(|h| h.give_up(Bytes::new())).collect();
        out.push(raw);
        out
    }

    /// The stream ended: every choice's held calls and text.
    pub(super) fn end(&mut self) -> Vec<Bytes> {
        self.holders.iter_mut().flat_map(|h| h.end(None, None)).collect()
    }

    /// What was repaired, every choice's.
    pub(super) fn made(&self) -> Vec<Made> {
        self.holders.iter().flat_map(|h| h.made.iter().cloned()).collect()
    }

    /// The second chance may be taken (a stream of one choice only: a
    /// second choice's first event turns it off).
    pub(super) fn retrying(mut self, on: bool) -> Self {
        self.holders[0].retrying = on;
        self
    }

    fn retry_pending(&self) -> Option<&Retry> {
        self.holders.first().and_then(|h| h.pending.as_ref())
    }

    /// What the stream said of its generation: the model, every choice's
    /// finish reasons, the last usage.
    pub(super) fn generation(&self) -> Generation {
        let mut generation = Generation::default();
        for holder in &self.holders {
            let of = &holder.generation;
            generation.model = generation.model.or_else(|| of.model.clone());
            generation.reasons.extend(of.reasons.iter().cloned());
            generation.usage = of.usage.clone().or(generation.usage);
        }
        generation
    }
}

/// The rules a stream is relayed under: one API's events, held, repaired
/// and lifted.
pub(super) trait Rules: Send + 'static {
    /// What to send for one event, in order.
    fn event(&mut self, raw: Bytes) -> Vec<Bytes>;
    /// Whether events are being held (keep-alives are then sent).
    fn holding(&self) -> bool;
    /// Something the rules cannot follow (`raw` after what is held).
    fn give_up(&mut self, raw: Bytes) -> Vec<Bytes>;
    /// The stream ended: what is held.
    fn end(&mut self) -> Vec<Bytes>;
    /// What was repaired.
    fn made(&self) -> Vec<Made>;
    /// What the stream said of its generation.
    fn generation(&self) -> Generation;
    /// The event that ends a stream cut mid-way, in the API's shape.
    fn cut(&self, message: &str) -> Bytes {
        error_event(message)
    }
    /// The answer kept back for the second chance (whole, in the API's
    /// shape, with the stream's usage), if one was.
    fn kept_back(&self) -> Option<Value> {
        None
    }
    /// After the second chance: the rest of the stream written from
    /// `last` (the last try's answer, repaired here), and what was
    /// repaired.
    fn rest(&mut self, last: Value) -> (Vec<Bytes>, Vec<Made>) {
        let _ = last;
        (Vec::new(), Vec::new())
    }
}

impl Rules for Choices {
    fn event(&mut self, raw: Bytes) -> Vec<Bytes> {
        Choices::event(self, raw)
    }

    fn holding(&self) -> bool {
        Choices::holding(self)
    }

    fn give_up(&mut self, raw: Bytes) -> Vec<Bytes> {
        Choices::give_up(self, raw)
    }

    fn end(&mut self) -> Vec<Bytes> {
        Choices::end(self)
    }

    fn made(&self) -> Vec<Made> {
        Choices::made(self)
    }

    fn generation(&self) -> Generation {
        Choices::generation(self)
    }

    fn kept_back(&self) -> Option<Value> {
        self.retry_pending().map(|kept| kept.answer.clone())
    }

    fn rest(&mut self, mut last: Value) -> (Vec<Bytes>, Vec<Made>) {
        let Some(holder) = self.holders.first_mut() else { return (Vec::new(), Vec::new()) };
        let Some(kept) = holder.pending.take() else { return (Vec::new(), Vec::new()) };
        let made = super::response::repair_completion(&mut last, &holder.declared, holder.lifting);
        (kept.chunks(&last), made)
    }
}

/// Sends the upstream's events to `to` under `holder`'s rules, with a
/// keep-alive comment every 15 s while holding; a stream cut mid-way ends
/// with an error event. Once an event passes the most a choice holds,
/// every byte goes as it came. The rules are given back: what was
/// repaired, and what the stream said of its generation.
pub(super) async fn relay<R: Rules>(
    mut upstream: impl Stream<Item = Result<Bytes, reqwest::Error>> + Unpin,
    to: &mpsc::Sender<Bytes>,
    mut holder: R,
) -> R {
    let (mut frames, mut waiting) = (Frames::default(), bytes::BytesMut::new());
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
                waiting.extend_from_slice(&bytes);
                let mut out = Vec::new();
                while let Ok(Some(event)) = frames.decode(&mut waiting) {
                    out.extend(holder.event(event));
                }
                if waiting.len() > MAX_HELD {
                    out.extend(holder.give_up(waiting.split().freeze()));
                    raw = true;
                }
                (out, false)
            }
            Some(Err(err)) => {
                let mut out = holder.give_up(Bytes::new());
                out.push(holder.cut(&format!("the model server's stream broke off: {err}")));
                (out, true)
            }
            None => {
                let mut out = holder.end();
                out.push(waiting.split().freeze());
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

    fn weather() -> Arc<Declared> {
        let parameters =
            serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let tools = vec![crate::exec::declared::declared("get_weather", Some(&parameters), false)];
        Arc::new(Declared::new(tools, crate::exec::ExecLimits::default()).unwrap())
    }

    fn content_event(text: &str) -> Bytes {
        let chunk = json!({"id": "c", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
        Bytes::from(format!("data: {chunk}\n\n"))
    }

    /// Every event through a holder; the text sent and the calls sent.
    fn run(events: Vec<Bytes>) -> (String, Vec<Value>) {
        let mut holder = Holder::new(Some(weather()), Lifting { on: true, several: true }, false);
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

    /// `text` in deltas of `size` characters.
    fn pieces(text: &str, size: usize) -> Vec<Bytes> {
        let chars: Vec<char> = text.chars().collect();
        chars.chunks(size).map(|piece| content_event(&piece.iter().collect::<String>())).collect()
    }

    #[test]
    fn words_before_explicit_markup_stream_and_the_calls_after_them_are_lifted() {
        let written =
            "I'll check.\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>";
        for size in [1, 3, 7, 200] {
            let (text, calls) = run(pieces(written, size));
            assert_eq!(text, "I'll check.\n", "pieces of {size}");
            assert_eq!(calls.len(), 1, "pieces of {size}");
            assert_eq!(calls[0]["function"]["arguments"], "{\"city\":\"Oslo\"}");
        }
        // Words after the call: the whole text, unchanged.
        let prose = format!("{written} is what I would send.");
        for size in [1, 5, 400] {
            assert_eq!(run(pieces(&prose, size)), (prose.clone(), Vec::new()), "pieces of {size}");
        }
        // Markup in a fence, in a sentence, or what only looks like a
        // marker's start: text.
        for text in [
            "Never run this:\n```\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>\n```",
            "An attacker would send <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>",
            "Use <tool_c\n<tool_cal\nx",
        ] {
            for size in [1, 4, 300] {
                assert_eq!(run(pieces(text, size)), (text.to_owned(), Vec::new()), "{text:?} in pieces of {size}");
            }
        }
    }

    #[test]
    fn a_thought_whose_opener_is_missing_streams_and_the_call_after_it_is_lifted() {
        let written = "The user wants the weather.</think>\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>";
        for size in [1, 4, 500] {
            let (text, calls) = run(pieces(written, size));
            assert_eq!((text.as_str(), calls.len()), ("The user wants the weather.</think>", 1), "pieces of {size}");
        }
    }

    #[test]
    fn the_text_after_a_thought_in_its_last_delta_is_judged_afresh() {
        let (text, calls) = run(["<think>hmm", "</think>get_weather(city=\"Oslo\")"].map(content_event).to_vec());
        assert_eq!(text, "<think>hmm</think>");
        assert_eq!(calls.len(), 1);
        let (text, calls) = run(vec![content_event("<think>hmm</think>get_weather(city=\"Oslo\")")]);
        assert_eq!((text.as_str(), calls.len()), ("<think>hmm</think>", 1));
    }
}
