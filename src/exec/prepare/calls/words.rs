//! The words rule (docs/repairs.md, "Words around calls"): what of a text
//! read as whole calls may be words, decided here for `Execute` and for the
//! model door alike (its stream's hold and release included; the door has
//! no grammar of its own).
//!
//! - A text holds calls when, apart from residue, it is calls, with at
//!   most a **preamble**: words before the first call, allowed only when
//!   the calls are in explicit call markup ([`MARKERS`]) standing outside
//!   any Markdown fence, inline code span and block quote, that is either a
//!   special-token marker (`<|…|>`, `<｜…｜>`, `[TOOL_CALLS]`) anywhere, or
//!   a plain tag at the start of a line. A bare call after words, or a tag
//!   in the middle of a sentence, stays prose.
//! - After the last call only residue may follow ([`is_trailing_residue`]):
//!   any other character (a word, a full stop, an emoji) makes the whole
//!   text prose. The readers apply it where a call ends.
//! - Whether text at the start of an answer could still begin a call
//!   ([`could_begin`]) is what a stream holds for.
//!
//! The scan for a marker ([`Scan`]) reads a text in pieces as a stream
//! delivers them and stops where a marker might begin before it has
//! arrived whole: the whole text and its stream find the same place.

use super::{half_token_len, Anchor};
use crate::similar::{normalised_key, residue};

/// Where a marker may stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// A special token: anywhere outside code and quotes.
    Anywhere,
    /// A plain tag: at the start of a line (spaces before it allowed).
    LineStart,
}

/// Explicit call markup: the start marker of each ported peer parser (the
/// fixture under `tests/data/peers/` that brought it beside each), compared
/// ignoring ASCII case, special tokens in any alphabet folded to ASCII
/// first (`<｜tool▁calls▁begin｜>` is `<|tool_calls_begin|>`). Nothing
/// else opens calls after words.
const MARKERS: &[(&str, Place)] = &[
    // vllm_kimi_k2, llamacpp_testchat_kimi_k2_thinking
    ("<|tool_calls_section_begin|>", Place::Anywhere),
    ("<|tool_call_begin|>", Place::Anywhere),
    // llamacpp_deepseek_r1 (DeepSeek V3, R1), vllm_step3
    ("<|tool_calls_begin|>", Place::Anywhere),
    ("<|tool_calls|>", Place::Anywhere),
    // vllm_deepseek_v32 (DSML), and its ASCII spelling
    ("<\u{FF5C}DSML\u{FF5C}", Place::Anywhere),
    ("<|DSML|", Place::Anywhere),
    // vllm_lfm2, vllm_gemma4 (a half token), vllm_solar_open2
    ("<|tool_call_start|>", Place::Anywhere),
    ("<|tool_call>", Place::Anywhere),
    ("<|tool_call:start|>", Place::Anywhere),
    // vllm_apertus, sglang_gigachat3_detector, vllm_internlm2, vllm_granite
    ("<|tools_prefix|>", Place::Anywhere),
    ("<|function_call|>", Place::Anywhere),
    ("<|action_start|>", Place::Anywhere),
    ("<|tool_call|>", Place::Anywhere),
    // llamacpp_llama_3_x, vllm_llama4_pythonic, sglang_cohere_command4_detector
    ("<|python_tag|>", Place::Anywhere),
    ("<|python_start|>", Place::Anywhere),
    ("<|START_ACTION|>", Place::Anywhere),
    // vllm_plamo3, sglang_inkling_detector
    ("<|plamo:begin_tool_requests:plamo|>", Place::Anywhere),
    ("<|content_invoke_tool_json|>", Place::Anywhere),
    ("<|content_invoke_tool_text|>", Place::Anywhere),
    // vllm_mistral
    ("[TOOL_CALLS]", Place::Anywhere),
    // vllm_hermes, vllm_hunyuan_a13b, vllm_hy_v4, vllm_minimax_m2
    ("<tool_call>", Place::LineStart),
    ("<tool_calls>", Place::LineStart),
    ("<tool_calls:opensource>", Place::LineStart),
    ("<minimax:tool_call>", Place::LineStart),
    // mlxlm_minimax_m2, vllm_qwen3coder, vllm_minicpm5xml
    ("<invoke ", Place::LineStart),
    ("<function=", Place::LineStart),
    ("<function ", Place::LineStart),
    // vllm_olmo3, vllm_granite_20b_fc, vllm_qwen25_coder, vllm_nemotron_json
    ("<function_calls>", Place::LineStart),
    ("<function_call>", Place::LineStart),
    ("<tools>", Place::LineStart),
    ("<TOOLCALL>", Place::LineStart),
    // vllm_functiongemma, vllm_dots, vllm_seed_oss, vllm_longcat
    ("<start_function_call>", Place::LineStart),
    ("<dots_function_call>", Place::LineStart),
    ("<seed:tool_call>", Place::LineStart),
    ("<longcat_tool_call>", Place::LineStart),
    // vllm_iquest_coder_v2, sglang_iquest_q1_detector
    ("<iquestcoder_tool_call>", Place::LineStart),
    ("<iquest_tool_call>", Place::LineStart),
];

