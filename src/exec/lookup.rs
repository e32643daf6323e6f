//! Which tool an emitted name means, inside the caller's available set
//! (DESIGN section 3): exact name, then declared alias, then (non-strict) the
//! single tool whose normalised key matches. Nothing outside the set is ever
//! resolved, suggested or listed, so a drifted name can never reach a tool its
//! exact name could not.

use super::outcome::{ErrorKind, Repair, RepairKind, ToolError};
use crate::{
    catalog::{Catalog, Name, Target, ToolId},
    resolve::{
        self,
        message::{or_list, python_list, quote_emitted, MAX_REPORTED_UNKNOWN},
    },
    similar::normalised_key,
};

/// Execute suggests the single nearest name at least this similar (difflib's
/// `get_close_matches` default is 0.6; DESIGN asks 0.5 here).
pub const EXECUTE_CUTOFF: f64 = 0.5;

/// The tools a call may use.
#[derive(Clone, Debug)]
pub enum AvailableSet {
    /// Every tool of the catalogue.
    All,
    /// These tools (one bit per tool id).
    Only(Vec<u64>),
}

impl AvailableSet {
    /// The set named by `names` (tools, aliases, toolsets expanded) inside
    /// `within` (the caller's grants), and the names that matched nothing
    /// there. Empty `names` means all of `within`; non-empty names that all
    /// match nothing give an empty set, never every tool.
    ///
    /// Only the unknown names a strict answer shows get suggestions (none
    /// when not `strict`: the call goes ahead without them).
    pub fn of(catalog: &Catalog, names: &[String], strict: bool, within: &AvailableSet) -> (Self, resolve::Resolution) {
        if names.is_empty() {
            return (within.clone(), resolve::Resolution::default());
        }
        let suggested = if strict { MAX_REPORTED_UNKNOWN } else { 0 };
        let resolution = resolve::resolve_within(catalog, names, suggested, &|id| within.contains(id));
        (Self::of_tools(catalog, &resolution.tools), resolution)
    }

    /// The set of exactly these tools.
    pub fn of_tools(catalog: &Catalog, tools: &[ToolId]) -> Self {
        let mut bits = vec![0u64; catalog.tools().len().div_ceil(64)];
        for id in tools {
            bits[id.0 as usize / 64] |= 1 << (id.0 % 64);
        }
        AvailableSet::Only(bits)
    }

    pub fn contains(&self, id: ToolId) -> bool {
        match self {
            AvailableSet::All => true,
            AvailableSet::Only(bits) => bits.get(id.0 as usize / 64).is_some_and(|w| w & (1 << (id.0 % 64)) != 0),
        }
    }
}

/// What an emitted name resolved to.
#[derive(Debug)]
pub enum Resolved {
    /// A tool, and the repair of the name if one was made.
    Tool(ToolId, Option<Repair>),
    /// No single tool: the names to suggest (every tool the normalised key
    /// matches, else the nearest name, else none).
    Missing { suggestions: Vec<String> },
}

/// Resolves `emitted` inside `set`: exact name, declared alias, then
/// (non-strict) the single tool with the same normalised key.
pub fn resolve_tool(catalog: &Catalog, set: &AvailableSet, emitted: &str, strict: bool) -> Resolved {
    if let Some(Name::Tool(id) | Name::Alias(id)) = catalog.lookup(emitted) {
        if set.contains(id) {
            return Resolved::Tool(id, None);
        }
    }
    let mut candidates: Vec<ToolId> =
        catalog.by_key(&normalised_key(emitted)).iter().copied().filter(|&id| set.contains(id)).collect();
    if !strict && candidates.len() == 1 {
        let canonical = catalog.tool(candidates[0]).name.clone();
        let repair = Repair { kind: RepairKind::ToolName, original: emitted.to_owned(), repaired: canonical };
        return Resolved::Tool(candidates[0], Some(repair));
    }
    candidates.sort_by(|a, b| catalog.tool(*a).name.cmp(&catalog.tool(*b).name));
    let suggestions: Vec<String> = if candidates.is_empty() {
        let accept = |t: Target| matches!(t, Target::Tool(id) if set.contains(id));
        catalog.suggest(emitted, EXECUTE_CUTOFF, 1, accept).into_iter().map(str::to_owned).collect()
    } else {
        candidates.iter().map(|&id| catalog.tool(id).name.clone()).collect()
    };
    Resolved::Missing { suggestions }
}

/// The "available tools" of a set: the first names in code point order, how
/// many there are, and the text of the list (`['a', 'b'] … and 3 more`).
#[derive(Clone, Debug)]
pub struct Inventory {
    pub listed: Vec<String>,
    pub total: usize,
    pub text: String,
}

impl Inventory {
    /// At most `cap` names of `set`.
    pub fn of(catalog: &Catalog, set: &AvailableSet, cap: usize) -> Self {
        // The catalogue keeps tools sorted by name (code point order).
        let mut total = 0usize;
        let mut listed: Vec<String> = Vec::new();
        for (i, tool) in catalog.tools().iter().enumerate() {
            if set.contains(ToolId(i as u32)) {
                total += 1;
                if listed.len() < cap {
                    listed.push(tool.name.clone());
                }
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
pub fn unknown_tool_error(emitted: &str, suggestions: Vec<String>, inventory: &Inventory) -> ToolError {
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
