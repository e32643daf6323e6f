//! Where the entries of a catalogue file's `tools` list begin and end, found
//! line by line, so that each entry can be parsed on its own.
//!
//! The YAML crate builds the events of a whole document before the first
//! value can be read: at 10,000 tools that list is tens of megabytes, and
//! building it (growing it, touching fresh pages) was about a third of the
//! start. Parsed one entry at a time, no such list outlives an entry.
//!
//! A file is cut only where the YAML scanner itself would end an entry: at
//! a line that starts, at the list's indentation, with `- `. Every piece is
//! then parsed by the same YAML crate; if a piece does not parse as what it
//! must be (the head a mapping ending in an empty `tools:`, each entry a
//! one-item list, the tail a mapping), the whole file is parsed as one
//! document instead, so every error reads as it did. Why a piece that
//! parses means what it means in the whole file: each piece starts at the
//! beginning of a line in block context (the piece before it parsed to its
//! end, so no quoted scalar, flow collection or block scalar is left open),
//! every line of an entry but its first is indented deeper than the list,
//! and what ends the entry in the whole file (the next `- ` at the list's
//! indentation, or a line indented less) ends every block node the entry
//! opened, as the end of the piece does. Anything this reasoning does not
//! cover is not cut: tabs, line breaks other than `\n`, a byte-order mark,
//! directives (`%TAG` would change what tags mean in later pieces) and
//! document markers, a `tools` key written otherwise than as a plain
//! `tools:` at the start of a line, or written twice.

/// A file cut into its `tools` entries.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Pieces<'t> {
    /// From the start of the file to the first entry: the keys before
    /// `tools`, the `tools:` line, comments and blank lines after it.
    pub(crate) head: &'t str,
    /// Each entry of the list, from its `- ` to the next entry or the tail,
    /// comments and blank lines after it included.
    pub(crate) entries: Vec<&'t str>,
    /// From the first line after the list: the keys that follow it.
    pub(crate) tail: &'t str,
}

/// `text` cut into the pieces above, or `None` when it is not laid out as
/// this reader is sure of (see the module documentation).
pub(crate) fn pieces(text: &str) -> Option<Pieces<'_>> {
    if text.contains(['\t', '\r', '\u{85}', '\u{2028}', '\u{2029}', '\u{feff}']) {
        return None;
    }
    // Each line with the offset at which it starts.
    let lines: Vec<(usize, &str)> = text
        .split_inclusive('\n')
        .scan(0, |at, line| {
            let start = *at;
            *at += line.len();
            Some((start, line.strip_suffix('\n').unwrap_or(line)))
        })
        .collect();
    if lines.iter().any(|(_, line)| line.starts_with('%') || line.starts_with("---") || line.starts_with("...")) {
        return None;
    }
    let mut keys = lines.iter().enumerate().filter(|(_, (_, line))| is_tools_key(line));
    let (key, _) = keys.next()?;
    if keys.next().is_some() {
        return None;
    }
    let first = key + 1 + lines[key + 1..].iter().position(|(_, line)| !is_blank_or_comment(line))?;
    let indent = indentation(lines[first].1);
    if !is_entry(&lines[first].1[indent..]) {
        return None;
    }
    let mut starts = vec![lines[first].0];
    let mut end = text.len();
    for &(start, line) in &lines[first + 1..] {
        if is_blank_or_comment(line) {
            continue;
        }
        match indentation(line) {
            n if n > indent => continue,
            n if n == indent && is_entry(&line[n..]) => starts.push(start),
            // The next key of the file.
            0 => {
                end = start;
                break;
            }
            // Between the file's keys and the list's entries: an error of
            // the whole file, which a piece parsed alone would not see.
            _ => return None,
        }
    }
    let bounds = starts.iter().copied().zip(starts.iter().skip(1).copied().chain([end]));
    Some(Pieces { head: &text[..starts[0]], entries: bounds.map(|(a, b)| &text[a..b]).collect(), tail: &text[end..] })
}

/// `tools:` at the start of a line, as a plain key with nothing after it
/// but spaces and a comment.
fn is_tools_key(line: &str) -> bool {
    line.strip_prefix("tools:")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(' ') && is_blank_or_comment(rest))
}

fn is_blank_or_comment(line: &str) -> bool {
    let rest = line.trim_start_matches(' ');
    rest.is_empty() || rest.starts_with('#')
}

/// An entry of a block list: `-` then a space or the end of the line.
fn is_entry(rest: &str) -> bool {
    rest == "-" || rest.starts_with("- ")
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_cut_at_the_entries_of_its_tools_list() {
        let text = "# tools of the team\naliases: {a: b}\ntools:\n  # first\n  - name: a\n    description: |\n      x\n\n      - not an entry\n# between\n  -\n    name: b\n  - name: c\n    parameters:\n      - x\ntoolsets:\n  - name: s\n";
        let cut = pieces(text).unwrap();
        assert_eq!(cut.head, "# tools of the team\naliases: {a: b}\ntools:\n  # first\n");
        assert_eq!(
            cut.entries,
            [
                "  - name: a\n    description: |\n      x\n\n      - not an entry\n# between\n",
                "  -\n    name: b\n",
                "  - name: c\n    parameters:\n      - x\n",
            ]
        );
        assert_eq!(cut.tail, "toolsets:\n  - name: s\n");
        let joined: String = [cut.head].into_iter().chain(cut.entries.iter().copied()).chain([cut.tail]).collect();
        assert_eq!(joined, text);
    }

    #[test]
    fn a_list_at_the_keys_own_indentation_is_cut_too() {
        let cut = pieces("tools:\n- name: a\n- name: b\nmcp_servers: {}\n").unwrap();
        assert_eq!(cut.entries, ["- name: a\n", "- name: b\n"]);
        assert_eq!(cut.tail, "mcp_servers: {}\n");
    }

    #[test]
    fn layouts_it_is_not_sure_of_are_not_cut() {
        for text in [
            "tools:\n\t- name: a\n",
            "tools:\r\n  - name: a\r\n",
            "\u{feff}tools:\n  - name: a\n",
            "%TAG !e! tag:example.com,2000:\n---\ntools:\n  - name: a\n",
            "tools:\n  - name: a\n---\ntools:\n  - name: b\n",
            "tools:\n  - name: a\ntools:\n  - name: b\n",
            "\"tools\":\n  - name: a\n",
            "tools: [a]\n",
            "tools:#\n  - name: a\n",
            "tools:\n  name: a\n",
            "toolsets: {}\n",
            "  tools:\n    - name: a\n",
            "tools:\n",
            "tools:\n  - name: a\n  description: x\n",
            "tools:\n    - name: a\n  description: x\n",
        ] {
            assert_eq!(pieces(text), None, "{text:?}");
        }
    }
}