/// Markers after which a call is JSON (llamacpp_llama_3_x,
/// sglang_llama32_detector_finish): after Llama's `<|python_tag|>`, a
/// custom tool's call is JSON, and Python is code for its interpreter.
const JSON_AFTER: &[&str] = &["<|python_tag|>"];

/// Whether `text` opens with a marker after which only JSON is a call,
/// and what follows it is not JSON.
pub(crate) fn code_not_call(text: &str) -> bool {
    let text = text.trim_start();
    JSON_AFTER.iter().any(|marker| {
        starts_with(text, marker) == Some(true) && !text[marker.len()..].trim_start().starts_with(['{', '['])
    })
}

/// Each marker's second character, folded and in lower case.
static SECONDS: std::sync::LazyLock<Vec<char>> = std::sync::LazyLock::new(|| {
    MARKERS
        .iter()
        .map(|(marker, _)| marker.chars().nth(1).map_or(' ', |c| residue::fold_char(c).to_ascii_lowercase()))
        .collect()
});

/// Harmony (vllm_openai): a header (`<|start|>assistant<|channel|>
/// commentary to=functions.NAME<|constrain|>json<|message|>`) that
/// addresses a function; the marker is its first special token.
const HARMONY_RECIPIENT: &str = "to=functions.";

/// The longest header read for Harmony's recipient.
const MAX_HEADER: usize = 256;

/// Whether `text` starts with a marker that may stand at `line_start`
/// (`Yes`), may become one as more arrives (`Prefix`, only when the text
/// is not `complete`), or neither.
#[derive(Debug, PartialEq, Eq)]
enum Match {
    Yes,
    Prefix,
    No,
}

fn marker_at(text: &str, line_start: bool, complete: bool) -> Match {
    if !text.starts_with(|c: char| c == '[' || residue::is_open_angle(c)) {
        return Match::No;
    }
    // Markers differ by their second character already: only those whose
    // second character this text has are compared.
    let second = text.chars().nth(1).map(|c| residue::fold_char(c).to_ascii_lowercase());
    let mut prefix = false;
    for ((marker, place), own) in MARKERS.iter().zip(SECONDS.iter()) {
        if *place == Place::LineStart && !line_start {
            continue;
        }
        if second.is_some_and(|second| second != *own) {
            continue;
        }
        match starts_with(text, marker) {
            Some(true) => return Match::Yes,
            Some(false) => prefix = true,
            None => {}
        }
    }
    for header in ["<|start|>", "<|channel|>"].into_iter().filter(|_| second.is_none_or(|c| c == '|')) {
        match starts_with(text, header) {
            Some(true) => match harmony_header(text) {
                Some(true) => return Match::Yes,
                None => prefix = true,
                Some(false) => {}
            },
            Some(false) => prefix = true,
            None => {}
        }
    }
    match prefix && !complete {
        true => Match::Prefix,
        false => Match::No,
    }
}

