//! The general reading (DESIGN-wave4 section 20): a call read by its
//! structure, anchored by the caller's tools, when no family of syntax
//! ([`super`]) reads it. Each new model family brings a template; what the
//! templates share is read here instead of each template:
//!
//! - **Markup, tokenised once**: elements with any tag name (a namespace in
//!   bars or before a colon set aside: `<｜DSML｜invoke>`, `<minimax:…>`),
//!   `=VALUE` or attributes, self-closing or not; a tag that lost its `<` at
//!   the start of a line; special tokens (`<|…|>`) and text between.
//! - **A call** is an element whose tag is a tool of the caller's
//!   (`<get_weather><city>Paris</city></get_weather>`,
//!   `<get_weather city="Paris"/>`), or an element whose `=VALUE` or `name`
//!   attribute is one (`<invoke name="get_weather">`, `<function=…>`), or,
//!   in text, a tool's name directly followed by its body (`call:NAME{key:
//!   "value"}`, `NAME(key="value")`).
//! - **Its arguments** are the children that name the tool's parameters:
//!   `<parameter name="K">`, `<parameter=K>`, `<K>v</K>`,
//!   `<arg_key>K</arg_key><arg_value>v</arg_value>`, attributes, a JSON
//!   object, or a body's `K: v`, `"K": v`, `K=v`. A parameter left open is
//!   closed by the next parameter or by its call's end, a call left open by
//!   a wrapper's closer; a call the end of the text cuts off is never read.
//! - **Accepted only when unique and complete**: every key is a parameter
//!   or folds to exactly one (case and separators), none given twice, every
//!   required parameter given, and nothing left over but residue: special
//!   tokens, whitespace, fences, wrappers and orphan closers, a thinking or
//!   analysis part before the call, words that are markup; text after the
//!   call is allowed when it holds no other call. Two calls or more are
//!   [`Reading::Many`], never one of them.
//!
//! Linear: the text is tokenised in one pass (a tag's head is at most
//! [`MAX_HEAD`] bytes, so no `<` searches far), and the calls are read in
//! one pass over the tokens; every byte visited is charged to the meter.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{
    balanced_end, python,
    tags::{attributes, is_name_attribute, name_attribute, unquote},
    words::THOUGHT_TAGS,
    Arguments, Found, Reading,
};
use crate::{
    exec::{
        limits::ArgumentLimits,
        prepare::{json::literal, work},
    },
    similar::{normalised_key, residue},
};

/// The longest tag head read (`<invoke name="…" …>`): a `<` without a `>`
/// this close is text.
const MAX_HEAD: usize = 256;

/// Tags whose `=VALUE` or `name` attribute names a parameter.
const PARAMETER_TAGS: &[&str] = &["parameter", "param", "arg", "argument"];

/// Tags holding the arguments as one JSON object.
const ARGUMENTS_TAGS: &[&str] = &["arguments", "parameters", "args", "input"];

/// A tool of the caller's, as the reading needs it.
#[derive(Clone, Copy)]
pub(crate) struct Tool<'a> {
    pub(crate) parameters: &'a [String],
    pub(crate) required: &'a [String],
}

/// What the reading asks of the caller's tools.
pub(crate) trait Anchor {
    /// The one tool of the caller's set `name` means (exact, alias, a
    /// drifted or wrapped name), if any. Never suggests.
    fn tool(&self, name: &str) -> Option<Tool<'_>>;
}

/// One token of the text.
#[derive(Debug)]
enum Token<'a> {
    Open(Tag<'a>),
    Close {
        tag: &'a str,
        /// Written with a namespace in bars (`</｜DSML｜parameter>`).
        barred: bool,
        at: usize,
        end: usize,
    },
    /// A special token (`<|…|>`), its text.
    Special(&'a str),
    /// Text, from `at` to `end`.
    Text {
        at: usize,
        end: usize,
    },
}

/// An opening tag.
#[derive(Debug)]
struct Tag<'a> {
    /// The name, without a namespace in bars.
    tag: &'a str,
    /// `<tag=VALUE>`.
    value: Option<&'a str>,
    attributes: Vec<(&'a str, &'a str)>,
    /// `<tag … />`.
    empty: bool,
    /// Written with a namespace in bars (`<｜DSML｜parameter …>`).
    barred: bool,
    /// Where the tag starts, and where the element's content starts.
    at: usize,
    end: usize,
}

impl<'t> Tag<'t> {
    /// The name `=VALUE` or a `name`-like attribute gives.
    fn named(&self) -> Option<&'t str> {
        self.value.or_else(|| name_attribute(&self.attributes))
    }

    fn is(&self, tags: &[&str]) -> bool {
        tags.iter().any(|t| t.eq_ignore_ascii_case(self.tag))
    }
}

/// The tokens of `text`, in one pass.
fn tokens(text: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut text_start: Option<usize> = None;
    let mut at = 0;
    let mut line_start = true;
    while at < text.len() {
        let rest = &text[at..];
        let special = residue::special_token_len(rest).or_else(|| super::half_token_len(rest));
        let found = if let Some(len) = special {
            Some((Token::Special(&rest[..len]), len))
        } else if rest.starts_with('<') {
            tag(text, at + 1, at)
        } else if line_start && !rest.starts_with(char::is_whitespace) {
            // A tag that lost its `<`, alone at the start of its line.
            tag(text, at, at).filter(|(token, _)| match token {
                Token::Open(tag) => tag.named().is_some(),
                Token::Close { .. } => true,
                _ => false,
            })
        } else {
            None
        };
        if let Some((token, len)) = found {
            if let Some(start) = text_start.take() {
                tokens.push(Token::Text { at: start, end: at });
            }
            tokens.push(token);
            at += len;
            line_start = false;
            continue;
        }
        let c = rest.chars().next().expect("not at the end");
        if c == '\n' {
            line_start = true;
        } else if !c.is_whitespace() {
            line_start = false;
        }
        text_start.get_or_insert(at);
        at += c.len_utf8();
    }
    if let Some(start) = text_start {
        tokens.push(Token::Text { at: start, end: text.len() });
    }
    work::charge(text.len());
    tokens
}

