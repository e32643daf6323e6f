//! What a caller may see: Resolve (agent-configured names to tools, with
//! "did you mean" for the rest) and tool listings, both inside the caller's
//! grants, so a name outside them is unknown and never suggested. Requests
//! naming many names resolve on the blocking pool.

use std::sync::Arc;

use opentelemetry::KeyValue;

use super::{Executor, RequestError};
use crate::{
    catalog::{Catalog, Name, ToolId, Toolset},
    identity::Caller,
    resolve::{self, check_names, message::quote_emitted, AvailableSet, Resolution, INLINE_NAMES},
    telemetry::{semconv, span},
};

impl Executor {
    /// Whether `name` is a toolset `caller` may see: one with a tool inside
    /// its grants (every toolset, for a caller who may use every tool).
    /// Else the message of an unknown toolset, its did-you-mean among the
    /// toolsets the caller may see: a toolset outside the grants answers
    /// exactly as an absent one.
    pub(crate) fn toolset(&self, caller: &Caller, name: &str) -> Result<(), String> {
        let visible = self.visible(caller);
        let seen = |toolset: &Toolset| match &visible {
            AvailableSet::All => true,
            AvailableSet::Only(_) => toolset.tools.iter().any(|&id| visible.contains(id)),
        };
        if let Some(Name::Toolset(id)) = self.catalog.lookup(name) {
            if seen(self.catalog.toolset(id)) {
                return Ok(());
            }
        }
        let known = self.catalog.toolsets().iter().filter(|t| seen(t)).map(|t| t.name.as_str());
        let statement = format!("unknown toolset {}", quote_emitted(name));
        Err(crate::similar::did_you_mean(&statement, name, known, String::new))
    }

    /// Resolves `names` among the tools `caller` may use. Strict (the
    /// request's choice, else the policy), an unknown name fails the
    /// request; non-strict, it is left out with a warning. Each unknown name
    /// with suggestions is a `did_you_mean` hint (an event on the current
    /// span, and the hint metric).
    pub(crate) async fn resolve(
        &self,
        caller: &Caller,
        names: Vec<String>,
        strict: Option<bool>,
    ) -> Result<Resolution, RequestError> {
        check_names("names", &names)?;
        let strict = self.policy.strict_for(strict);
        let resolution = resolve_within(&self.catalog, names, self.visible(caller)).await;
        for unknown in resolution.unknown.iter().filter(|u| !u.suggestions.is_empty()) {
            span::current_event(semconv::HINT_EVENT, || {
                vec![
                    KeyValue::new(semconv::HINT_KIND, "did_you_mean"),
                    KeyValue::new(semconv::HINT_SUGGESTIONS, unknown.suggestions.join(",")),
                ]
            });
            self.shared.observer.metrics.hint(None, "did_you_mean");
        }
        if strict && !resolution.unknown.is_empty() {
            return Err(RequestError::UnknownNames(resolution));
        }
        if !resolution.unknown.is_empty() {
            tracing::warn!(unknown = resolution.unknown.len(), "{}", resolution.message());
        }
        Ok(resolution)
    }

    /// The tools `caller` may use, in name order; or, when `names` are given,
    /// the tools they name (toolsets expanded), every one of which must
    /// resolve.
    pub(crate) async fn list(&self, caller: &Caller, names: Vec<String>) -> Result<Vec<ToolId>, RequestError> {
        check_names("tools", &names)?;
        let visible = self.visible(caller);
        if names.is_empty() {
            let ids = (0..self.catalog.tools().len()).map(|i| ToolId(i as u32));
            return Ok(ids.filter(|&id| visible.contains(id)).collect());
        }
        let resolution = resolve_within(&self.catalog, names, visible).await;
        match resolution.unknown.is_empty() {
            true => Ok(resolution.tools),
            false => Err(RequestError::UnknownNames(resolution)),
        }
    }
}

/// Tools a search answers with when asked for 0, and at most.
pub(crate) const SEARCH_LIMIT: (u32, u32) = (8, 50);

/// The longest search query, in bytes.
pub(crate) const SEARCH_QUERY_MAX_BYTES: usize = 4096;

impl Executor {
    /// The caller's tools (within `toolset`, a name as [`Executor::list`]
    /// takes it) that fit `query` best, best first, with their scores,
    /// ranked over those tools only ([`crate::search`]). At most `limit`
    /// (0: 8; above 50 is refused). Until the snapshot's index is made
    /// ([`crate::catalog::Catalog::search`]), on the blocking pool.
    pub(crate) async fn search(
        &self,
        caller: &Caller,
        query: &str,
        limit: u32,
        toolset: Option<String>,
    ) -> Result<Vec<(ToolId, f32)>, RequestError> {
        if query.trim().is_empty() {
            return Err(RequestError::BadSearch("the query is empty: say in words what the tool should do".into()));
        }
        if query.len() > SEARCH_QUERY_MAX_BYTES {
            let message = format!("the query is {} bytes long; at most {SEARCH_QUERY_MAX_BYTES}", query.len());
            return Err(RequestError::BadSearch(message));
        }
        let limit = match limit {
            0 => SEARCH_LIMIT.0,
            limit if limit <= SEARCH_LIMIT.1 => limit,
            limit => return Err(RequestError::BadSearch(format!("limit {limit} is above {}", SEARCH_LIMIT.1))),
        };
        let ids = match self.list(caller, toolset.iter().cloned().collect()).await {
            // Said as a toolset: the name was asked for as one.
            Err(RequestError::UnknownNames(resolution)) if toolset.is_some() => {
                let name = toolset.as_deref().unwrap_or_default();
                let message = self.toolset(caller, name).err().unwrap_or_else(|| resolution.message());
                return Err(RequestError::UnknownToolset { resolution, message });
            }
            listed => listed?,
        };
        let among: Vec<u32> = ids.iter().map(|id| id.0).collect();
        let limit = limit as usize;
        let found = match self.catalog.search_index_made() {
            true => self.catalog.search(query, &among, limit),
            // Searched before the index is made: on the blocking pool.
            false => {
                let (catalog, query) = (Arc::clone(&self.catalog), query.to_owned());
                let found = move || catalog.search(&query, &among, limit);
                tokio::task::spawn_blocking(found).await.expect("a search does not panic")
            }
        };
        Ok(found.into_iter().map(|(id, score)| (ToolId(id), score)).collect())
    }
}

/// Resolves `names` among the tools of `visible`; large requests on the
/// blocking pool.
async fn resolve_within(catalog: &Arc<Catalog>, names: Vec<String>, visible: AvailableSet) -> Resolution {
    let run = move |catalog: &Catalog, names: &[String]| {
        resolve::resolve_within(catalog, names, usize::MAX, &|id| visible.contains(id))
    };
    if names.len() <= INLINE_NAMES {
        return run(catalog, &names);
    }
    let catalog = Arc::clone(catalog);
    tokio::task::spawn_blocking(move || run(&catalog, &names)).await.expect("resolving names does not panic")
}