/// Whether `text` starts with `marker`, compared with special tokens'
/// characters folded to ASCII and ASCII case ignored: `Some(true)` yes,
/// `Some(false)` so far (the text ends first), `None` no.
fn starts_with(text: &str, marker: &str) -> Option<bool> {
    let mut chars = text.chars().map(residue::fold_char);
    for expected in marker.chars().map(residue::fold_char) {
        match chars.next() {
            None => return Some(false),
            Some(c) if c.eq_ignore_ascii_case(&expected) => {}
            Some(_) => return None,
        }
    }
    Some(true)
}

/// Whether the Harmony header `text` starts addresses a function; `None`
/// while its `<|message|>` has not arrived.
fn harmony_header(text: &str) -> Option<bool> {
    let mut end = text.len().min(MAX_HEADER);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let header = &text[..end];
    match header.find("<|message|>") {
        Some(end) => Some(header[..end].contains(HARMONY_RECIPIENT)),
        None if text.len() > MAX_HEADER => Some(false),
        None => None,
    }
}

/// What the scan found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scanned {
    /// A marker starts at this byte of the piece scanned.
    Marker(usize),
    /// The piece may hold a marker (or a fence) from this byte on that
    /// has not arrived whole: scan it again with what comes next.
    Incomplete(usize),
    /// A thought whose opener is missing (a template put `<think>` in the
    /// prompt) ends before this byte: its closer (`</think>`) came before
    /// any marker. The scan stands after it.
    ThoughtEnd(usize),
    /// No marker in the piece.
    Nothing,
}

/// Where a line stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Line {
    /// Only spaces so far (how many).
    #[default]
    Start,
    /// A block quote (`>` first).
    Quote,
    /// Anything else.
    Text,
}

/// The state of a scan for explicit markup, carried from one piece of a
/// text to the next: inside a fenced code block (its fence), an inline
/// code span (its backtick run), where the current line stands.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scan {
    fence: Option<(char, usize)>,
    span: Option<usize>,
    line: Line,
    spaces: usize,
    /// The text may still be a thought whose opener is missing.
    orphan: bool,
    /// Call markup stood where it opens no calls after words (a plain tag
    /// in the middle of a sentence): words that hold markup are no
    /// preamble, whatever follows.
    tainted: bool,
}

impl Scan {
    /// A scan from the start of an answer's text, where a thought whose
    /// opener is missing may end first ([`Scanned::ThoughtEnd`]).
    pub(crate) fn at_start() -> Self {
        Self { orphan: true, ..Self::default() }
    }

    /// Scans `piece` (what follows what was scanned before). The state
    /// then stands where the scan stopped: after the piece, or before the
    /// marker or the incomplete part it found (scan from there again).
    /// `complete`: nothing follows the piece.
    pub(crate) fn next(&mut self, piece: &str, complete: bool) -> Scanned {
        let mut at = 0;
        while at < piece.len() {
            let rest = &piece[at..];
            if self.tainted {
                return Scanned::Nothing;
            }
            if self.fence.is_none() && self.span.is_none() && self.line != Line::Quote {
                match marker_at(rest, self.line == Line::Start, complete) {
                    Match::Yes => return Scanned::Marker(at),
                    Match::Prefix => return Scanned::Incomplete(at),
                    Match::No => {}
                }
                if self.line != Line::Start {
                    match marker_at(rest, true, complete) {
                        Match::Yes => {
                            self.tainted = true;
                            return Scanned::Nothing;
                        }
                        Match::Prefix => return Scanned::Incomplete(at),
                        Match::No => {}
                    }
                }
                if self.orphan && rest.starts_with("</") {
                    match thought_closer(rest) {
                        Some(Some(len)) => {
                            self.orphan = false;
                            self.line = Line::Text;
                            return Scanned::ThoughtEnd(at + len);
                        }
                        Some(None) if !complete => return Scanned::Incomplete(at),
                        _ => {}
                    }
                }
            }
            let len = match self.step(rest, complete) {
                Some(len) => len,
                None => return Scanned::Incomplete(at),
            };
            at += len;
        }
        Scanned::Nothing
    }

