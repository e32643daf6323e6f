//! The tools of a request (`tools[].function`: name, description,
//! parameters), compiled once per distinct list and kept for the next
//! request that declares the same (at most [`KEPT`] lists; past that the
//! oldest goes).

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::exec::{
    declared::{declared, Declared},
    ExecLimits,
};

/// Distinct tool lists kept compiled.
const KEPT: usize = 256;

/// A tool list's digest (SHA-256 of its JSON text).
type Digest32 = [u8; 32];

/// Compiled lists by digest, and the digests oldest first.
type Kept = (HashMap<Digest32, Arc<Declared>>, VecDeque<Digest32>);

/// Tool lists compiled so far.
#[derive(Default)]
pub(super) struct ToolCache {
    kept: Mutex<Kept>,
}

impl ToolCache {
    /// The request's `tools` compiled; `None` when it declares none, or
    /// declares them in a way no call can be read against (a tool that is
    /// not a function, a bad name, a schema that does not compile): its
    /// responses then pass unchanged.
    pub(super) fn of(&self, tools: &Value, limits: ExecLimits) -> Option<Arc<Declared>> {
        let list = tools.as_array().filter(|list| !list.is_empty())?;
        let digest: Digest32 = Sha256::digest(tools.to_string().as_bytes()).into();
        if let Some(found) = self.kept.lock().expect("not poisoned").0.get(&digest) {
            return Some(Arc::clone(found));
        }
        let mut declared_tools = Vec::with_capacity(list.len());
        for tool in list {
            let function = tool.get("function").filter(|_| tool.get("type").is_none_or(|t| t == "function"))?;
            let name = function.get("name")?.as_str()?;
            let description = function.get("description").and_then(Value::as_str).unwrap_or_default();
            declared_tools.push(declared(name, description, function.get("parameters")));
        }
        let compiled = match Declared::new(declared_tools, limits) {
            Ok(compiled) => Arc::new(compiled),
            Err(why) => {
                tracing::debug!(door = super::NAME, "the request's tools are not read against: {why}");
                return None;
            }
        };
        let mut kept = self.kept.lock().expect("not poisoned");
        let (map, order) = &mut *kept;
        if map.len() >= KEPT {
            if let Some(oldest) = order.pop_front() {
                map.remove(&oldest);
            }
        }
        if map.insert(digest, Arc::clone(&compiled)).is_none() {
            order.push_back(digest);
        }
        Some(compiled)
    }
}
