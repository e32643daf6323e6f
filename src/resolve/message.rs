//! Model-facing text (docs/architecture.md, "Names and messages"): how names are quoted and how the
//! Resolve warning reads. Exact formats are part of the contract.

use std::fmt::Write;

/// An emitted name is cut to this many characters before quoting.
pub(crate) const MAX_QUOTED_CHARS: usize = 64;

/// The first this many unknown names are spelled out in a message and in
/// status details; the rest are counted.
pub(crate) const MAX_REPORTED_UNKNOWN: usize = 20;

/// Quotes a name as a model or agent emitted it: cut to 64 characters (then
/// `…`), control, bidirectional-formatting and invisible characters escaped
/// (`\u202e`, `\u200b`), in single quotes.
pub(crate) fn quote_emitted(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(256) + 2);
    out.push('\'');
    let mut chars = name.chars();
    for c in chars.by_ref().take(MAX_QUOTED_CHARS) {
        if needs_escape(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    if chars.next().is_some() {
        out.push('…');
    }
    out.push('\'');
    out
}

fn needs_escape(c: char) -> bool {
    c.is_control() || is_bidi_control(c) || is_invisible(c)
}

/// Characters that reorder the text around them (a name or message that
/// reads one way and runs another).
pub(crate) fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Characters that show nothing, so two names that look alike differ:
/// soft hyphen, zero-width space, word joiner, byte-order mark, Mongolian
/// vowel separator, invisible operators. (Zero-width joiners stay: scripts
/// and emoji need them.)
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(c, '\u{00ad}' | '\u{180e}' | '\u{200b}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
}

/// Catalogue names (known safe) as `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`.
pub(crate) fn or_list<S: AsRef<str>>(names: &[S]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{}'", n.as_ref())).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// A list printed like Python's: `['a', 'b']`.
pub(crate) fn python_list<S: AsRef<str>>(names: &[S]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{}'", n.as_ref())).collect();
    format!("[{}]", quoted.join(", "))
}

/// `Unknown tool 'web_serch'. Did you mean 'web_search' or 'exa_search'? Run 'toolgate tools list'.`
pub(crate) fn unknown_name_sentence(name: &str, suggestions: &[String]) -> String {
    let quoted = quote_emitted(name);
    match suggestions.is_empty() {
        true => format!("Unknown tool {quoted}. Run 'toolgate tools list'."),
        false => format!("Unknown tool {quoted}. Did you mean {}? Run 'toolgate tools list'.", or_list(suggestions)),
    }
}

/// The Resolve warning: one sentence for each of the first `shown` unknown
/// names, joined by a space; the rest are counted (`… and 5 more unknown names.`).
pub(crate) fn resolve_warning(unknown: &[(&str, &[String])], shown: usize) -> String {
    let mut sentences: Vec<String> =
        unknown.iter().take(shown).map(|(name, s)| unknown_name_sentence(name, s)).collect();
    if unknown.len() > shown {
        sentences.push(format!("… and {} more unknown names.", unknown.len() - shown));
    }
    sentences.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_cuts_emitted_names() {
        assert_eq!(quote_emitted("web_serch"), "'web_serch'");
        let long = "x".repeat(100);
        assert_eq!(quote_emitted(&long), format!("'{}…'", "x".repeat(64)));
        assert_eq!(quote_emitted(&"y".repeat(64)), format!("'{}'", "y".repeat(64)));
    }

    #[test]
    fn escapes_control_and_bidi_characters() {
        assert_eq!(quote_emitted("evil\u{202e}txt"), "'evil\\u202etxt'");
        assert_eq!(quote_emitted("a\nb\u{0}c\u{7f}"), "'a\\u000ab\\u0000c\\u007f'");
        assert_eq!(quote_emitted("\u{2066}x\u{200f}"), "'\\u2066x\\u200f'");
        assert_eq!(quote_emitted("web\u{200b}_se\u{00ad}arch"), "'web\\u200b_se\\u00adarch'");
        assert_eq!(quote_emitted("wéb_ツール"), "'wéb_ツール'");
    }

    #[test]
    fn lists() {
        assert_eq!(or_list(&["a"]), "'a'");
        assert_eq!(or_list(&["a", "b"]), "'a' or 'b'");
        assert_eq!(or_list(&["a", "b", "c"]), "'a', 'b' or 'c'");
        assert_eq!(python_list(&["a", "b"]), "['a', 'b']");
        assert_eq!(python_list::<&str>(&[]), "[]");
    }

    #[test]
    fn resolve_sentences() {
        let s = vec!["web_search".to_owned(), "exa_search".to_owned()];
        assert_eq!(
            unknown_name_sentence("web_serch", &s),
            "Unknown tool 'web_serch'. Did you mean 'web_search' or 'exa_search'? Run 'toolgate tools list'."
        );
        assert_eq!(unknown_name_sentence("zzz", &[]), "Unknown tool 'zzz'. Run 'toolgate tools list'.");
        let names: Vec<String> = (0..23).map(|i| format!("n{i}")).collect();
        let many: Vec<(&str, &[String])> = names.iter().map(|n| (n.as_str(), &[][..])).collect();
        let text = resolve_warning(&many, MAX_REPORTED_UNKNOWN);
        assert!(text.ends_with("Unknown tool 'n19'. Run 'toolgate tools list'. … and 3 more unknown names."), "{text}");
        assert!(!text.contains("'n20'"));
    }
}