/// The tag whose head starts at `from` (after its `<`, if it has one) in
/// `text`; the token starts at `at`. Its length counts from `at`.
fn tag(text: &str, from: usize, at: usize) -> Option<(Token<'_>, usize)> {
    // A head ends at its `>`; a `<` or a line's end first means text (and
    // bounds every attempt by the next delimiter: each byte is looked at
    // a bounded number of times).
    let mut limit = text.len().min(from + MAX_HEAD);
    while !text.is_char_boundary(limit) {
        limit -= 1;
    }
    let window = &text[from..limit];
    let delimiter = window.find(['>', '<', '\n'])?;
    work::charge(delimiter + 1);
    // A closer fused to the next tag (`</parameter</function>`): it ends
    // where the next `<` starts.
    let fused = window[delimiter..].starts_with('<') && window.starts_with('/');
    if !window[delimiter..].starts_with('>') && !fused {
        return None;
    }
    let close = delimiter;
    let head = &window[..close];
    let len = from + close + usize::from(!fused) - at;
    let (closing, head) = match head.strip_prefix('/') {
        Some(rest) => (true, rest),
        None => (false, head),
    };
    let barred = strip_bars(head).len() != head.len();
    let head = strip_bars(head);
    let name_len =
        head.find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | ':' | '.'))).unwrap_or(head.len());
    let name = &head[..name_len];
    if name.is_empty() || !name.starts_with(|c: char| c.is_alphabetic() || c == '_') {
        return None;
    }
    let after = &head[name_len..];
    if closing {
        let close = Token::Close { tag: local(name), barred, at, end: at + len };
        return after.trim().is_empty().then_some((close, len));
    }
    let (after, empty) = match after.trim_end().strip_suffix('/') {
        Some(before) => (before, true),
        None => (after, false),
    };
    let (value, attributes) = match after.strip_prefix('=') {
        Some(value) => (Some(unquote(value.trim())), Vec::new()),
        None => (None, attributes(after)?),
    };
    let tag = Tag { tag: local(name), value, attributes, empty, barred, at, end: at + len };
    Some((Token::Open(tag), len))
}

/// A head without a namespace in bars before the name (`｜DSML｜invoke`).
fn strip_bars(head: &str) -> &str {
    for bar in ['｜', '|'] {
        if let Some(rest) = head.strip_prefix(bar) {
            if let Some(end) = rest.find(bar) {
                return &rest[end + bar.len_utf8()..];
            }
        }
    }
    head
}

/// A tag's name without its namespace (`minimax:tool_call` → `tool_call`).
fn local(name: &str) -> &str {
    name.rsplit_once(':').map_or(name, |(_, local)| local)
}

/// A call being read: of the tool `'a` (the anchor's), in the text `'t`.
struct Frame<'t, 'a> {
    /// The name as written.
    written: String,
    /// The tag that closes it (none: a name written as text, closed by the
    /// next closer).
    tag: &'t str,
    parameters: &'a [String],
    required: &'a [String],
    values: Map<String, Value>,
    /// A JSON body, as text.
    body: Option<String>,
    /// The parameter being read: its name, its closing tag, where its value
    /// starts, and whether its value is JSON (`string="false"`).
    open: Option<(String, &'t str, usize, bool, bool)>,
    /// An `<arg_key>` read, waiting for its `<arg_value>`.
    key: Option<String>,
    /// Inside `<arg_key>`: where its text starts.
    key_start: Option<usize>,
    /// Something in it is not a part of a call.
    broken: bool,
}

impl<'t, 'a> Frame<'t, 'a> {
    fn new(tool: Tool<'a>, written: &str, tag: &'t str) -> Self {
        Frame {
            written: written.to_owned(),
            tag,
            parameters: tool.parameters,
            required: tool.required,
            values: Map::new(),
            body: None,
            open: None,
            key: None,
            key_start: None,
            broken: false,
        }
    }

    /// The parameter a key written as markup names: itself, exactly (a key
    /// that only folds to one is two readings: the tool's, or another).
    fn exact(&self, key: &str) -> Option<String> {
        self.parameters.iter().any(|p| p == key).then(|| key.to_owned())
    }

    /// The parameter a JSON key names: itself, or the one parameter it
    /// folds to (as the argument names stage repairs it).
    fn parameter(&self, key: &str) -> Option<String> {
        if self.parameters.iter().any(|p| p == key) {
            return Some(key.to_owned());
        }
        let folded = normalised_key(key);
        let mut matches = self.parameters.iter().filter(|p| normalised_key(p) == folded);
        match (matches.next(), matches.next()) {
            (Some(one), None) => Some(one.clone()),
            _ => None,
        }
    }

    /// Sets a parameter's value; a key given twice breaks the call.
    fn set(&mut self, key: String, value: Value) {
        if self.values.contains_key(&key) {
            self.broken = true;
        }
        self.values.insert(key, value);
    }

    /// Ends the open parameter, its value running to `until`.
    fn close_parameter(&mut self, text: &str, until: usize) {
        if let Some((key, _, start, json, _)) = self.open.take() {
            let value = value_text(&text[start..until.max(start)]);
            // The arguments as one object (`<arguments>{…}</arguments>`).
            if key.is_empty() {
                match self.body.is_none() && value.trim_start().starts_with('{') {
                    true => self.body = Some(value.trim().to_owned()),
                    false => self.broken = true,
                }
                return;
            }
            let value = match json {
                true => serde_json::from_str(value.trim()).unwrap_or_else(|_| Value::String(value.to_owned())),
                false => Value::String(value.to_owned()),
            };
            self.set(key, value);
        }
    }

