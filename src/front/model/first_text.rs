//! The judgment of an answer's first text as it arrives, for the streams
//! of the Responses and Messages APIs (a Chat Completions stream has its
//! own, with a thought's streaming and the split of a delta where markup
//! begins): held while it can still begin a call (the core's judgment,
//! [`Declared::could_begin`], asked again as text arrives), passing once it
//! is words, watched then for explicit call markup
//! ([`crate::exec::declared::words::Scan`]), held to the end from the
//! markup on.

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
