//! One pass over the tokens: the calls the text holds, and what stands
//! around them (residue, prose, words).

use std::collections::HashMap;

use serde_json::Value;

use super::super::{balanced_end, tags::is_name_attribute, words::THOUGHT_TAGS, Found, Reading};
use super::{
    anchor::{Anchor, Frame, Parameter, Tool},
    text,
    tokens::{start_of, Tag, Token},
};
use crate::{
    exec::{limits::ArgumentLimits, prepare::json::literal},
    similar::residue,
};

/// Tags whose `=VALUE` or `name` attribute names a parameter.
pub(super) const PARAMETER_TAGS: &[&str] = &["parameter", "param", "arg", "argument"];

/// Tags holding the arguments as one JSON object.
pub(super) const ARGUMENTS_TAGS: &[&str] = &["arguments", "parameters", "args", "input"];

pub(super) struct Reader<'t, 'a> {
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
    /// The call being read.
    frame: Option<Frame<'t, 'a>>,
    /// Inside a thought: its closer (a tag's name, or `None` for the
    /// special token that ends Harmony's analysis channel).
    thought: Option<Option<&'t str>>,
    /// A call was read last (what follows is after a call).
    after_call: bool,
}

impl<'t, 'a> Reader<'t, 'a> {
    pub(super) fn new(text: &'t str, anchor: &'a dyn Anchor, limits: ArgumentLimits) -> Self {
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
            frame: None,
            thought: None,
            after_call: false,
        }
    }

    /// What the pass found, as one reading.
    pub(super) fn reading(mut self) -> Reading {
        match (self.broken, self.calls, self.found.pop()) {
            (_, n, Some(found)) if n >= 1 && self.words => Reading::Words(found),
            (_, n, _) if n > 1 => Reading::Many(n),
            (false, 1, Some(found)) if self.prose => Reading::AfterProse(found),
            (false, 1, Some(found)) => Reading::One(found),
            _ => Reading::Nothing,
        }
    }

    /// Every call the pass found, when the text is nothing but calls and
    /// residue and each call has its one reading.
    pub(super) fn each(self) -> Option<Vec<Found>> {
        let complete = !self.broken && !self.prose && !self.words && self.calls == self.found.len();
        (complete && !self.found.is_empty()).then_some(self.found)
    }

    /// The tool `name` means, asked once.
    fn tool(&mut self, name: &'t str) -> Option<Tool<'a>> {
        if name.len() > 128 {
            return None;
        }
        let anchor = self.anchor;
        *self.known.entry(name).or_insert_with(|| anchor.tool(name))
    }

    pub(super) fn read(&mut self, tokens: &[Token<'t>]) {
        // A thought closed by a `</think>` whose opener a template left out:
        // what comes before it is the thought.
        let mut i = orphan_thought_end(tokens).unwrap_or(0);
        while i < tokens.len() {
            i = self.step(tokens, i);
        }
        self.end();
    }

    /// Reads the token at `i`; where reading goes on.
    fn step(&mut self, tokens: &[Token<'t>], i: usize) -> usize {
        let token = &tokens[i];
        if let Some(until) = self.thought {
            match (token, until) {
                (Token::Close { tag, .. }, Some(until)) if tag.eq_ignore_ascii_case(until) => self.thought = None,
                (Token::Special(special), None) if ends_channel(special) => self.thought = None,
                _ => {}
            }
            return i + 1;
        }
        if let Some(mut frame) = self.frame.take() {
            if self.in_call(&mut frame, token) {
                self.frame = Some(frame);
                return i + 1;
            }
            // A tag that ended the call by opening another, or a wrapper's
            // closer, is read again outside it.
            let own = matches!(token, Token::Close { tag, .. } if tag.eq_ignore_ascii_case(frame.tag));
            self.finish(frame);
            self.after_call = true;
            return if own { i + 1 } else { i };
        }
        match token {
            Token::Special(special) => self.special(special, tokens, i + 1),
            Token::Open(tag) => {
                self.open(tag);
                i + 1
            }
            // A wrapper's or an orphan closer: residue.
            Token::Close { tag, .. } => {
                if let Some(open) = self.wrappers.iter().rposition(|w| w.eq_ignore_ascii_case(tag)) {
                    self.wrappers.truncate(open);
                }
                i + 1
            }
            Token::Text { at, end } => self.text_token(tokens, i + 1, *at, *end),
        }
    }

    /// A special token outside calls; Harmony's `<|channel|>analysis
    /// <|message|>…<|end|>` opens a thought. Where reading goes on.
    fn special(&mut self, special: &str, tokens: &[Token<'t>], next: usize) -> usize {
        if special.contains("channel") {
            if let Some(Token::Text { at, end }) = tokens.get(next) {
                if is_thought_channel(self.text[*at..*end].trim_start()) {
                    self.thought = Some(None);
                    return next + 1;
                }
            }
        }
        next
    }

    /// An opening tag outside calls: a thought, a call, or a wrapper.
    fn open(&mut self, tag: &Tag<'t>) {
        if tag.is(THOUGHT_TAGS) && !tag.empty {
            self.thought = Some(Some(tag.tag));
            return;
        }
        match self.call_element(tag) {
            Some(started) if tag.empty => {
                self.finish(started);
                self.after_call = true;
            }
            Some(started) => self.frame = Some(started),
            // Any other element is a wrapper: its content is read.
            None if !tag.empty => self.wrappers.push(tag.tag),
            None => {}
        }
    }

    /// Text outside calls (the token before `next`, from `at` to `end`): a
    /// tool's name before its parameters or alone in a wrapper, calls
    /// written as a name then a body, residue or words. Where reading goes
    /// on.
    fn text_token(&mut self, tokens: &[Token<'t>], next: usize, at: usize, end: usize) -> usize {
        let text = self.text;
        let span = &text[at..end];
        let name = span.trim();
        // A tool's name as text, then its parameters in tags (`NAME
        // <arg_key>…`, `<tool_call>NAME\n<parameter=…>`).
        if let Some(Token::Open(following)) = tokens.get(next) {
            if let Some(tool) = self.tool(name) {
                let started = Frame::new(tool, name, "");
                if self.parameter_tag(&started, following).is_some() {
                    self.frame = Some(started);
                    return next;
                }
            }
        }
        // A tool's name as the whole text of a wrapper
        // (`<tool_call>NAME</tool_call>`): a call without arguments.
        let wrapped = matches!(
            (tokens.get(next.wrapping_sub(2)), tokens.get(next)),
            (Some(Token::Open(open)), Some(Token::Close { tag, .. }))
                if !open.empty && open.tag.eq_ignore_ascii_case(tag)
        );
        let plain = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
        if wrapped && name.chars().all(plain) {
            if let Some(tool) = self.tool(name) {
                self.finish(Frame::new(tool, name, ""));
                self.after_call = true;
                return next;
            }
        }
        match self.in_text(at, end, self.after_call) {
            // Words (not a JSON value: arguments before a call are a call
            // of their own).
            None if self.calls == 0 && !span.trim_start().starts_with(['{', '[']) => self.prose = true,
            None => self.broken = true,
            Some(resume) => {
                self.after_call = self.calls > 0;
                // A body that ran past this text: its tokens are read.
                let mut next = next;
                while tokens.get(next).is_some_and(|t| start_of(text, t) < resume) {
                    next += 1;
                }
                return next;
            }
        }
        next
    }

    /// The end of the text: a call left open, a wrapper left open.
    fn end(&mut self) {
        if let Some(mut done) = self.frame.take() {
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
                // The arguments' object as an attribute (`arguments='{…}'`).
                None if super::super::ARGUMENT_KEYS.contains(key)
                    && frame.body.is_none()
                    && value.trim_start().starts_with('{') =>
                {
                    frame.body = Some(value.trim().to_owned())
                }
                None => frame.broken = true,
            }
        }
        frame
    }

    /// Reads `token` inside the call `frame`; `false` when the token ends
    /// the call (it is then read again outside, if it opens something).
    fn in_call(&mut self, frame: &mut Frame<'t, 'a>, token: &Token<'t>) -> bool {
        match token {
            Token::Close { tag, at, barred, .. } => self.close_in_call(frame, tag, *at, *barred),
            Token::Open(tag) => self.open_in_call(frame, tag),
            Token::Special(_) => true,
            Token::Text { at, end } => {
                if frame.open.is_some() || frame.key_start.is_some() {
                    return true;
                }
                let span = self.text[*at..*end].trim();
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

    /// A closer inside the call `frame` (at `at`); `false` when it ends
    /// the call.
    fn close_in_call(&mut self, frame: &mut Frame<'t, 'a>, tag: &str, at: usize, barred: bool) -> bool {
        let text = self.text;
        if let Some(start) = frame.key_start {
            if tag.eq_ignore_ascii_case("arg_key") {
                frame.key_start = None;
                match frame.exact(text[start..at].trim()) {
                    Some(parameter) => frame.key = Some(parameter),
                    None => frame.broken = true,
                }
            }
            return true;
        }
        let Some((_, closer, _, _, opened_barred)) = &frame.open else {
            // The call's own closer, or a wrapper's (the call was left open
            // inside it): either ends it.
            return false;
        };
        if tag.eq_ignore_ascii_case(closer) {
            // `<parameter …>` closed by `</｜DSML｜parameter>`: markup that
            // does not match is no reading.
            frame.broken |= *opened_barred != barred;
            frame.close_parameter(text, at);
            return true;
        }
        let wrapper = self.wrappers.iter().any(|w| w.eq_ignore_ascii_case(tag));
        if !tag.eq_ignore_ascii_case(frame.tag) && !wrapper {
            // Markup inside a value (`a </b>`).
            return true;
        }
        // The call ends: its last parameter was left open. By the call's own
        // closer, the value ends there; by a wrapper's (the call never
        // closed), where it ends is a guess: no reading.
        frame.broken |= !tag.eq_ignore_ascii_case(frame.tag);
        frame.close_parameter(text, at);
        false
    }

    /// An opening tag inside the call `frame`; `false` when it ends the
    /// call (it opens another).
    fn open_in_call(&mut self, frame: &mut Frame<'t, 'a>, tag: &Tag<'t>) -> bool {
        if frame.key_start.is_some() {
            return true;
        }
        let parameter = self.parameter_tag(frame, tag);
        if frame.open.is_some() {
            match &parameter {
                // The next parameter closes one left open.
                Some(_) => frame.close_parameter(self.text, tag.at),
                // A call opened before this one closed: where the first ends
                // would be a guess (no reading).
                None if self.starts_call(tag) => {
                    frame.close_parameter(self.text, tag.at);
                    frame.broken |= !frame.tag.is_empty();
                    return false;
                }
                // Markup inside a value.
                None => return true,
            }
        }
        let opened = |key: String, json: bool| Some((key, tag.tag, tag.end, json, tag.barred));
        match parameter {
            Some(Parameter::Named(key, _)) if tag.empty => frame.set(key, Value::String(String::new())),
            Some(Parameter::Named(key, json)) => frame.open = opened(key, json),
            Some(Parameter::Key) => frame.key_start = Some(tag.end),
            Some(Parameter::Value) => match frame.key.take() {
                Some(key) => frame.open = opened(key, false),
                None => frame.broken = true,
            },
            Some(Parameter::Body) => frame.open = opened(String::new(), false),
            None if self.starts_call(tag) => {
                frame.broken |= !frame.tag.is_empty();
                return false;
            }
            None => frame.broken = true,
        }
        true
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
            if frame.exact(key).is_none() && super::super::ARGUMENT_KEYS.contains(&key) {
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
                    if !super::super::words::is_trailing_residue(tail) {
                        let more = super::super::count_anchored(tail, self.limits, Some(self.anchor));
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

    /// A tool's name and its body at the start of `text` ([`text`]): the
    /// call and its length.
    fn name_then_body(&mut self, text: &'t str) -> Option<(Found, usize)> {
        let limits = self.limits;
        text::name_then_body(text, &mut |name| self.tool(name), limits)
    }

    fn finish(&mut self, frame: Frame<'t, 'a>) {
        self.calls += 1;
        match frame.found(self.limits) {
            Some(found) => self.found.push(found),
            None => self.broken = true,
        }
    }
}

/// The text after a thought that comes first: `<think>…</think>`,
/// `…</think>` (its opener left out), or a thought channel (Harmony's
/// `<|channel|>analysis<|message|>…<|end|>`, Gemma's `<|channel>thought
/// …<channel|>`).
pub(super) fn after_thought<'t>(text: &'t str, tokens: &[Token<'t>]) -> Option<&'t str> {
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
pub(super) fn is_thought_channel(text: &str) -> bool {
    let text = text.trim_start();
    ["analysis", "thought", "thinking"].iter().any(|channel| text.starts_with(channel))
}

/// A token that ends a channel's text: Harmony's `<|end|>`, Gemma's
/// `<channel|>`.
pub(super) fn ends_channel(special: &str) -> bool {
    special.contains("end") || special.contains("channel")
}

/// Where the tokens of a thought end whose opener is missing: after the
/// first closer of a thought that no opener of one comes before.
pub(super) fn orphan_thought_end(tokens: &[Token<'_>]) -> Option<usize> {
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
pub(super) fn is_residue(text: &str) -> bool {
    let stripped = text.trim().trim_matches('`').trim();
    if stripped.contains(['{', '}', '(', ')']) {
        return false;
    }
    stripped.is_empty()
        || residue::words(stripped).iter().all(|w| w.markup || w.namespace)
        || super::super::is_language_tag(stripped)
}
