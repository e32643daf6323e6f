//! What each principal may run in one catalogue snapshot: its grants (tool,
//! alias and toolset names, or `"*"`), resolved once when the snapshot is
//! built, so a request looks its caller's tool set up instead of resolving
//! names. The catalogue checks the same names when it is assembled
//! ([`super::Principals::grant_decls`]): an unknown granted name fails the
//! load, so every name resolved here is known.

use std::{collections::HashMap, sync::Arc};

use super::{Caller, Principals};
use crate::{
    catalog::Catalog,
    resolve::{self, AvailableSet},
};

/// Whether a grant is `"*"`, every tool (the one grant that is not a name).
pub(crate) fn is_every_tool(grant: &str) -> bool {
    grant == "*"
}

/// Each principal's tool set in one snapshot.
#[derive(Debug, Default)]
pub(crate) struct Granted {
    by_principal: HashMap<Arc<str>, AvailableSet>,
}

impl Granted {
    /// Resolves every principal's grants in `catalog`.
    pub(crate) fn resolve(principals: &Principals, catalog: &Catalog) -> Self {
        let set = |names: &[String]| match names.iter().any(|n| is_every_tool(n)) {
            true => AvailableSet::All,
            false => AvailableSet::of_tools(catalog, &resolve::resolve_suggesting(catalog, names, 0).tools),
        };
        let by_principal = principals.grants().map(|(name, names)| (Arc::clone(name), set(names))).collect();
        Self { by_principal }
    }

    /// The tools `caller` may use: every tool for the caller of a gateway
    /// without principals, else its principal's grants (nothing for a
    /// principal this snapshot does not know).
    /// Whether some principal may use `id` (without principals: every
    /// caller may).
    pub(crate) fn anyone_may_use(&self, id: crate::catalog::ToolId) -> bool {
        self.by_principal.is_empty() || self.by_principal.values().any(|set| set.contains(id))
    }

    pub(crate) fn visible(&self, caller: &Caller) -> AvailableSet {
        match &caller.principal {
            None => AvailableSet::All,
            Some(name) => self.by_principal.get(name).cloned().unwrap_or(AvailableSet::Only(Vec::new())),
        }
    }
}