    /// Moves over what `rest` starts with (a character, a run of backticks
    /// or a fence); how far, or `None` when a run may go on in what has not
    /// arrived.
    fn step(&mut self, rest: &str, complete: bool) -> Option<usize> {
        let c = rest.chars().next().expect("not at the end");
        if c == '\n' {
            self.line = Line::Start;
            self.spaces = 0;
            // A code span does not go on past its line here: a backtick
            // that opens none leaves the rest of its line out.
            self.span = None;
            return Some(1);
        }
        if matches!(c, '`' | '~') {
            let run = rest.len() - rest.trim_start_matches(c).len();
            if run == rest.len() && !complete {
                return None;
            }
            if self.line == Line::Start && run >= 3 {
                match self.fence {
                    None => self.fence = Some((c, run)),
                    Some((fence, length)) if fence == c && run >= length => self.fence = None,
                    Some(_) => {}
                }
                self.line = Line::Text;
                return Some(run);
            }
            if c == '`' && self.fence.is_none() {
                self.span = match self.span {
                    None => Some(run),
                    Some(open) if open == run => None,
                    open => open,
                };
            }
            self.line = if self.line == Line::Quote { Line::Quote } else { Line::Text };
            return Some(run);
        }
        if self.line == Line::Start {
            match c {
                ' ' if self.spaces < 3 => self.spaces += 1,
                '>' if self.fence.is_none() => self.line = Line::Quote,
                _ => self.line = Line::Text,
            }
        }
        Some(c.len_utf8())
    }
}

/// Where the calls of a text read whole may begin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// At its start, after a thought (that ends before this byte): the rest
    /// of the text is read.
    Whole(usize),
    /// After a preamble: these bytes are its words; the calls begin where
    /// they end, at explicit markup.
    After(std::ops::Range<usize>),
    /// Words that no explicit markup follows where a preamble may: prose.
    Prose,
}

/// Where the calls of `text` may begin: at its start when it could begin
/// a call there ([`could_begin`]; a thought first is set aside), else after
/// a preamble at the first marker standing where markup may, else nowhere.
pub(crate) fn start(text: &str, anchor: &dyn Anchor) -> Start {
    let from = match thought_end(text) {
        // A thought whose opener is missing ends at a closer (`</think>`).
        0 if !text.contains("</") => 0,
        0 => match Scan::at_start().next(text, true) {
            Scanned::ThoughtEnd(end) => end,
            _ => 0,
        },
        end => end,
    };
    let body = &text[from..];
    if could_begin(body, anchor) != Some(false) {
        return Start::Whole(from);
    }
    match first_marker(body) {
        Some(at) => Start::After(from..from + at),
        None => Start::Prose,
    }
}

/// The length of the thought closer `text` starts with (`Some(Some)`),
/// or whether it may become one as more arrives (`Some(None)`).
fn thought_closer(text: &str) -> Option<Option<usize>> {
    let mut may = false;
    for tag in THOUGHT_TAGS {
        let closer = format!("</{tag}>");
        match starts_with(text, &closer) {
            Some(true) => return Some(Some(closer.len())),
            Some(false) => may = true,
            None => {}
        }
    }
    may.then_some(None)
}

/// Tags holding a thought, not a call.
pub(crate) const THOUGHT_TAGS: &[&str] = &["think", "thinking", "thought", "reasoning", "analysis"];

/// Where a thought that opens `text` (`<think>…</think>`, whitespace
/// before it) ends; 0 when there is none.
pub(crate) fn thought_end(text: &str) -> usize {
    let body = text.trim_start();
    let lead = text.len() - body.len();
    // Harmony's analysis channel (vllm_openai).
    for head in ["<|start|>assistant<|channel|>analysis<|message|>", "<|channel|>analysis<|message|>"] {
        if let Some(inside) = body.strip_prefix(head) {
            if let Some(end) = inside.find("<|end|>") {
                return lead + head.len() + end + "<|end|>".len();
            }
        }
    }
    for tag in THOUGHT_TAGS {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        if !body.get(..open.len()).is_some_and(|head| head.eq_ignore_ascii_case(&open)) {
            continue;
        }
        let inside = &body[open.len()..];
        let end = inside.to_ascii_lowercase().find(&close);
        if let Some(end) = end {
            return lead + open.len() + end + close.len();
        }
    }
    0
}

