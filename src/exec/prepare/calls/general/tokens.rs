//! The general reading's tokens: the text tokenised once, in one pass.

use super::super::{
    half_token_len,
    tags::{attributes, name_attribute, unquote},
};
use crate::{exec::prepare::work, similar::residue};

/// The longest tag head read (`<invoke name="…" …>`): a `<` without a `>`
/// this close is text.
pub(super) const MAX_HEAD: usize = 256;

/// One token of the text.
#[derive(Debug)]
pub(super) enum Token<'a> {
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
pub(super) struct Tag<'a> {
    /// The name, without a namespace in bars.
    pub(super) tag: &'a str,
    /// `<tag=VALUE>`.
    pub(super) value: Option<&'a str>,
    pub(super) attributes: Vec<(&'a str, &'a str)>,
    /// `<tag … />`.
    pub(super) empty: bool,
    /// Written with a namespace in bars (`<｜DSML｜parameter …>`).
    pub(super) barred: bool,
    /// Where the tag starts, and where the element's content starts.
    pub(super) at: usize,
    pub(super) end: usize,
}

impl<'t> Tag<'t> {
    /// The name `=VALUE` or a `name`-like attribute gives.
    pub(super) fn named(&self) -> Option<&'t str> {
        self.value.or_else(|| name_attribute(&self.attributes))
    }

    pub(super) fn is(&self, tags: &[&str]) -> bool {
        tags.iter().any(|t| t.eq_ignore_ascii_case(self.tag))
    }
}

/// The tokens of `text`, in one pass.
pub(super) fn tokens(text: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut text_start: Option<usize> = None;
    let mut at = 0;
    let mut line_start = true;
    while at < text.len() {
        let rest = &text[at..];
        let special = residue::special_token_len(rest).or_else(|| half_token_len(rest));
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
pub(super) fn tag(text: &str, from: usize, at: usize) -> Option<(Token<'_>, usize)> {
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
pub(super) fn strip_bars(head: &str) -> &str {
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
pub(super) fn local(name: &str) -> &str {
    name.rsplit_once(':').map_or(name, |(_, local)| local)
}

/// Where a token starts in `text`.
pub(super) fn start_of(text: &str, token: &Token<'_>) -> usize {
    match token {
        Token::Open(tag) => tag.at,
        Token::Close { at, .. } | Token::Text { at, .. } => *at,
        Token::Special(special) => special.as_ptr() as usize - text.as_ptr() as usize,
    }
}
