//! Which tool an emitted name means, inside the caller's available set
//! (docs/architecture.md, "Names and messages"): exact name, then declared alias, then (non-strict) the
//! single tool whose normalised key matches. Nothing outside the set is ever
//! resolved, suggested or listed, so a drifted name can never reach a tool its
//! exact name could not.

use crate::{
    catalog::{ToolId, Tools},
    exec::outcome::{ErrorKind, Repair, RepairKind, ToolError},
    resolve::{
        message::{is_bidi_control, is_invisible, or_list, python_list, quote_emitted},
        AvailableSet, MAX_NAME_BYTES,
    },
    similar::{normalised_key, residue},
};

/// Execute suggests the single nearest name at least this similar (difflib's
/// `get_close_matches` default is 0.6; a call names one tool, so a looser
/// cutoff finds the one meant more often).
pub(crate) const EXECUTE_CUTOFF: f64 = 0.5;

/// What an emitted name resolved to.
#[derive(Debug)]
pub(crate) enum Resolved {
    /// A tool, and the repair of the name if one was made.
    Tool(ToolId, Option<Repair>),
    /// No single tool: the names to suggest (every tool the normalised key
    /// matches, else the nearest name, else none).
    Missing { suggestions: Vec<String> },
}

/// Resolves `emitted` inside `set`: exact name, declared alias, then
/// (non-strict) the single tool with the same normalised key, then the
/// single tool named among the words of a name wrapped in template residue
/// ([`residue`]).
pub(crate) fn resolve_tool(tools: &dyn Tools, set: &AvailableSet, emitted: &str, strict: bool) -> Resolved {
    if let Some(id) = tools.named(emitted) {
        if set.contains(id) {
            return Resolved::Tool(id, None);
        }
    }
    // Longer than any name: only a whole call written in the name (read
    // before this stage) or noise; neither is repaired nor has a nearest
    // name, and reading its words would cost more than its length.
    if emitted.len() > MAX_NAME_BYTES {
        return Resolved::Missing { suggestions: Vec::new() };
    }
    let repaired = |id: ToolId| {
        let canonical = tools.tool(id).name.to_owned();
        Resolved::Tool(
            id,
            Some(Repair { kind: RepairKind::ToolName, original: emitted.to_owned(), repaired: canonical }),
        )
    };
    let mut suggestions = match meaning(tools, set, emitted) {
        Meaning::Tool(id) if !strict => return repaired(id),
        Meaning::Tool(id) => return Resolved::Missing { suggestions: names(tools, vec![id]) },
        Meaning::Several(candidates) => return Resolved::Missing { suggestions: names(tools, candidates) },
        Meaning::Nothing if strict => return Resolved::Missing { suggestions: suggest(tools, set, emitted) },
        Meaning::Nothing => Vec::new(),
    };
    // A name hiding characters that show nothing or reorder the text is not
    // template residue but a name made to look like another: never split.
    let hidden = |c: char| (c.is_control() && !c.is_whitespace()) || is_bidi_control(c) || is_invisible(c);
    if emitted.contains(hidden) {
        return Resolved::Missing { suggestions: suggest(tools, set, emitted) };
    }
    let words = residue::words(emitted);
    match in_residue(tools, set, emitted, &words) {
        Meaning::Tool(id) => return repaired(id),
        Meaning::Several(candidates) => suggestions = names(tools, candidates),
        Meaning::Nothing => {}
    }
    if suggestions.is_empty() {
        // The did-you-mean of a name wrapped in residue is the one of the
        // word the model most likely meant.
        suggestions = suggest(tools, set, residue::cleaned(&words).unwrap_or(emitted));
    }
    Resolved::Missing { suggestions }
}

/// What one name means in `set`.
enum Meaning {
    Tool(ToolId),
    /// Several tools: no repair, each is suggested.
    Several(Vec<ToolId>),
    Nothing,
}

/// The one tool of `set` `name` means, without suggesting: exact name or
/// alias, the one tool of its normalised key, or the one tool named among
/// the words of a name wrapped in residue.
pub(crate) fn means(tools: &dyn Tools, set: &AvailableSet, name: &str) -> Option<ToolId> {
    if name.len() > MAX_NAME_BYTES {
        return None;
    }
    match meaning(tools, set, name) {
        Meaning::Tool(id) => Some(id),
        Meaning::Several(_) => None,
        Meaning::Nothing => match in_residue(tools, set, name, &residue::words(name)) {
            Meaning::Tool(id) => Some(id),
            _ => None,
        },
    }
}

/// Exact name or alias, else the tools whose normalised key matches.
fn meaning(tools: &dyn Tools, set: &AvailableSet, name: &str) -> Meaning {
    if let Some(id) = tools.named(name) {
        if set.contains(id) {
            return Meaning::Tool(id);
        }
    }
    let candidates: Vec<ToolId> =
        tools.by_key(&normalised_key(name)).iter().copied().filter(|&id| set.contains(id)).collect();
    match candidates.len() {
        0 => Meaning::Nothing,
        1 => Meaning::Tool(candidates[0]),
        _ => Meaning::Several(candidates),
    }
}