    /// The call read, if it is complete.
    fn found(mut self, limits: ArgumentLimits) -> Option<Found> {
        if self.broken || self.key.is_some() {
            return None;
        }
        let arguments = match self.body.take() {
            Some(body) if self.values.is_empty() => {
                let object = literal(&body, limits).filter(Value::is_object)?;
                let keys: Vec<String> = object.as_object()?.keys().cloned().collect();
                let mut seen = Map::new();
                for key in keys {
                    let parameter = self.parameter(&key)?;
                    if seen.insert(parameter, Value::Null).is_some() {
                        return None;
                    }
                }
                if !self.required.iter().all(|r| seen.contains_key(r)) {
                    return None;
                }
                Arguments::Text(body)
            }
            Some(_) => return None,
            None => {
                if !self.required.iter().all(|r| self.values.contains_key(r)) {
                    return None;
                }
                match self.values.is_empty() {
                    true => Arguments::Absent,
                    false => Arguments::Markup(self.values),
                }
            }
        };
        Some(Found { name: Some(self.written), arguments })
    }
}

/// A value's text, as written: its layout (`<parameter=city>\nParis\n
/// </parameter>`) is read with the tool's schema, where two readings are
/// held.
fn value_text(text: &str) -> &str {
    text
}

/// The calls `text` holds, read by structure and anchored by `anchor`.
pub(crate) fn read(text: &str, anchor: &dyn Anchor, limits: ArgumentLimits) -> Reading {
    if work::spent() {
        return Reading::Nothing;
    }
    let tokens = tokens(text);
    // A thought before the call: the families read what follows it.
    if let Some(rest) = after_thought(text, &tokens) {
        let reading = super::read(rest, limits);
        if reading != Reading::Nothing {
            return reading;
        }
    }
    let mut reader = Reader::new(text, anchor, limits);
    reader.read(&tokens);
    match (reader.broken, reader.calls, reader.found.pop()) {
        (_, n, Some(found)) if n >= 1 && reader.words => Reading::Words(found),
        (_, n, _) if n > 1 => Reading::Many(n),
        (false, 1, Some(found)) if reader.prose => Reading::AfterProse(found),
        (false, 1, Some(found)) => Reading::One(found),
        _ => Reading::Nothing,
    }
}

/// Every call of `text`, in order, when it is nothing but calls and
/// residue and each call has its one reading (a thought first, wrappers,
/// closers, whitespace between); `None` otherwise, and for no call. For
/// text that may hold several calls (the model door's `content`): each
/// is then prepared as a call of its own.
pub(crate) fn read_each(text: &str, anchor: &dyn Anchor, limits: ArgumentLimits) -> Option<Vec<Found>> {
    if work::spent() {
        return None;
    }
    let tokens = tokens(text);
    let mut reader = Reader::new(text, anchor, limits);
    reader.read(&tokens);
    let complete = !reader.broken && !reader.prose && !reader.words && reader.calls == reader.found.len();
    (complete && !reader.found.is_empty()).then_some(reader.found)
}

struct Reader<'t, 'a> {
    text: &'t str,
    anchor: &'a dyn Anchor,
    limits: ArgumentLimits,
    /// The tools names mean, as asked already (each name asked once).
    known: HashMap<&'t str, Option<Tool<'a>>>,
    /// The wrappers open around what is being read (`<tool_call>`): a
    /// closer of one ends a call left open inside it.
    wrappers: Vec<&'t str>,
    calls: usize,
    /// Each call read, in order (fewer than `calls` when some could not be).
    found: Vec<Found>,
    /// Something outside the calls is not residue.
    broken: bool,
    /// Text that is not residue came before the first call.
    prose: bool,
    /// Text that is not residue came after a call (the words rule: the
    /// whole text is prose).
    words: bool,
}

impl<'t, 'a> Reader<'t, 'a> {
    fn new(text: &'t str, anchor: &'a dyn Anchor, limits: ArgumentLimits) -> Self {
        Reader {
            text,
            anchor,
            limits,
            known: HashMap::new(),
            wrappers: Vec::new(),
            calls: 0,
            found: Vec::new(),
            broken: false,
            prose: false,
            words: false,
        }
    }

