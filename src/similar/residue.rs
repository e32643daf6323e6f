//! The words of an emitted tool name that chat templates and output parsers
//! left residue around (docs/architecture.md, "Names and messages"): `<|start|>assistant
//! <|channel|>commentary to=functions.get_weather <|constrain|>json`,
//! `[TOOL_CALLS]get_weather`, `<function=get_weather>`, `get_weather:0`,
//! `` `get_weather()` ``.
//!
//! The rule: a tool name is made of `[A-Za-z0-9_-]` only, so the emitted name
//! is split at every other character into words, and each word is marked by
//! its place. The executor resolves every word inside the caller's available
//! set and dispatches only when exactly one tool is named and every other
//! word is recognisable residue: markup (a `<|…|>` special token, a
//! bracketed marker, a tag name, an attribute key, a call index, a format or
//! channel word), a namespace in front of another word, or a word that a
//! special token separates from the tool's (what a template appends after
//! its tokens). A word glued to residue with no separator (`get_weatherjson`)
//! is one word and never split. Pure: knows nothing of the catalogue.

/// Words that templates and constrained decoders put beside a tool name:
/// format markers (`<|constrain|>json`), channel names (`<|channel|>
/// commentary`), the speaker of a turn and a call's type (DeepSeek's
/// `function<｜tool▁sep｜>NAME`). Compared ignoring ASCII case.
pub(crate) const RESIDUE_WORDS: &[&str] = &["json", "commentary", "analysis", "final", "assistant", "function"];

/// One word of an emitted name and what its place says about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word<'a> {
    pub(crate) text: &'a str,
    /// Its place marks it as markup, never a name by itself: inside `[…]`
    /// (`[TOOL_CALLS]`), a tag name (`<tool_call>`, `</function>`), an
    /// attribute key (`to=`, `function=`), only digits (a call index,
    /// `name:0`), or one of [`RESIDUE_WORDS`].
    pub(crate) markup: bool,
    /// Followed directly by `.`, `:` or `::` and another word, not a call
    /// index (`functions.x`, `ns:x`; not `x:0`): a namespace, unless it
    /// names a tool itself.
    pub(crate) namespace: bool,
    /// How many special tokens (`<|…|>`) come before it. Words of another
    /// region than the tool's are what a template put around the name.
    pub(crate) region: usize,
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

/// The words of `emitted`, in order, with their places; special tokens
/// (`<|…|>`) are dropped whole.
pub(crate) fn words(emitted: &str) -> Vec<Word<'_>> {
    let mut words = Vec::new();
    let mut region = 0;
    let mut at = 0;
    while at < emitted.len() {
        let rest = &emitted[at..];
        if let Some(len) = special_token_len(rest) {
            at += len;
            region += 1;
            continue;
        }
        let c = rest.chars().next().expect("not at the end");
        if !is_name_char(c) {
            at += c.len_utf8();
            continue;
        }
        let len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        let text = &rest[..len];
        let before = &emitted[..at];
        let after = &rest[len..];
        let tag = before.ends_with('<') || before.ends_with("</");
        let bracketed = (before.ends_with('[') || before.ends_with("[/")) && after.starts_with(']');
        let key = after.starts_with('=');
        let index = text.bytes().all(|b| b.is_ascii_digit());
        let vocabulary = RESIDUE_WORDS.iter().any(|w| w.eq_ignore_ascii_case(text));
        let namespace = ["::", ":", "."].iter().any(|sep| after.strip_prefix(sep).is_some_and(starts_with_word));
        words.push(Word { text, markup: tag || bracketed || key || index || vocabulary, namespace, region });
        at += len;
    }
    words
}

/// Characters some tokenizers write for the `|` of a special token
/// (full-width, mathematical, box drawing and other variant forms).
pub(crate) fn is_bar(c: char) -> bool {
    matches!(c, '|' | '\u{FF5C}' | '\u{2223}' | '\u{01C0}' | '\u{2502}' | '\u{FFE8}' | '\u{FE31}' | '\u{2758}')
}

