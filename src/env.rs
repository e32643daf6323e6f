//! The process environment as a value.
//!
//! The only module that reads the process environment (a lint enforces it):
//! everything else (the policy, `${VAR}` expansion in the catalogue, what
//! child processes inherit, telemetry switches) takes an [`Env`] as a
//! parameter, so tests build their own and never touch the real process
//! environment.

use std::collections::BTreeMap;

/// A snapshot of environment variables.
#[derive(Clone, Debug, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// The variables of the running process (those that are valid UTF-8).
    #[allow(clippy::disallowed_methods)] // the one place that reads the process environment
    pub(crate) fn from_process() -> Self {
        Self::from_pairs(std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))))
    }

    /// An environment holding exactly these variables.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Self { vars: pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect() }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// A switch: `1`, `true` or `yes` (after trimming, any case) mean on, any
    /// other value, empty included, means off; `None` when unset.
    pub(crate) fn flag(&self, name: &str) -> Option<bool> {
        self.get(name).map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        let env = Env::from_pairs([("A", " Yes\n"), ("B", "0"), ("C", "")]);
        assert_eq!(env.flag("A"), Some(true));
        assert_eq!(env.flag("B"), Some(false));
        assert_eq!(env.flag("C"), Some(false));
        assert_eq!(env.flag("D"), None);
    }
}