/// Where the first explicit marker of a whole text starts, if one stands
/// where a preamble may come before it.
pub(crate) fn first_marker(text: &str) -> Option<usize> {
    match Scan::default().next(text, true) {
        Scanned::Marker(at) => Some(at),
        _ => None,
    }
}

/// How much of a text's start is judged: past it, what may still begin a
/// call is taken as one (a stream then holds it to the end).
const JUDGED: usize = 512;

/// How many wrappers, namespaces and labels deep a start is judged
/// (`print(default_api.get_weather(…))` is two).
const JUDGED_DEPTH: usize = 4;

/// Whether text at the start of an answer (after a thought) could begin a
/// call the reader accepts: `Some(true)` yes (a call's form has begun: a
/// stream holds to the end), `Some(false)` no (words: a stream releases
/// them and watches for explicit markup), `None` not known yet (ask again
/// with more). A stream holds only while the answer is `None` or
/// `Some(true)`, and the whole text is read by the same answer
/// ([`start`]), so both read alike.
///
/// - JSON (`{`, `[`) and markup (`<`, any of its forms) may begin a call.
/// - A fence: not known until its first line has arrived; then its
///   content is judged as a start.
/// - A word: a call when it names one of the caller's tools and what
///   follows can be that call's body (`(`, `{`, `[`, `<`, a fence, a
///   `key=` or `key:` pair, an argument label, after any separator that is
///   no word); a namespace (`functions.`, `brave:`) or a wrapper (`print(`)
///   before what is judged again; a label that names the tool (`Action:`).
///   Words (`grep -rn x`, `task is done`) are released as soon as they are
///   seen to be words; a word still arriving, as soon as no tool's name,
///   label or namespace can begin with it. A namespace never begins with a
///   capital letter (`Hello.` is a word and a full stop).
pub(crate) fn could_begin(text: &str, anchor: &dyn Anchor) -> Option<bool> {
    let text = text.trim_start();
    if text.len() <= JUDGED {
        return begins(text, anchor, 0);
    }
    let mut cut = JUDGED;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(begins(&text[..cut], anchor, 0).unwrap_or(true))
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

/// [`could_begin`] at `depth` wrappers, namespaces and labels in.
fn begins(text: &str, anchor: &dyn Anchor, depth: usize) -> Option<bool> {
    let text = text.trim_start();
    let first = text.chars().next()?;
    if depth > JUDGED_DEPTH {
        return Some(true);
    }
    if matches!(first, '{' | '[') || residue::is_open_angle(first) {
        return Some(true);
    }
    if first == '`' {
        return fenced(text, anchor, depth);
    }
    if !(first.is_alphanumeric() || first == '_') {
        return Some(false);
    }
    let Some(end) = text.find(|c: char| !is_word_char(c)) else { return arriving(text, anchor) };
    let (word, rest) = text.split_at(end);
    if let Some(tool) = anchor.tool(word) {
        return body(rest, tool.parameters);
    }
    let next = rest.chars().next().expect("a character ends the word");
    let after = &rest[next.len_utf8()..];
    match next {
        '(' | '[' => begins(after, anchor, depth + 1),
        // A template's word glued to markup (`function<｜tool▁sep｜>`); a
        // capitalised word is words (`CONTENT<｜tool▁calls▁begin｜>`: a
        // preamble).
        '{' | '<' => Some(may_be_namespace(word)),
        ':' if is_name_label(word) => begins(after, anchor, depth + 1),
        '.' | ':' if may_be_namespace(word) => {
            let after = after.strip_prefix(':').unwrap_or(after);
            match after.chars().next() {
                None => None,
                Some(c) if is_word_char(c) => begins(after, anchor, depth + 1),
                Some(_) => Some(false),
            }
        }
        _ => Some(false),
    }
}

/// A fence at the start: not known until its first line has arrived
/// (a long first line is words), then its content judged as a start; one
/// or two backticks before a word are a code span.
fn fenced(text: &str, anchor: &dyn Anchor, depth: usize) -> Option<bool> {
    let ticks = text.len() - text.trim_start_matches('`').len();
    if ticks == text.len() {
        return None;
    }
    if ticks < 3 {
        return Some(false);
    }
    match text.find('\n') {
        Some(line) => begins(&text[line + 1..], anchor, depth + 1),
        None if text.len() - ticks <= 64 => None,
        None => Some(false),
    }
}

/// A word at the end of the text, still arriving: not known while a tool's
/// name, a label or a namespace may begin with it.
fn arriving(word: &str, anchor: &dyn Anchor) -> Option<bool> {
    let key = crate::similar::normalised_key(word);
    let label = super::NAME_KEYS.iter().any(|k| crate::similar::normalised_key(k).starts_with(&key));
    let possible = word.len() <= 128 && (may_be_namespace(word) || label || anchor.could_name(&key));
    match possible {
        true => None,
        false => Some(false),
    }
}

/// Whether `word` may be a namespace before a tool's name: any word that
/// does not begin with a capital letter.
fn may_be_namespace(word: &str) -> bool {
    !word.chars().next().is_some_and(char::is_uppercase)
}

/// What follows a tool's name at the start: its body after any separator
/// that is no word (whitespace, punctuation, symbols, a call index), or a
/// pair or label ([`label_or_pair`]); words are no body.
fn body(rest: &str, parameters: &[String]) -> Option<bool> {
    let mut rest = rest;
    loop {
        let at =
            rest.find(|c: char| c.is_alphanumeric() || matches!(c, '{' | '(' | '[' | '<' | '`' | '"' | '\'' | '_'))?;
        rest = &rest[at..];
        let first = rest.chars().next().expect("found");
        if matches!(first, '{' | '(' | '[' | '`') || residue::is_open_angle(first) {
            return Some(true);
        }
        if matches!(first, '"' | '\'') {
            return Some(false);
        }
        let Some(end) = rest.find(|c: char| !is_word_char(c)) else {
            // A key (or a call index) still arriving?
            let key = normalised_key(rest);
            let index = rest.bytes().all(|b| b.is_ascii_digit());
            return match index || keys(parameters).any(|k| k.starts_with(&key)) {
                true => None,
                false => Some(false),
            };
        };
        let (word, after) = rest.split_at(end);
        // A call index (`get_weather:0`) is a separator.
        if word.bytes().all(|b| b.is_ascii_digit()) {
            rest = after;
            continue;
        }
        return label_or_pair(word, after, parameters);
    }
}

/// The keys a pair or label after a tool's name may have, folded: its
/// parameters' and the argument keys ([`super::ARGUMENT_KEYS`]).
fn keys(parameters: &[String]) -> impl Iterator<Item = String> + '_ {
    parameters.iter().map(|p| normalised_key(p)).chain(super::ARGUMENT_KEYS.iter().map(|k| normalised_key(k)))
}

