//! Name resolution: agent-configured names to tools, with suggestions for the
//! names that match nothing.
//!
//! Normalisation and similarity are pure string functions of
//! [`crate::similar`] (the catalogue builds the suggestion index at load);
//! this module applies them to a [`Catalog`], words what it found, and never
//! touches the network or the clock.

pub(crate) mod message;
mod set;

use std::collections::HashSet;

use crate::catalog::{Catalog, Name, Target, ToolId};

pub(crate) use set::AvailableSet;

/// Resolve suggests up to this many names per unknown name…
pub(crate) const RESOLVE_SUGGESTIONS: usize = 3;
/// …each at least this similar (difflib's `get_close_matches` default).
pub(crate) const RESOLVE_CUTOFF: f64 = 0.6;

/// Requests may name at most this many tools, aliases or toolsets.
pub(crate) const MAX_NAMES: usize = 10_000;
/// A requested name may be at most this long in bytes: far beyond any real
/// name (64 characters), small enough that answers stay small.
pub(crate) const MAX_NAME_BYTES: usize = 1024;

/// A name that matched nothing, with the names it may have meant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown {
    pub(crate) name: String,
    pub suggestions: Vec<String>,
}

/// What a list of names resolved to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolution {
    /// In request order, toolsets expanded, aliases resolved, each tool once.
    pub tools: Vec<ToolId>,
    /// In request order, each name once.
    pub unknown: Vec<Unknown>,
}

impl Resolution {
    /// The warning text for the unknown names, the first 20 spelled out
    /// (empty when there are none).
    pub fn message(&self) -> String {
        self.message_naming(message::MAX_REPORTED_UNKNOWN)
    }

    /// The warning text, spelling out the first `shown` unknown names.
    pub fn message_naming(&self, shown: usize) -> String {
        if self.unknown.is_empty() {
            return String::new();
        }
        let pairs: Vec<(&str, &[String])> =
            self.unknown.iter().map(|u| (u.name.as_str(), u.suggestions.as_slice())).collect();
        message::resolve_warning(&pairs, shown)
    }
}

/// A request whose names cannot be resolved as given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NamesError {
    #[error("too many names: {count}; at most {MAX_NAMES}")]
    TooMany { count: usize },
    #[error("{field}[{index}] is empty")]
    Empty { field: &'static str, index: usize },
    #[error("{field}[{index}] is {bytes} bytes long; a name has at most {MAX_NAME_BYTES}")]
    TooLong { field: &'static str, index: usize, bytes: usize },
}

/// Checks the shape of a list of names (`field` names the request field).
pub(crate) fn check_names(field: &'static str, names: &[String]) -> Result<(), NamesError> {
    if names.len() > MAX_NAMES {
        return Err(NamesError::TooMany { count: names.len() });
    }
    for (index, name) in names.iter().enumerate() {
        if name.is_empty() {
            return Err(NamesError::Empty { field, index });
        }
        if name.len() > MAX_NAME_BYTES {
            return Err(NamesError::TooLong { field, index, bytes: name.len() });
        }
    }
    Ok(())
}

/// Requests naming more than this many names resolve on the blocking pool,
/// so a huge request never stalls the runtime's workers.
pub(crate) const INLINE_NAMES: usize = 64;

/// Resolves tool, alias and toolset names exactly; unknown names get up to 3
/// suggestions (similarity at least 0.6, best first).
pub fn resolve<S: AsRef<str>>(catalog: &Catalog, names: &[S]) -> Resolution {
    resolve_suggesting(catalog, names, usize::MAX)
}

/// [`resolve`], with suggestions for the first `suggested` unknown names
/// only: those a message will show. Suggesting is the costly part of a miss;
/// a request of thousands of unknown names costs lookups, not searches.
pub(crate) fn resolve_suggesting<S: AsRef<str>>(catalog: &Catalog, names: &[S], suggested: usize) -> Resolution {
    resolve_within(catalog, names, suggested, &|_| true)
}

/// [`resolve_suggesting`] for a caller that may see only the tools
/// `visible` accepts (a principal's grants): a name of a tool outside them,
/// or of a toolset with none of its tools inside them, is unknown, and only
/// visible names are suggested. A caller cannot learn that a tool it may
/// not use exists.
pub(crate) fn resolve_within<S: AsRef<str>>(
    catalog: &Catalog,
    names: &[S],
    suggested: usize,
    visible: &dyn Fn(ToolId) -> bool,
) -> Resolution {
    let mut resolution = Resolution::default();
    let mut seen = vec![false; catalog.tools().len()];
    let mut seen_unknown: HashSet<&str> = HashSet::new();
    let mut add = |id: ToolId, tools: &mut Vec<ToolId>| {
        if !std::mem::replace(&mut seen[id.0 as usize], true) {
            tools.push(id);
        }
    };
    let accept = |target: Target| match target {
        Target::Tool(id) => visible(id),
        Target::Toolset(set) => catalog.toolset(set).tools.iter().any(|&id| visible(id)),
    };
    for name in names {
        let name = name.as_ref();
        let found = match catalog.lookup(name) {
            Some(Name::Tool(id) | Name::Alias(id)) if visible(id) => {
                add(id, &mut resolution.tools);
                true
            }
            Some(Name::Toolset(set)) if accept(Target::Toolset(set)) => {
                for &id in catalog.toolset(set).tools.iter().filter(|&&id| visible(id)) {
                    add(id, &mut resolution.tools);
                }
                true
            }
            _ => false,
        };
        if found || !seen_unknown.insert(name) {
            continue;
        }
        let suggestions = match resolution.unknown.len() < suggested {
            true => catalog
                .suggest(name, RESOLVE_CUTOFF, RESOLVE_SUGGESTIONS, accept)
                .into_iter()
                .map(str::to_owned)
                .collect(),
            false => Vec::new(),
        };
        resolution.unknown.push(Unknown { name: name.to_owned(), suggestions });
    }
    resolution
}
