//! Hidden instructions in a federated tool (docs/security.md, "Federated MCP
//! servers"): text in a tool's name, title, description or anywhere in its
//! input schema (property names, descriptions, defaults, types, `required`
//! entries, vendor keys) that speaks to the model instead of describing the
//! tool. Each finding is a warning `hidden instructions in SERVER/TOOL:
//! REASON`; `toolgate validate --strict` fails on it, nothing else does.
//!
//! What counts, each a shape published attacks use (the examples of
//! `tests/data/poisoning`, cited there) and the 2,000 real tools of
//! `tests/data/tool_search*` do not:
//! - a tag addressed to the model (`<IMPORTANT>`, `<HIDDEN>`, `<SYSTEM…>`);
//! - asking to keep something from the user;
//! - naming a secret file (`~/.ssh`, `id_rsa`, `/etc/passwd`, `mcp.json`…);
//! - telling the model what to do with other tools, or to ignore its
//!   instructions, or to copy mail to an address;
//! - asking for the whole conversation;
//! - invisible or bidirectional Unicode, control characters (ANSI escapes),
//!   or a long run of blank space that pushes text out of view.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// A tag addressed to the model, read in the text as written (a tag
/// named `<important_notes>` in a real server's workflow notes is not one).
static TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)<\s*/?\s*(important|hidden|secret|admin|override|critical|system[\w-]*)\s*(\s[^>\n]{0,80})?>")
        .expect("a valid pattern")
});

/// Each pattern over the text with names read as words (`_` and `-` as
/// spaces), with its reason.
static PATTERNS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    let patterns: [(&str, &str); 10] = [
        (
            r"(?i)\b(do\s+not|don'?t|never|without)\s+(tell|telling|mention|mentioning|inform|informing|reveal|revealing|notify|notifying|alert|alerting|let)\b[^.\n]{0,60}\buser",
            "it asks to keep something from the user",
        ),
        (
            r"(?i)\b(keep|hide)\b[^.\n]{0,30}\b(secret|hidden)\b[^.\n]{0,30}\bfrom\b",
            "it asks to keep something from the user",
        ),
        (
            r"(?i)(~/\.ssh|\.ssh/|\bid[ _](rsa|ed25519|ecdsa|dsa)\b|/etc/(passwd|shadow)\b|\.aws/credentials|~/\.(bashrc|zshrc|profile|env)\b|\bmcp\.json\b|~/\.cursor\b)",
            "it names a secret file",
        ),
        (r"(?i)\bimportant\s+side\s+effects?\b", "it tells the model what to do with other tools"),
        (
            r#"(?i)\bcall\s+['`"][\w\s-]{0,30}?(read|send|request|upload|post|fetch)[\w\s-]{0,30}?['`"]\s+on\b"#,
            "it tells the model to read or send data with another tool",
        ),
        (r"(?i)\b(bcc|cc)\b[^.\n]{0,40}[\w.+-]+@[\w-]+\.\w+", "it copies messages to an address"),
        (
            r"(?i)\b(ignore|disregard|override|forget)\b[^.\n]{0,30}\b(previous|prior|above|earlier|all|user'?s?|system)\b[^.\n]{0,20}\b(instructions?|prompts?|rules?|messages?|requests?)\b",
            "it tells the model to ignore its instructions",
        ),
        (
            r"(?i)\b(entire|whole|full|complete)\s+(conversation|chat\s+history|message\s+history)\b[^.\n]{0,40}\b(as|into|in|to)\b",
            "it asks for the conversation",
        ),
        (r"(?i)\bfrom\s+now\s+on\b[^.\n]{0,30}\byou\b", "it changes how the model behaves from now on"),
        (r"(?i)\bthe\s+system\s+will\s+crash\b", "it threatens the model"),
    ];
    patterns.into_iter().map(|(pattern, reason)| (Regex::new(pattern).expect("a valid pattern"), reason)).collect()
});

/// Why the tool a server listed (its `tools/list` entry as JSON: `name`,
/// `title`, `description`, `inputSchema`, and any other keys) holds hidden
/// instructions, or `None`.
pub fn hidden_instructions(tool: &Value) -> Option<&'static str> {
    let mut texts = Vec::new();
    collect(tool, &mut texts);
    for text in &texts {
        if let Some(reason) = hiding(text) {
            return Some(reason);
        }
    }
    let written = texts.join("\n");
    if TAG.is_match(&written) {
        return Some("a tag addressed to the model");
    }
    let words = written.replace(['_', '-'], " ");
    PATTERNS.iter().find(|(pattern, _)| pattern.is_match(&words)).map(|&(_, reason)| reason)
}

/// Every string of `value`: keys and values, at every depth.
fn collect<'v>(value: &'v Value, texts: &mut Vec<&'v str>) {
    match value {
        Value::String(text) => texts.push(text),
        Value::Array(items) => items.iter().for_each(|item| collect(item, texts)),
        Value::Object(fields) => {
            for (key, value) in fields {
                texts.push(key);
                collect(value, texts);
            }
        }
        _ => {}
    }
}

/// Characters that hide text from whoever reviews it.
fn hiding(text: &str) -> Option<&'static str> {
    let invisible = |c: char| {
        matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}')
    };
    if text.chars().any(invisible) {
        return Some("invisible or bidirectional characters");
    }
    if text.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t')) {
        return Some("control characters (terminal escapes)");
    }
    // Blank space between words, long enough to scroll what follows away.
    let blank = text.trim().split(|c: char| !c.is_whitespace()).map(str::len).max().unwrap_or(0);
    if blank >= 80 {
        return Some("a long run of blank space that pushes text out of view");
    }
    None
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn lines(path: &str) -> Vec<Value> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
        let text = std::fs::read_to_string(path).unwrap();
        text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    }

    /// Every published example is found; the words of a clean tool are not.
    #[test]
    fn published_poisoning_is_found() {
        let examples = lines("tests/data/poisoning/examples.jsonl");
        let missed: Vec<String> = examples
            .iter()
            .filter(|example| hidden_instructions(&example["tool"]).is_none())
            .map(|example| format!("{} / {}: {}", example["server"], example["tool"]["name"], example["what"]))
            .collect();
        assert!(missed.is_empty(), "{} of {} missed:\n{}", missed.len(), examples.len(), missed.join("\n"));
        let clean = serde_json::json!({"name": "add", "description": "Add two numbers.",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}}});
        assert_eq!(hidden_instructions(&clean), None);
    }

    /// None of the real tools of the search catalogues (2,000 of 57
    /// servers) is flagged.
    #[test]
    fn real_tools_are_clean() {
        let mut flagged = Vec::new();
        let mut count = 0;
        for set in ["tests/data/tool_search/catalog", "tests/data/tool_search_untuned/catalog"] {
            let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join(set);
            for entry in std::fs::read_dir(folder).unwrap() {
                let listing: Value =
                    serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
                for tool in listing["tools"].as_array().unwrap() {
                    count += 1;
                    if let Some(reason) = hidden_instructions(tool) {
                        flagged.push(format!("{}/{}: {reason}", listing["server"], tool["name"]));
                    }
                }
            }
        }
        assert!(count > 1900, "{count}");
        assert!(flagged.is_empty(), "{} of {count} flagged:\n{}", flagged.len(), flagged.join("\n"));
    }
}