    /// The tool `name` means, asked once.
    fn tool(&mut self, name: &'t str) -> Option<Tool<'a>> {
        if name.len() > 128 {
            return None;
        }
        let anchor = self.anchor;
        *self.known.entry(name).or_insert_with(|| anchor.tool(name))
    }

    fn read(&mut self, tokens: &[Token<'t>]) {
        let text = self.text;
        // A thought closed by a `</think>` whose opener a template left out:
        // what comes before it is the thought.
        let start = orphan_thought_end(tokens).unwrap_or(0);
        let mut frame: Option<Frame<'t, 'a>> = None;
        // Inside a thought: the closer (a tag's name, or `None` for the
        // special token that ends Harmony's analysis channel).
        let mut thought: Option<Option<&str>> = None;
        let mut after_call = false;
        let mut i = start;
        while i < tokens.len() {
            let token = &tokens[i];
            i += 1;
            if let Some(until) = thought {
                match (token, until) {
                    (Token::Close { tag, .. }, Some(until)) if tag.eq_ignore_ascii_case(until) => thought = None,
                    (Token::Special(special), None) if ends_channel(special) => thought = None,
                    _ => {}
                }
                continue;
            }
            if let Some(current) = frame.as_mut() {
                if self.in_call(current, token) {
                    continue;
                }
                let done = frame.take().expect("a frame");
                // A tag that ended the call by opening another, or a
                // wrapper's closer, is read again outside it.
                let own = matches!(token, Token::Close { tag, .. } if tag.eq_ignore_ascii_case(done.tag));
                if !own {
                    i -= 1;
                }
                self.finish(done);
                after_call = true;
                continue;
            }
            match token {
                Token::Special(special) => {
                    // Harmony: `<|channel|>analysis<|message|>…<|end|>`.
                    if special.contains("channel") {
                        if let Some(Token::Text { at, end }) = tokens.get(i) {
                            let channel = text[*at..*end].trim_start();
                            if is_thought_channel(channel) {
                                thought = Some(None);
                                i += 1;
                            }
                        }
                    }
                }
                Token::Open(tag) if tag.is(THOUGHT_TAGS) && !tag.empty => thought = Some(Some(tag.tag)),
                Token::Open(tag) => {
                    if let Some(started) = self.call_element(tag) {
                        match tag.empty {
                            true => {
                                self.finish(started);
                                after_call = true;
                            }
                            false => frame = Some(started),
                        }
                    }
                    // Any other element is a wrapper: its content is read.
                    else if !tag.empty {
                        self.wrappers.push(tag.tag);
                    }
                }
                // A wrapper's or an orphan closer: residue.
                Token::Close { tag, .. } => {
                    if let Some(open) = self.wrappers.iter().rposition(|w| w.eq_ignore_ascii_case(tag)) {
                        self.wrappers.truncate(open);
                    }
                }
                Token::Text { at, end } => {
                    let span = &text[*at..*end];
                    // A tool's name as text, then its parameters in tags
                    // (`NAME <arg_key>…`, `<tool_call>NAME\n<parameter=…>`).
                    if let Some(Token::Open(next)) = tokens.get(i) {
                        if let Some(tool) = self.tool(span.trim()) {
                            let started = Frame::new(tool, span.trim(), "");
                            if self.parameter_tag(&started, next).is_some() {
                                frame = Some(started);
                                continue;
                            }
                        }
                    }
                    // A tool's name as the whole text of a wrapper
                    // (`<tool_call>NAME</tool_call>`): a call without
                    // arguments.
                    let wrapped = matches!(
                        (tokens.get(i.wrapping_sub(2)), tokens.get(i)),
                        (Some(Token::Open(open)), Some(Token::Close { tag, .. }))
                            if !open.empty && open.tag.eq_ignore_ascii_case(tag)
                    );
                    let plain = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
                    if wrapped && span.trim().chars().all(plain) {
                        if let Some(tool) = self.tool(span.trim()) {
                            self.finish(Frame::new(tool, span.trim(), ""));
                            after_call = true;
                            continue;
                        }
                    }
                    match self.in_text(*at, *end, after_call) {
                        // Words (not a JSON value: arguments before a
                        // call are a call of their own).
                        None if self.calls == 0 && !span.trim_start().starts_with(['{', '[']) => self.prose = true,
                        None => self.broken = true,
                        Some(resume) => {
                            after_call = self.calls > 0;
                            // A body that ran past this text: its tokens are read.
                            while tokens.get(i).is_some_and(|t| start_of(text, t) < resume) {
                                i += 1;
                            }
                        }
                    }
                }
            }
        }
        if let Some(mut done) = frame {
            // Left open by the end of the text: cut off, maybe mid-value or
            // before more arguments; counted, never read. A call whose name
            // was text (no element to close) ends with its last parameter.
            if !done.tag.is_empty() || done.open.is_some() || done.key_start.is_some() {
                done.broken = true;
            }
            self.finish(done);
        }
        // A wrapper around calls still open at the end: the text may have
        // been cut off there, or the closer left out; two readings.
        if self.calls > 0 && !self.wrappers.is_empty() {
            self.broken = true;
        }
    }

    /// The call an element starts, if its tag or its name is a tool.
    fn call_element(&mut self, tag: &Tag<'t>) -> Option<Frame<'t, 'a>> {
        if tag.is(PARAMETER_TAGS) || tag.is(ARGUMENTS_TAGS) {
            return None;
        }
        if let Some(named) = tag.named() {
            let tool = self.tool(named)?;
            let frame = Frame::new(tool, named, tag.tag);
            return Some(self.with_tag(frame, tag, true));
        }
        let tool = self.tool(tag.tag)?;
        let frame = Frame::new(tool, tag.tag, tag.tag);
        Some(self.with_tag(frame, tag, false))
    }

    /// The frame, closed by `tag`'s closer, with `tag`'s attributes as
    /// arguments (the name attribute set aside when it named the call).
    fn with_tag(&self, mut frame: Frame<'t, 'a>, tag: &Tag<'t>, named: bool) -> Frame<'t, 'a> {
        for (key, value) in &tag.attributes {
            if named && is_name_attribute(key) {
                continue;
            }
            match frame.exact(key) {
                Some(parameter) => frame.set(parameter, Value::String((*value).to_owned())),
                None => frame.broken = true,
            }
        }
        frame
    }

    /// Reads `token` inside the call `frame`; `false` when the token ends
    /// the call (it is then read again outside, if it opens something).
    fn in_call(&mut self, frame: &mut Frame<'t, 'a>, token: &Token<'t>) -> bool {
        let text = self.text;
        match token {
            Token::Close { tag, at, barred, .. } => {
                if let Some(start) = frame.key_start {
                    if tag.eq_ignore_ascii_case("arg_key") {
                        frame.key_start = None;
                        let key = text[start..*at].trim();
                        match frame.exact(key) {
                            Some(parameter) => frame.key = Some(parameter),
                            None => frame.broken = true,
                        }
                    }
                    return true;
                }
                if let Some((_, closer, _, _, opened_barred)) = &frame.open {
                    if tag.eq_ignore_ascii_case(closer) {
                        // `<parameter …>` closed by `</｜DSML｜parameter>`:
                        // markup that does not match is no reading.
                        frame.broken |= opened_barred != barred;
                        frame.close_parameter(text, *at);
                        return true;
                    }
                    let wrapper = self.wrappers.iter().any(|w| w.eq_ignore_ascii_case(tag));
                    if !tag.eq_ignore_ascii_case(frame.tag) && !wrapper {
                        // Markup inside a value (`a </b>`).
                        return true;
                    }
                    // The call ends: its last parameter was left open. By
                    // the call's own closer, the value ends there; by a
                    // wrapper's (the call never closed), where it ends is a
                    // guess: no reading.
                    frame.broken |= !tag.eq_ignore_ascii_case(frame.tag);
                    frame.close_parameter(text, *at);
                    return false;
                }
                if tag.eq_ignore_ascii_case(frame.tag) {
                    return false;
                }
                // A wrapper's closer: the call was left open inside it.
                false
            }
            Token::Open(tag) => {
                if frame.key_start.is_some() {
                    return true;
                }
                let parameter = self.parameter_tag(frame, tag);
                if frame.open.is_some() {
                    match &parameter {
                        // The next parameter closes one left open.
                        Some(_) => frame.close_parameter(text, tag.at),
                        // A call opened before this one closed: where the
                        // first ends would be a guess (no reading).
                        None if self.starts_call(tag) => {
                            frame.close_parameter(text, tag.at);
                            frame.broken |= !frame.tag.is_empty();
                            return false;
                        }
                        // Markup inside a value.
                        None => return true,
                    }
                }
                match parameter {
                    Some(Parameter::Named(key, json)) => {
                        if tag.empty {
                            frame.set(key, Value::String(String::new()));
                        } else {
                            frame.open = Some((key, tag.tag, tag.end, json, tag.barred));
                        }
                        true
                    }
                    Some(Parameter::Key) => {
                        frame.key_start = Some(tag.end);
                        true
                    }
                    Some(Parameter::Value) => match frame.key.take() {
                        Some(key) => {
                            frame.open = Some((key, tag.tag, tag.end, false, tag.barred));
                            true
                        }
                        None => {
                            frame.broken = true;
                            true
                        }
                    },
                    Some(Parameter::Body) => {
                        frame.open = Some((String::new(), tag.tag, tag.end, false, tag.barred));
                        true
                    }
                    None if self.starts_call(tag) => {
                        frame.broken |= !frame.tag.is_empty();
                        false
                    }
                    None => {
                        frame.broken = true;
                        true
                    }
                }
            }
            Token::Special(_) => true,
            Token::Text { at, end } => {
                if frame.open.is_some() || frame.key_start.is_some() {
                    return true;
                }
                let span = text[*at..*end].trim();
                if span.is_empty() {
                    return true;
                }
                if span.starts_with('{') && frame.body.is_none() && frame.values.is_empty() {
                    match balanced_end(span) {
                        Some(close) if span[close..].trim().is_empty() => frame.body = Some(span.to_owned()),
                        _ => frame.broken = true,
                    }
                    return true;
                }
                frame.broken = true;
                true
            }
        }
    }

    /// What an element inside a call is: a parameter named by its tag or
    /// its name, `<arg_key>`, `<arg_value>`, a JSON body, or none of them.
    fn parameter_tag(&self, frame: &Frame<'t, 'a>, tag: &Tag<'t>) -> Option<Parameter> {
        if tag.tag.eq_ignore_ascii_case("arg_key") {
            return Some(Parameter::Key);
        }
        if tag.tag.eq_ignore_ascii_case("arg_value") {
            return Some(Parameter::Value);
        }
        if tag.is(ARGUMENTS_TAGS) && tag.named().is_none() && frame.exact(tag.tag).is_none() {
            return Some(Parameter::Body);
        }
        let json = tag.attributes.iter().any(|(k, v)| *k == "string" && v.eq_ignore_ascii_case("false"));
        if tag.is(PARAMETER_TAGS) {
            let key = tag.named()?;
            // A parameter named as a wrapper of the arguments (`arguments`,
            // `input`) that is none of the tool's: their object.
            if frame.exact(key).is_none() && super::ARGUMENT_KEYS.contains(&key) {
                return Some(Parameter::Body);
            }
            return frame.exact(key).map(|key| Parameter::Named(key, json));
        }
        frame.exact(tag.tag).map(|key| Parameter::Named(key, json))
    }

    /// Whether an element opens a call of its own.
    fn starts_call(&mut self, tag: &Tag<'t>) -> bool {
        if tag.is(PARAMETER_TAGS) || tag.is(ARGUMENTS_TAGS) {
            return false;
        }
        match tag.named() {
            Some(named) => self.tool(named).is_some(),
            None => self.tool(tag.tag).is_some(),
        }
    }

    /// Text outside any call, from `at` to `end`: residue, or calls
    /// written as a name then a body (which may run past `end`). Where
    /// reading goes on, or `None` when it holds something else.
    fn in_text(&mut self, at: usize, end: usize, after_call: bool) -> Option<usize> {
        let text = self.text;
        let mut pos = at;
        let mut any = false;
        loop {
            let rest = &text[pos..end.max(pos)];
            pos += rest.len() - rest.trim_start().len();
            if pos >= end {
                return Some(pos);
            }
            // Between calls, a `,` or `;` may separate them.
            let after = after_call || any;
            let separated = match after {
                true => text[pos..end].strip_prefix([',', ';']).map(|r| pos + 1 + r.len() - r.trim_start().len()),
                false => None,
            };
            let next = separated.unwrap_or(pos);
            match self.name_then_body(&text[next..]) {
                Some((found, len)) => {
                    self.calls += 1;
                    self.found.push(found);
                    any = true;
                    pos = next + len;
                }
                // After a call: residue only (the words rule); words make
                // the text prose, and each call they hold counts. Before
                // any: residue only (fences, markers, a language tag).
                None if after => {
                    let tail = &text[pos..end];
                    if !super::words::is_trailing_residue(tail) {
                        let more = super::count_anchored(tail, self.limits, Some(self.anchor));
                        self.calls += more;
                        self.words |= more == 0;
                    }
                    return Some(end);
                }
                // Arguments before a call (`{}` then `<tool_call>…`): a call
                // of their own, whose name was sent apart; never dropped.
                None if text[pos..end].starts_with('{') => {
                    let close = balanced_end(&text[pos..end])?;
                    literal(&text[pos..pos + close], self.limits).filter(Value::is_object)?;
                    self.calls += 1;
                    any = true;
                    pos += close;
                }
                None => return is_residue(&text[pos..end]).then_some(end),
            }
        }
    }

    /// A tool's name followed directly by its body, at the start of `text`
    /// (after markup words: `call:`, a namespace): the call and its length.
    fn name_then_body(&mut self, text: &'t str) -> Option<(Found, usize)> {
        // A JSON call object (`{"name": …, "arguments": …}`) whose wrapper
        // was left open or is some other markup.
        if text.starts_with('{') {
            let end = balanced_end(text)?;
            let Reading::One(found) = super::from_json(&literal(&text[..end], self.limits)?) else { return None };
            let name = found.name.as_deref()?;
            let tool = self.tool(text_of(text, name)?)?;
            let mut frame = Frame::new(tool, name, "");
            match found.arguments {
                Arguments::Values(values) | Arguments::Markup(values) => {
                    for (key, value) in values {
                        let parameter = frame.parameter(&key)?;
                        frame.set(parameter, value);
                    }
                }
                Arguments::Text(body) => frame.body = Some(body),
                Arguments::Absent => {}
                Arguments::Unwritten => return None,
            }
            return Some((frame.found(self.limits)?, end));
        }
        let name_len = text.find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))?;
        let head = &text[..name_len];
        let opener = text[name_len..].chars().next()?;
        if !matches!(opener, '{' | '(') || head.is_empty() {
            return None;
        }
        // `call:get_weather`, `functions.get_weather`: the last word.
        let name = head.rsplit([':', '.']).find(|w| !w.is_empty())?;
        let tool = self.tool(name).or_else(|| self.tool(head))?;
        let body = &text[name_len..];
        let (values, len) = match opener {
            '{' => {
                let close = balanced_end(body)?;
                let values = key_values(&body[1..close - 1], self.limits)?;
                (values, close)
            }
            _ => {
                let (calls, end) = python::calls_at(text).ok()?;
                if calls != 1 {
                    return None;
                }
                let Reading::One(found) = python::read(&text[..end])? else { return None };
                let values = match found.arguments {
                    Arguments::Values(values) | Arguments::Markup(values) => values,
                    Arguments::Absent => Map::new(),
                    Arguments::Unwritten => return None,
                    Arguments::Text(_) => return None,
                };
                (values, end - name_len)
            }
        };
        let mut frame = Frame::new(tool, head, "");
        for (key, value) in values {
            match frame.parameter(&key) {
                Some(parameter) => frame.set(parameter, value),
                None => return None,
            }
        }
        let found = frame.found(self.limits)?;
        Some((found, name_len + len))
    }