/// The one tool the words of `emitted`, a name wrapped in residue, name,
/// when every other word is residue ([`residue`]); several tools named, or
/// one word naming several, is no repair. A word may carry an MCP client's
/// `server__` in front of the tool's name, for any server. A word that is
/// the whole name is known to mean nothing by itself (the caller looked).
fn in_residue(tools: &dyn Tools, set: &AvailableSet, emitted: &str, words: &[residue::Word<'_>]) -> Meaning {
    let mut named: Vec<(ToolId, usize)> = Vec::new();
    let mut several: Vec<ToolId> = Vec::new();
    let mut unresolved: Vec<&residue::Word<'_>> = Vec::new();
    for word in words {
        let direct = match word.text == emitted {
            true => Meaning::Nothing,
            false => meaning(tools, set, word.text),
        };
        let found = match direct {
            Meaning::Nothing => {
                let mut inside: Vec<ToolId> = residue::after_double_underscores(word.text)
                    .filter_map(|rest| match meaning(tools, set, rest) {
                        Meaning::Tool(id) => Some(id),
                        _ => None,
                    })
                    .collect();
                inside.sort_unstable_by_key(|id| id.0);
                inside.dedup();
                match inside.len() {
                    0 => Meaning::Nothing,
                    1 => Meaning::Tool(inside[0]),
                    _ => Meaning::Several(inside),
                }
            }
            other => other,
        };
        match found {
            Meaning::Tool(id) if !named.iter().any(|(n, _)| *n == id) => named.push((id, word.region)),
            Meaning::Tool(_) => {}
            Meaning::Several(ids) => several.extend(ids),
            Meaning::Nothing => unresolved.push(word),
        }
    }
    if !several.is_empty() || named.len() > 1 {
        several.extend(named.iter().map(|(id, _)| *id));
        several.sort_unstable_by_key(|id| id.0);
        several.dedup();
        return Meaning::Several(several);
    }
    let Some(&(id, region)) = named.first() else { return Meaning::Nothing };
    let residue = |w: &&residue::Word<'_>| w.markup || w.namespace || w.region != region;
    match unresolved.iter().all(residue) {
        true => Meaning::Tool(id),
        false => Meaning::Nothing,
    }
}

/// The names of `ids`, in name order.
fn names(tools: &dyn Tools, mut ids: Vec<ToolId>) -> Vec<String> {
    ids.sort_by(|a, b| tools.tool(*a).name.cmp(tools.tool(*b).name));
    ids.into_iter().map(|id| tools.tool(id).name.to_owned()).collect()
}

/// The single nearest tool name to `name` in `set`, if one is near enough.
fn suggest(tools: &dyn Tools, set: &AvailableSet, name: &str) -> Vec<String> {
    tools.nearest(name, EXECUTE_CUTOFF, &|id| set.contains(id)).into_iter().map(str::to_owned).collect()
}

/// The "available tools" of a set: the first names in code point order, how
/// many there are, and the text of the list (`['a', 'b'] … and 3 more`).
#[derive(Clone, Debug)]
pub(crate) struct Inventory {
    pub(crate) listed: Vec<String>,
    pub(crate) total: usize,
    pub(crate) text: String,
}

impl Inventory {
    /// At most `cap` names of `set`.
    pub(crate) fn of(tools: &dyn Tools, set: &AvailableSet, cap: usize) -> Self {
        // Tools are numbered in name order (code point order).
        let mut total = 0usize;
        let mut listed: Vec<String> = Vec::new();
        for id in (0..tools.count() as u32).map(ToolId).filter(|&id| set.contains(id)) {
            total += 1;
            if listed.len() < cap {
                listed.push(tools.tool(id).name.to_owned());
            }
        }
        let mut text = python_list(&listed);
        if total > listed.len() {
            text.push_str(&format!(" … and {} more", total - listed.len()));
        }
        Self { listed, total, text }
    }
}

/// `Tool 'web_serch' not found. Did you mean 'web_search'? Available tools: ['calculator', 'web_search']`
pub(crate) fn unknown_tool_error(emitted: &str, suggestions: Vec<String>, inventory: &Inventory) -> ToolError {
    let mut message = format!("Tool {} not found.", quote_emitted(emitted));
    if !suggestions.is_empty() {
        message.push_str(&format!(" Did you mean {}?", or_list(&suggestions)));
    }
    message.push_str(" Available tools: ");
    message.push_str(&inventory.text);
    let mut error = ToolError::new(ErrorKind::UnknownTool, message, false);
    error.suggestions = suggestions;
    error.available_tools = inventory.listed.clone();
    error.available_tools_total = inventory.total as u32;
    error
}