/// `<` and its variant forms (full-width, small, angle brackets).
pub(crate) fn is_open_angle(c: char) -> bool {
    matches!(c, '<' | '\u{FF1C}' | '\u{FE64}' | '\u{2039}' | '\u{3008}' | '\u{27E8}' | '\u{2329}')
}

/// `>` and its variant forms.
pub(crate) fn is_close_angle(c: char) -> bool {
    matches!(c, '>' | '\u{FF1E}' | '\u{FE65}' | '\u{203A}' | '\u{3009}' | '\u{27E9}' | '\u{232A}')
}

/// `c` as a special token's character is written in ASCII: a bar, an
/// angle and `▁` in their variant forms become `|`, `<`, `>` and `_`.
pub(crate) fn fold_char(c: char) -> char {
    match c {
        c if is_bar(c) => '|',
        c if is_open_angle(c) => '<',
        c if is_close_angle(c) => '>',
        '\u{2581}' => '_',
        c => c,
    }
}

/// The length in bytes of the special token `text` starts with, in any
/// alphabet: `<|tool_call_begin|>`, and the same written with full-width
/// bars and `▁` between its words (`<｜tool▁call▁begin｜>`) or other
/// variant forms of `<`, `|` and `>`. A token has no whitespace inside and
/// is at most 64 characters long; an unclosed one is not a token.
pub(crate) fn special_token_len(text: &str) -> Option<usize> {
    let mut chars = text.char_indices();
    let (_, open) = chars.next()?;
    let (_, bar) = chars.next()?;
    if !is_open_angle(open) || !is_bar(bar) {
        return None;
    }
    let mut previous_bar = false;
    for (count, (at, c)) in chars.enumerate() {
        if count > 64 || c.is_whitespace() || is_open_angle(c) || matches!(c, '{' | '}') {
            return None;
        }
        if previous_bar && is_close_angle(c) {
            return Some(at + c.len_utf8());
        }
        previous_bar = is_bar(c);
    }
    None
}

/// `text` with every special token in another alphabet written in ASCII
/// (`<｜tool▁sep｜>` → `<|tool_sep|>`); the rest is unchanged. Borrowed
/// when there is nothing to rewrite (ASCII text always).
pub(crate) fn fold_tokens(text: &str) -> std::borrow::Cow<'_, str> {
    if text.is_ascii() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut changed = false;
    while at < text.len() {
        let rest = &text[at..];
        if let Some(len) = special_token_len(rest) {
            let token = &rest[..len];
            let inner: String = token.chars().map(fold_char).collect();
            changed |= inner != token;
            out.push_str(&inner);
            at += len;
            continue;
        }
        let c = rest.chars().next().expect("not at the end");
        out.push(c);
        at += c.len_utf8();
    }
    match changed {
        true => std::borrow::Cow::Owned(out),
        false => std::borrow::Cow::Borrowed(text),
    }
}

/// Whether `text` starts with a word that is not a call index.
fn starts_with_word(text: &str) -> bool {
    let len = text.find(|c: char| !is_name_char(c)).unwrap_or(text.len());
    len > 0 && !text[..len].bytes().all(|b| b.is_ascii_digit())
}

/// The name the model most likely meant once residue is set aside: the one
/// word that is neither markup nor a namespace, if there is exactly one
/// (`<|channel|>get_wether json` → `get_wether`). For suggestions when no
/// tool is named.
pub(crate) fn cleaned<'a>(words: &[Word<'a>]) -> Option<&'a str> {
    let mut plain = words.iter().filter(|w| !w.markup && !w.namespace);
    match (plain.next(), plain.next()) {
        (Some(one), None) => Some(one.text),
        _ => None,
    }
}