/// A word after a tool's name: a `key=value` or `key: value` pair whose
/// key is one of the tool's parameters or an argument key, or an argument
/// label of several words (`Action Input:`), else words.
fn label_or_pair(word: &str, after: &str, parameters: &[String]) -> Option<bool> {
    let mut label = normalised_key(word);
    let mut after = after;
    loop {
        let is_key = keys(parameters).any(|key| key == label);
        let spaced = after.trim_start_matches([' ', '\t']);
        match spaced.chars().next() {
            None if is_key || spaced.len() == after.len() => return None,
            Some('=' | ':') if is_key => return Some(true),
            _ => {}
        }
        // Another word of a label (`Action Input`)?
        let longer = keys(parameters).any(|key| key.len() > label.len() && key.starts_with(label.as_str()));
        if !longer || spaced.len() == after.len() {
            return Some(false);
        }
        let Some(end) = spaced.find(|c: char| !is_word_char(c)) else {
            let key = format!("{label}{}", normalised_key(spaced));
            return match keys(parameters).any(|k| k.starts_with(&key)) {
                true => None,
                false => Some(false),
            };
        };
        label.push_str(&normalised_key(&spaced[..end]));
        after = &spaced[end..];
    }
}

/// A label naming the tool (`Action:`, `Tool:`, `tool_name:`): a name key
/// ([`super::NAME_KEYS`]).
fn is_name_label(word: &str) -> bool {
    super::NAME_KEYS.iter().any(|key| key.eq_ignore_ascii_case(word))
}

