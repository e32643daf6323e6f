//! The process environment as a value.
//!
//! Everything that reads environment variables (the policy, `${VAR}` expansion
//! in the catalogue) takes an [`Env`] as a parameter, so tests build their own
//! and never touch the real process environment.

use std::collections::BTreeMap;

/// A snapshot of environment variables.
#[derive(Clone, Debug, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// The variables of the running process (those that are valid UTF-8).
    pub fn from_process() -> Self {
        Self::from_pairs(std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))))
    }

    /// An environment holding exactly these variables.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Self { vars: pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect() }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }
}
