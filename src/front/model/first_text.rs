//! What the streams of the Responses and Messages APIs share: the events
//! they hold ([`Held`]), the framing of the events they write ([`frame`]),
//! and the judgment of an answer's first text as it arrives, for both (a Chat Completions stream has its
//! own, with a thought's streaming and the split of a delta where markup
//! begins): held while it can still begin a call (the core's judgment,
//! [`Declared::could_begin`], asked again as text arrives), passing once it
//! is words, watched then for explicit call markup
//! ([`crate::exec::declared::words::Scan`]), held to the end from the
//! markup on.

use bytes::Bytes;
use serde_json::Value;

use super::stream::MAX_HELD;
use crate::exec::declared::{
    words::{Scan, Scanned},
    Declared,
};

/// Where the answer's text is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// No text yet that says whether a call begins: held.
    Undecided,
    /// Words: passing, watched for explicit markup.
    Passing,
    /// After words, text that may still become markup: held until it is
    /// or is not.
    Pending,
    /// A call may have begun: everything held to the end.
    Holding,
    /// Nothing is changed.
    Off,
}

/// The first text of an answer, judged as it arrives.
pub(super) struct FirstText {
    pub(super) state: State,
    scan: Scan,
    /// The text judged so far (undecided), or pending after words.
    text: String,
}

impl FirstText {
    /// A judgment from the answer's start (`on`: tools were declared).
    pub(super) fn new(on: bool) -> Self {
        let state = if on { State::Undecided } else { State::Off };
        Self { state, scan: Scan::at_start(), text: String::new() }
    }

    /// A delta of the text (its event held already): whether what is held
    /// may go now.
    pub(super) fn delta(&mut self, declared: &Declared, delta: &str) -> bool {
        match self.state {
            State::Undecided => {
                self.text.push_str(delta);
                match declared.could_begin(&self.text) {
                    Some(true) => {
                        self.state = State::Holding;
                        false
                    }
                    None => false,
                    Some(false) => {
                        let text = std::mem::take(&mut self.text);
                        self.watched(&text)
                    }
                }
            }
            State::Passing => self.watched(delta),
            State::Pending => {
                let mut text = std::mem::take(&mut self.text);
                text.push_str(delta);
                self.watched(&text)
            }
            State::Holding | State::Off => false,
        }
    }

    /// Words scanned for explicit markup: they go (`true`), or the answer
    /// is held from them on.
    fn watched(&mut self, text: &str) -> bool {
        match self.scan.next(text, false) {
            Scanned::Nothing | Scanned::ThoughtEnd(_) => {
                self.state = State::Passing;
                true
            }
            Scanned::Marker(_) => {
                self.state = State::Holding;
                false
            }
            Scanned::Incomplete(at) => {
                self.state = State::Pending;
                self.text = text[at..].to_owned();
                false
            }
        }
    }
}

/// Events held, as they came, and how many bytes they are.
#[derive(Default)]
pub(super) struct Held {
    events: Vec<Bytes>,
    bytes: usize,
}

impl Held {
    /// `raw` held after the others: whether what is held is now more than
    /// a stream may hold ([`MAX_HELD`]).
    pub(super) fn push(&mut self, raw: Bytes) -> bool {
        self.bytes += raw.len();
        self.events.push(raw);
        self.bytes > MAX_HELD
    }

    pub(super) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Everything held, in order; nothing is held after.
    pub(super) fn take(&mut self) -> Vec<Bytes> {
        self.bytes = 0;
        std::mem::take(&mut self.events)
    }
}

/// An event's JSON (its `data`), if it has any.
pub(super) fn parsed(raw: &[u8]) -> Option<Value> {
    super::sse::data(raw).and_then(|data| serde_json::from_str(&data).ok())
}

/// An event of the door's, framed as these APIs frame them (`event:` its
/// type, then its `data`).
pub(super) fn frame(event: &Value) -> Bytes {
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("message");
    Bytes::from(format!("event: {kind}\ndata: {event}\n\n"))
}
