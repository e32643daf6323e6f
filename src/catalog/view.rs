//! What reading a call asks of a set of tools ([`Tools`]): each tool's name
//! and parameters, exact names and aliases, normalised keys, the nearest
//! name. A snapshot's [`super::Catalog`] is one such set; the tools a
//! request declares for itself (the model door's `tools`,
//! [`super::DeclaredTools`]) are another, read against and never run.

use super::{Binding, Schema, ToolId};

/// A set of tools calls are read against. Ids run from 0 to
/// [`Tools::count`], in name order (code point order).
pub(crate) trait Tools: Sync {
    /// How many tools there are.
    fn count(&self) -> usize;

    /// The tool `id` as the stages read it.
    fn tool(&self, id: ToolId) -> ToolView<'_>;

    /// The tool an exact name or alias names.
    fn named(&self, name: &str) -> Option<ToolId>;

    /// The tools whose name or an alias has this normalised key.
    fn by_key(&self, key: &str) -> &[ToolId];

    /// The nearest tool name to `query` (similarity at least `cutoff`)
    /// among the tools that `accept`; ties to the name that sorts first.
    fn nearest(&self, query: &str, cutoff: f64, accept: &dyn Fn(ToolId) -> bool) -> Option<&str>;
}

/// What the stages read of one tool.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ToolView<'a> {
    pub(crate) name: &'a str,
    /// The schema the model sees (bound parameters left out).
    pub(crate) parameters: &'a Schema,
    /// Parameters the gateway fills from who calls.
    pub(crate) binding: Option<&'a Binding>,
    /// A tool of an MCP server (its answers say `extension`).
    pub(crate) federated: bool,
}
