//! The tools a call may use: every tool, or a set of them (one bit per
//! tool), named by an agent's tool set inside a caller's grants.

use super::{message::MAX_REPORTED_UNKNOWN, resolve_within, Resolution};
use crate::catalog::{Catalog, ToolId};

/// The tools a call may use.
#[derive(Clone, Debug)]
pub(crate) enum AvailableSet {
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
    pub(crate) fn of(catalog: &Catalog, names: &[String], strict: bool, within: &AvailableSet) -> (Self, Resolution) {
        if names.is_empty() {
            return (within.clone(), Resolution::default());
        }
        let suggested = if strict { MAX_REPORTED_UNKNOWN } else { 0 };
        let resolution = resolve_within(catalog, names, suggested, &|id| within.contains(id));
        (Self::of_tools(catalog, &resolution.tools), resolution)
    }

    /// The set of exactly these tools.
    pub(crate) fn of_tools(catalog: &Catalog, tools: &[ToolId]) -> Self {
        let mut bits = vec![0u64; catalog.tools().len().div_ceil(64)];
        for id in tools {
            bits[id.0 as usize / 64] |= 1 << (id.0 % 64);
        }
        AvailableSet::Only(bits)
    }

    pub(crate) fn contains(&self, id: ToolId) -> bool {
        match self {
            AvailableSet::All => true,
            AvailableSet::Only(bits) => bits.get(id.0 as usize / 64).is_some_and(|w| w & (1 << (id.0 % 64)) != 0),
        }
    }
}
