//! What each principal may run in one catalogue snapshot: its grants (tool,
//! alias and toolset names, or `"*"`), resolved once when the snapshot is
//! built, so a request looks its caller's tool set up instead of resolving
//! names. The catalogue checks the same names when it is assembled
//! ([`super::Principals::grant_decls`]): an unknown granted name fails the
//! load, so every name resolved here is known.

use std::{collections::HashMap, sync::Arc};

use serde_json::{Map, Value};

use super::{
    conditions::{Condition, Facts},
    Caller, Principals,
};
use crate::{
    catalog::{Catalog, ToolId},
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
    /// Each principal's conditions over arguments, with the tools each
    /// covers.
    conditions: HashMap<Arc<str>, Conditioned>,
}

/// One principal's conditions in one snapshot.
#[derive(Debug)]
struct Conditioned {
    conditions: Arc<[Condition]>,
    /// The tools each condition covers, by condition.
    covering: Vec<AvailableSet>,
}

impl Granted {
    /// Resolves every principal's grants in `catalog`.
    pub(crate) fn resolve(principals: &Principals, catalog: &Catalog) -> Self {
        let set = |names: &[String]| match names.iter().any(|n| is_every_tool(n)) {
            true => AvailableSet::All,
            false => AvailableSet::of_tools(catalog, &resolve::resolve_suggesting(catalog, names, 0).tools),
        };
        let by_principal = principals.grants().map(|(name, names)| (Arc::clone(name), set(names))).collect();
        let conditions = principals
            .conditions()
            .filter(|(_, conditions)| !conditions.is_empty())
            .map(|(name, conditions)| {
                let covering = conditions.iter().map(|c| set(std::slice::from_ref(&c.covers))).collect();
                (Arc::clone(name), Conditioned { conditions: Arc::clone(conditions), covering })
            })
            .collect();
        Self { by_principal, conditions }
    }

    /// Whether the caller's principal may make this call of `tool` (its
    /// arguments as the tool would receive them): every condition covering
    /// the tool holds, or the first that does not says why.
    pub(crate) fn permits(
        &self,
        caller: &Caller,
        tool: ToolId,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<(), String> {
        let Some(conditioned) = caller.principal.as_ref().and_then(|p| self.conditions.get(p)) else { return Ok(()) };
        let facts = Facts { args, user: caller.user.as_deref(), principal: caller.principal.as_deref(), tool: name };
        let mut context = None;
        for (condition, covering) in conditioned.conditions.iter().zip(&conditioned.covering) {
            if covering.contains(tool) {
                condition.check(context.get_or_insert_with(|| facts.context())).map_err(str::to_owned)?;
            }
        }
        Ok(())
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