    fn finish(&mut self, frame: Frame<'t, 'a>) {
        self.calls += 1;
        match frame.found(self.limits) {
            Some(found) => self.found.push(found),
            None => self.broken = true,
        }
    }
}

/// `name` as a slice of `text`, where it is written there verbatim (the
/// memo of tools is keyed by slices of the text).
fn text_of<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    text.find(name).map(|at| &text[at..at + name.len()])
}

/// What an element inside a call holds.
enum Parameter {
    /// A parameter (its name), and whether its value is JSON.
    Named(String, bool),
    Key,
    Value,
    Body,
}

/// The text after a thought that comes first: `<think>…</think>`,
/// `…</think>` (its opener left out), or a thought channel (Harmony's
/// `<|channel|>analysis<|message|>…<|end|>`, Gemma's `<|channel>thought
/// …<channel|>`).
fn after_thought<'t>(text: &'t str, tokens: &[Token<'t>]) -> Option<&'t str> {
    let rest_after = |token: &Token<'t>| match token {
        Token::Close { end, .. } => Some(&text[*end..]),
        Token::Special(special) => Some(&text[special.as_ptr() as usize - text.as_ptr() as usize + special.len()..]),
        _ => None,
    };
    let blank = |token: &Token<'_>| matches!(token, Token::Text { at, end } if text[*at..*end].trim().is_empty());
    let first = tokens.iter().position(|t| !blank(t))?;
    if let Token::Open(tag) = &tokens[first] {
        if tag.is(THOUGHT_TAGS) {
            let closer = tokens[first..]
                .iter()
                .find(|t| matches!(t, Token::Close { tag: c, .. } if c.eq_ignore_ascii_case(tag.tag)))?;
            return rest_after(closer);
        }
    }
    if let Some(end) = orphan_thought_end(tokens) {
        return rest_after(&tokens[end - 1]);
    }
    // Harmony's analysis channel, among the first tokens.
    let channel = tokens.iter().take(8).position(|t| matches!(t, Token::Special(s) if s.contains("channel")))?;
    let thought =
        matches!(tokens.get(channel + 1), Some(Token::Text { at, end }) if is_thought_channel(&text[*at..*end]));
    if !thought {
        return None;
    }
    let end = tokens[channel + 1..].iter().find(|t| matches!(t, Token::Special(s) if ends_channel(s)))?;
    rest_after(end)
}

