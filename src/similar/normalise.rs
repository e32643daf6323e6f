//! Normalised keys: the form in which a drifted tool name is compared with the
//! catalogue (docs/architecture.md, "Names and messages").
//!
//! Pure string functions; they know nothing of the catalogue.

use std::borrow::Cow;

/// Namespaces that models invent in front of a tool name, matched
/// case-insensitively. `mcp__<server>__` is handled beside them.
pub(crate) const INVENTED_NAMESPACES: &[&str] = &["functions.", "default_api.", "tools.", "tool."];

/// Characters that separate words in a tool name and are dropped from its key.
const SEPARATORS: &[char] = &['_', '-', ' ', '.'];

/// Removes one leading invented namespace (`functions.`, `default_api.`,
/// `tools.`, `tool.` or `mcp__<server>__`), if the rest is not empty.
pub(crate) fn strip_namespace(name: &str) -> &str {
    for prefix in INVENTED_NAMESPACES {
        if let Some(rest) = strip_prefix_ignore_ascii_case(name, prefix) {
            if !rest.is_empty() {
                return rest;
            }
        }
    }
    if let Some(rest) = strip_prefix_ignore_ascii_case(name, "mcp__") {
        if let Some(end) = rest.find("__") {
            let tool = &rest[end + 2..];
            if end > 0 && !tool.is_empty() {
                return tool;
            }
        }
    }
    name
}

/// The normalised key of a name: its namespace stripped, lower-cased
/// (Unicode-aware), with `_`, `-`, space and `.` removed.
///
/// `WebSearch`, `web-search` and `functions.web_search` all have the key
/// `websearch`.
pub(crate) fn normalised_key(name: &str) -> String {
    strip_namespace(name).chars().filter(|c| !SEPARATORS.contains(c)).flat_map(char::to_lowercase).collect()
}

/// The form in which argument names are compared with the parameters a
/// schema declares: Unicode default case folding (`ſ` is `s`, the Kelvin
/// sign `K` is `k`, `ß` is `ss`), with `_`, `-`, space and `.` removed. Go's
/// `encoding/json` matches keys under simple case folding, so every key it
/// would read as a parameter has that parameter's folded key (and a few
/// more: full folding is the wider net). No namespace is stripped: an
/// argument has none.
pub(crate) fn folded_key(name: &str) -> String {
    // ASCII folds to its lower case: no tables needed (the common case, on
    // every call that sends an undeclared key).
    if name.is_ascii() {
        return name.chars().filter(|c| !SEPARATORS.contains(c)).map(|c| c.to_ascii_lowercase()).collect();
    }
    let kept: String = name.chars().filter(|c| !SEPARATORS.contains(c)).collect();
    caseless::default_case_fold_str(&kept)
}

/// [`folded_key`], borrowed when the name is its own key (ASCII without
/// capitals or separators: most argument names), so that looking at a call's
/// keys allocates nothing.
pub(crate) fn folded_key_of(name: &str) -> Cow<'_, str> {
    match name.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase() && !SEPARATORS.contains(&char::from(b))) {
        true => Cow::Borrowed(name),
        false => Cow::Owned(folded_key(name)),
    }
}

/// Whether the folded key of `name` is `key`, without building it when
/// `name` is ASCII.
pub(crate) fn has_folded_key(name: &str, key: &str) -> bool {
    match name.is_ascii() {
        true => name
            .bytes()
            .filter(|&b| !SEPARATORS.contains(&char::from(b)))
            .map(|b| b.to_ascii_lowercase())
            .eq(key.bytes()),
        false => folded_key(name) == key,
    }
}

/// The form in which names are compared for suggestions: the namespace
/// stripped and lower-cased, separators kept.
pub(crate) fn folded(name: &str) -> String {
    strip_namespace(name).to_lowercase()
}

fn strip_prefix_ignore_ascii_case<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    let head = name.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &name[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_and_separator_drift_share_a_key() {
        for drifted in ["web_search", "WebSearch", "web-search", "Web Search", "WEB_SEARCH", "web.search"] {
            assert_eq!(normalised_key(drifted), "websearch", "{drifted}");
        }
    }

    #[test]
    fn one_invented_namespace_is_stripped() {
        assert_eq!(normalised_key("functions.web_search"), "websearch");
        assert_eq!(normalised_key("Functions.WebSearch"), "websearch");
        assert_eq!(normalised_key("default_api.web_search"), "websearch");
        assert_eq!(normalised_key("tools.web_search"), "websearch");
        assert_eq!(normalised_key("tool.web_search"), "websearch");
        assert_eq!(normalised_key("mcp__brave__web_search"), "websearch");
        assert_eq!(normalised_key("MCP__notes__List-Notes"), "listnotes");
        // Only one namespace is stripped; the second stays part of the name.
        assert_eq!(normalised_key("functions.tools.web_search"), "toolswebsearch");
    }

    #[test]
    fn a_namespace_alone_is_a_name() {
        assert_eq!(strip_namespace("functions."), "functions.");
        assert_eq!(strip_namespace("mcp__x__"), "mcp__x__");
        assert_eq!(strip_namespace("mcp____tool"), "mcp____tool");
        assert_eq!(normalised_key("tools"), "tools");
    }

    #[test]
    fn lower_casing_is_unicode_aware() {
        assert_eq!(normalised_key("ÜBER_Straße"), "überstraße");
        assert_eq!(normalised_key("ΣΕΙΡΑ"), "σειρα");
    }

    #[test]
    fn non_ascii_prefix_lookalikes_do_not_panic() {
        // A multi-byte character where an ASCII prefix would end.
        assert_eq!(strip_namespace("functionsé"), "functionsé");
        assert_eq!(strip_namespace("tööls.x"), "tööls.x");
    }

    #[test]
    fn argument_keys_fold_as_decoders_read_them() {
        // U+017F LONG S and U+212A KELVIN SIGN fold to ASCII letters.
        assert_eq!(folded_key("\u{17f}ku"), "sku");
        assert_eq!(folded_key("S\u{212a}U"), "sku");
        // The borrowed and the comparing forms agree with it.
        for name in ["sku", "SKU", "s_k-u", "\u{17f}ku", "S\u{212a}U", "stra\u{df}e", "n", "customer.id", ""] {
            assert_eq!(folded_key_of(name), folded_key(name), "{name}");
            for other in ["sku", "n", "strasse", "customerid", ""] {
                assert_eq!(has_folded_key(name, other), folded_key(name) == other, "{name} {other}");
            }
        }
        assert!(matches!(folded_key_of("message"), Cow::Borrowed(_)));
        assert_eq!(folded_key("Customer-ID"), "customerid");
        assert_eq!(folded_key("Straße"), "strasse");
        // A dotless i is not an i, in Go's folding or here.
        assert_ne!(folded_key("\u{131}d"), folded_key("id"));
        // Namespaces are a tool name's, not an argument's.
        assert_eq!(folded_key("functions.sku"), "functionssku");
    }

    #[test]
    fn folding_keeps_separators() {
        assert_eq!(folded("functions.Web_Search"), "web_search");
    }
}