/// Whether what follows the last call is residue only: whitespace,
/// special tokens and half tokens, end-of-turn tokens (`</s>`,
/// `<end_of_turn>`), tags without attributes (closers, wrappers), bracketed
/// markers (`[TOOL_CALLS]`) and fences. Nothing else may follow a call.
pub(crate) fn is_trailing_residue(text: &str) -> bool {
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let len = residue::special_token_len(rest)
            .or_else(|| half_token_len(rest))
            .or_else(|| plain_tag_len(rest))
            .or_else(|| marker_len(rest))
            .or_else(|| rest.starts_with("```").then(|| rest.len() - rest.trim_start_matches('`').len()));
        match len {
            Some(len) => rest = rest[len..].trim_start(),
            None => return false,
        }
    }
    true
}

/// The length of a tag without attributes at the start of `text`
/// (`<end_of_turn>`, `</tool_call>`, `</s>`, `<minimax:tool_call>`).
fn plain_tag_len(text: &str) -> Option<usize> {
    let inner = text.strip_prefix('<')?;
    let end = inner.find('>')?;
    let name = inner[..end].strip_prefix('/').unwrap_or(&inner[..end]);
    let name = name.strip_suffix('/').unwrap_or(name);
    let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '.');
    (!name.is_empty() && name.len() <= 64 && name.chars().all(word)).then_some(end + 2)
}

