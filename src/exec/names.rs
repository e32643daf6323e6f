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
        message::{or_list, python_list, quote_emitted},
        normalise::normalised_key,
    },
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
    /// The set named by `names` (tools, aliases, toolsets expanded), and the
    /// names that matched nothing. Empty `names` means every tool; non-empty
    /// names that all match nothing give an empty set, never every tool.
    pub fn of(catalog: &Catalog, names: &[String]) -> (Self, resolve::Resolution) {
        if names.is_empty() {
            return (AvailableSet::All, resolve::Resolution::default());
        }
        let resolution = resolve::resolve(catalog, names);
        let mut bits = vec![0u64; catalog.tools().len().div_ceil(64)];
        for id in &resolution.tools {
            bits[id.0 as usize / 64] |= 1 << (id.0 % 64);
        }
        (AvailableSet::Only(bits), resolution)
    }

    pub fn contains(&self, id: ToolId) -> bool {
        match self {
            AvailableSet::All => true,
            AvailableSet::Only(bits) => bits.get(id.0 as usize / 64).is_some_and(|w| w & (1 << (id.0 % 64)) != 0),
        }
    }
}

/// Resolves `emitted` inside `set`: the tool and the repair made, or the
/// UNKNOWN_TOOL error with the nearest names and the inventory.
#[allow(clippy::result_large_err)] // the error is the call's answer, built once
pub fn resolve_tool(
    catalog: &Catalog,
    set: &AvailableSet,
    emitted: &str,
    strict: bool,
    inventory_cap: usize,
) -> Result<(ToolId, Option<Repair>), ToolError> {
    if let Some(Name::Tool(id) | Name::Alias(id)) = catalog.lookup(emitted) {
        if set.contains(id) {
            return Ok((id, None));
        }
    }
    let mut candidates: Vec<ToolId> =
        catalog.by_key(&normalised_key(emitted)).iter().copied().filter(|&id| set.contains(id)).collect();
    if !strict && candidates.len() == 1 {
        let canonical = catalog.tool(candidates[0]).name.clone();
        let repair = Repair { kind: RepairKind::ToolName, original: emitted.to_owned(), repaired: canonical };
        return Ok((candidates[0], Some(repair)));
    }
    // Every tool the key matches (ambiguous, or strict), else the nearest name.
    candidates.sort_by(|a, b| catalog.tool(*a).name.cmp(&catalog.tool(*b).name));
    let suggestions: Vec<String> = if candidates.is_empty() {
        let accept = |t: Target| matches!(t, Target::Tool(id) if set.contains(id));
        catalog.suggest(emitted, EXECUTE_CUTOFF, 1, accept).into_iter().map(str::to_owned).collect()
    } else {
        candidates.iter().map(|&id| catalog.tool(id).name.clone()).collect()
    };
    Err(unknown_tool(catalog, set, emitted, suggestions, inventory_cap))
}

/// `Tool 'web_serch' not found. Did you mean 'web_search'? Available tools: ['calculator', 'web_search']`
fn unknown_tool(
    catalog: &Catalog,
    set: &AvailableSet,
    emitted: &str,
    suggestions: Vec<String>,
    cap: usize,
) -> ToolError {
    // The catalogue keeps tools sorted by name (code point order).
    let available = catalog.tools().iter().enumerate().filter(|(i, _)| set.contains(ToolId(*i as u32)));
    let mut total = 0usize;
    let mut listed: Vec<String> = Vec::new();
    for (_, tool) in available {
        total += 1;
        if listed.len() < cap {
            listed.push(tool.name.clone());
        }
    }
    let mut message = format!("Tool {} not found.", quote_emitted(emitted));
    if !suggestions.is_empty() {
        message.push_str(&format!(" Did you mean {}?", or_list(&suggestions)));
    }
    message.push_str(&format!(" Available tools: {}", python_list(&listed)));
    if total > listed.len() {
        message.push_str(&format!(" … and {} more", total - listed.len()));
    }
    let mut error = ToolError::new(ErrorKind::UnknownTool, message, false);
    error.suggestions = suggestions;
    error.available_tools = listed;
    error.available_tools_total = total as u32;
    error
}