/// The tool parts of a word in the MCP-client shape `server__tool`: what
/// follows each `__` (not at the start or end), longest first.
pub(crate) fn after_double_underscores(word: &str) -> impl Iterator<Item = &str> {
    word.match_indices("__").filter_map(move |(at, _)| {
        let rest = word[at + 2..].trim_start_matches('_');
        (at > 0 && !rest.is_empty()).then_some(rest)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(emitted: &str) -> Vec<&str> {
        words(emitted).into_iter().filter(|w| !w.markup && !w.namespace).map(|w| w.text).collect()
    }

    #[test]
    fn template_tokens_and_what_follows_them_are_set_apart() {
        let found = words("get_weather<|channel|>commentary");
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].text, found[0].region), ("get_weather", 0));
        assert_eq!((found[1].text, found[1].markup, found[1].region), ("commentary", true, 1));
        let harmony = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json";
        assert_eq!(plain(harmony), ["get_weather"]);
        assert_eq!(words(harmony).iter().find(|w| w.text == "functions").map(|w| w.namespace), Some(true));
    }

    #[test]
    fn markers_tags_indexes_and_punctuation() {
        assert_eq!(plain("[TOOL_CALLS]get_weather"), ["get_weather"]);
        assert_eq!(plain("<function=get_weather>"), ["get_weather"]);
        assert_eq!(plain("<tool_call>get_weather</tool_call>"), ["get_weather"]);
        assert_eq!(plain("get_weather:0"), ["get_weather"]);
        assert_eq!(plain("  .:get_weather\n"), ["get_weather"]);
        assert_eq!(plain("\"get_weather\""), ["get_weather"]);
        assert_eq!(plain("`get_weather()`"), ["get_weather"]);
        assert_eq!(plain("github:create_issue"), ["create_issue"]);
        assert_eq!(plain("github::create_issue"), ["create_issue"]);
    }

    #[test]
    fn glued_residue_is_not_split() {
        assert_eq!(plain("get_weatherjson"), ["get_weatherjson"]);
        assert_eq!(plain("get_weather json"), ["get_weather"]);
    }

    #[test]
    fn tokens_in_other_alphabets_are_tokens() {
        let deepseek =
            "<\u{FF5C}tool\u{2581}call\u{2581}begin\u{FF5C}>function<\u{FF5C}tool\u{2581}sep\u{FF5C}>get_weather";
        let found = words(deepseek);
        assert_eq!(found.iter().map(|w| (w.text, w.region)).collect::<Vec<_>>(), [("function", 1), ("get_weather", 2)]);
        assert_eq!(plain("\u{FF1C}\u{FF5C}python_tag\u{FF5C}\u{FF1E}get_weather"), ["get_weather"]);
        assert_eq!(
            fold_tokens("{\"a\": 1}<\u{FF5C}tool\u{2581}call\u{2581}end\u{FF5C}>"),
            "{\"a\": 1}<|tool_call_end|>"
        );
        // Outside a token, variant characters are text.
        assert_eq!(fold_tokens("a \u{FF5C} b \u{2581}"), "a \u{FF5C} b \u{2581}");
        assert_eq!(special_token_len("<| a |>"), None);
    }

    #[test]
    fn an_unclosed_token_is_punctuation() {
        assert_eq!(plain("<|get_weather"), ["get_weather"]);
        assert!(words("<|x|><|y|>").is_empty());
    }

    #[test]
    fn cleaned_is_the_one_plain_word() {
        assert_eq!(cleaned(&words("<|channel|>get_wether json")), Some("get_wether"));
        assert_eq!(cleaned(&words("get weather")), None);
        assert_eq!(cleaned(&words("<|call|>")), None);
    }

    #[test]
    fn mcp_client_prefixes() {
        assert_eq!(after_double_underscores("brave__web_search").collect::<Vec<_>>(), ["web_search"]);
        assert_eq!(
            after_double_underscores("mcp__brave__web_search").collect::<Vec<_>>(),
            ["brave__web_search", "web_search"]
        );
        assert_eq!(after_double_underscores("__x").count(), 0);
        assert_eq!(after_double_underscores("x__").count(), 0);
    }
}