/// A channel a thought is written in (Harmony's `analysis`, Gemma's
/// `thought`), by the text after its channel token.
fn is_thought_channel(text: &str) -> bool {
    let text = text.trim_start();
    ["analysis", "thought", "thinking"].iter().any(|channel| text.starts_with(channel))
}

/// A token that ends a channel's text: Harmony's `<|end|>`, Gemma's
/// `<channel|>`.
fn ends_channel(special: &str) -> bool {
    special.contains("end") || special.contains("channel")
}

/// Where a token starts in `text`.
fn start_of(text: &str, token: &Token<'_>) -> usize {
    match token {
        Token::Open(tag) => tag.at,
        Token::Close { at, .. } | Token::Text { at, .. } => *at,
        Token::Special(special) => special.as_ptr() as usize - text.as_ptr() as usize,
    }
}

/// Where the tokens of a thought end whose opener is missing: after the
/// first closer of a thought that no opener of one comes before.
fn orphan_thought_end(tokens: &[Token<'_>]) -> Option<usize> {
    for (i, token) in tokens.iter().enumerate() {
        match token {
            Token::Open(tag) if tag.is(THOUGHT_TAGS) => return None,
            Token::Close { tag, .. } if THOUGHT_TAGS.iter().any(|t| t.eq_ignore_ascii_case(tag)) => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// Text that is only residue: markup words, fences, language tags.
fn is_residue(text: &str) -> bool {
    let stripped = text.trim().trim_matches('`').trim();
    if stripped.contains(['{', '}', '(', ')']) {
        return false;
    }
    stripped.is_empty()
        || residue::words(stripped).iter().all(|w| w.markup || w.namespace)
        || super::is_language_tag(stripped)
}

/// `K: v, "K": v, K=v` pairs of a body between braces; values read as
/// JSON literals where they are one, quoted text (Gemma's `<|"|>` quotes
/// included), else the bare text.
fn key_values(body: &str, limits: ArgumentLimits) -> Option<Map<String, Value>> {
    let mut values = Map::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let (key, after) = match rest.chars().next()? {
            q @ ('"' | '\'') => {
                let end = rest[1..].find(q)?;
                (&rest[1..1 + end], &rest[2 + end..])
            }
            _ => {
                let end = rest.find([':', '='])?;
                (rest[..end].trim(), &rest[end..])
            }
        };
        let after = after.trim_start().strip_prefix([':', '='])?.trim_start();
        if key.is_empty() || values.contains_key(key) {
            return None;
        }
        let (value, next) = value_at(after, limits)?;
        values.insert(key.to_owned(), value);
        rest = next.trim_start();
        match rest.strip_prefix(',') {
            Some(more) => rest = more.trim_start(),
            None if rest.is_empty() => {}
            None => return None,
        }
    }
    Some(values)
}

/// A value at the start of `text`, and what follows it.
fn value_at(text: &str, limits: ArgumentLimits) -> Option<(Value, &str)> {
    for quote in ["<|\"|>", "<escape>"] {
        if let Some(inner) = text.strip_prefix(quote) {
            let end = inner.find(quote)?;
            return Some((Value::String(inner[..end].to_owned()), &inner[end + quote.len()..]));
        }
    }
    if text.starts_with(['{', '[', '"']) {
        let end = match text.starts_with('"') {
            true => string_end(text)?,
            false => balanced_end(text)?,
        };
        let value = literal(&text[..end], limits)?;
        return Some((value, &text[end..]));
    }
    if let Some(inner) = text.strip_prefix('\'') {
        let end = inner.find('\'')?;
        return Some((Value::String(inner[..end].to_owned()), &inner[end + 1..]));
    }
    let end = text.find([',', '}']).unwrap_or(text.len());
    let bare = text[..end].trim();
    if bare.is_empty() {
        return None;
    }
    let value = literal(bare, limits).unwrap_or_else(|| Value::String(bare.to_owned()));
    Some((value, &text[end..]))
}

/// Where the JSON string `text` starts with ends.
fn string_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The caller's tools of the tests: `get_weather(city, unit, days)`
    /// (city required) and `read_file(path)` (required).
    struct Tools {
        weather: Vec<String>,
        file: Vec<String>,
        city: Vec<String>,
        path: Vec<String>,
    }

    impl Tools {
        fn new() -> Self {
            let owned = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
            Tools {
                weather: owned(&["city", "unit", "days"]),
                file: owned(&["path"]),
                city: owned(&["city"]),
                path: owned(&["path"]),
            }
        }
    }

    impl Anchor for Tools {
        fn tool(&self, name: &str) -> Option<Tool<'_>> {
            let name = name.rsplit(['.', ':']).next().unwrap_or(name);
            match normalised_key(name).as_str() {
                "getweather" => Some(Tool { parameters: &self.weather, required: &self.city }),
                "readfile" => Some(Tool { parameters: &self.file, required: &self.path }),
                "now" => Some(Tool { parameters: &[], required: &[] }),
                _ => None,
            }
        }
    }

    fn reading(text: &str) -> Reading {
        read(text, &Tools::new(), ArgumentLimits::default())
    }

    /// The one call read: its name as written and its arguments as JSON.
    fn one(text: &str) -> (String, Value) {
        match reading(text) {
            Reading::One(Found { name: Some(name), arguments }) => {
                let arguments = match arguments {
                    Arguments::Values(values) | Arguments::Markup(values) => Value::Object(values),
                    Arguments::Text(text) => serde_json::from_str(&text).unwrap(),
                    Arguments::Absent | Arguments::Unwritten => Value::Object(Map::new()),
                };
                (name, arguments)
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn new_templates_are_read_by_structure() {
        let paris = serde_json::json!({"city": "Paris"});
        for text in [
            // DeepSeek's DSML.
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
            "<｜DSML｜invoke name=\"get_weather\">{\"city\": \"Paris\"}</｜DSML｜invoke>",
            // Calls as XML elements, and self-closing.
            "<get_weather><city>Paris</city></get_weather>",
            "<get_weather city=\"Paris\"/>",
            // Qwen3-Coder with its opener missing, its last parameter left
            // open, a closer fused to the next, an orphan closer.
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter</function>\n</tool_call>",
            "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>",
            // Tags that lost their `<` (MiniMax).
            "<minimax:tool_call>\ninvoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>",
            // Gemma 4's bare keys.
            "call:get_weather{city: \"Paris\"}",
            "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>",
            // A thought before the call.
            "The user wants the weather.</think>\n<get_weather><city>Paris</city></get_weather>",
            "<think>weather</think><function=get_weather><parameter=city>Paris</parameter></function>",
            // A name as text, then its parameters.
            "get_weather\n<parameter=city>Paris</parameter>",
            // Residue after the call: closers, tokens, a fence.
            "get_weather(city=\"Paris\")\n</tool_call><|im_end|>",
            "call:get_weather{city: \"Paris\"}\n```",
        ] {
            let (_, arguments) = one(text);
            // Values as written: their layout is the markup stage's to read.
            let city = arguments["city"].as_str().unwrap_or_else(|| panic!("{text}: {arguments}"));
            assert_eq!(city.trim(), "Paris", "{text}");
            assert_eq!(arguments.as_object().unwrap().len(), 1, "{text}");
        }
        let _ = paris;
    }

    /// The words rule: after the last call only residue; words (a sentence,
    /// a full stop, an emoji) make the whole text prose, whatever the call
    /// was written in.
    #[test]
    fn words_after_a_call_make_the_text_prose() {
        for text in [
            "get_weather(city=\"Paris\")\nI will tell you once I know.",
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\nI will tell you once I know.",
            "get_weather(city=\"Paris\") -- never run this.",
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call> is what I refuse.",
            "<get_weather><city>Paris</city></get_weather>.",
            "call:get_weather{city: \"Paris\"} \u{1F642}",
            "<tool_call>now</tool_call>, then",
        ] {
            assert!(matches!(reading(text), Reading::Words(_)), "{text}: {:?}", reading(text));
        }
        // Between calls, `,` and `;` separate them.
        assert_eq!(reading("call:get_weather{city: \"Paris\"}, call:get_weather{city: \"Rome\"}"), Reading::Many(2));
        assert_eq!(reading("get_weather(city='Paris'); get_weather(city='Rome')"), Reading::Many(2));
    }

    /// Text shaped against the reading, at 1 MiB, costs a few passes: the
    /// bytes it visits stay within a small multiple of its length.
    #[test]
    fn hostile_shapes_are_read_in_linear_work() {
        let size = 1 << 20;
        for unit in [
            "<a>",
            "<get_weather>",
            "<get_weather><city>",
            "<invoke name=\"get_weather\"><parameter name=\"city\">",
            "call:get_weather{",
            "get_weather{city: ",
            "\ninvoke name=\"get_weather\">",
            "<|\"|>",
            "</think>",
            "<think>",
            "<a ",
            "get_weather(",
            "<get_weather city=\"a\"/>",
            // Characters of several bytes wherever a window may end.
            "<｜DSML｜invoke name=\"get_weather\">",
            "<a ｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜",
        ] {
            let text = unit.repeat(size / unit.len());
            let (_, work) = work::metered(text.len(), || reading(&text));
            assert!(!work.exhausted && work.spent <= 16 * size as u64, "{unit:?}: {work:?}");
        }
    }

    /// A name alone inside a wrapper is a call without arguments; a tool
    /// that requires some is then incomplete.
    #[test]
    fn a_wrapped_name_is_a_call_without_arguments() {
        for text in ["<tool_call>now</tool_call>", "  \n<tool_call>now\n</tool_call>", "<call>now</call>"] {
            assert_eq!(one(text), ("now".to_owned(), serde_json::json!({})), "{text}");
        }
        assert_eq!(reading("<tool_call>get_weather</tool_call>"), Reading::Nothing);
        assert_eq!(reading("<tool_call>now later</tool_call>"), Reading::Nothing);
        assert!(matches!(reading("Checking.<tool_call>now</tool_call>"), Reading::AfterProse(_)));
        assert_eq!(reading("<tool_call>now</tool_call><tool_call>now</tool_call>"), Reading::Many(2));
    }

    #[test]
    fn what_is_not_one_complete_call_is_no_reading() {
        for text in [
            // A required parameter missing; a key of no parameter; a key twice.
            "<get_weather><unit>celsius</unit></get_weather>",
            "<get_weather><town>Paris</town></get_weather>",
            "<get_weather><city>Paris</city><city>Rome</city></get_weather>",
            // Not a tool of the caller's.
            "<delete_file><path>/etc</path></delete_file>",
            // A call never closed, its value ended by a wrapper's closer:
            // where the value ends is a guess.
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</tool_call>",
            // A wrapper left open at the end: cut off, or its closer left out.
            "<tool_call>get_weather\n<parameter=city>Paris</parameter>",
            // Markup that does not match its opener.
            "<｜DSML｜invoke name=\"get_weather\"><parameter name=\"city\">Paris</｜DSML｜parameter></｜DSML｜invoke>",
        ] {
            assert_eq!(reading(text), Reading::Nothing, "{text}");
        }
        // Words before one call: two readings (the words, or the call); in
        // the words' own text, no reading.
        let text = "I would call <get_weather><city>Paris</city></get_weather>";
        assert!(matches!(reading(text), Reading::AfterProse(_)), "{text}: {:?}", reading(text));
        assert_eq!(reading("Sure! call:get_weather{city: \"Paris\"}"), Reading::Nothing);
        // Two calls, in any shape: never one of them.
        for text in [
            "<get_weather><city>Paris</city></get_weather><get_weather><city>Rome</city></get_weather>",
            "<get_weather city=\"Paris\"/>\n<read_file path=\"/a\"/>",
            "call:get_weather{city: \"Paris\"} call:read_file{path: \"/a\"}",
            "<get_weather><city>Paris</city></get_weather>\nread_file(path='/a')",
        ] {
            assert!(matches!(reading(text), Reading::Many(2)), "{text}: {:?}", reading(text));
        }
    }
}