/// The length of a bracketed marker (`[TOOL_CALLS]`, `[/TOOL_CALLS]`).
fn marker_len(text: &str) -> Option<usize> {
    let inner = text.strip_prefix('[')?;
    let end = inner.find(']')?;
    let name = inner[..end].strip_prefix('/').unwrap_or(&inner[..end]);
    let upper = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
    (!name.is_empty() && name.len() <= 64 && name.chars().all(upper)).then_some(end + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tools;

    static CITY: std::sync::LazyLock<[String; 1]> = std::sync::LazyLock::new(|| ["city".to_owned()]);

    impl Anchor for Tools {
        fn tool(&self, name: &str) -> Option<super::super::Tool<'_>> {
            let parameters = CITY.as_slice();
            (name == "get_weather").then_some(super::super::Tool { parameters, required: &[], lists: &[] })
        }

        fn could_name(&self, key: &str) -> bool {
            "getweather".starts_with(key)
        }
    }

    #[test]
    fn a_marker_after_words_is_found_where_markup_may_stand() {
        for (text, at) in [
            ("I'll check.\n<tool_call>{}", Some(12)),
            ("I'll check. <|tool_calls_section_begin|>", Some(12)),
            ("Let me look.\n\n<\u{FF5C}DSML\u{FF5C}function_calls>", Some(14)),
            ("Sure <\u{FF5C}tool\u{2581}calls\u{2581}begin\u{FF5C}>", Some(5)),
            ("  <function=get_weather>", Some(2)),
            ("Text [TOOL_CALLS]get_weather[ARGS]{}", Some(5)),
            ("Ok<|start|>assistant<|channel|>commentary to=functions.x <|constrain|>json<|message|>{}", Some(2)),
            // In the middle of a sentence, a plain tag is prose.
            ("An attacker would send <invoke name=\"delete_file\">", None),
            ("Use <tool_call> tags.", None),
            // In a fence, a code span or a quote: never a call.
            ("Never run this:\n```\n<tool_call>{}</tool_call>\n```", None),
            ("Write `<|tool_calls_section_begin|>` first.", None),
            ("> <tool_call>{}</tool_call>", None),
            ("A final answer<|start|>assistant<|channel|>final<|message|>Hi", None),
        ] {
            assert_eq!(first_marker(text), at, "{text:?}");
        }
        // Words holding markup in a sentence are no preamble, whatever
        // follows: every call after them stays prose.
        assert_eq!(first_marker("Lead. <tool_call>{}</tool_call>\n<tool_call>{}</tool_call>"), None);
        // After a fence closes, markup counts again.
        assert_eq!(first_marker("```\nx\n```\n<tool_call>"), Some(10));
    }

    #[test]
    fn a_stream_finds_the_marker_the_whole_text_has() {
        let text = "Let me check `this`.\n```js\n<tool_call>\n```\nNow:\n<tool_call>{\"name\": \"x\"}";
        let whole = first_marker(text);
        for size in 1..12 {
            let (mut scan, mut from, mut found) = (Scan::default(), 0, None);
            let mut end = 0;
            while found.is_none() && from < text.len() {
                end = (end + size).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                match scan.next(&text[from..end], end == text.len()) {
                    Scanned::Marker(at) => found = Some(from + at),
                    Scanned::Incomplete(at) => from += at,
                    Scanned::ThoughtEnd(after) => from += after,
                    Scanned::Nothing => from = end,
                }
            }
            assert_eq!(found, whole, "pieces of {size}");
        }
    }

    #[test]
    fn only_residue_may_follow_a_call() {
        for tail in ["", "\n", "</tool_call>", "<|im_end|>", " </s>", "<end_of_turn>\n", "\n```", "[/TOOL_CALLS]"] {
            assert!(is_trailing_residue(tail), "{tail:?}");
        }
        for tail in [" -- never run this", ".", " is the call you must NOT make.", " 🙂", ", then"] {
            assert!(!is_trailing_residue(tail), "{tail:?}");
        }
    }

    #[test]
    fn where_the_calls_of_a_text_begin() {
        assert_eq!(start("<tool_call>{}</tool_call>", &Tools), Start::Whole(0));
        assert_eq!(start("get_weather(city='x')", &Tools), Start::Whole(0));
        assert_eq!(start("<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant", &Tools), Start::Whole(41));
        assert_eq!(start("I'll check.\n<tool_call>{}", &Tools), Start::After(0..12));
        assert_eq!(start("<think>a <tool_call></think>Sure.\n<tool_call>{}", &Tools), Start::After(28..34));
        assert_eq!(start("I'll check: get_weather(city='x')", &Tools), Start::Prose);
        assert_eq!(thought_end("  <THINK>x</think>y"), 18);
        // A thought whose opener a template left out, before any marker.
        assert_eq!(
            start("The user wants it.</think>\n<get_weather><city>x</city></get_weather>", &Tools),
            Start::Whole(26)
        );
        assert_eq!(start("Hmm.</think>Sure.\n<tool_call>{}", &Tools), Start::After(12..18));
        assert_eq!(thought_end("<think>never closed"), 0);
    }

    #[test]
    fn what_could_begin_a_call() {
        for text in [
            "<tool_call>",
            "{\"a\"",
            "```json\n{",
            "```\nget_weather(",
            "get_weather(",
            "get_weather {",
            "get_weather - {",
            "get_weather city=",
            "get_weather: {",
            "get_weather:0<|tool_call_argument_begin|>",
            "get_weather\n```json",
            "get_weather\nAction Input: {",
            "Action: get_weather\nAction Input: {",
            "functions.get_weather(",
            "call:get_weather{",
            "print(get_weather(",
            "[get_weather(",
            "\u{FF1C}|x",
            "\u{2039}|x",
        ] {
            assert_eq!(could_begin(text, &Tools), Some(true), "{text}");
        }
        for text in [
            "I'll check.",
            "Sure, ",
            "- item",
            "Hello",
            "Hello.get_weather(",
            "The",
            "get_weather is done",
            "get_weather -rn foo",
            "get_weather \"Oslo\"",
            "get_weather Oslo is",
            "get_weather country=",
            "```python\nimport os",
            "```bash\nget_weather -rn x",
            "`get_weather(`",
            "Note(s): ",
            "Note: get_weather(",
            "CONTENT<\u{FF5C}tool\u{2581}calls\u{2581}begin\u{FF5C}>",
        ] {
            assert_eq!(could_begin(text, &Tools), Some(false), "{text}");
        }
        // Not known yet: a tool's name, a label, a namespace or a fence
        // still arriving, a name then separators.
        for text in
            ["get_wea", "Get", "Act", "functions", "sure", "```", "``", "```pyth", "get_weather.", "get_weather ci"]
        {
            assert_eq!(could_begin(text, &Tools), None, "{text}");
        }
    }
}
